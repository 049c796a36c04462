"""A parameter's declared values: the comment grammar, every shipped notebook's declarations, the check
`nbkit run` makes before any kernel starts, and the same check in a notebook's first cell."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from nbkit.cli import main
from nbkit.errors import UsageError
from nbkit.params import (
    ParameterError,
    check_given,
    check_parameters,
    notebook_parameters,
    parameters_in,
)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _problem(cell: str, value, base: Path | None = None) -> str | None:
    """The error line for ``X = value`` against the one-parameter cell ``cell``; None when it is taken."""
    declared = parameters_in(cell)
    try:
        check_given(Path("01_nb.ipynb"), {"X": value}, declared, base=base or Path.cwd())
    except ParameterError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(
    "cell, value, expected",
    [
        ("X = 3  # range: 1..10", 10, None),
        ("X = 3  # range: 1..10", 11, "X=11 is outside its declared range 1..10"),
        ("X = 0.5  # range: 0..", -0.1, "outside its declared range 0.."),
        ("X = 'a'  # choices: a, b", "b", None),
        ("X = 'a'  # choices: a, b", "c", "X='c' is not one it takes: 'a' or 'b'"),
        ("X = 'umls'  # choices: umls, kinships", "umsl", "(did you mean 'umls'?)"),
        ("X = ''  # choices: \"\", <path>", "", None),
        (
            "X = ''  # choices: \"\", <path>",
            "no/such.json",
            "'' (empty) or the path of an existing file; no such",
        ),
        ("X = ''  # choices: \"\", <path>", '{"a": 1', "JSON text is not a path"),
        (
            "X = ''  # choices: \"\", <path>",
            {"a": 1},
            "expects str (default ''), got {'a': 1} (dict); it takes",
        ),
        ("X = ''  # choices: <sizes>", "256x8,512x8", None),
        ("X = ''  # choices: <sizes>", "", None),
        ("X = ''  # choices: <sizes>", "[256x8", "item '[256x8': expected HIDDENxLAYERS"),
        ("X = ''  # choices: <sizes>", "16x2", "item '16x2': expected HIDDENxLAYERS with HIDDEN ≥ 32"),
        ("X = 'auto'  # choices: auto, cpu, <cuda:N>", "cuda:1", None),
        ("X = 'auto'  # choices: auto, cpu, <cuda:N>", "gpu", "'auto', 'cpu' or cuda:N"),
        ("X = 'exact'  # choices: exact, <module:name>", "my.metrics:f1", None),
        ("X = 'exact'  # choices: exact, <module:name>", "f1", "an importable 'module:name'"),
        ("X = ''  # choices: \"\", <signature>", "question, context -> answer", None),
        ("X = ''  # choices: \"\", <signature>", "question", "a DSPy string signature"),
        ("X = None  # None: its own; type: int; range: 1..", None, None),
        ("X = None  # None: its own; type: int; range: 1..", 4, None),
        (
            "X = None  # None: its own; type: int; range: 1..",
            "4",
            "X expects int or None (default None), got '4'",
        ),
        ("X = None  # None: its own; type: int; range: 1..", 0, "X=0 is outside its declared range 1.."),
        ("X = None  # type: int", True, "expects int or None"),
        ("X = None", "anything", None),  # no type declared: any value
        ("X = 3", "abc", "X expects int (default 3), got 'abc' (str)"),
    ],
)
def test_the_declared_values_grammar(cell, value, expected):
    got = _problem(cell, value)
    if expected is None:
        assert got is None, got
    else:
        assert got is not None and expected in got and "\n" not in got, got


def test_path_and_dir_choices_are_looked_up_from_the_given_folder(tmp_path):
    (tmp_path / "ds.json").write_text("{}")
    (tmp_path / "run").mkdir()
    assert _problem("X = ''  # choices: \"\", <path>", "ds.json", base=tmp_path) is None
    assert "is not a file" in _problem("X = ''  # choices: \"\", <path>", "run/", base=tmp_path)
    assert _problem("X = 'example'  # choices: example, <dir>", "run", base=tmp_path) is None
    assert "the path of an existing folder" in _problem(
        "X = 'e'  # choices: e, <dir>", "ds.json", base=tmp_path
    )


def test_unknown_names_suggest_the_parameter_meant():
    declared = parameters_in("WORLD_SIZE = 8\nSEED = 0\n")
    for typo in ("WORLDSIZE", "world_size"):
        with pytest.raises(ParameterError, match=r"unknown parameter '\w+' \(did you mean 'WORLD_SIZE'\?\)"):
            check_given(Path("02_x.ipynb"), {typo: 4}, declared)


def test_types_come_from_the_default_the_annotation_or_the_comment_never_nonetype():
    declared = parameters_in("A = None  # type: float\nB = None\nC: int = 3\nD = len('x')  # computed\n")
    assert {k: v["type"] for k, v in declared.items()} == {"A": "float", "B": "any", "C": "int", "D": "any"}
    assert declared["D"]["help"] == "computed"


def test_a_parameters_cell_that_is_not_python_is_one_error(tmp_path):
    with pytest.raises(UsageError, match=r"cell.ipynb: its parameters cell is not Python \(line 1"):
        parameters_in("X = = 1\n", tmp_path / "cell.ipynb")


# -- the shipped notebooks ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_each_shipped_notebooks_own_values_are_ones_it_takes(path):
    declared = notebook_parameters(path)
    defaults = {k: v["default"] for k, v in declared.items()}
    assert check_given(path, defaults, declared) == defaults
    assert "NoneType" not in {v["type"] for v in declared.values()}


def test_the_bundled_names_a_notebook_offers_are_the_bundled_files():
    """04's choices name the examples its readers resolve (nbkit/audit/examples, nbkit/diagnose/examples)."""
    from nbkit.audit.config import config_file
    from nbkit.diagnose.finished import run_folder
    from nbkit.diagnose.setup import config_file as setup_file
    from nbkit.params import declared_choices

    declared = notebook_parameters(ROOT / "notebooks" / "04_finetune_audit.ipynb")
    resolvers = {
        "CONFIG": config_file,
        "BROKEN_CONFIG": config_file,
        "TRAINER_CONFIG": config_file,
        "DIAGNOSE_CONFIG": setup_file,
        "FINISHED_RUN": run_folder,
    }
    for key, resolve in resolvers.items():
        names = [c for c in declared_choices(declared[key]["help"]) if not c.startswith("<")]
        assert names, key
        for name in names:
            found = resolve(name)
            assert found.is_absolute() and found.exists(), (key, name, found)


# (notebook, parameter, value as typed after -p, what the one error line says): the values a user gets
# wrong, each caught before a kernel starts.
BAD_VALUES = [
    ("01", "DATASET", '"umsl"', "DATASET='umsl' is not one it takes: 'umls', 'kinships', 'synthetic', "),
    ("01", "DATASET", "umsl", "(did you mean 'umls'?)"),
    ("01", "DATASET", "data/missing.tsv", "no such file"),
    ("01", "PROFILE", "fast", "PROFILE='fast' is not one it takes: 'default' or 'full'"),
    ("00", "DEVICE", "gpu", "DEVICE='gpu' is not one it takes: 'auto', 'cpu', 'cuda' or cuda:N"),
    ("02", "CROSSOVER_SIZES", "[256x8", "item '[256x8': expected HIDDENxLAYERS"),
    ("02", "DS_CONFIG", '{"zero_optimization": {"stage": 3}', "JSON text is not a path"),
    (
        "02",
        "DS_CONFIG",
        '{"zero_optimization": {"stage": 3}}',
        "the path of an existing file; JSON is not taken",
    ),
    ("02", "PRECISION", "fp8", "PRECISION='fp8' is not one it takes: 'bf16', 'fp16' or 'fp32'"),
    ("02", "LADDER_STEPS", "0", "LADDER_STEPS=0 is outside its declared range 1..200"),
    ("02", "HIDDEN_SIZE", "'256'", "HIDDEN_SIZE expects int or None"),
    ("02", "WORLDSIZE", "4", "(did you mean 'WORLD_SIZE'?)"),
    ("03", "LM_SERVER", "vllm", "'auto', 'llama-server' or 'llama-cpp-python'"),
    ("03", "LM_CACHE", "redis", "'disk', 'memory' or 'off'"),
    ("03", "ADAPTER", "xml", "'auto', 'chat', 'json' or 'json_grammar'"),
    ("03", "METRIC", "f1", "'exact', 'contains' or an importable 'module:name'"),
    ("03", "SIGNATURE", "question", "a DSPy string signature"),
    ("03", "DEV_SET", "dev/missing.jsonl", "no such file"),
    ("04", "MODEL", "llama", "'smollm2' or 'tiny'"),
    (
        "04",
        "CONFIG",
        "nope.yaml",
        "'good_smollm2.yaml', 'good.yaml', 'broken.yaml', 'invalid.yaml' or the path",
    ),
    ("04", "DIAGNOSE_CONFIG", "axolotl_ff.yaml", "(did you mean 'axolotl_fft.yaml'?)"),
    ("04", "FINISHED_RUN", "no_such_run", "'finished_run' or the path of an existing folder"),
]


@pytest.mark.parametrize("nb, key, value, expected", BAD_VALUES, ids=[f"{b[0]}-{b[1]}" for b in BAD_VALUES])
def test_nbkit_run_refuses_a_bad_value_before_any_kernel_starts(
    nb, key, value, expected, tmp_path, monkeypatch, capsys
):
    import nbkit.runner

    def no_kernel(*args, **kwargs):
        raise AssertionError("a notebook ran")

    monkeypatch.setattr(nbkit.runner, "execute_jobs", no_kernel)
    monkeypatch.delenv("NBKIT_NOTEBOOKS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["run", nb, "-p", key, value, "-q", "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nbkit: error: ") and expected in err, err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_a_bad_value_set_in_the_users_own_parameters_cell_stops_nbkit_run_too(tmp_path, monkeypatch, capsys):
    from runner_notebooks import make_notebook

    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    make_notebook(
        nbs / "01_alpha.ipynb",
        body="pass\n",
        parameters="SEED = 0\nDATASET = 'gama'  # choices: alpha, gamma\n",
    )
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(nbs))
    assert main(["run", "01", "-q", "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "DATASET='gama' is not one it takes: 'alpha' or 'gamma' (did you mean 'gamma'?)" in err
    assert "(the value its parameters cell sets; give another with -p)" in err
    assert main(["run", "01", "-q", "-p", "DATASET", "gamma", "--output", str(tmp_path / "out")]) == 0


# -- the notebook's own first cell ----------------------------------------------------------------------

CHECKED_BODY = "import nbkit\nnbkit.check_parameters(globals(), '01_alpha')\n"


def test_the_first_cell_stops_a_papermill_run_with_one_line_before_any_work(tmp_path):
    """papermill (or JupyterLab) with a value `nbkit run` would refuse: the first code cell says it in one
    line (no traceback in the notebook) and nothing after it runs; `nbkit run` reads that as exit 2."""
    from runner_notebooks import PARAMETERS, make_notebook

    from nbkit.execute import execute

    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    src = make_notebook(nbs / "01_alpha.ipynb", body=CHECKED_BODY)
    nb = nbformat.read(src, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import pathlib\npathlib.Path('ran.txt').write_text('ran')"))
    nbformat.write(nb, src)
    assert "DATASET = 'alpha'  # choices: alpha, beta, <path>" in PARAMETERS
    (tmp_path / "out").mkdir()
    result = execute(src, tmp_path / "out", {"DATASET": "gamma", "N": 5}, progress=False)
    assert not result.ok and not (nbs / "ran.txt").exists()
    assert "raised ParameterError: 01_alpha: parameter DATASET='gamma' is not one it takes" in result.error
    executed = nbformat.read(result.output, as_version=4)
    (error,) = [o for c in executed.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert error.traceback == [f"ParameterError: {error.evalue}"], error.traceback
    (tmp_path / "out2").mkdir()
    ok = execute(src, tmp_path / "out2", {"DATASET": "beta", "N": 5}, progress=False)
    assert ok.ok, ok.error
    assert (nbs / "ran.txt").exists()


def test_the_first_cell_reads_the_declarations_of_the_notebook_jupyterlab_serves(tmp_path, monkeypatch):
    """In JupyterLab the kernel knows its notebook (``__session__``), even a renamed copy; else the notebook
    of that name in the kernel's folder, else the one `nbkit run` would find."""
    from runner_notebooks import make_notebook

    renamed = make_notebook(tmp_path / "my_copy.ipynb", body=CHECKED_BODY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(tmp_path / "nowhere"))
    values = {"SMOKE": False, "DEVICE": "auto", "SEED": 0, "N": 3, "RATE": 0.5, "DATASET": "gamma"}
    with pytest.raises(ParameterError, match="my_copy: parameter DATASET='gamma'"):
        check_parameters({**values, "__session__": str(renamed)}, "01_alpha")
    check_parameters({**values, "DATASET": "beta", "__session__": str(renamed)}, "01_alpha")
    with pytest.raises(ParameterError, match="01_alpha: cannot read its declared parameters"):
        check_parameters(values, "01_alpha")
    make_notebook(tmp_path / "01_alpha.ipynb")
    with pytest.raises(ParameterError, match="01_alpha: parameter DATASET='gamma'"):
        check_parameters(values, "01_alpha")


# -- nbkit list --------------------------------------------------------------------------------------


def test_list_shows_type_default_and_what_each_takes_aligned(tmp_path, monkeypatch, capsys):
    from runner_notebooks import make_notebook

    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    make_notebook(
        nbs / "01_alpha.ipynb",
        parameters="SEED = 0  # range: 0..\nSTEPS = None  # None: its own; type: int\nANY = None\n"
        "DATASET = 'alpha'  # the data; choices: alpha, <path>\n",
    )
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(nbs))
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "NoneType" not in out
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("  ")}
    assert lines["STEPS"].split()[1:3] == ["int", "None"] and lines["ANY"].split()[1:4] == [
        "any",
        "None",
        "any",
    ]
    assert "'alpha' or the path of an existing file  # the data" in lines["DATASET"]
    assert "0.." in lines["SEED"] and "# None: its own" in lines["STEPS"]
    # the columns line up: each starts at the header's offset on every row
    header = lines["parameter"]
    for column in ("type", "default", "takes"):
        at = header.index(column)
        for key in ("SEED", "STEPS", "ANY", "DATASET"):
            assert lines[key][at - 1] == " " and lines[key][at] != " ", (column, key)
    assert main(["list", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)["01_alpha"]
    assert listed["STEPS"] == {
        "type": "int",
        "default": None,
        "help": "None: its own; type: int",
        "takes": "",
    }
