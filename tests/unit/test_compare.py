"""``nbkit compare RUN_A RUN_B`` on real runs of a small theme notebook (``nbkit run`` and ``nbkit
sweep``, made once per module), and on copies of them changed the way a later run or a damaged folder
would be: identical runs exit 0; a changed verdict, a row or a notebook ok in one run only exit 1 and are
named; parameter, version and headline differences are named with exit 0; a folder that is not a run,
an unreadable record, or a smoke run against a default one is one line, exit 2.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from runner_notebooks import THEME, make_notebook

from nbkit.cli import main
from nbkit.compare import compare

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three runs of the theme notebook (A, A again, and A with RATE=0.1), one sweep over RATE and one smoke
    run."""
    root = tmp_path_factory.mktemp("compare")
    notebooks = root / "notebooks"
    notebooks.mkdir()
    make_notebook(notebooks / "01_toy.ipynb", body=THEME)
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NBKIT_NOTEBOOKS", str(notebooks))
        for name, extra in (("a", []), ("same", []), ("rate", ["-p", "RATE", "0.1"]), ("smoke", ["--smoke"])):
            out[name] = root / name
            assert main(["run", "01", "-q", "--output", str(out[name]), *extra]) == 0
        out["sweep"] = root / "sweep"
        assert main(["sweep", "01", "--grid", "RATE=0.5,0.1", "-q", "--output", str(out["sweep"])]) == 0
    return out


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_two_identical_runs_compare_equal(runs, capsys):
    assert main(["compare", str(runs["a"]), str(runs["same"])]) == 0
    out = capsys.readouterr().out
    assert "verdicts changed: none" in out and "parameters that differ: none" in out
    assert out.strip().endswith("same verdicts and nothing else differs (exit 0)")
    run = json.loads((runs["a"] / "run.json").read_text())
    assert run["packages"]["python"] and run["packages"]["plotly"]  # recorded from now on
    recorded = json.loads((runs["a"] / "metrics.json").read_text())["01_toy"]
    stated = recorded.get("headline_spec") or recorded["headline_tolerance"]
    tolerance = {k: {"tolerance": v["tolerance"], "relative": v["relative"]} for k, v in stated.items()}
    assert tolerance == {
        "total of b": {"tolerance": 0.1, "relative": False},
        "total of a": {"tolerance": 0.05, "relative": True},
    }


def test_a_changed_verdict_exits_1_and_names_the_row_the_parameter_and_the_headline(runs, capsys):
    assert main(["compare", str(runs["a"]), str(runs["rate"])]) == 1
    out = capsys.readouterr().out
    assert (
        "verdicts changed: 1\n  01_toy  b_total: holds → refuted  (A: 3 (n 1 sum); B: 0.6 (n 1 sum))" in out
    )
    assert "  01_toy  RATE: default → 0.1" in out
    assert "  01_toy  total of b: 3 → 0.6 (tolerance ±0.1)" in out
    assert "total of a" not in out  # a does not read RATE
    c = compare(runs["a"], runs["rate"])
    assert [r["key"] for r in c.verdicts_changed] == ["b_total"] and c.exit_code == 1
    assert main(["compare", str(runs["a"]), str(runs["rate"]), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdicts_changed"][0]["a"]["verdict"] == "holds" and doc["exit_code"] == 1
    assert doc["parameters"] == [{"unit": "01_toy", "parameter": "RATE", "a": "default", "b": "0.1"}]


def test_a_headline_within_its_tolerance_and_a_package_bump_exit_0(runs, tmp_path, capsys):
    b = _copy(runs["same"], tmp_path / "bumped")
    _edit_json(b / "run.json", lambda r: r["packages"].update(plotly="99.0.0"))
    # "total of b" moves by 0.05 of its tolerance 0.1; "total of a" by 1 % of its relative 5 %
    _edit_json(
        b / "metrics.json",
        lambda m: m["01_toy"]["headline"].update({"total of b": 3.05, "total of a": 3.03}),
    )
    assert main(["compare", str(runs["a"]), str(b)]) == 0
    out = capsys.readouterr().out
    plotly = json.loads((runs["a"] / "run.json").read_text())["packages"]["plotly"]
    assert f"package versions that differ: 1\n  plotly: {plotly} → 99.0.0" in out
    assert "headline numbers beyond their tolerance: none" in out
    _edit_json(b / "metrics.json", lambda m: m["01_toy"]["headline"].update({"total of a": 3.3}))
    assert main(["compare", str(runs["a"]), str(b)]) == 0
    assert "total of a: 3 → 3.3 (tolerance ±0.05 relative)" in capsys.readouterr().out


def test_a_row_or_a_notebook_in_one_run_only_exits_1(runs, tmp_path, capsys):
    fewer = _copy(runs["same"], tmp_path / "fewer")
    _edit_json(fewer / "metrics.json", lambda m: m["01_toy"].update(claims=[]))
    assert main(["compare", str(runs["a"]), str(fewer)]) == 1
    assert "rows in one run only: 1\n  01_toy  b_total: only in A (holds)" in capsys.readouterr().out
    failed = _copy(runs["same"], tmp_path / "failed")
    _edit_json(
        failed / "index.json",
        lambda s: s["notebooks"][0].update(status="failed", error="01_toy: cell 3 raised ValueError: x"),
    )
    assert main(["compare", str(failed), str(runs["a"])]) == 1
    out = capsys.readouterr().out
    assert (
        "notebooks ok in one run only: 1\n  01_toy: A failed (01_toy: cell 3 raised ValueError: x); B ok"
        in out
    )


def test_sweeps_compare_each_combination_with_the_same_combination(runs, tmp_path, capsys):
    assert main(["compare", str(runs["sweep"]), str(runs["sweep"])]) == 0
    assert "(sweeps; 2 compared ok in both)" in capsys.readouterr().out
    other = _copy(runs["sweep"], tmp_path / "other")
    table = other / "comparison.csv"
    with open(table, newline="") as fh:
        rows = list(csv.DictReader(fh))
    rows[1]["status"] = "failed"
    with open(table, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["compare", str(runs["sweep"]), str(other)]) == 1
    out = capsys.readouterr().out
    assert "combinations ok in one run only: 1\n  RATE=0.1: A ok; B failed" in out


def _garbage(path: Path) -> None:
    path.write_text("{not json")


@pytest.mark.parametrize(
    ("damage", "pattern"),
    [
        (lambda d: shutil.rmtree(d), r"nbkit: error: .*b: not a folder$"),
        (lambda d: (d / "run.json").unlink(), r"nbkit: error: .*b: not a run folder \(no run.json"),
        (lambda d: _garbage(d / "metrics.json"), r"nbkit: error: .*metrics.json: not readable JSON"),
        (
            lambda d: (d / "index.json").unlink(),
            r"nbkit: error: .*index.json: missing \(each notebook's status",
        ),
        (
            lambda d: _edit_json(d / "metrics.json", lambda m: m["01_toy"].update(claims=[{"claim": "x"}])),
            r"nbkit: error: .*01_toy's claims are not in the Claim shape",
        ),
    ],
    ids=["missing", "not-a-run", "corrupt-metrics", "no-index", "claims-not-rows"],
)
def test_a_missing_or_corrupt_folder_is_one_line_exit_2(runs, tmp_path, capsys, damage, pattern):
    import re

    b = _copy(runs["same"], tmp_path / "b")
    damage(b)
    assert main(["compare", str(runs["a"]), str(b)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1 and re.search(pattern, captured.err.strip()), (
        captured.err
    )


def test_a_run_against_a_sweep_is_bad_input(runs, capsys):
    assert main(["compare", str(runs["a"]), str(runs["sweep"])]) == 2
    assert "is a run folder and" in capsys.readouterr().err


def test_the_html_report_names_the_changed_row(runs, tmp_path, capsys):
    page = tmp_path / "diff.html"
    assert (
        main(["compare", str(runs["a"]), str(runs["rate"]), "--format", "html", "--output", str(page)]) == 1
    )
    text = page.read_text()
    assert "<h2>verdicts changed (1)</h2>" in text and "b_total: holds → refuted" in text


def test_a_smoke_run_against_a_default_run_is_refused_in_one_line(runs, tmp_path, capsys):
    """A smoke run's rows are measured, not judged: no verdict of it can be set beside a default run's."""
    for a, b in ((runs["smoke"], runs["a"]), (runs["a"], runs["smoke"])):
        assert main(["compare", str(a), str(b)]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and len(captured.err.strip().splitlines()) == 1, captured.err
        assert f"{runs['smoke']} is a smoke run and {runs['a']} is not" in captured.err
        assert "compare two smoke runs, or two runs without --smoke" in captured.err
    assert main(["compare", str(runs["smoke"]), str(runs["smoke"])]) == 0  # smoke against smoke: measurements
    capsys.readouterr()
    # a notebook given SMOKE by -p in an otherwise default run is a smoke run too
    given = _copy(runs["same"], tmp_path / "given")
    _edit_json(given / "run.json", lambda r: r.update(parameters={"01_toy": {"SMOKE": "True"}}))
    assert main(["compare", str(runs["a"]), str(given)]) == 2
    assert f"{given} is a smoke run and {runs['a']} is not" in capsys.readouterr().err


def test_headline_tolerances_come_from_the_headline_spec_and_else_the_older_record(runs, tmp_path, capsys):
    spec = _copy(runs["same"], tmp_path / "spec")

    def stated(m):
        m["01_toy"]["headline_spec"] = {
            "total of b": {"label": "b's total", "unit": "", "help": "", "tolerance": 0.5, "relative": False}
        }
        m["01_toy"]["headline"]["total of b"] = 3.4

    _edit_json(spec / "metrics.json", stated)
    assert main(["compare", str(runs["a"]), str(spec)]) == 0
    assert "headline numbers beyond their tolerance: none" in capsys.readouterr().out  # 0.4 ≤ 0.5 stated
    _edit_json(spec / "metrics.json", lambda m: m["01_toy"].pop("headline_spec"))
    assert main(["compare", str(runs["a"]), str(spec)]) == 0
    assert "total of b: 3 → 3.4 (tolerance ±0.1)" in capsys.readouterr().out  # the older record's 0.1
