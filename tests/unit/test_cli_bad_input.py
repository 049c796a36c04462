"""Bad input to `nbkit run / sweep / list`: one line naming the problem, exit 2, nothing run or written.

Table-driven: each case is argv (``{out}``, ``{file}``, ``{port}`` filled in per test), extra
environment, and a fragment the one error line must contain. A new entry point adds its rows here.
"""

from __future__ import annotations

import socket

import pytest
from runner_notebooks import make_notebook

from nbkit.cli import main

CASES = [
    # nbkit run
    ("run-no-notebook", ["run"], {}, "name the notebooks to run"),
    ("run-all-and-name", ["run", "--all", "01"], {}, "--all runs every notebook"),
    ("run-repeated-param", ["run", "01", "-p", "N", "2", "-p", "N", "5"], {}, "-p N given twice"),
    ("run-unknown-notebook", ["run", "nope"], {}, "unknown notebook 'nope'"),
    ("run-unknown-param", ["run", "01", "-p", "EPOCHS", "3"], {}, "unknown parameter 'EPOCHS'"),
    ("run-wrong-type", ["run", "01", "-p", "N", "abc"], {}, "parameter N expects int"),
    ("run-below-range", ["run", "01", "-p", "N", "-5"], {}, "N=-5 is outside its declared range 1..100"),
    ("run-above-range", ["run", "01", "-p", "N", "101"], {}, "outside its declared range 1..100"),
    (
        "run-unknown-choice",
        ["run", "01", "-p", "DATASET", "gamma"],
        {},
        "DATASET='gamma' is not one it takes: 'alpha', 'beta'",
    ),
    (
        "run-missing-path-choice",
        ["run", "01", "-p", "DATASET", "no/such/file.tsv"],
        {},
        "or the path of an existing file",
    ),
    ("run-output-is-file", ["run", "01", "--output", "{file}"], {}, "is a file; give a folder path"),
    ("run-output-under-file", ["run", "01", "--output", "{file}/sub/run"], {}, "which is a file"),
    ("run-output-not-creatable", ["run", "01", "--output", "/proc/nbkit-no/run"], {}, "cannot create it"),
    ("run-output-not-empty", ["run", "01", "--output", "{full}"], {}, "exists and is not empty"),
    ("run-jobs-zero", ["run", "01", "--jobs", "0"], {}, "--jobs must be at least 1"),
    (
        "run-no-kernel",
        ["run", "01", "--kernel", "no-such-kernel"],
        {},
        "kernel 'no-such-kernel' is not installed",
    ),
    # nbkit list
    (
        "list-missing-folder",
        ["list"],
        {"NBKIT_NOTEBOOKS": "/missing/nbkit"},
        "NBKIT_NOTEBOOKS=/missing/nbkit: not a folder",
    ),
    ("list-empty-folder", ["list"], {"NBKIT_NOTEBOOKS": "{empty}"}, "no notebooks (NN_name.ipynb) found"),
    # nbkit sweep
    ("sweep-empty-grid", ["sweep", "01", "--output", "{out}"], {}, "empty grid"),
    ("sweep-no-values", ["sweep", "01", "--grid", "N=", "--output", "{out}"], {}, "--grid N: no values"),
    ("sweep-malformed", ["sweep", "01", "--grid", "N", "--output", "{out}"], {}, "expected KEY=V1,V2"),
    (
        "sweep-empty-value",
        ["sweep", "01", "--grid", "N=1,,2", "--output", "{out}"],
        {},
        "an empty value between commas",
    ),
    (
        "sweep-unknown-key",
        ["sweep", "01", "--grid", "EPOCHS=1,2", "--output", "{out}"],
        {},
        "unknown parameter 'EPOCHS'",
    ),
    (
        "sweep-wrong-type",
        ["sweep", "01", "--grid", "N=1,'x'", "--output", "{out}"],
        {},
        "parameter N expects int",
    ),
    ("sweep-out-of-range", ["sweep", "01", "--grid", "N=1,500", "--output", "{out}"], {}, "N=500 is outside"),
    (
        "sweep-key-twice",
        ["sweep", "01", "--grid", "N=1", "--grid", "N=2", "--output", "{out}"],
        {},
        "--grid N given twice",
    ),
    ("sweep-value-twice", ["sweep", "01", "--grid", "N=2,2", "--output", "{out}"], {}, "value 2 given twice"),
    (
        "sweep-grid-and-param",
        ["sweep", "01", "--grid", "N=1,2", "-p", "N", "3", "--output", "{out}"],
        {},
        "both as --grid and as -p",
    ),
    (
        "sweep-grid-and-smoke",
        ["sweep", "01", "--grid", "SMOKE=True,False", "--smoke", "--output", "{out}"],
        {},
        "SMOKE given both",
    ),
    (
        "sweep-too-many",
        [
            "sweep",
            "01",
            "--grid",
            "N=" + ",".join(map(str, range(1, 18))),
            "--grid",
            "RATE=" + ",".join(str(i / 10) for i in range(16)),
            "--output",
            "{out}",
        ],
        {},
        "makes 272 runs (more than 256); pass --yes",
    ),
    (
        "sweep-scheduler-unreachable",
        ["sweep", "01", "--grid", "N=1,2", "--scheduler", "tcp://127.0.0.1:{port}", "--output", "{out}"],
        {},
        "cannot reach the Dask scheduler",
    ),
    (
        "sweep-jobs-zero",
        ["sweep", "01", "--grid", "N=1,2", "--jobs", "0", "--output", "{out}"],
        {},
        "--jobs must be at least 1",
    ),
]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("argv,env,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_nothing_happens(argv, env, expected, tmp_path, monkeypatch, capsys):
    if "distributed" in " ".join(argv) or "--scheduler" in argv:
        pytest.importorskip("distributed")
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    make_notebook(nb_dir / "01_alpha.ipynb")
    (tmp_path / "empty").mkdir()
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("x")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    out = tmp_path / "out" / "run"
    fill = {
        "out": str(out),
        "file": str(a_file),
        "full": str(full),
        "empty": str(tmp_path / "empty"),
        "port": str(_closed_port()),
    }
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(nb_dir))
    for k, v in env.items():
        monkeypatch.setenv(k, v.format(**fill))
    monkeypatch.chdir(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))

    rc = main([a.format(**fill) for a in argv])

    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.startswith("nbkit: error:")]
    assert rc == 2, captured
    assert len(lines) == 1 and expected in lines[0], captured.err
    assert "Traceback" not in captured.err + captured.out
    assert not (nb_dir / "ran.txt").exists(), "the notebook ran"
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert after == before, f"written: {set(after) - set(before)}"


def test_relative_path_parameters_are_made_absolute(tmp_path, monkeypatch):
    """Kernels run in notebooks/: a path the user gives from their directory must still be found."""
    from nbkit.params import parse_value

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "kg.tsv").write_text("a\tr\tb\n")
    (tmp_path / "dev.jsonl").write_text("{}\n")
    assert parse_value("data/kg.tsv") == str(tmp_path / "data" / "kg.tsv")
    assert parse_value("'dev.jsonl'") == str(tmp_path / "dev.jsonl")
    assert parse_value("umls") == "umls"  # a name, not a path
    assert parse_value("missing/file.tsv") == "missing/file.tsv"  # left for the notebook's own error
