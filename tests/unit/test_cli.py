"""The `nbkit` command's dispatch: `audit` is an argparse subcommand that forwards every argument;
`--version` prints the version."""

import subprocess
import sys

import pytest

from nbkit.cli import build_parser, main


@pytest.mark.parametrize(
    "argv",
    [
        ["good.yaml"],
        ["--checks", "2,7-11", "good.yaml", "--format", "json"],
        ["--help"],
        ["-h"],
        [],
    ],
)
def test_audit_forwards_its_arguments_unchanged(monkeypatch, argv):
    import nbkit.audit.cli

    seen = []
    monkeypatch.setattr(nbkit.audit.cli, "main", lambda a: seen.append(a) or 7)
    assert main(["audit", *argv]) == 7
    assert seen == [argv]


def test_audit_is_listed_with_the_other_subcommands():
    help_text = build_parser().format_help()
    for name in ("run", "sweep", "list", "doctor", "audit"):
        assert name in help_text


def test_version_prints_the_installed_version(capsys):
    import re
    from pathlib import Path

    import nbkit

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    declared = re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1)
    assert capsys.readouterr().out.strip() == f"nbkit {declared} (pip package nbkit-workbook)"
    assert declared == nbkit.__version__


def test_import_nbkit_stays_light():
    """`import nbkit` (and the CLI module) must not pull in torch, plotly, papermill or pandas."""
    code = (
        "import sys, nbkit, nbkit.cli, nbkit.runner, nbkit.report, nbkit.sweep, nbkit.live, nbkit.panels; "
        "print(' '.join(m for m in ('torch', 'plotly', 'papermill', 'pandas', 'distributed', 'ipywidgets') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"imported at `import nbkit`: {out}"


def test_own_run_examples_name_real_parameters():
    """`nbkit doctor`'s "diagnose your own" lines use parameters the notebooks really declare."""
    import shlex

    from nbkit.catalog import resolve_notebook
    from nbkit.cli import OWN_RUN_EXAMPLES
    from nbkit.params import notebook_parameters

    assert set(OWN_RUN_EXAMPLES) == {"kg", "zero", "signatures", "audit"}
    for line in OWN_RUN_EXAMPLES.values():
        words = shlex.split(line.split("#")[0])
        if words[1] != "run":
            continue
        declared = notebook_parameters(resolve_notebook(words[2]))
        keys = [words[i + 1] for i, w in enumerate(words) if w == "-p"]
        assert keys and all(k in declared for k in keys), (line, sorted(declared))


def test_runner_import_leaves_sys_modules_alone():
    """Importing nbkit's runner from a user's program must not hide jsonschema's optional grammar;
    only nbkit's own `run`/`sweep`/`list` processes skip it (start-up cost)."""
    code = (
        "import sys, nbkit.cli, nbkit.execute; a = 'rfc3987_syntax' in sys.modules and "
        "sys.modules['rfc3987_syntax'] is None; "
        "nbkit.execute.skip_uri_grammar(); b = sys.modules.get('rfc3987_syntax', 1) is None; print(a, b)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "True"]


def test_every_option_and_argument_has_help_and_diagnose_names_both_forms():
    """`--help` explains each argument of run/sweep/list/doctor/init/lab/compare (the positional ones and
    --kernel included), and the top-level line for diagnose names its CONFIG and RUN_DIR forms."""
    import argparse

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    silent = []
    for name in ("run", "sweep", "list", "doctor", "init", "lab", "compare"):
        for action in subparsers.choices[name]._actions:
            if not action.help and not isinstance(action, argparse._HelpAction):
                silent.append(f"{name} {action.metavar or '/'.join(action.option_strings) or action.dest}")
    assert not silent, f"no help text: {silent}"
    (diagnose,) = [a for a in subparsers._choices_actions if a.dest == "diagnose"]
    assert "CONFIG" in diagnose.help and "RUN_DIR" in diagnose.help
    assert "docs/" not in subparsers.choices["run"].format_help()  # a pip user has no docs/ folder
