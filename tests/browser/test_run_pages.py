"""A run's pages in a real browser, offline: the index page's claims ledger, its figures at a glance and
an exported figure.

Most tests need no kernel: the run folder is built from fabricated results with ``nbkit.report`` (what
``nbkit run`` calls), so they check the page itself. The glance test runs a real ``nbkit run`` of small
theme notebooks (or checks the run folder ``$NBKIT_INDEX_RUN`` names, e.g. a ``make workbook`` run). Every
request that is not a local file is refused, so a page that needed a CDN would show it here.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import nbformat
import pytest

from nbkit.claims import Claim
from nbkit.execute import NotebookResult
from nbkit.report import PLOTLY_JS, export_html, write_index

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def _claim(i: int, verdict: str) -> dict:
    return Claim(
        claim=f"claim {i}",
        field_note="0.9",
        measured="0.8",
        verdict=verdict,
        rule="≥ 0.85",
        n="3 seeds",
        why=f"reason {i}",
    ).to_dict()


@pytest.fixture
def offline_page(chromium):
    context = chromium.new_context(viewport={"width": 1300, "height": 1000})
    refused = []

    def route(r):
        if r.request.url.startswith("file://"):
            return r.continue_()
        refused.append(r.request.url)
        return r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page, refused
    context.close()


def test_index_ledger_has_one_row_per_claim_and_filters_by_verdict(offline_page, tmp_path):
    page, _ = offline_page
    claims_a = [_claim(0, "holds"), _claim(1, "refuted"), _claim(2, "inconclusive")]
    claims_b = [_claim(3, "holds"), _claim(4, "needs GPU")]
    results = [
        NotebookResult(
            "01_a",
            True,
            12.5,
            tmp_path / "01_a.ipynb",
            tmp_path / "01_a.html",
            {"claims": claims_a, "headline": {"test MRR": 0.9312}},
        ),
        NotebookResult(
            "02_b", True, 3.0, tmp_path / "02_b.ipynb", tmp_path / "02_b.html", {"claims": claims_b}
        ),
        NotebookResult("03_old", True, 1.0, None, None, {"claims": [{"claim": "old", "verdict": "holds"}]}),
    ]
    index = write_index(
        tmp_path, results, {"01_a": {"SMOKE": True}}, name="20260101-120000", date="2026-01-01 12:00"
    )
    page.goto(index.as_uri())
    assert page.title() == "nbkit run 20260101-120000 (2026-01-01 12:00)"
    rows = page.locator("#ledger tbody tr")
    assert rows.count() == len(claims_a) + len(claims_b)
    assert rows.nth(0).locator("td").nth(1).inner_text() == "claim 0"
    assert page.locator("#ledger-count").inner_text() == "5"
    page.locator("#verdict-filter input[value='holds']").uncheck()
    assert page.locator("#ledger tbody tr:visible").count() == 3
    assert page.locator("#ledger-count").inner_text() == "3"
    page.locator("#verdict-filter input[value='holds']").check()
    assert page.locator("#ledger tbody tr:visible").count() == 5
    assert "03_old: claims not in the Claim shape" in page.locator("body").inner_text()
    page.screenshot(path=str(tmp_path / "index.png"), full_page=True)


def test_exported_notebook_draws_its_figure_offline_from_the_shared_plotly_js(offline_page, tmp_path):
    import plotly.graph_objects as go

    from nbkit.live import figure_bundle

    page, refused = offline_page
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("live.show()")
    fig = go.Figure(go.Scatter(x=[0, 1, 2], y=[3, 1, 2], name="loss"), layout={"title": "loss"})
    cell.outputs = [nbformat.v4.new_output("display_data", data=figure_bundle(fig))]
    nb.cells = [cell]
    src = tmp_path / "01_fig.ipynb"
    nbformat.write(nb, src)
    assert export_html(src, tmp_path / "01_fig.html") == 1
    assert (tmp_path / PLOTLY_JS).is_file()
    page.goto((tmp_path / "01_fig.html").as_uri())
    page.wait_for_selector(".js-plotly-plot .main-svg", state="attached")
    assert page.evaluate("document.querySelector('.js-plotly-plot').data[0].y") == [3, 1, 2]
    assert all("plotly" not in url for url in refused)  # plotly.js came from the file beside the page


LAPTOP = {"width": 1366, "height": 768}


def test_index_ledger_fits_a_laptop_screen_and_a_row_opens_on_click(chromium, tmp_path):
    """At 1366×768 the ledger needs no sideways scrolling: long values wrap, `why` shows three lines
    and its row shows all of it when clicked (and closes again)."""
    why = " ".join(["the paired bootstrap of per-query reciprocal ranks over 3 seeds decides the rise;"] * 8)
    rows = [
        Claim(
            claim="scale_curve_rises_on_the_synthetic_47k_entity_graph",
            field_note="MRR rises with training time",
            measured=json.dumps(
                {"curve": [0.017, 0.031, 0.044, 0.057], "ceiling": 0.074, "steps_per_s": 3.1}
            ),
            verdict=v,
            rule="≥ 0.02 rise",
            n="3 seeds",
            interval="[0.031, 0.049]",
            why=why,
        ).to_dict()
        for v in ("holds", "refuted", "inconclusive")
    ]
    results = [
        NotebookResult("01_kg_gnn", True, 12.5, tmp_path / "01.ipynb", tmp_path / "01.html", {"claims": rows})
    ]
    index = write_index(tmp_path, results, {}, name="laptop", date="2026-01-01 12:00")
    context = chromium.new_context(viewport=LAPTOP)
    try:
        page = context.new_page()
        page.goto(index.as_uri())
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= LAPTOP["width"], f"the page is {width}px wide on a {LAPTOP['width']}px screen"
        table = page.locator("#ledger").bounding_box()
        assert table["x"] + table["width"] <= LAPTOP["width"]
        cell = page.locator("#ledger tbody tr").first.locator("td.why div")
        closed = cell.bounding_box()["height"]
        line = page.evaluate(
            "parseFloat(getComputedStyle(document.querySelector('#ledger td.why div')).lineHeight)"
        )
        assert closed <= 3.5 * line, (closed, line)
        page.screenshot(path=str(tmp_path / "ledger-1366.png"))
        page.locator("#ledger tbody tr").first.click()
        opened = cell.bounding_box()["height"]
        assert opened > 2 * closed, (closed, opened)
        assert (
            page.locator("#ledger tbody tr").nth(1).locator("td.why div").bounding_box()["height"] == closed
        )
        page.screenshot(path=str(tmp_path / "ledger-1366-open.png"))
        page.locator("#ledger tbody tr").first.click()
        assert cell.bounding_box()["height"] == closed
        shots = os.environ.get("NBKIT_LEDGER_SHOTS")
        if shots:  # keep the two screenshots for a person to look at
            for png in tmp_path.glob("ledger-*.png"):
                shutil.copy2(png, Path(shots) / png.name)
    finally:
        context.close()


def _theme_notebooks_that_ran(run: Path) -> list[str]:
    """The notebooks of a run folder that are ok and recorded a headline or claims (a theme notebook)."""
    status = json.loads((run / "index.json").read_text())["notebooks"]
    metrics = json.loads((run / "metrics.json").read_text())
    return [
        e["name"]
        for e in status
        if e["status"] == "ok" and {"headline", "claims"} & set(metrics.get(e["name"], {}))
    ]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """``$NBKIT_INDEX_RUN`` when set, else a fresh ``nbkit run`` of two small theme notebooks and one that
    is not a theme's."""
    given = os.environ.get("NBKIT_INDEX_RUN")
    if given:
        return Path(given).resolve()
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "runner_notebooks", Path(__file__).resolve().parents[1] / "unit" / "runner_notebooks.py"
    )
    notebooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(notebooks)
    from nbkit.runner import run_notebooks

    d = tmp_path_factory.mktemp("notebooks")
    notebooks.make_notebook(d / "00_intro.ipynb", body="import nbkit\nnbkit.record('x', 1)\n")
    notebooks.make_notebook(d / "01_toy.ipynb", body=notebooks.THEME)
    notebooks.make_notebook(d / "02_toy.ipynb", body=notebooks.THEME)
    previous = os.environ.get("NBKIT_NOTEBOOKS")
    os.environ["NBKIT_NOTEBOOKS"] = str(d)
    try:
        final, results = run_notebooks(
            [], {"N": 6}, output=tmp_path_factory.mktemp("runs") / "glance", progress=False
        )
    finally:
        if previous is None:
            os.environ.pop("NBKIT_NOTEBOOKS")
        else:
            os.environ["NBKIT_NOTEBOOKS"] = previous
    assert all(r.ok for r in results), [r.error for r in results]
    return final


@pytest.mark.timeout(600)
def test_index_shows_one_summary_figure_per_theme_notebook_on_a_laptop_screen(
    chromium, finished_run, tmp_path
):
    """At 1366×768, offline: one drawn figure per theme notebook that ran, above the ledger, none wider
    than the screen; the first row of figures starts on the first screen, side by side."""
    themes = _theme_notebooks_that_ran(finished_run)
    assert themes, f"{finished_run}: no theme notebook ran"
    context = chromium.new_context(viewport=LAPTOP)
    refused: list[str] = []
    context.route(
        "**/*",
        lambda r: (
            r.continue_()
            if r.request.url.startswith("file://")
            else (refused.append(r.request.url), r.abort())
        ),
    )
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto((finished_run / "index.html").as_uri())
        cards = page.locator("#glance section.nb")
        assert [cards.nth(i).get_attribute("data-notebook") for i in range(cards.count())] == themes
        page.wait_for_function(
            f"document.querySelectorAll('#glance .js-plotly-plot .main-svg').length >= {len(themes)}"
        )
        plots = page.locator("#glance .js-plotly-plot")
        assert plots.count() == len(themes), "one summary figure per theme notebook that ran"
        for i in range(plots.count()):
            box = plots.nth(i).bounding_box()
            assert box["width"] > 300 and box["height"] > 200, box
            assert box["x"] + box["width"] <= LAPTOP["width"], box
            assert (
                page.evaluate(f"document.querySelectorAll('#glance .js-plotly-plot')[{i}].data.length") >= 1
            )
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= LAPTOP["width"], f"the page is {width}px wide on a {LAPTOP['width']}px screen"
        first = cards.first.bounding_box()
        assert first["y"] < LAPTOP["height"], f"the glance starts below the first screen ({first['y']}px)"
        if cards.count() > 1:
            assert cards.nth(1).bounding_box()["y"] == first["y"], "two cards side by side on a laptop"
        assert cards.first.bounding_box()["y"] < page.locator("#ledger").bounding_box()["y"]
        shot = tmp_path / "index-glance-1366.png"
        page.screenshot(path=str(shot))
        from PIL import Image

        with Image.open(shot) as img:
            assert img.size == (LAPTOP["width"], LAPTOP["height"])
            colours = img.convert("RGB").getcolors(maxcolors=1 << 16)
            assert colours is None or len(colours) > 50, "the first screen is (almost) blank"
        assert not refused, f"requests that are not local files: {refused}"
        shots = os.environ.get("NBKIT_LEDGER_SHOTS")
        if shots:
            shutil.copy2(shot, Path(shots) / shot.name)
    finally:
        context.close()
