"""Pitfall detectors find the seeded bug and pass the clean input; claims verdicts follow their rules."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from nbkit.kg import checks, claims
from nbkit.kg import graph as kgg
from nbkit.kg import triples as kgt
from nbkit.kg.downstream import embedding_f1, split_without_types


def test_inplace_edge_mutation_is_named():
    def bad(ei):
        ei[0] += 1

    found = checks.detect_inplace_edge_mutation(bad, torch.zeros(2, 4, dtype=torch.long))
    assert not found.ok and found.evidence["version_bumps"] >= 1 and found.evidence["entries_changed"] == 4
    assert checks.detect_inplace_edge_mutation(lambda ei: ei.clone() + 1, torch.zeros(2, 4, dtype=torch.long)).ok


def test_features_nan_and_scale_then_robust_scale_fixes():
    x = torch.randn(200, 3)
    x[:, 0] *= 1e4
    x[5, 2] = float("inf")
    bad = checks.check_features(x)
    assert not bad.ok and bad.evidence["inf"] == 1 and "unscaled" in bad.message
    fixed = checks.robust_scale(x)
    assert torch.isfinite(fixed).all() and checks.check_features(fixed).ok


def test_edge_index_out_of_range_and_mapping_from_heads_only():
    kg = kgt.synthetic_kg(60, 300, seed=0)
    split = kgg.split_kg(kg)
    data = kgg.build_hetero_data(split, "none")
    assert checks.check_edge_indices(data).ok
    et = data.edge_types[0]
    data[et].edge_index = data[et].edge_index.clone()
    data[et].edge_index[0, 0] = data[et[0]].num_nodes
    bad = checks.check_edge_indices(data)
    assert not bad.ok and str(et) in bad.evidence["bad_edge_types"]
    heads_only = {t: sorted(set(kg.df.loc[kg.df["head_type"] == t, "head"])) for t in split.entity_types}
    assert not checks.check_mapping_covers(kg.df, heads_only).ok
    assert checks.check_mapping_covers(kg.df, split.entities).ok


def test_auc_near_chance_names_a_cause():
    split = kgg.split_kg(kgt.synthetic_kg(60, 300, seed=0))
    f = checks.diagnose_auc_near_chance(0.5, loss_history=[1.0] * 5, embeddings=torch.zeros(10, 4), split=split, reverse="none")
    assert not f.ok and "did not decrease" in f.message and "collapsed" in f.message
    assert checks.diagnose_auc_near_chance(0.8).ok


def test_coalesce_experiment_measures_the_claim():
    exp = checks.coalesce_experiment(num_nodes=20, num_edges=80, seed=0)
    # measured, not assumed: RGCNConv accepts unsorted/duplicated edges; duplicates change the output
    assert exp["unsorted_raises"] is False
    assert exp["coalesced_vs_raw_max_abs_diff_add"] > 0
    assert exp["out_of_range_raises_even_after_coalesce"] is True
    assert claims.verdict_coalesce(exp)[0] == "refuted"


def test_embedding_f1_separable_vs_random_and_small_classes_dropped():
    rng = np.random.default_rng(0)
    y = np.array(["a"] * 30 + ["b"] * 30 + ["c"] * 3)
    X = np.vstack([rng.normal(0, 1, (30, 4)) + 5, rng.normal(0, 1, (30, 4)) - 5, rng.normal(0, 1, (3, 4))])
    good = embedding_f1(X, y)
    assert good["macro_f1"] > 0.95 and good["dropped_small_classes"] == {"c": 3} and good["samples"] == 60
    assert embedding_f1(rng.normal(size=(63, 4)), y)["macro_f1"] < 0.8
    with pytest.raises(ValueError, match="embeddings but"):
        embedding_f1(X[:5], y)


def test_split_without_types_keeps_triples():
    split = kgg.split_kg(kgt.synthetic_kg(60, 300, seed=0))
    flat = split_without_types(split)
    assert flat.entity_types == ["entity"] and flat.num_nodes == split.num_nodes
    names, fnames = split.entity_names(), flat.entity_names()
    as_names = lambda s, n: sorted((n[h], r, n[t]) for h, r, t in s.train.tolist())  # noqa: E731
    assert as_names(split, names) == as_names(flat, fnames)


def test_verdicts():
    assert claims.verdict_reverse_edges(0.53, 0.79)[0] == "holds"
    assert claims.verdict_reverse_edges(0.80, 0.82)[0] == "refuted"
    assert claims.verdict_reverse_edges(math.nan, math.nan)[0] == "not measured"
    assert claims.verdict_f1(0.85, 0.3)[0] == "holds" and claims.verdict_f1(0.85, 0.8)[0] == "refuted"
    s = lambda ms, ma, rs, ra: {"mean": {"mrr_std": ms, "roughness": rs, "diverged": 0, "mrr_mean": 0.5}, "add": {"mrr_std": ma, "roughness": ra, "diverged": 0, "mrr_mean": 0.5}}  # noqa: E731
    assert claims.verdict_aggr(s(0.01, 0.02, 0.1, 0.2))[0] == "holds"
    assert claims.verdict_aggr(s(0.03, 0.02, 0.3, 0.2))[0] == "refuted"
    assert claims.verdict_aggr(s(0.01, 0.02, 0.3, 0.2))[0] == "inconclusive"
    assert claims.loss_roughness([1, 1, 1, 1]) == 0.0


def test_claims_table_shape():
    exp = {"unsorted_raises": False, "out_of_range_raises_even_after_coalesce": True, "out_of_range_after_coalesce_error": "ValueError: x"}
    summ = {a: {"mrr_std": 0.01, "roughness": 0.1, "diverged": 0, "mrr_mean": 0.5} for a in ("mean", "add")}
    t = claims.claims_table(auc_without_reverse=0.6, auc_with_reverse=0.7, f1=0.5, control_f1=0.2, aggr_summary=summ, coalesce=exp)
    assert isinstance(t, pd.DataFrame) and len(t) == 4
    assert set(t["verdict"]) <= {"holds", "refuted", "inconclusive", "not measured"}
