"""KG panels driven like a user: set controls, press Run, the figure changes."""

import pytest

from nbkit.kg import graph as kgg
from nbkit.kg import triples as kgt
from nbkit.kg.panel import (
    AggrParams,
    DownstreamParams,
    LadderParams,
    aggr_panel,
    downstream_panel,
    ladder_panel,
)


@pytest.fixture(scope="module")
def split():
    return kgg.split_kg(kgt.synthetic_kg(60, 500, seed=0, num_clusters=3))


def test_ladder_panel_controls_change_the_curves(split):
    panel = ladder_panel(split, LadderParams(rungs=(1,), epochs=4, hidden=16, eval_every=2), widget=True)
    assert type(panel.controls["rungs"]).__name__ == "SelectMultiple"
    panel.click()
    assert panel.error is None
    first = {t.name: list(t.y) for t in panel.live.figure.data}
    assert set(first) == {"rung 1 loss", "rung 1 valid MRR"} and len(first["rung 1 loss"]) == 4
    panel.controls["rungs"].value = (1, 5)
    panel.controls["epochs"].value = 6
    panel.click()
    assert panel.error is None and panel.runs == 2
    second = {t.name: list(t.y) for t in panel.live.figure.data}
    assert "rung 5 loss" in second and len(second["rung 1 loss"]) == 6
    assert list(panel.result["table"]["rung"]) == [1, 5]


def test_ladder_panel_empty_selection_is_one_readable_line(split):
    panel = ladder_panel(split, LadderParams(rungs=(1,), epochs=2, hidden=8), widget=True)
    panel.controls["rungs"].value = ()
    panel.click()
    assert panel.error.startswith("ValueError: choose at least one rung")


def test_aggr_panel_runs_both_aggregations(split):
    panel = aggr_panel(split, AggrParams(seeds=1, epochs=3, hidden=16, eval_every=3), widget=True)
    panel.click()
    assert panel.error is None
    names = {t.name for t in panel.live.figure.data}
    assert {"mean s0 loss", "add s0 loss"} <= names
    assert set(panel.result["summary"]) == {"mean", "add"}


def test_downstream_panel_returns_a_bar_figure(split):
    labels = {e: t for t in split.entity_types for e in split.entities[t]}
    panel = downstream_panel(split, labels, DownstreamParams(epochs=3, hidden=16, eval_every=3), widget=True)
    panel.click()
    assert panel.error is None
    bars = [t for t in panel.live.figure.data if t.type == "bar"]
    assert len(bars) == 1 and list(bars[0].x) == ["trained embeddings", "random control"]
    before = list(bars[0].y)
    panel.controls["epochs"].value = 12
    panel.click()
    assert list(next(t for t in panel.live.figure.data if t.type == "bar").y) != before


def test_minibatch_panel_compares_modes_and_reacts_to_controls(split):
    from nbkit.kg.panel import MinibatchParams, minibatch_panel

    panel = minibatch_panel(split, MinibatchParams(epochs=2, batch_size=128, num_negatives=16, hidden=16, fanout=3), widget=True)
    panel.click()
    assert panel.error is None
    table = panel.result["table"]
    assert list(table["mode"]) == ["mini-batch", "full batch"]
    mini, full = table.iloc[0], table.iloc[1]
    assert mini["edges_per_step"] < full["edges_per_step"] == full["message_graph_edges"]
    names = {t.name for t in panel.live.figure.data}
    assert {"mini-batch loss", "full batch loss"} <= names
    before = len(next(t for t in panel.live.figure.data if t.name == "mini-batch loss").y)
    # a smaller batch means more steps per epoch: more points on the mini-batch loss curve
    panel.controls["batch_size"].value = 32
    panel.controls["compare_full"].value = False
    panel.click()
    assert panel.error is None and list(panel.result["table"]["mode"]) == ["mini-batch"]
    after = len(next(t for t in panel.live.figure.data if t.name == "mini-batch loss").y)
    assert after > before
    # synthetic source builds its own graph of the requested size
    panel.controls["source"].value = "synthetic"
    panel.controls["entities"].value = 200
    panel.controls["triples"].value = 3000
    panel.controls["clusters"].value = 4
    panel.click()
    assert panel.error is None and panel.result["sizes"]["entities"] == 200
