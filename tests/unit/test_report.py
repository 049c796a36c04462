"""The run's pages as HTML (``nbkit.report``), without a browser: the index's answer sentence and counts,
headline numbers in words with units, the ledger's rows in the recorded shape (older runs' rows
tolerated), a smoke run marked everywhere, a figure with nothing to draw shown as one line, and
notebook pages that request nothing from the network."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import plotly.graph_objects as go
import pytest

from nbkit.execute import NotebookResult
from nbkit.live import PLOTLY_MIME, LiveFigure, figure_bundle, nothing_to_draw
from nbkit.report import (
    NOT_JUDGED,
    answer_sentence,
    chances_words,
    claim_rows,
    export_html,
    headline_rows,
    interval_words,
    ledger_rows,
    write_index,
)


def _row(verdict: str, **extra) -> dict:
    return {
        "key": "k",
        "claim": "a claim",
        "field_note": "0.9",
        "source": "§2.1",
        "kind": "measured",
        "measured": "0.8",
        "verdict": verdict,
        "why": "because",
        "rule": "≥ 0.85",
        "n": "3 seeds",
        "interval": "[0.7, 0.9]",
        "level": 0.975,
        "exact": False,
        "units": 3,
        "budget": 5,
        "p_holds_if_true": 0.9,
        "p_refuted_if_false": 0.85,
        "true_value": "0.9",
        "false_value": "0.8",
        "decided": True,
        **extra,
    }


def _ok(name: str, metrics: dict, tmp_path: Path | None = None) -> NotebookResult:
    return NotebookResult(name, True, 10.0, None, None, metrics)


# -- rows ------------------------------------------------------------------------------------------------


def test_a_row_is_read_field_by_field_and_an_older_rows_missing_fields_are_absent():
    (new,) = claim_rows([_row("holds")])
    assert new["level"] == 0.975 and new["units"] == 3 and new["decided"] is True and new["older"] is False
    (old,) = claim_rows(
        [{"claim": "c", "verdict": "refuted", "p_holds_if_true": 1.0, "p_refuted_if_false": 1.0,
          "decided_at_defaults": True}]
    )  # fmt: skip
    assert old["measured"] is None and old["level"] is None and old["older"] is True
    assert "older nbkit" in chances_words(old)  # its P's were for the design's n: not shown as this run's
    assert interval_words(old) == "none recorded"
    assert "98.75 %" not in interval_words(_row("holds")) and "97.5 %" in interval_words(_row("holds"))
    assert interval_words(_row("holds", exact=True)) == "exact measurement: no interval"


@pytest.mark.parametrize(
    ("recorded", "message"),
    [
        ({"a": 1}, "a dict, not a list of rows"),
        (["x"], "row 0 is a str, not an object"),
        ([_row("holds"), {"claim": "c"}], "row 1 lacks verdict"),
        ([{"verdict": "holds", "claim": " "}], "row 0 lacks claim"),
    ],
)
def test_rows_that_are_not_rows_are_one_note_naming_the_row(recorded, message):
    rows, note = ledger_rows("01_x", recorded)
    assert rows == [] and note == f"01_x: claims not in the Claim shape ({message})"


def test_a_smoke_notebooks_rows_carry_no_verdict():
    rows, _ = ledger_rows("01_x", [_row("holds"), _row("refuted"), _row("needs GPU")], smoke=True)
    assert [r["verdict"] for r in rows] == [NOT_JUDGED, NOT_JUDGED, "needs GPU"]  # not measured: says so
    assert [r["why"] for r in rows[:2]] == ["smoke size: not judged"] * 2
    assert [r["measured"] for r in rows] == ["0.8"] * 3  # the measurements stay


# -- the answer and the headline numbers -------------------------------------------------------------------


def test_the_answer_counts_what_holds_is_refuted_undecided_needs_a_gpu_and_failed():
    rows = [
        {"notebook": "01", **r}
        for r in claim_rows(
            [_row("holds"), _row("holds"), _row("refuted"), _row("inconclusive"), _row("needs GPU"),
             _row("holds", source="nbkit")]
        )
    ]  # fmt: skip
    results = [_ok("01", {}), NotebookResult("02", False, 3.0, status="failed", error="boom")]
    assert answer_sentence(results, rows, []) == (
        "This run judged 5 claims of 1 notebook (4 from the field notes, 1 of nbkit's own): 3 hold, "
        "1 is refuted, 1 is undecided; 1 claim needs a GPU this machine does not have; "
        "1 notebook did not finish: 02 (failed)."
    )
    smoke = [{**r, "verdict": NOT_JUDGED} for r in rows[:4]]
    assert answer_sentence([_ok("01", {})], smoke, ["01"]) == (
        "4 claims were measured at smoke size in 1 notebook and not judged: no verdict here is a finding; "
        "every notebook finished."
    )
    assert answer_sentence([_ok("01", {})], [], []) == (
        "This run recorded no claims (1 of 1 notebooks finished); every notebook finished."
    )


def test_headline_numbers_are_words_with_units_and_nan_is_not_measured():
    spec = {
        "stage3_over_stage0_peak_growth": {"label": "ZeRO-3 peak ÷ ZeRO-0 peak", "unit": "×", "help": "h",
                                           "tolerance": 0.05, "relative": True},
        "loss_max_rel_diff": {"label": "largest loss difference", "unit": "%", "help": "", "tolerance": 0.1,
                              "relative": False},
        "peak": {"label": "peak memory", "unit": "GiB", "help": "per rank", "tolerance": 0,
                 "relative": False},
    }  # fmt: skip
    headline = {"stage3_over_stage0_peak_growth": 1.56586, "loss_max_rel_diff": "nan", "peak": 3, "old": 0.5}
    assert headline_rows(headline, spec) == [
        ("ZeRO-3 peak ÷ ZeRO-0 peak", "1.566×", "h"),
        ("largest loss difference", "not measured in this run", ""),
        ("peak memory", "3 GiB", "per rank"),
        ("old", "0.5", ""),  # an older run's number without a spec: its identifier
    ]


def test_the_index_leads_with_the_answer_then_numbers_figures_and_ledger(tmp_path):
    metrics = {
        "claims": [_row("holds"), _row("refuted")],
        "headline": {"peak": 3.25},
        "headline_spec": {"peak": {"label": "peak memory", "unit": "GiB", "help": "per rank"}},
    }
    page = write_index(tmp_path, [_ok("01_a", metrics)], {}, name="r", date="d").read_text()
    order = [
        page.index(s) for s in ("id='answer'", "id='notebooks'", "peak memory", "id='glance'", "id='ledger'")
    ]
    assert order == sorted(order)
    assert "<th>peak memory</th><td class='value'>3.25 GiB</td><td class='help'>per rank</td>" in page
    assert "id='smoke-banner'" not in page
    assert re.search(r"<td class='count'>1</td><td class='count'>1</td>", page)  # 1 holds, 1 refuted


def test_a_smoke_run_index_has_a_banner(tmp_path):
    page = write_index(
        tmp_path, [_ok("01_a", {"claims": [_row("refuted")]})], {"01_a": {"SMOKE": True}}, name="r", date="d"
    ).read_text()
    assert "id='smoke-banner'" in page and "This is a smoke run" in page
    assert "data-verdict='not judged'" in page and "data-verdict='refuted'" not in page


# -- figures and notebook pages ----------------------------------------------------------------------------


def test_a_figure_with_nothing_to_draw_is_one_line_saying_so():
    empty = go.Figure(layout={"title": "fp16 loss-scale history"})
    assert nothing_to_draw(json.loads(empty.to_json()))
    bundle = figure_bundle(empty)
    assert PLOTLY_MIME not in bundle
    assert (
        bundle["text/plain"]
        == "fp16 loss-scale history: nothing was plotted in this run; what it found is written below"
    )
    no_points = go.Figure(go.Scatter(x=[], y=[], name="loss"))
    assert nothing_to_draw(json.loads(no_points.to_json()))
    drawn = go.Figure(go.Bar(x=["a"], y=[1]))
    assert not nothing_to_draw(json.loads(drawn.to_json())) and PLOTLY_MIME in figure_bundle(drawn)
    live = LiveFigure("loss", widget=False, min_interval_s=0)
    assert PLOTLY_MIME not in figure_bundle(live.figure)
    live.add("train", 0, 1.0)
    assert PLOTLY_MIME in figure_bundle(live.figure)


def _page(tmp_path: Path, outputs: list, parameters: dict | None = None) -> str:
    nb = nbformat.v4.new_notebook()
    if parameters is not None:
        nb.metadata["papermill"] = {"parameters": parameters}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2}}
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = outputs
    nb.cells = [nbformat.v4.new_markdown_cell("# page"), cell]
    src = tmp_path / "01_page.ipynb"
    nbformat.write(nb, src)
    export_html(src, tmp_path / "01_page.html")
    return (tmp_path / "01_page.html").read_text()


def test_a_notebook_page_requests_nothing_from_the_network(tmp_path):
    widget = nbformat.v4.new_output(
        "display_data",
        data={
            "application/vnd.jupyter.widget-view+json": {"model_id": "m", "version_major": 2},
            "text/plain": "HBox()",
        },
    )
    figure = nbformat.v4.new_output("display_data", data=figure_bundle(go.Figure(go.Scatter(y=[1, 2]))))
    page = _page(tmp_path, [widget, figure])
    sources = re.findall(r"<script[^>]*\bsrc=['\"]([^'\"]+)", page)
    assert sources == ["plotly.min.js"], sources
    assert not re.search(r"(require|mathjax|mermaid|html-manager|unpkg|jsdelivr|cdnjs)", page, re.I)
    assert "widget-view+json" not in page and "widget-state+json" not in page
    assert 'id="smoke-banner"' not in page


def test_a_smoke_notebooks_page_carries_the_banner_and_an_empty_figure_is_one_line(tmp_path):
    stored = {
        PLOTLY_MIME: json.loads(go.Figure(layout={"title": "drill"}).to_json())
    }  # shown by plotly itself
    page = _page(tmp_path, [nbformat.v4.new_output("display_data", data=stored)], {"SMOKE": True})
    assert 'id="smoke-banner"' in page or "id='smoke-banner'" in page
    assert "This notebook ran at smoke size" in page
    assert "drill: nothing was plotted in this run" in page and "Plotly.newPlot" not in page


def test_a_runs_notebooks_are_one_holm_family_on_its_index():
    """Each notebook judged its decisive rows with its own Holm family; the run's index judges all of them
    as one: two rows that decide only at α ≥ 0.03 and 0.04 hold alone in their notebooks, and are
    inconclusive in a run of three decisive rows (Holm's second step needs α ≤ 0.025)."""
    from nbkit.report import run_ledger

    results = [
        _ok(
            "01",
            {
                "claims": [
                    _row("holds", key="a", alpha_needed=1e-6),
                    _row("holds", key="b", alpha_needed=0.03),
                ]
            },
        ),
        _ok(
            "02",
            {"claims": [_row("refuted", key="c", alpha_needed=0.04), _row("holds", key="d", exact=True)]},
        ),
    ]
    judged = run_ledger(results, smoke=[])
    verdicts = {r["key"]: r["verdict"] for name in judged for r in judged[name][0]}
    assert verdicts == {"a": "holds", "b": "inconclusive", "c": "inconclusive", "d": "holds"}
    assert "family of 3 decisive rows" in judged["01"][0][1]["why"]
    alone = run_ledger(results[1:], smoke=[])
    assert alone["02"][0][0]["verdict"] == "refuted"


def test_the_index_says_where_each_experiment_ran_and_its_cpu_seconds(tmp_path):
    from nbkit.report import ran_rows

    ran = {"ablation": {"where": "this process and 2 worker processes", "wall_s": 60.2, "cpu_s": 118.4}}
    assert ran_rows(ran) == [("ablation", "118 CPU-s, 60 s wall", "this process and 2 worker processes")]
    assert ran_rows(None) == [] and ran_rows(["x"]) == []
    page = write_index(
        tmp_path, [_ok("01", {"claims": [_row("holds")], "ran": ran})], {}, name="r", date="d"
    ).read_text()
    assert "where each experiment ran" in page and "118 CPU-s, 60 s wall" in page
