"""KG panels driven like a user: set controls, press Run, the figure and the result change; every figure
a run ends with keeps each line readable (no quantity squashed by another of a different unit)."""

import json
import math

import pytest

from nbkit.kg import experiments as ex
from nbkit.kg.context import KGContext

SMALL = {"dataset": "synthetic", "hidden": 16}


@pytest.fixture(scope="module")
def ctx():
    with KGContext("cpu") as ctx:
        yield ctx


def squashed(fig) -> list[tuple[str, float]]:
    """Every scatter trace whose own y-span is under 2 % of the span of all traces on its axis (log10
    values on a log axis)."""
    d = json.loads(fig.to_json())
    layout, axes = d.get("layout", {}), {}
    for t in d["data"]:
        if t.get("type", "scatter") != "scatter":
            continue
        ax = t.get("yaxis", "y")
        log = layout.get("yaxis" + ax[1:], {}).get("type") == "log"
        ys = [y for y in t.get("y") or [] if isinstance(y, (int, float)) and math.isfinite(y)]
        axes.setdefault(ax, []).append((t.get("name"), [math.log10(y) for y in ys if y > 0] if log else ys))
    out = []
    for traces in axes.values():
        values = [y for _, ys in traces for y in ys]
        total = max(values) - min(values)
        out += [
            (n, (max(ys) - min(ys)) / total)
            for n, ys in traces
            if total and (max(ys) - min(ys)) < 0.02 * total
        ]
    return out


def test_the_squash_check_catches_a_loss_and_an_mrr_on_one_axis():
    import plotly.graph_objects as go

    fig = go.Figure([go.Scatter(y=[12_000, 900, 40]), go.Scatter(y=[0.1, 0.5, 0.8], name="mrr")])
    assert [n for n, _ in squashed(fig)] == ["mrr"]


def test_ablation_panel_controls_change_the_curves(ctx):
    panel = ex.panel("ablation", ctx, widget=True, rungs=(1,), seeds=1, epochs=4, eval_every=2, **SMALL)
    assert type(panel.controls["rungs"]).__name__ == "SelectMultiple"
    panel.click()
    assert panel.error is None
    first = {t.name: list(t.y) for t in panel.live.figure.data if t.type == "scatter"}
    assert set(first) == {"rung 1 loss", "rung 1 valid MRR"} and len(first["rung 1 loss"]) == 4
    panel.controls["rungs"].value = (1, 5)
    panel.controls["epochs"].value = 6
    panel.click()
    assert panel.error is None and panel.runs == 2
    second = {t.name: list(t.y) for t in panel.live.figure.data if t.type == "scatter"}
    assert "rung 5 loss" in second and len(second["rung 1 loss"]) == 6
    assert list(panel.result.table["rung"]) == [1, 5] and squashed(panel.live.figure) == []
    # loss and MRR on axes of their own, the loss on a log axis
    loss, mrr = (
        next(t for t in panel.live.figure.data if t.name == f"rung 5 {q}") for q in ("loss", "valid MRR")
    )
    assert (
        loss.yaxis != mrr.yaxis and panel.live.figure.layout[loss.yaxis.replace("y", "yaxis")].type == "log"
    )


def test_ablation_panel_empty_selection_is_one_readable_line(ctx):
    panel = ex.panel("ablation", ctx, widget=True, rungs=(1,), seeds=1, epochs=2, **SMALL)
    panel.controls["rungs"].value = ()
    panel.click()
    assert panel.error.startswith("UsageError: AblationConfig.rungs: choose at least one rung")


def test_selection_panel_chooses_on_the_selecting_half(ctx):
    panel = ex.panel(
        "selection",
        ctx,
        widget=True,
        epochs=3,
        eval_every=3,
        decoders=("distmult", "complex"),
        rgcn_hiddens=(16,),
        type_aggrs=("sum",),
        complex_dims=(16,),
        complex_n3s=(0.01, 0.1),
        **SMALL,
    )
    panel.click()
    assert panel.error is None
    rows = panel.result.metrics.validation
    chosen = panel.result.metrics.chosen
    for what, decoder_key in (
        ("RGCN (rung 5), aggr=mean", "decoder"),
        ("RGCN (rung 5), aggr=add", "add_decoder"),
    ):
        group = [r for r in rows if r["choice"] == what]
        best = max(group, key=lambda r: r["valid_mrr_select"])
        assert (
            getattr(chosen, decoder_key) == best["decoder"] and [r["chosen"] for r in group].count(True) == 1
        )
    rung6 = [r for r in rows if r["rung"] == 6]
    assert sorted(r["complex_n3"] for r in rung6) == [0.01, 0.1] and chosen.type_aggr == "sum"
    assert chosen.complex_n3 == max(rung6, key=lambda r: r["valid_mrr_select"])["complex_n3"]
    assert {t.type for t in panel.live.figure.data} == {"bar"}  # one bar per candidate, no curves


def test_aggr_panel_runs_both_aggregations(ctx):
    panel = ex.panel("aggr", ctx, widget=True, seeds=2, epochs=6, eval_every=3, add_rgcn_hidden=8, **SMALL)
    panel.click()
    assert panel.error is None
    assert {t.name for t in panel.live.figure.data if t.type == "scatter"} == {"aggr=mean", "aggr=add"}
    m = panel.result.metrics
    assert (m.mean.width, m.add.width, m.mean.runs, m.add.runs) == (64, 8, 2, 2)
    assert squashed(panel.live.figure) == []


def test_downstream_panel_returns_a_bar_figure(ctx):
    panel = ex.panel("downstream", ctx, widget=True, epochs=3, eval_every=3, **SMALL)
    panel.click()
    assert panel.error is None
    bars = [t for t in panel.live.figure.data if t.type == "bar"]
    assert len(bars) == 1 and list(bars[0].x) == ["trained embeddings", "random control"]
    before = list(bars[0].y)
    panel.controls["epochs"].value = 12
    panel.click()
    assert list(next(t for t in panel.live.figure.data if t.type == "bar").y) != before


def test_minibatch_panel_compares_modes_and_reacts_to_controls(ctx):
    panel = ex.panel(
        "minibatch", ctx, widget=True, epochs=2, batch_size=128, num_negatives=16, fanout=3, **SMALL
    )
    panel.click()
    assert panel.error is None
    table = panel.result.table
    assert list(table["mode"]) == ["mini-batch", "full graph"]
    mini, full = table.iloc[0], table.iloc[1]
    assert mini["edges_per_step"] < full["edges_per_step"] == full["message_graph_edges"]
    assert mini["steps"] == full["steps"]  # same batches: the loss is the same, only message passing differs
    assert {"mini-batch", "full graph"} <= {t.name for t in panel.live.figure.data}
    assert squashed(panel.live.figure) == []
    before = len(next(t for t in panel.live.figure.data if t.name == "mini-batch").y)
    # a smaller batch means more steps per epoch: more points on the mini-batch loss curve
    panel.controls["batch_size"].value = 32
    panel.controls["compare_full"].value = False
    panel.click()
    assert panel.error is None and list(panel.result.table["mode"]) == ["mini-batch"]
    after = len(next(t for t in panel.live.figure.data if t.name == "mini-batch").y)
    assert after > before


def test_scale_panel_builds_a_synthetic_graph_of_the_requested_size(ctx):
    panel = ex.panel(
        "scale",
        ctx,
        widget=True,
        entities=200,
        triples=3000,
        clusters=4,
        max_steps=8,
        eval_points=2,
        epochs=2,
        batch_size=256,
        num_negatives=16,
        hidden=16,
        eval_max_triples=100,
        seeds=2,
    )
    panel.click()
    assert panel.error is None and panel.result.metrics.sizes["entities"] == 200
    assert list(panel.result.table["mode"]) == ["mini-batch", "mini-batch"]
    row = panel.result.metrics.rows[0]
    # a budget of 8 steps, validated before the first step and every 4
    assert row.steps == 8 and row.curve_steps == (0, 4, 8) and row.seed == 1 and row.steps_per_s > 0
    assert 0 < row.valid_mrr <= row.ceiling_mrr + 0.05 and row.ceiling_mrr < 1
    assert squashed(panel.live.figure) == []
