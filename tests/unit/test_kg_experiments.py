"""The KG registry, its context and what notebook 01 prints and records, on fabricated results."""

import dataclasses
import math

import pytest

from nbkit.errors import UsageError
from nbkit.experiment import config_for
from nbkit.kg import config as c
from nbkit.kg import experiments as ex
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


@pytest.mark.parametrize("Config", [c.AblationConfig, c.DownstreamConfig, c.AggrConfig, c.SelectionConfig])
def test_what_the_selection_chose_is_a_set_of_fields_of_the_later_configs(Config):
    chosen = c.Chosen(decoder="distmult", dropout=0.3, type_aggr="sum", complex_dim=64)
    cfg = config_for(Config, True, dataset="synthetic", **chosen.overrides())
    assert (cfg.decoder, cfg.dropout, cfg.type_aggr, cfg.complex_dim) == ("distmult", 0.3, "sum", 64)
    assert cfg.epochs == Config.smoke().epochs  # the SMOKE preset under the overrides


def test_an_unknown_override_is_a_usage_error_before_anything_runs():
    with pytest.raises(UsageError, match="LoadConfig has no field datset"):
        ex.run("load", ex.KGContext("cpu"), datset="umls")
    with pytest.raises(UsageError, match="kg has no experiment 'ladder'"):
        ex.run("ladder", ex.KGContext("cpu"))


def test_each_context_caches_its_own_split():
    a, b = ex.KGContext("cpu"), ex.KGContext("cpu")
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
        curve_steps=[10, 40],
        curve_train_s=[1.0, 5.0],
        curve_valid_mrr=[0.004, 0.0123],
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


def test_the_scale_row_and_summary():
    m = MinibatchMetrics(rows=[_row(0, ceiling_mrr=0.03), _row(1)], sizes={"entities": 3000, "train": 16_000})
    row = m.scale_row
    assert row["graph_entities"] == 3000 and row["graph_train"] == 16_000 and row["seed"] == 0
    text = ex.scale_summary(Result(metrics=m))
    assert text.startswith("synthetic graph: 3,000 entities, 16,000 train triples; 40 steps in 5.1 s")
    assert "(ceiling 0.0300)" in text and text.count("learning curve, seed") == 2 and "5 s: 0.0123" in text
    assert "mini-batch: 7.8 steps/s, encoder on 25% of the nodes" in ex.minibatch_summary(Result(metrics=m))
    assert "scale_row" not in {f.name for f in dataclasses.fields(m)}  # a view, not a recorded field


def test_downstream_and_ablation_summaries():
    assert (
        ex.downstream_summary(Result(metrics=DownstreamMetrics(skipped="one class"))) == "skipped: one class"
    )
    assert math.isnan(DownstreamMetrics(skipped="x").macro_f1)
    done = DownstreamMetrics(macro_f1=0.8, macro_f1_control=0.3, seeds=2, classes=9)
    assert ex.downstream_summary(Result(metrics=done)).startswith("macro-F1 0.800 (random control 0.300)")
    abl = AblationMetrics(
        best_rung=6,
        seeds=2,
        test_mrr=0.9,
        test_hits_at_1=0.8,
        test_hits_at_3=0.9,
        test_hits_at_10=0.95,
        test_mean_rank=1.5,
        test_auc=0.97,
        test_mrr_per_seed=[0.9, 0.9],
        rung_metrics={},
        interrupted=False,
    )
    text = ex.ablation_summary(Result(metrics=abl))
    assert (
        text.startswith("best rung by validation MRR: 6 ComplEx-N3")
        and "MRR 0.900, Hits@10 0.950, AUC 0.970" in text
    )


def test_record_each_records_fields_under_their_own_names(monkeypatch):
    seen = []
    monkeypatch.setattr(ex, "record", lambda name, value: seen.append((name, value)))
    m = DownstreamMetrics(skipped="x")
    ex.record_each(m, "skipped", "seeds")
    assert seen == [("skipped", "x"), ("seeds", 0)]
    seen.clear()
    ex.record_each(m)
    assert [n for n, _ in seen] == [f.name for f in dataclasses.fields(m)]
