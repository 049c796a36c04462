import pytest

from nbkit.live import LiveFigure


def test_static_live_figure_streams_points():
    live = LiveFigure("loss", widget=False, min_interval_s=0)
    for i in range(5):
        live.add("train", i, 1.0 / (i + 1))
    live.flush()
    xs, ys = live.trace_data("train")
    assert xs == [0, 1, 2, 3, 4]
    assert list(live.figure.data[0].y) == ys


def test_throttled_points_arrive_on_flush():
    live = LiveFigure("loss", widget=False, min_interval_s=3600)
    live.add("a", 0, 1)  # first add flushes (nothing pushed yet)
    live.add("a", 1, 2)
    assert len(live.figure.data[0].x) == 1
    live.flush()
    assert list(live.figure.data[0].x) == [0, 1]


def test_widget_mode_uses_figurewidget():
    live = LiveFigure("mem", widget=True, min_interval_s=0)
    live.extend("rank0", [0, 1], [10, 20])
    assert type(live.figure).__name__ == "FigureWidget"
    assert list(live.figure.data[0].y) == [10, 20]


def test_mismatched_lengths_raise():
    live = LiveFigure(widget=False)
    with pytest.raises(ValueError, match="2 x values but 1 y"):
        live.extend("t", [1, 2], [3])


def test_reset_and_set_figure():
    import plotly.graph_objects as go

    live = LiveFigure(widget=False, min_interval_s=0)
    live.add("a", 0, 0)
    live.reset()
    assert len(live.figure.data) == 0
    live.set_figure(go.Figure(go.Bar(x=["s0", "s1"], y=[3, 4], name="bytes")))
    assert live.figure.data[0].type == "bar"


def test_set_figure_accepts_numpy_and_pandas_traces():
    import numpy as np
    import pandas as pd
    import plotly.graph_objects as go

    live = LiveFigure(widget=False)
    fig = go.Figure([go.Scatter(x=np.arange(3), y=pd.Series([1.0, 2.0, 3.0]), name="np")])
    live.set_figure(fig)
    assert live.trace_data("np") == ([0, 1, 2], [1.0, 2.0, 3.0])


def test_figure_bundle_is_plotly_json_without_the_library():
    import json

    import numpy as np

    from nbkit.live import PLOTLY_MIME, figure_bundle

    live = LiveFigure("loss", widget=False, min_interval_s=0)
    live.extend("train", np.arange(3), np.array([3.0, 2.0, 1.0]))
    bundle = figure_bundle(live.figure)
    assert set(bundle) == {PLOTLY_MIME, "text/plain"}
    assert bundle[PLOTLY_MIME]["data"][0]["y"] == [3.0, 2.0, 1.0]
    assert "loss" in bundle["text/plain"]
    assert len(json.dumps(bundle)) < 20_000  # data, layout and its template only: plotly.js is ~4.8 MB


REFRESHING_PANEL = """
from dataclasses import dataclass, field
from nbkit.panels import Panel

@dataclass
class P:
    steps: int = field(default=40, metadata={"min": 1, "max": 500})

def run(params, live):
    for i in range(params.steps):
        live.add("loss", i, 1.0 / (i + 1))
    return None

panel = Panel(P(), run, title="refreshing panel")
panel.live.min_interval_s = 0  # every point is a refresh
panel.display()
panel.run()
panel.display()  # shown again by the same cell: still one output
panel.run(steps=57)  # a second run resets and refills the same figure
"""


def test_headless_kernel_keeps_one_output_per_live_figure_with_the_final_data(tmp_path):
    """papermill (nbclient) applies update_display to the stored output: 97 refreshes, 1 output."""
    import nbformat
    from runner_notebooks import make_notebook

    from nbkit.execute import execute
    from nbkit.live import PLOTLY_MIME

    src = make_notebook(tmp_path / "01_live.ipynb", body=REFRESHING_PANEL, parameters="SMOKE = False\n")
    (tmp_path / "out").mkdir()
    result = execute(src, tmp_path / "out", {}, progress=False)
    assert result.ok, result.error
    cell = nbformat.read(result.output, as_version=4).cells[2]
    figures = [o for o in cell.outputs if PLOTLY_MIME in o.get("data", {})]
    assert len(figures) == 1, [sorted(o.get("data", {})) for o in cell.outputs]
    (trace,) = figures[0]["data"][PLOTLY_MIME]["data"]
    assert trace["x"] == list(range(57))
    assert trace["y"] == [1.0 / (i + 1) for i in range(57)]
    assert all("text/html" not in o.get("data", {}) for o in cell.outputs)  # no embedded plotly.js
    assert result.output.stat().st_size < 200_000


def test_a_registry_marks_each_panel_figure_with_its_experiment_and_its_summary(tmp_path):
    """The stored figure output of every experiment a notebook shows says which experiment it is, and the
    theme's summary experiment's says so (what the run's index page looks for)."""
    import nbformat
    from runner_notebooks import THEME, make_notebook

    from nbkit.execute import execute
    from nbkit.live import FIGURE_METADATA, PLOTLY_MIME

    src = make_notebook(tmp_path / "01_theme.ipynb", body=THEME)
    (tmp_path / "out").mkdir()
    result = execute(src, tmp_path / "out", {"N": 4}, progress=False)
    assert result.ok, result.error
    figures = [
        o
        for c in nbformat.read(result.output, as_version=4).cells
        for o in c.get("outputs", [])
        if PLOTLY_MIME in o.get("data", {})
    ]
    assert [o["metadata"][FIGURE_METADATA] for o in figures] == [
        {"experiment": "a", "summary": False},
        {"experiment": "b", "summary": True},
    ]
    assert figures[1]["data"][PLOTLY_MIME]["data"][0]["y"] == [0.5, 1.0, 1.5, 2.0]  # the finished figure
