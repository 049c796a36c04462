"""Pitfall detectors find the planted bug and pass the clean input (core Finding); the coalesce
experiment keeps parallel edges of different relations."""

import numpy as np
import pytest
import torch

from nbkit.findings import Finding
from nbkit.kg import checks
from nbkit.kg import graph as kgg
from nbkit.kg import synthetic as kgsyn
from nbkit.kg.downstream import downstream_skip_reason, embedding_f1, split_without_types


def test_inplace_edge_mutation_is_named():
    def bad(ei):
        ei[0] += 1

    found = checks.detect_inplace_edge_mutation(bad, torch.zeros(2, 4, dtype=torch.long))
    assert isinstance(found, Finding) and found.check == "edge-index-mutation"
    assert (
        found.status == "fail"
        and found.figures["version_bumps"] >= 1
        and found.figures["entries_changed"] == 4
        and found.fix
    )
    clean = checks.detect_inplace_edge_mutation(
        lambda ei: ei.clone() + 1, torch.zeros(2, 4, dtype=torch.long)
    )
    assert clean.status == "pass" and not clean.fix


def test_features_nan_and_scale_then_robust_scale_fixes():
    x = torch.randn(200, 3)
    x[:, 0] *= 1e4
    x[5, 2] = float("inf")
    bad = checks.check_features(x)
    assert bad.status == "fail" and bad.figures["inf"] == 1 and "unscaled" in bad.summary
    fixed = checks.robust_scale(x)
    assert torch.isfinite(fixed).all() and checks.check_features(fixed).status == "pass"


def test_edge_index_out_of_range_and_mapping_from_heads_only():
    kg = kgsyn.synthetic_kg(60, 300, seed=0)
    split = kgg.split_kg(kg)
    data = kgg.build_hetero_data(split, "none")
    assert checks.check_edge_indices(data).status == "pass"
    et = data.edge_types[0]
    data[et].edge_index = data[et].edge_index.clone()
    data[et].edge_index[0, 0] = data[et[0]].num_nodes
    bad = checks.check_edge_indices(data)
    assert (
        bad.status == "fail" and bad.figures["bad_edge_types"] == 1 and bad.table[0]["edge_type"] == str(et)
    )
    heads_only = {t: sorted(set(kg.df.loc[kg.df["head_type"] == t, "head"])) for t in split.entity_types}
    missing = checks.check_mapping_covers(kg.df, heads_only)
    assert missing.status == "fail" and missing.figures["missing"] > 0
    assert checks.check_mapping_covers(kg.df, split.entities).status == "pass"


def test_auc_near_chance_names_a_cause():
    split = kgg.split_kg(kgsyn.synthetic_kg(60, 300, seed=0))
    f = checks.diagnose_auc_near_chance(
        0.5, loss_history=[1.0] * 5, embeddings=torch.zeros(10, 4), split=split, reverse="none"
    )
    assert f.status == "fail" and "did not decrease" in f.summary and "collapsed" in f.summary
    assert checks.diagnose_auc_near_chance(0.8).status == "pass"


def test_coalesce_experiment_keeps_parallel_edges_of_different_relations():
    import torch_geometric

    exp = checks.coalesce_experiment(num_nodes=6, num_edges=200, num_relations=4, seed=0)
    # a dense little graph: many (src, dst) pairs carry several relations, and all of them survive
    assert exp.pairs_with_several_relations > 10
    assert exp.edges_after_coalesce == exp.distinct_typed_edges < exp.edges
    # measured, not assumed: RGCNConv accepts unsorted/duplicated edges; duplicates change the output
    assert (exp.error_add, exp.error_mean) == ("", "")
    assert exp.max_abs_diff_add > 0
    assert exp.out_of_range_after_coalesce_error and exp.pyg_version == torch_geometric.__version__


def test_coalesce_typed_drops_only_exact_duplicates():
    ei = torch.tensor([[0, 0, 0, 1], [1, 1, 1, 0]])
    et = torch.tensor([2, 0, 2, 1])
    out_ei, out_et = kgg.coalesce_typed(ei, et, num_nodes=2)
    assert sorted(zip(out_ei.t().tolist(), out_et.tolist(), strict=True)) == [
        ([0, 1], 0),
        ([0, 1], 2),
        ([1, 0], 1),
    ]


def test_embedding_f1_separable_vs_random_and_small_classes_dropped():
    rng = np.random.default_rng(0)
    y = np.array(["a"] * 30 + ["b"] * 30 + ["c"] * 3)
    X = np.vstack([rng.normal(0, 1, (30, 4)) + 5, rng.normal(0, 1, (30, 4)) - 5, rng.normal(0, 1, (3, 4))])
    good = embedding_f1(X, y)
    assert good["macro_f1"] > 0.95 and good["dropped_small_classes"] == {"c": 3} and good["samples"] == 60
    assert embedding_f1(rng.normal(size=(63, 4)), y)["macro_f1"] < 0.8
    with pytest.raises(ValueError, match="embeddings but"):
        embedding_f1(X[:5], y)


def test_downstream_skip_reason_for_untyped_labels():
    assert downstream_skip_reason({f"e{i}": "entity" for i in range(50)}).startswith(
        "the labels (node types) give 1 class"
    )
    assert downstream_skip_reason({f"e{i}": "ab"[i % 2] for i in range(20)}) == ""


def test_split_without_types_keeps_triples():
    split = kgg.split_kg(kgsyn.synthetic_kg(60, 300, seed=0))
    flat = split_without_types(split)
    assert flat.entity_types == ["entity"] and flat.num_nodes == split.num_nodes
    names, fnames = split.entity_names(), flat.entity_names()
    as_names = lambda s, n: sorted((n[h], r, n[t]) for h, r, t in s.train.tolist())  # noqa: E731
    assert as_names(split, names) == as_names(flat, fnames)
