"""Every notebook runs headless with SMOKE=True, records what the workbook promises, and stays small.

Size budgets: each executed notebook ≤ 3 MB, each HTML page (with the plotly.js it
loads) ≤ 8 MB, a whole run folder ≤ 40 MB. Figures are stored as plotly's mime type only — one
output per live figure, no copy of plotly.js in any notebook.
"""

from pathlib import Path

import nbformat
import pytest

from nbkit.live import PLOTLY_MIME
from nbkit.report import PLOTLY_JS

NOTEBOOKS = sorted(
    p.stem for p in (Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb")
)
MB = 1024 * 1024
NOTEBOOK_BUDGET, PAGE_BUDGET, RUN_BUDGET = 3 * MB, 8 * MB, 40 * MB


def _embedded_plotly_js(nb_path: Path) -> list[int]:
    """Indices of cells with an HTML output that carries the plotly.js library itself."""
    nb = nbformat.read(nb_path, as_version=4)
    return [
        i
        for i, cell in enumerate(nb.cells)
        for o in cell.get("outputs", [])
        if "plotly.js v" in str(o.get("data", {}).get("text/html", ""))[:2_000_000]
    ]


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_headless_and_records_its_device(executed_notebook, name):
    path, metrics = executed_notebook(name)
    assert path.is_file()
    assert metrics["device"]["device"] in ("cpu", "cuda", "cuda:0"), f"{name} records the device it ran on"


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_executed_notebook_and_page_fit_their_budgets(executed_notebook, name):
    path, _ = executed_notebook(name)
    page = path.with_suffix(".html")
    js = path.parent / PLOTLY_JS
    nb_size = path.stat().st_size
    page_size = page.stat().st_size + (js.stat().st_size if js.is_file() else 0)
    print(f"{name}: notebook {nb_size / MB:.2f} MB, page + plotly.js {page_size / MB:.2f} MB")
    assert nb_size <= NOTEBOOK_BUDGET, f"{name}.ipynb is {nb_size / MB:.1f} MB (budget 3 MB)"
    assert page_size <= PAGE_BUDGET, f"{name}.html with plotly.js is {page_size / MB:.1f} MB (budget 8 MB)"
    assert _embedded_plotly_js(path) == [], "plotly.js embedded in the executed notebook"
    figures = sum(
        PLOTLY_MIME in o.get("data", {})
        for c in nbformat.read(path, as_version=4).cells
        for o in c.get("outputs", [])
    )
    if js.is_file():
        assert figures > 0, "plotly.js beside a page with no figure"


@pytest.mark.slow
def test_a_whole_smoke_run_fits_40_mb(executed_notebook):
    total = 0
    for name in NOTEBOOKS:
        path, _ = executed_notebook(name)
        total += path.stat().st_size + path.with_suffix(".html").stat().st_size
    from nbkit.report import ensure_plotly_js

    total += ensure_plotly_js(path.parent).stat().st_size  # one shared copy per run folder
    print(f"SMOKE run folder: {total / MB:.1f} MB")
    assert total <= RUN_BUDGET, f"a SMOKE run folder would be {total / MB:.1f} MB (budget 40 MB)"
