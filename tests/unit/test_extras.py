"""nbkit's extras: `nbkit.require("kg")` stops a theme notebook with one line naming the extra, and
`nbkit doctor` says which extras are present — both from nbkit's own requirements."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import nbformat
import pytest

from nbkit import extras
from nbkit.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]

# Requires-Dist lines as a wheel's METADATA holds them; the missing distribution's name is made up.
LINES = (
    "pyyaml>=1",
    'packaging>=1; extra == "kg"',
    'nbkit-no-such-dist-for-tests>=1; extra == "kg"',
    'pyyaml>=99; extra == "zero"',
    'pydantic>=2; extra == "audit"',
    'nbkit-workbook[kg,audit]; extra == "all"',
    'pytest>=1; extra == "dev"',
)


def test_requirements_group_by_extra_and_expand_all():
    reqs = extras.requirements(LINES)
    assert [r.name for r in reqs["core"]] == ["pyyaml"]
    assert [r.name for r in reqs["kg"]] == ["packaging", "nbkit-no-such-dist-for-tests"]
    assert sorted(r.name for r in reqs["all"]) == ["nbkit-no-such-dist-for-tests", "packaging", "pydantic"]


@pytest.mark.parametrize(
    "extra, expected",
    [
        (
            "kg",
            "this notebook needs nbkit-workbook[kg]: nbkit-no-such-dist-for-tests (not installed); install "
            "with: pip install 'nbkit-workbook[kg]'",
        ),
        ("zero", "nbkit-workbook[zero]: pyyaml"),  # installed, but older than the extra needs
    ],
    ids=["not-installed", "too-old"],
)
def test_require_names_the_extra_in_one_line(extra, expected):
    with pytest.raises(extras.MissingExtra) as info:
        extras.require(extra, LINES)
    message = str(info.value)
    assert expected in message and "\n" not in message
    if extra == "zero":
        assert "(needs >=99)" in message
    assert isinstance(info.value, UsageError)
    assert info.value._render_traceback_() == [f"MissingExtra: {message}"]  # what Jupyter shows: no traceback


def test_require_passes_when_the_extra_is_complete():
    assert extras.require("audit", LINES) is None


@pytest.mark.parametrize("extra", ["nope", "dev", "all", "core"])
def test_require_of_an_unknown_extra_says_which_exist(extra):
    with pytest.raises(UsageError, match="its extras: audit, kg, zero") as info:
        extras.require(extra, LINES)
    assert not isinstance(info.value, extras.MissingExtra)


def test_status_lists_each_part_with_its_fix():
    st = extras.status(LINES)
    assert set(st) == {"core", "kg", "zero", "audit"}
    assert st["core"]["ok"] and st["audit"]["ok"]
    assert not st["kg"]["ok"] and st["kg"]["fix"] == "pip install 'nbkit-workbook[kg]'"


def test_this_environment_has_every_extra_of_its_installed_metadata():
    """The test environment is `make setup`'s (nbkit-workbook[all,dev]): every part is present."""
    st = extras.status()
    assert {"core", "kg", "zero", "signatures", "audit"} <= set(st)
    assert all(info["ok"] for info in st.values()), {k: v["missing"] for k, v in st.items() if not v["ok"]}


THEME_EXTRA = {
    "01_kg_gnn": "kg",
    "02_zero_ladder": "zero",
    "03_dspy_signatures": "signatures",
    "04_finetune_audit": "audit",
}


@pytest.mark.parametrize("stem, extra", THEME_EXTRA.items())
def test_theme_notebook_requires_its_extra_before_anything_else(stem, extra):
    """The first code cell after the parameters starts with `import nbkit`, the check of the parameters
    (nbkit's core only) and `nbkit.require("<extra>")`: nothing the extra brings is imported before it."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extra in declared
    nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])
    first, check, second = ast.parse(code[1].source).body[:3]
    assert isinstance(first, ast.Import) and [a.name for a in first.names] == ["nbkit"]
    assert ast.unparse(check) == f"nbkit.check_parameters(globals(), '{stem}')"
    assert ast.unparse(second) == f"nbkit.require('{extra}')"


def test_doctor_reports_extras_and_a_missing_extra_is_not_a_failure(monkeypatch, capsys):
    from nbkit.cli import main

    real = extras._requirement_lines()
    monkeypatch.setattr(
        extras,
        "_requirement_lines",
        lambda: real + ('nbkit-no-such-dist-for-tests>=1; extra == "testsonly"',),
    )
    code = main(["doctor", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert report["extras"]["testsonly"] == {
        "ok": False,
        "missing": ["nbkit-no-such-dist-for-tests (not installed)"],
        "packages": ["nbkit-no-such-dist-for-tests"],
        "fix": "pip install 'nbkit-workbook[testsonly]'",
    }
    assert report["extras"]["kg"]["ok"] and report["packages"]["kg"]["pykeen"]["ok"]
    assert not any("testsonly" in m or "no-such-dist" in m for m in report["missing"])
    assert code == (0 if not report["missing"] else 1)
    main(["doctor"])
    text = capsys.readouterr().out
    assert "✘ testsonly" in text and "fix: pip install 'nbkit-workbook[testsonly]'" in text


def test_device_name_and_report_without_torch(monkeypatch):
    import sys

    from nbkit.device import device_name, device_report

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    assert device_name("auto") == "cpu" and device_name(" CPU ") == "cpu"
    with pytest.raises(RuntimeError, match="torch is not installed"):
        device_name("cuda")
    rep = device_report()
    assert rep["torch"] is None and rep["cuda_available"] is False and rep["gpus"] == []


def test_a_missing_extra_shows_as_one_line_in_the_executed_notebook(tmp_path):
    """In a real kernel: the cell's error output is the one line (IPython uses _render_traceback_),
    and `nbkit run` reports the notebook's failure naming the extra."""
    from nbkit.execute import execute

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("SMOKE = False", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(f"import nbkit\n\nnbkit.extras.require('kg', {LINES!r})"),
        nbformat.v4.new_code_cell("import nbkit_never_reached"),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    src = tmp_path / "01_needs_kg.ipynb"
    nbformat.write(nb, src)
    (tmp_path / "out").mkdir()
    result = execute(src, tmp_path / "out", {}, progress=False)
    assert not result.ok
    assert (
        "raised MissingExtra: this notebook needs nbkit-workbook[kg]: nbkit-no-such-dist-for-tests (not "
        "installed)" in result.error
    )
    executed = nbformat.read(result.output, as_version=4)
    (error,) = [o for c in executed.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert error.traceback == [f"MissingExtra: {error.evalue}"], error.traceback


def test_nbkit_run_exits_2_when_a_notebook_misses_its_extra(tmp_path, monkeypatch, capsys):
    """The CLI treats MissingExtra as the usage error it is: one line naming the extra, exit 2."""
    from nbkit.cli import main

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("SMOKE = False", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(f"import nbkit\n\nnbkit.extras.require('kg', {LINES!r})"),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (tmp_path / "nbs").mkdir()
    nbformat.write(nb, tmp_path / "nbs" / "01_needs_kg.ipynb")
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(tmp_path / "nbs"))
    assert main(["run", "01", "--quiet", "--output", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "this notebook needs nbkit-workbook[kg]" in err and "Traceback" not in err
