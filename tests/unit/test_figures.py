"""The readability rule every stored figure passes (``tests/figure_rules.py``), on figures built with plotly
and read back as an executed notebook stores them."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
from figure_rules import MIN_SHARE, squashed_traces, values
from plotly.subplots import make_subplots


def _stored(fig) -> dict:
    return json.loads(fig.to_json())  # numpy data become plotly's typed arrays, as in a notebook


LOSS = list(np.linspace(12_000, 40, 30))
MRR = list(np.linspace(0.05, 0.61, 30))


def test_a_loss_and_an_mrr_on_one_axis_squash_the_mrr():
    fig = go.Figure([go.Scatter(y=LOSS, name="train loss"), go.Scatter(y=MRR, name="valid MRR")])
    fig.update_layout(title="selection: train loss and validation MRR per candidate")
    (bad,) = squashed_traces(_stored(fig))
    assert (bad.trace, bad.axis, bad.figure) == (
        "valid MRR",
        "y",
        "selection: train loss and validation MRR per candidate",
    )
    assert bad.share < MIN_SHARE and "valid MRR" in str(bad)


def test_separate_axes_or_subplots_read_well():
    twin = make_subplots(specs=[[{"secondary_y": True}]])
    twin.add_scatter(y=LOSS, name="train loss")
    twin.add_scatter(y=MRR, name="valid MRR", secondary_y=True)
    assert squashed_traces(_stored(twin)) == []
    rows = make_subplots(rows=2, cols=1)
    rows.add_scatter(y=np.array(LOSS), name="train loss", row=1, col=1)
    rows.add_scatter(y=np.array(MRR), name="valid MRR", row=2, col=1)
    assert squashed_traces(_stored(rows)) == []


def test_a_log_axis_is_judged_on_log10_values():
    fig = go.Figure([go.Scatter(y=LOSS, name="loss"), go.Scatter(y=[1.0, 3.0], name="small")])
    assert [s.trace for s in squashed_traces(_stored(fig))] == ["small"]
    fig.update_yaxes(type="log")  # log10 spans: 2.48 of 4.08
    assert squashed_traces(_stored(fig)) == []


def test_flat_hidden_and_other_traces_are_not_judged():
    fig = go.Figure(
        [
            go.Scatter(y=LOSS, name="loss"),
            go.Scatter(y=[0.5, 0.5, 0.5], name="threshold"),  # does not vary: nothing to squash
            go.Scatter(y=MRR, name="hidden MRR", visible="legendonly"),
            go.Bar(y=[0.1, 0.2], name="bars"),
        ]
    )
    assert squashed_traces(_stored(fig)) == []


def test_typed_arrays_decode_to_their_numbers():
    stored = _stored(go.Figure(go.Scatter(y=np.array([1.5, -2.0, 3.25]))))
    assert isinstance(stored["data"][0]["y"], dict)  # plotly's {"dtype", "bdata"}
    assert values(stored["data"][0]["y"]) == [1.5, -2.0, 3.25]
    assert values(_stored(go.Figure(go.Scatter(y=np.array([1, 2], dtype=np.int8))))["data"][0]["y"]) == [1, 2]
    assert values([1, None, "x", [2, float("nan")], True]) == [1.0, 2.0]
