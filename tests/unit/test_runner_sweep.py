"""`nbkit sweep`: grid parsing, the comparison files, a failed run as a row, and the Dask path."""

from __future__ import annotations

import csv
import re

import pytest
from runner_notebooks import make_notebook

from nbkit.cli import main
from nbkit.errors import RunError
from nbkit.sweep import parse_grid, scalar_metrics

FAILS_AT_N_4 = "import nbkit\nif N == 4:\n    raise ValueError('N=4 is cursed')\n" + (
    "nbkit.record('n_squared', N * N)\nnbkit.record('headline', {'half': RATE / 2, 'label': DATASET})\n"
)


def test_parse_grid_literals_and_bare_words():
    assert parse_grid(["N=1,2", "RATE=0.1,1e-3", "DATASET=alpha,beta", "L=[1,2],[3]", "S='a,b','c'"]) == {
        "N": [1, 2],
        "RATE": [0.1, 1e-3],
        "DATASET": ["alpha", "beta"],
        "L": [[1, 2], [3]],
        "S": ["a,b", "c"],
    }
    with pytest.raises(RunError, match="value True given twice"):
        parse_grid(["B=True,true"])


def test_scalar_metrics_flattens_dicts_and_drops_lists():
    assert scalar_metrics({"a": 1, "h": {"x": 0.5, "y": {"z": "s"}}, "rows": [1, 2], "none": None}) == {
        "a": 1,
        "h.x": 0.5,
        "h.y.z": "s",
        "none": None,
    }


@pytest.fixture
def nb_dir(tmp_path, monkeypatch):
    d = tmp_path / "notebooks"
    d.mkdir()
    make_notebook(d / "01_alpha.ipynb", body=FAILS_AT_N_4)
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(d))
    return d


def _read_csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_sweep_with_a_process_pool_writes_the_comparison(nb_dir, tmp_path, capsys):
    out = tmp_path / "sweep"
    rc = main(
        [
            "sweep",
            "01",
            "--grid",
            "N=2,4,3",
            "--grid",
            "DATASET=alpha,beta",
            "-p",
            "RATE",
            "0.25",
            "--jobs",
            "2",
            "--output",
            str(out),
            "-q",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 1, captured  # two runs (N=4) failed: exit 1, the sweep still lands
    rows = _read_csv(out / "comparison.csv")
    assert [(r["N"], r["DATASET"]) for r in rows] == [
        ("2", "alpha"),
        ("2", "beta"),
        ("4", "alpha"),
        ("4", "beta"),
        ("3", "alpha"),
        ("3", "beta"),
    ]
    assert list(rows[0])[:5] == ["run", "status", "seconds", "N", "DATASET"]
    ok = [r for r in rows if r["status"] == "ok"]
    assert [r["n_squared"] for r in ok] == ["4", "4", "9", "9"]
    assert {r["headline.half"] for r in ok} == {"0.125"} and {r["headline.label"] for r in ok} == {
        "alpha",
        "beta",
    }
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == 2 and all("ValueError: N=4 is cursed" in r["error"] for r in failed)
    page = (out / "comparison.html").read_text()
    assert page.count("<tr class='ok'>") == 4 and page.count("<tr class='failed'>") == 2
    # one plot per numeric metric (seconds, n_squared, headline.half), one trace per DATASET value
    assert len(re.findall(r"Plotly\.newPlot\(\s*\"metric-\d+\"", page)) == 3
    assert page.count('"name":"DATASET=\'alpha\'"') == 3
    assert (out / "plotly.min.js").is_file() and not list(out.glob("runs/*/plotly.min.js"))
    assert (out / "runs" / "000" / "01_alpha.ipynb").is_file()
    assert not [p for p in out.parent.iterdir() if ".tmp-" in p.name]


def test_sweep_on_a_dask_local_cluster(nb_dir, tmp_path, capsys):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=2,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        protocol="tcp",
    ) as cluster:
        out = tmp_path / "sweep"
        rc = main(
            [
                "sweep",
                "01",
                "--grid",
                "N=2,3",
                "--scheduler",
                cluster.scheduler_address,
                "--output",
                str(out),
                "-q",
            ]
        )
        captured = capsys.readouterr()
    assert rc == 0, captured
    rows = _read_csv(out / "comparison.csv")
    assert [(r["N"], r["status"], r["n_squared"]) for r in rows] == [("2", "ok", "4"), ("3", "ok", "9")]
    assert (out / "runs" / "001" / "01_alpha.ipynb").is_file() and (
        out / "runs" / "001" / "01_alpha.html"
    ).is_file()
    assert "submitted run 1/2" in captured.out


def test_claim_verdicts_become_columns_and_old_shapes_are_skipped():
    from nbkit.claims import Claim
    from nbkit.sweep import claim_verdicts

    row = Claim(
        claim="x holds", field_note="1", measured="1", verdict="refuted", rule="r", n="1", why="w", key="x"
    ).to_dict()
    assert claim_verdicts([row]) == {"verdict: x": "refuted"}
    assert claim_verdicts([{"claim": "old"}]) == {} and claim_verdicts(None) == {}
