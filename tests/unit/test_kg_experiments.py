"""The KG registry, its context, the configs' profiles and what each panel shows under its figure, on
fabricated results."""

import dataclasses

import pytest

from nbkit.errors import UsageError
from nbkit.experiment import config_for
from nbkit.kg import config as c
from nbkit.kg import experiments as ex
from nbkit.kg.context import KGContext
from nbkit.kg.metrics import AblationMetrics, DownstreamMetrics, MinibatchMetrics, MinibatchRow
from nbkit.result import Result


def test_the_registry_holds_every_section_of_notebook_01():
    assert ex.REGISTRY.slugs == [
        "load",
        "selection",
        "ablation",
        "downstream",
        "aggr",
        "minibatch",
        "scale",
        "pitfalls",
    ]
    assert ex.REGISTRY["scale"].Config is c.ScaleConfig and ex.REGISTRY["scale"].run is ex.run_minibatch
    assert ex.run == ex.REGISTRY.run and ex.show == ex.REGISTRY.show and ex.panel == ex.REGISTRY.panel
    assert all(e.show_result is not None for e in ex.REGISTRY)


@pytest.mark.parametrize("Config", [c.AblationConfig, c.DownstreamConfig, c.AggrConfig, c.SelectionConfig])
def test_what_the_selection_chose_is_a_set_of_fields_of_the_later_configs(Config):
    chosen = c.Chosen(
        decoder="distmult", dropout=0.3, rgcn_hidden=128, add_decoder="complex", type_aggr="sum"
    )
    cfg = config_for(Config, True, dataset="synthetic", **chosen.overrides())
    assert (cfg.decoder, cfg.dropout, cfg.rgcn_hidden, cfg.type_aggr) == ("distmult", 0.3, 128, "sum")
    assert cfg.epochs == Config.smoke().epochs  # the SMOKE preset under the overrides


def test_each_aggr_arm_runs_with_its_own_choices_at_the_ladders_learning_rate():
    cfg = config_for(
        c.AggrConfig,
        **c.Chosen(
            decoder="complex",
            dropout=0.5,
            rgcn_hidden=64,
            add_decoder="distmult",
            add_dropout=0.3,
            add_rgcn_hidden=128,
        ).overrides(),
    )
    mean, add = cfg.arm("mean", 4), cfg.arm("add", 4)
    assert (mean.aggr, mean.decoder, mean.dropout, mean.rgcn_hidden, mean.seed) == (
        "mean",
        "complex",
        0.5,
        64,
        4,
    )
    assert (add.aggr, add.decoder, add.dropout, add.rgcn_hidden, add.seed) == ("add", "distmult", 0.3, 128, 4)
    assert mean.lr == add.lr == c.AblationConfig().lr


def test_the_selection_trains_at_seeds_no_judged_run_uses():
    for slug in ("ablation", "aggr", "downstream", "scale"):
        Config = ex.REGISTRY[slug].Config
        field = next(f for f in dataclasses.fields(Config) if f.name == "seeds")
        assert field.metadata["max"] <= c.SEEDS_MAX < c.SELECTION_SEED_OFFSET
        assert ex.REGISTRY[slug].config(False, "full").seeds <= c.SEEDS_MAX


def test_the_full_profile_changes_only_the_budget():
    for slug in ("ablation", "aggr", "downstream", "scale"):
        e = ex.REGISTRY[slug]
        full = e.config(False, "full")
        assert full.seeds == e.replicates.full >= e.Config().seeds
        assert dataclasses.replace(full, seeds=e.Config().seeds) == e.Config()


def test_the_scale_run_has_a_step_budget_on_a_graph_its_defaults_were_not_chosen_on():
    s = c.ScaleConfig()
    assert s.max_steps == 90 and s.eval_points == 2 and s.seed == 1
    tc = ex._minibatch_config(s)
    assert (tc.max_steps, tc.eval_every_steps, tc.max_seconds) == (90, 45, None)


def test_an_unknown_override_is_a_usage_error_before_anything_runs():
    with pytest.raises(UsageError, match="LoadConfig has no field datset"):
        ex.run("load", KGContext("cpu"), datset="umls")
    with pytest.raises(UsageError, match="kg has no experiment 'ladder'"):
        ex.run("ladder", KGContext("cpu"))


def test_each_context_caches_its_own_split():
    a, b = KGContext("cpu"), KGContext("cpu")
    split = a.split("synthetic", 0)
    assert a.split("synthetic", 0) is split and a.kg("synthetic") is a.kg("synthetic")
    assert b.split("synthetic", 0) is not split
    a.close()
    assert a.closed and a.split("synthetic", 0) is not split


def _row(seed, **extra):
    fields = dict(
        mode="mini-batch",
        seed=seed,
        valid_mrr=0.0123,
        valid_hits_at_10=0.03,
        evaluated_triples=500,
        epochs=1,
        steps=40,
        train_s=5.1,
        steps_per_s=7.8,
        curve_steps=(0, 20, 40),
        curve_valid_mrr=(0.001, 0.004, 0.0123),
        edges_per_step=1200,
        nodes_per_step=750,
        nodes_fraction=0.25,
        message_graph_edges=40_000,
        peak_memory_mb=300.0,
        peak_memory_growth_mb=12.0,
        memory_measured_as="rss",
        interrupted=False,
    )
    return MinibatchRow(**{**fields, **extra})


def _html(shown) -> str:
    return shown.data


def test_what_the_panels_show_under_their_figures():
    import pandas as pd

    m = MinibatchMetrics(
        rows=(_row(1, ceiling_mrr=0.03), _row(2)), sizes={"entities": 3000, "train": 16_000}, graph_seed=1
    )
    table = pd.DataFrame([ex._row_dict(r) for r in m.rows])
    text = _html(ex._show_minibatch(Result(metrics=m, table=table)))
    assert text.startswith("<p>graph: 3,000 entities, 16,000 train triples (seed 1)")
    assert "mini-batch (seed 1): 40 steps, 7.8 steps/s, encoder on 25% of the nodes" in text
    assert table["curve_valid_mrr"][0] == "0.0010 → 0.0040 → 0.0123" and "ceiling_mrr" in table
    assert "ceiling_mrr" not in ex._row_dict(_row(2))
    skipped = _html(ex._show_downstream(Result(metrics=DownstreamMetrics(skipped="one class"))))
    assert skipped == "<p>skipped: one class</p>"
    done = DownstreamMetrics(
        macro_f1=0.8, macro_f1_control=0.3, seeds=2, classes=9, dropped_classes=("X (2)",)
    )
    text = _html(ex._show_downstream(Result(metrics=done, table=pd.DataFrame([{"a": 1}]))))
    assert (
        text.startswith("<p>macro-F1 0.800 (random control 0.300)") and "left out" in text and "X (2)" in text
    )
    abl = AblationMetrics(
        best_rung=6,
        seeds=2,
        test_mrr=0.9,
        test_hits_at_1=0.8,
        test_hits_at_3=0.9,
        test_hits_at_10=0.95,
        test_mean_rank=1.5,
        test_auc=0.97,
        test_mrr_per_seed=(0.9, 0.9),
        rungs=(),
        interrupted=False,
    )
    text = _html(ex._show_ablation(Result(metrics=abl, table=pd.DataFrame([{"rung": 6}]))))
    assert "best rung by validation MRR (selecting half): 6 ComplEx-N3" in text
    assert "MRR 0.900, Hits@10 0.950, AUC 0.970" in text and "<table" in text
