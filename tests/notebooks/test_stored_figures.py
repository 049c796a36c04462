"""Every figure a SMOKE run stores reads well: no scatter trace is drawn at under 2 % of its y axis
(``tests/figure_rules.py``: its own y-span ÷ the span of every trace on that axis, log10 values on a log
axis), so quantities of different units sit on separate axes or subplots and curves spanning decades on a log
axis."""

from pathlib import Path

import nbformat
import pytest
from figure_rules import squashed_traces

from nbkit.live import PLOTLY_MIME

NOTEBOOKS = sorted(
    p.stem for p in (Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb")
)


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_no_trace_of_a_stored_figure_is_squashed(executed_notebook, name):
    path, _ = executed_notebook(name)
    nb = nbformat.read(path, as_version=4)
    figures = [
        o["data"][PLOTLY_MIME]
        for c in nb.cells
        for o in c.get("outputs", [])
        if PLOTLY_MIME in o.get("data", {})
    ]
    squashed = [f"cell figure {i}: {s}" for i, fig in enumerate(figures, 1) for s in squashed_traces(fig)]
    assert not squashed, (
        f"{name}: {len(squashed)} squashed trace(s) in {len(figures)} figures:\n" + "\n".join(squashed)
    )
