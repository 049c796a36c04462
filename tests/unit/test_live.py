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
