"""The labelled benchmark corpus, as a regression test, and the bench script without its peers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from nbkit.pscheck import RuleRegistry, lint_paths

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "pscheck"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("pscheck_run_bench", BENCH / "run_bench.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_corpus_every_labelled_defect_found_with_its_rule_and_clean_files_clean(bench):
    defects, files = bench.load_labels(BENCH / "corpus")
    assert len(defects) >= 60 and any(f.startswith("clean_") for f in files)
    names = {r.code: r.name for r in RuleRegistry.default()}
    labels = {r.name for r in RuleRegistry.default()}
    assert {d.rule for d in defects} <= labels, "labels must be pscheck rule names"
    diags = lint_paths([BENCH / "corpus"], strict=True, extend_select=["migration"])
    got = {(Path(d.path).name, d.line, names[d.code]) for d in diags}
    want = {(d.file, d.line, d.rule) for d in defects}
    assert got == want, {"missed": sorted(want - got), "unexpected": sorted(got - want)}


def test_bench_runs_with_peers_absent(bench, capsys, monkeypatch):
    monkeypatch.setattr(
        bench,
        "availability",
        lambda: {
            "pscheck": "",
            "mypy": "mypy is not installed (pip install mypy)",
            "flake8-pydantic": "flake8-pydantic is not installed (pip install flake8-pydantic)",
        },
    )
    assert bench.main(["--copies", "1", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "[mypy] not run: mypy is not installed" in out
    assert "[flake8-pydantic] not run: flake8-pydantic is not installed" in out
    assert "Defects a peer found and pscheck missed: none" in out
    assert "files/s" in out and "mypy: absent" in out


def test_bench_output_parsers(bench):
    mypy_out = (
        "a.py:3:5: error: Incompatible types in assignment  [assignment]\n"
        'a.py:3:5: note: See https://x\nb.py:7: error: Name "id" already defined  [no-redef]\n'
    )
    assert bench.parse_output("mypy", mypy_out) == [
        ("a.py", 3, "assignment", "Incompatible types in assignment  [assignment]"),
        ("b.py", 7, "no-redef", 'Name "id" already defined  [no-redef]'),
    ]
    assert bench.parse_output("flake8-pydantic", "x/c.py:2:5: PYD002 Non-annotated attribute\n") == [
        ("c.py", 2, "PYD002", "PYD002 Non-annotated attribute")
    ]
