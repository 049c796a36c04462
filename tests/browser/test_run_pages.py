"""A run's pages in a real browser at a laptop's 1366×768, offline: the index answers first, the claims
ledger is one line per row and fits a screen per notebook, figures have no colliding text and no empty
frame, a smoke run says so everywhere, and no page asks anything of the network.

The first tests build a run folder from fabricated results with ``nbkit.report`` (what ``nbkit run``
calls), so they check the page itself in seconds. The rest read a real run: a fresh ``nbkit run --all
--smoke`` of the workbook's notebooks (a few minutes on 2 cores), or the run folder ``$NBKIT_INDEX_RUN``
names (e.g. a ``make workbook`` run at default size). Every request that is not a local file is refused
and recorded, so a page that needed a CDN fails here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from pagecheck import measure_figures, offline_context

from nbkit.execute import NotebookResult
from nbkit.report import NOT_JUDGED, PLOTLY_JS, export_html, write_index

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

LAPTOP = {"width": 1366, "height": 768}


def _row(i: int, verdict: str, **extra) -> dict:
    """A claims row in the recorded shape (``Claim.to_dict()``)."""
    return {
        "key": f"claim_{i}",
        "claim": f"claim {i}",
        "field_note": "0.9",
        "source": "§2.1",
        "kind": "measured",
        "measured": "0.8",
        "verdict": verdict,
        "why": f"reason {i}",
        "rule": "≥ 0.85",
        "n": "3 seeds",
        "interval": "[0.70, 0.90]",
        "level": 0.9875,
        "exact": False,
        "units": 3,
        "budget": 3,
        "p_holds_if_true": 0.91,
        "p_refuted_if_false": 0.88,
        "true_value": "0.9",
        "false_value": "0.8",
        "decided": True,
        **extra,
    }


@pytest.fixture
def laptop(chromium):
    context, refused = offline_context(chromium, LAPTOP)
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page, refused
    context.close()


def _keep(tmp_path: Path, *names: str) -> None:
    shots = os.environ.get("NBKIT_LEDGER_SHOTS")
    if shots:  # keep the screenshots for a person to look at
        for name in names:
            for png in tmp_path.glob(name):
                shutil.copy2(png, Path(shots) / png.name)


def test_the_ledger_groups_rows_by_notebook_and_filters_by_verdict_and_notebook(laptop, tmp_path):
    page, refused = laptop
    claims_a = [_row(0, "holds"), _row(1, "refuted"), _row(2, "inconclusive")]
    claims_b = [_row(3, "holds"), _row(4, "needs GPU")]
    results = [
        NotebookResult(
            "01_a", True, 12.5, tmp_path / "01_a.ipynb", tmp_path / "01_a.html", {"claims": claims_a}
        ),
        NotebookResult(
            "02_b", True, 3.0, tmp_path / "02_b.ipynb", tmp_path / "02_b.html", {"claims": claims_b}
        ),
        # an older run's row: the fields it lacks are shown as absent
        NotebookResult("03_old", True, 1.0, None, None, {"claims": [{"claim": "old", "verdict": "holds"}]}),
        NotebookResult("04_bad", True, 1.0, None, None, {"claims": {"not": "rows"}}),
    ]
    index = write_index(tmp_path, results, {}, name="20260101-120000", date="2026-01-01 12:00")
    page.goto(index.as_uri())
    assert page.title() == "nbkit run 20260101-120000 (2026-01-01 12:00)"
    rows = page.locator("#ledger tr.row")
    assert rows.count() == 6
    assert [
        page.locator(f"#ledger tbody.nb[data-notebook='{n}'] tr.row").count()
        for n in ("01_a", "02_b", "03_old")
    ] == [3, 2, 1]
    assert rows.nth(0).locator("td").nth(0).inner_text() == "claim 0"
    assert page.locator("#ledger tbody.nb[data-notebook='03_old'] tr.row td").nth(1).inner_text() == "—"
    assert page.locator("#ledger-count").inner_text() == "6"
    page.locator("#verdict-filter input[value='holds']").uncheck()
    assert page.locator("#ledger tr.row:visible").count() == 3
    assert page.locator("#ledger-count").inner_text() == "3"
    page.locator("#notebook-filter input[value='01_a']").uncheck()
    assert page.locator("#ledger tr.row:visible").count() == 1  # 02_b's needs GPU row
    assert not page.locator("#ledger tbody.nb[data-notebook='01_a']").is_visible()
    page.locator("#verdict-filter input[value='holds']").check()
    page.locator("#notebook-filter input[value='01_a']").check()
    assert page.locator("#ledger tr.row:visible").count() == 6
    assert (
        "04_bad: claims not in the Claim shape (a dict, not a list of rows)"
        in page.locator("body").inner_text()
    )
    assert not refused


def test_each_row_is_one_line_and_opens_its_details_on_click(laptop, tmp_path):
    """At 1366×768: no sideways scrolling, no word broken mid-word, headers that fit; a click (or Enter) on a
    row shows the rule, the interval at the level its verdict used, its chances at the n that ran, the units
    of its budget and why; a second click closes it."""
    page, _ = laptop
    long = " ".join(["the paired bootstrap of per-query reciprocal ranks over 3 seeds decides the rise;"] * 8)
    rows = [
        _row(
            i,
            v,
            claim="scale curve rises on the synthetic 47k-entity graph as training time grows, "
            "inconclusive otherwise",
            measured=json.dumps(
                {"curve": [0.017, 0.031, 0.044, 0.057], "ceiling": 0.074, "steps_per_s": 3.1}
            ),
            why=long,
            units=4,
            budget=10,
        )
        for i, v in enumerate(("holds", "refuted", "inconclusive"))
    ]
    rows.append(
        _row(
            9,
            "holds",
            exact=True,
            interval="",
            level=None,
            p_holds_if_true=None,
            p_refuted_if_false=None,
            source="nbkit",
        )
    )
    results = [
        NotebookResult("01_kg_gnn", True, 12.5, tmp_path / "01.ipynb", tmp_path / "01.html", {"claims": rows})
    ]
    index = write_index(tmp_path, results, {}, name="laptop", date="2026-01-01 12:00")
    page.goto(index.as_uri())
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= LAPTOP["width"], f"the page is {width}px wide on a {LAPTOP['width']}px screen"
    line = page.evaluate(
        "parseFloat(getComputedStyle(document.querySelector('#ledger tr.row td')).lineHeight)"
    )
    for i in range(4):
        height = page.locator("#ledger tr.row").nth(i).bounding_box()["height"]
        assert height <= 1.6 * line + 6, f"row {i} is {height}px tall: more than one line of {line}px"
    headers = page.evaluate(
        "[...document.querySelectorAll('#ledger thead th')].map(th => [th.scrollWidth, th.clientWidth])"
    )
    assert all(scroll <= client for scroll, client in headers), headers
    details = page.locator("#ledger tr.details").first
    assert not details.is_visible()
    page.locator("#ledger tr.row").first.click()
    assert details.is_visible()
    text = details.inner_text()
    assert "field notes §2.1: 0.9" in text and "≥ 0.85" in text
    assert "[0.70, 0.90] at 98.75 % (Holm-adjusted" in text
    assert "at the n that ran (3 seeds): P(holds | true at the claimed 0.9) = 0.91" in text
    assert "P(refuted | false at 0.8) = 0.88" in text and "can decide at this n" in text
    assert "decided after 4 units of a budget of 10" in text and long in text
    page.screenshot(path=str(tmp_path / "ledger-1366-open.png"))
    page.locator("#ledger tr.row").first.click()
    assert not details.is_visible()
    page.locator("#ledger tr.row").nth(3).focus()
    page.keyboard.press("Enter")
    exact = page.locator("#ledger tr.details").nth(3).inner_text()
    assert "exact measurement" in exact and "exact: no chance involved" in exact
    assert "nbkit's own claim (not from the field notes)" in exact
    page.screenshot(path=str(tmp_path / "ledger-1366.png"))
    _keep(tmp_path, "ledger-*.png")


def test_a_smoke_run_shows_a_banner_and_its_rows_no_verdict(laptop, tmp_path):
    """An older smoke run's rows carried verdicts: the page shows what was measured and no verdict."""
    page, _ = laptop
    rows = [_row(0, "holds"), _row(1, "refuted"), _row(2, NOT_JUDGED, why="smoke size: not judged")]
    results = [
        NotebookResult("01_a", True, 2.0, tmp_path / "01_a.ipynb", tmp_path / "01_a.html", {"claims": rows})
    ]
    index = write_index(tmp_path, results, {"01_a": {"SMOKE": True}}, name="smoke", date="2026-01-01 12:00")
    page.goto(index.as_uri())
    banner = page.locator("#smoke-banner")
    assert banner.is_visible() and banner.bounding_box()["y"] < LAPTOP["height"]
    assert "This is a smoke run" in banner.inner_text()
    verdicts = page.locator("#ledger tr.row td:nth-child(3)").all_inner_texts()
    assert verdicts == [NOT_JUDGED] * 3
    assert (
        "refuted" not in page.locator("#ledger").inner_text()
        and "holds" not in page.locator("#ledger").inner_text()
    )
    answer = page.locator("#answer").inner_text()
    assert answer.startswith("3 claims were measured at smoke size in 1 notebook and not judged"), answer


def test_an_exported_notebook_draws_its_figure_from_the_shared_plotly_js_and_requests_nothing(
    laptop, tmp_path
):
    import plotly.graph_objects as go

    from nbkit.live import figure_bundle

    page, refused = laptop
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"parameters": {"SMOKE": True}}
    cell = nbformat.v4.new_code_cell("live.show()")
    fig = go.Figure(go.Scatter(x=[0, 1, 2], y=[3, 1, 2], name="loss"), layout={"title": "loss"})
    empty = go.Figure(layout={"title": "fp16 loss-scale history"})  # nothing was drawn into it
    cell.outputs = [nbformat.v4.new_output("display_data", data=figure_bundle(fig))]
    # stored as plotly displays a figure itself (not through LiveFigure): the page still shows one line
    cell.outputs.append(
        nbformat.v4.new_output(
            "display_data", data={"application/vnd.plotly.v1+json": json.loads(empty.to_json())}
        )
    )
    nb.cells = [nbformat.v4.new_markdown_cell("# a page"), cell]
    src = tmp_path / "01_fig.ipynb"
    nbformat.write(nb, src)
    assert export_html(src, tmp_path / "01_fig.html") == 1
    assert (tmp_path / PLOTLY_JS).is_file()
    page.goto((tmp_path / "01_fig.html").as_uri())
    page.wait_for_selector(".js-plotly-plot .main-svg", state="attached")
    assert page.evaluate("document.querySelector('.js-plotly-plot').data[0].y") == [3, 1, 2]
    assert page.locator(".js-plotly-plot").count() == 1
    assert "fp16 loss-scale history: nothing was plotted in this run" in page.locator("body").inner_text()
    assert page.locator("#smoke-banner").is_visible()
    page.wait_for_load_state("networkidle")
    assert not refused, f"requests that are not local files: {refused}"


# -- a real run ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workbook_run(tmp_path_factory) -> Path:
    """``$NBKIT_INDEX_RUN`` when set, else a fresh ``nbkit run --all --smoke`` of the workbook's notebooks."""
    given = os.environ.get("NBKIT_INDEX_RUN")
    if given:
        return Path(given).resolve()
    from nbkit.runner import run_notebooks

    final, results = run_notebooks(
        [],
        smoke=True,
        jobs=2,
        output=tmp_path_factory.mktemp("runs") / "smoke",
        progress=False,
        log=lambda _m: None,
    )
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    return final


def _record(run: Path) -> tuple[dict, list[dict], dict]:
    return (
        json.loads((run / "run.json").read_text()),
        json.loads((run / "index.json").read_text())["notebooks"],
        json.loads((run / "metrics.json").read_text()),
    )


def _is_smoke(record: dict, name: str) -> bool:
    return bool(record.get("smoke")) or str(record["parameters"].get(name, {}).get("SMOKE")) == "True"


@pytest.mark.timeout(1200)
def test_the_index_answers_first_and_each_notebooks_ledger_fits_one_screen(laptop, workbook_run, tmp_path):
    page, refused = laptop
    record, status, metrics = _record(workbook_run)
    page.goto((workbook_run / "index.html").as_uri())
    answer = page.locator("#answer")
    assert answer.bounding_box()["y"] + answer.bounding_box()["height"] <= LAPTOP["height"], (
        "below the first screen"
    )
    text = answer.inner_text()
    verdicts = page.locator("#ledger tr.row").evaluate_all("rows => rows.map(r => r.dataset.verdict)")
    count = {v: verdicts.count(v) for v in set(verdicts)}
    judged = len(verdicts) - count.get("needs GPU", 0) - count.get(NOT_JUDGED, 0)
    if judged:
        holds, refuted = count.get("holds", 0), count.get("refuted", 0)
        assert re.search(
            rf"^This run judged {judged} claims? of \d+ notebooks?.*: {holds} holds?, "
            rf"{refuted} (is|are) refuted, {judged - holds - refuted} (is|are) undecided",
            text,
        ), text
    if count.get(NOT_JUDGED):
        assert f"{count[NOT_JUDGED]} claims were measured at smoke size" in text, text
    if count.get("needs GPU"):
        assert f"{count['needs GPU']} claim" in text and "a GPU this machine does not have" in text, text
    failed = [e["name"] for e in status if e["status"] != "ok"]
    assert ("every notebook finished" in text) == (not failed), text
    smoke = [e["name"] for e in status if _is_smoke(record, e["name"])]
    if smoke:
        assert page.locator("#smoke-banner").is_visible(), "a smoke run without its banner"
        shown = set(verdicts) - {NOT_JUDGED, "needs GPU"}  # a row that needs a GPU was not measured
        assert not shown, f"a smoke run's ledger shows verdicts: {shown}"
    for name in (e["name"] for e in status if e["status"] == "ok" and "claims" in metrics.get(e["name"], {})):
        group = page.locator(f"#ledger tbody.nb[data-notebook='{name}']")
        height = group.bounding_box()["height"]
        assert height <= LAPTOP["height"], (
            f"{name}'s ledger is {height:.0f}px tall on a {LAPTOP['height']}px screen"
        )
    assert page.evaluate("document.documentElement.scrollWidth") <= LAPTOP["width"]
    page.screenshot(path=str(tmp_path / "index-first-screen.png"))
    page.screenshot(path=str(tmp_path / "index-full.png"), full_page=True)
    _keep(tmp_path, "index-*.png")
    assert not refused, f"requests that are not local files: {refused}"


@pytest.mark.timeout(1200)
def test_no_figure_of_a_run_has_colliding_text_or_an_empty_frame_and_no_page_asks_the_network(
    laptop, workbook_run, tmp_path
):
    """The index's summary figures (one per theme notebook, drawn at their own size) and every figure of every
    notebook's page, measured as drawn at 1366×768."""
    page, refused = laptop
    record, status, metrics = _record(workbook_run)
    page.goto((workbook_run / "index.html").as_uri())
    themes = [
        e["name"]
        for e in status
        if e["status"] == "ok" and {"headline", "claims"} & set(metrics.get(e["name"], {}))
    ]
    figures = {"index": measure_figures(page)}
    assert len(figures["index"]) == len(themes), "one summary figure per theme notebook that ran"
    for fig in figures["index"]:
        assert fig["width"] >= 0.85 * (LAPTOP["width"] - 100), (
            f"a summary figure squeezed to {fig['width']}px: {fig['title']}"
        )
    for entry in status:
        if entry["status"] != "ok":
            continue
        page.goto((workbook_run / f"{entry['name']}.html").as_uri())
        figures[entry["name"]] = measure_figures(page, wait_ms=60_000)
        if _is_smoke(record, entry["name"]):
            assert page.locator("#smoke-banner").is_visible(), f"{entry['name']}'s page has no smoke banner"
    collisions = [
        f"{where}: {fig['title']!r} ({fig['width']}×{fig['height']}): {len(fig['collisions'])} pair(s), e.g. "
        + "; ".join(f"{a!r} over {b!r}" for a, b in fig["collisions"][:3])
        for where, figs in figures.items()
        for fig in figs
        if fig["collisions"]
    ]
    empty = [
        f"{where}: {fig['title']!r}" for where, figs in figures.items() for fig in figs if not fig["traces"]
    ]
    total = sum(len(f) for f in figures.values())
    assert not collisions, f"colliding text in {len(collisions)} of {total} figures:\n" + "\n".join(
        collisions
    )
    assert not empty, f"{len(empty)} empty frame(s) of {total} figures:\n" + "\n".join(empty)
    assert not refused, f"requests that are not local files: {sorted(set(refused))}"
