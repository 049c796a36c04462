"""Notebook 01 with SMOKE=True: every metric recorded, plausible, choices on validation, claims computed."""

import pytest

from nbkit.claims import VERDICTS, as_claims

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def metrics(executed_notebook):
    pytest.importorskip("pykeen")
    pytest.importorskip("torch_geometric")
    return executed_notebook("01")[1]


def test_headline_and_test_metrics_of_the_chosen_rung(metrics):
    head = metrics["headline"]
    assert set(head) == {
        "best_rung",
        "test_mrr",
        "test_hits_at_10",
        "reverse_edge_valid_auc_gain",
        "downstream_macro_f1",
    }
    assert metrics["test_hits_at_1"] <= metrics["test_hits_at_3"] <= metrics["test_hits_at_10"]
    # the best rung must beat chance ranking among 135 entities (MRR ~0.04) even in a smoke run
    assert metrics["test_mrr"] > 0.08 and head["test_mrr"] == metrics["test_mrr"]


def test_best_rung_is_the_best_on_validation(metrics):
    rungs = metrics["rung_metrics"]
    assert set(rungs) == {"1", "2", "3", "4", "5", "6"}
    best = str(metrics["best_rung"])
    assert rungs[best]["valid_mrr"] == max(m["valid_mrr"] for m in rungs.values())
    for m in rungs.values():
        assert len(m["valid_auc_per_seed"]) == metrics["seeds"] >= 2


def test_selection_was_made_on_validation(metrics):
    sel = metrics["selection"]
    rows = [r for r in sel["validation"] if r["choice"] == "decoder, dropout"]
    best = max(rows, key=lambda r: r["valid_mrr"])
    assert (sel["chosen"]["decoder"], sel["chosen"]["dropout"]) == (best["decoder"], best["dropout"])
    assert {r["decoder"] for r in rows} == {"distmult", "complex"}
    rung6 = [r for r in sel["validation"] if r["rung"] == 6]
    best6 = max(rung6, key=lambda r: r["valid_mrr"])
    assert len(rung6) >= 2 and all(
        sel["chosen"][k] == best6[k] for k in ("complex_dim", "complex_n3", "complex_lr", "complex_batch")
    )


def test_umls_load_and_leakage_meter(metrics):
    assert metrics["split_sizes"] == {
        "entities": 135,
        "node_types": 15,
        "relations": 46,
        "train": 5216,
        "valid": 652,
        "test": 661,
    }
    assert metrics["load_report"]["rows_kept"] == 6529 == metrics["rdf_roundtrip_kept"]
    # deterministic on PyKEEN's split: 270/661 reversed pairs, 345/661 same pair under another relation
    assert metrics["leakage_test_reversed_pair_share"] == pytest.approx(270 / 661)
    assert metrics["leakage_test_same_pair_other_relation_share"] == pytest.approx(345 / 661)


def test_downstream_aggr_and_pitfalls(metrics):
    down = metrics["downstream"]
    # one embedding run per seed, each scored over 5 folds; the claim's interval is across the seeds
    assert len(down["seed_scores"]) == len(down["fold_scores"]) == down["seeds"] >= 2 and down["classes"] >= 2
    assert all(len(f) == 5 for f in down["fold_scores"])
    assert {r["aggr"] for r in metrics["aggr_stability"]["runs"]} == {"mean", "add"}
    status = [(f["check"], f["status"]) for f in metrics["pitfall_findings"]]
    # each broken input flagged, each clean twin passed (in the notebook's order)
    assert status == [
        ("edge-index-mutation", "fail"),
        ("edge-index-mutation", "pass"),
        ("features", "fail"),
        ("features", "pass"),
        ("node-mapping", "fail"),
        ("node-mapping", "pass"),
        ("edge-indices", "fail"),
        ("edge-indices", "pass"),
        ("auc-near-chance", "fail"),
    ]
    coalesce = metrics["coalesce_experiment"]
    assert coalesce["edges_after_coalesce"] == coalesce["distinct_typed_edges"]


def test_claims_rows_have_every_field(metrics):
    rows = as_claims(metrics["claims"])
    assert [r.key for r in rows] == [
        "reverse_edges_auc",
        "downstream_f1",
        "aggr_mean_stable",
        "message_passing_helps",
        "coalesce_indexerror",
        "scale_curve_rises",
    ]
    for row in rows:
        assert row.verdict in VERDICTS and row.rule and row.n and row.why and row.measured
    assert next(r for r in rows if r.key == "coalesce_indexerror").verdict == "refuted"


def test_minibatch_section_measured_both_modes_and_the_scale_run(metrics):
    rows = {r["mode"]: r for r in metrics["minibatch_comparison"]}
    assert set(rows) == {"mini-batch", "full graph"}
    mini, full = rows["mini-batch"], rows["full graph"]
    # on UMLS (135 entities) chance MRR is ~0.04: the mini-batch model must have learnt something
    assert mini["valid_mrr"] > 0.08
    assert mini["edges_per_step"] < mini["message_graph_edges"] == full["edges_per_step"]
    assert mini["steps"] == full["steps"]  # same batches, same loss
    scale = metrics["minibatch_scale"]
    assert scale["mode"] == "mini-batch" and scale["graph_entities"] >= 1000 and scale["steps"] >= 1
    # the smoke preset scores slice 1 of 500 sampled validation triples (slice 0 is what the defaults
    # were chosen on)
    assert scale["evaluated_triples"] == 500 and scale["seed"] == 0 and scale["memory_measured_as"]
    # the share of nodes one step's encoder runs on: the whole graph in full-graph mode, at most that sampled
    assert (
        full["nodes_fraction"] == 1.0 and 0 < mini["nodes_fraction"] <= 1 and 0 < scale["nodes_fraction"] <= 1
    )
    assert len(scale["curve_valid_mrr"]) >= 1 and scale["steps_per_s"] > 0 and 0 < scale["ceiling_mrr"] < 1
    rise = next(r for r in as_claims(metrics["claims"]) if r.key == "scale_curve_rises")
    # decided across the scale run's training seeds: each run's first and last points, on every
    # evaluated query (both sides)
    assert rise.n.startswith("2 training runs (seeds) on one graph, each scored on 1000 validation queries")
    assert f"{len(scale['curve_valid_mrr'])} curve points" in rise.n
