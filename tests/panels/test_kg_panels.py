"""KG panels driven like a user: set controls, press Run, the figure and the result change."""

import pytest

from nbkit.kg import panels as p

SMALL = {"dataset": "synthetic", "hidden": 16}


@pytest.fixture(scope="module")
def ctx():
    with p.KGContext("cpu") as ctx:
        yield ctx


def test_ablation_panel_controls_change_the_curves(ctx):
    panel = p.panel("ablation", ctx, widget=True, rungs=(1,), seeds=1, epochs=4, eval_every=2, **SMALL)
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
    assert list(panel.result.table["rung"]) == [1, 5]


def test_ablation_panel_empty_selection_is_one_readable_line(ctx):
    panel = p.panel("ablation", ctx, widget=True, rungs=(1,), seeds=1, epochs=2, **SMALL)
    panel.controls["rungs"].value = ()
    panel.click()
    assert panel.error.startswith("UsageError: AblationConfig.rungs: choose at least one rung")


def test_selection_panel_prints_and_chooses_on_validation(ctx, capsys):
    panel = p.panel(
        "selection",
        ctx,
        widget=True,
        epochs=3,
        eval_every=3,
        decoders=("distmult", "complex"),
        dropouts=(0.5,),
        type_aggrs=("sum",),
        complex_dims=(16,),
        complex_n3s=(0.01, 0.1),
        **SMALL,
    )
    panel.click()
    assert panel.error is None
    rows = panel.result.metrics.validation
    chosen = panel.result.metrics.chosen
    best = max((r for r in rows if r["choice"] == "decoder, dropout"), key=lambda r: r["valid_mrr"])
    assert chosen.decoder == best["decoder"] and chosen.type_aggr == "sum"
    rung6 = [r for r in rows if r["rung"] == 6]
    assert sorted(r["complex_n3"] for r in rung6) == [0.01, 0.1]
    assert (
        chosen.complex_n3 == max(rung6, key=lambda r: r["valid_mrr"])["complex_n3"]
        and chosen.complex_dim == 16
    )
    assert "chosen on validation MRR" in capsys.readouterr().out


def test_aggr_panel_runs_both_aggregations(ctx):
    panel = p.panel("aggr", ctx, widget=True, seeds=1, epochs=3, eval_every=3, **SMALL)
    panel.click()
    assert panel.error is None
    names = {t.name for t in panel.live.figure.data}
    assert {"mean s0 loss", "add s0 loss"} <= names
    assert set(panel.result.metrics.summary) == {"mean", "add"}


def test_downstream_panel_returns_a_bar_figure(ctx):
    panel = p.panel("downstream", ctx, widget=True, epochs=3, eval_every=3, **SMALL)
    panel.click()
    assert panel.error is None
    bars = [t for t in panel.live.figure.data if t.type == "bar"]
    assert len(bars) == 1 and list(bars[0].x) == ["trained embeddings", "random control"]
    before = list(bars[0].y)
    panel.controls["epochs"].value = 12
    panel.click()
    assert list(next(t for t in panel.live.figure.data if t.type == "bar").y) != before


def test_minibatch_panel_compares_modes_and_reacts_to_controls(ctx):
    panel = p.panel(
        "minibatch", ctx, widget=True, epochs=2, batch_size=128, num_negatives=16, fanout=3, **SMALL
    )
    panel.click()
    assert panel.error is None
    table = panel.result.table
    assert list(table["mode"]) == ["mini-batch", "full graph"]
    mini, full = table.iloc[0], table.iloc[1]
    assert mini["edges_per_step"] < full["edges_per_step"] == full["message_graph_edges"]
    assert mini["steps"] == full["steps"]  # same batches: the loss is the same, only message passing differs
    names = {t.name for t in panel.live.figure.data}
    assert {"mini-batch loss", "full graph loss"} <= names
    before = len(next(t for t in panel.live.figure.data if t.name == "mini-batch loss").y)
    # a smaller batch means more steps per epoch: more points on the mini-batch loss curve
    panel.controls["batch_size"].value = 32
    panel.controls["compare_full"].value = False
    panel.click()
    assert panel.error is None and list(panel.result.table["mode"]) == ["mini-batch"]
    after = len(next(t for t in panel.live.figure.data if t.name == "mini-batch loss").y)
    assert after > before


def test_scale_panel_builds_a_synthetic_graph_of_the_requested_size(ctx):
    panel = p.panel(
        "scale",
        ctx,
        widget=True,
        entities=200,
        triples=3000,
        clusters=4,
        max_seconds=5.0,
        epochs=2,
        batch_size=256,
        num_negatives=16,
        hidden=16,
        eval_points=0,
        eval_max_triples=100,
        seeds=1,
    )
    panel.click()
    assert panel.error is None and panel.result.metrics.sizes["entities"] == 200
    assert list(panel.result.table["mode"]) == ["mini-batch"]
    row = panel.result.metrics.rows[0]
    # validated at each epoch end (eval_points=0): one curve point per epoch, after that epoch's steps
    assert len(row.curve_valid_mrr) == row.epochs and row.curve_steps[-1] == row.steps and row.steps_per_s > 0
    assert 0 < row.valid_mrr <= row.ceiling_mrr + 0.05 and row.ceiling_mrr < 1
