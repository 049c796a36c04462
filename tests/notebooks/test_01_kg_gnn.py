"""Notebook 01 with SMOKE=True: every experiment's metrics recorded under its slug, plausible, choices on
the selecting half of validation, claims judged with their operating characteristics."""

import pytest

from nbkit.claims import as_claims

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def metrics(executed_notebook):
    pytest.importorskip("pykeen")
    pytest.importorskip("torch_geometric")
    return executed_notebook("01")[1]


def test_headline_and_test_metrics_of_the_chosen_rung(metrics):
    head, abl = metrics["headline"], metrics["ablation"]
    assert set(head) == {
        "best_rung",
        "test_mrr",
        "test_hits_at_10",
        "reverse_edge_valid_auc_gain",
        "downstream_macro_f1",
    }
    assert abl["test_hits_at_1"] <= abl["test_hits_at_3"] <= abl["test_hits_at_10"]
    # the best rung must beat chance ranking among 135 entities (MRR ~0.04) even in a smoke run
    assert abl["test_mrr"] > 0.08 and head["test_mrr"] == abl["test_mrr"]


def test_best_rung_is_the_best_on_the_selecting_half(metrics):
    abl = metrics["ablation"]
    rungs = {r["rung"]: r for r in abl["rungs"]}
    assert set(rungs) == {1, 2, 3, 4, 5, 6}
    assert rungs[abl["best_rung"]]["valid_mrr_select"] == max(r["valid_mrr_select"] for r in rungs.values())
    for r in rungs.values():
        assert len(r["valid_auc_judge_per_seed"]) == abl["seeds"] >= 2


def test_selection_was_made_on_the_selecting_half_at_its_own_seed(metrics):
    sel = metrics["selection"]
    assert sel["train_seed"] == 1000
    rows = [r for r in sel["validation"] if r["choice"] == "RGCN (rung 5), aggr=mean"]
    best = max(rows, key=lambda r: r["valid_mrr_select"])
    assert (sel["chosen"]["decoder"], sel["chosen"]["rgcn_hidden"]) == (best["decoder"], best["rgcn_hidden"])
    assert {r["rgcn_hidden"] for r in rows} == {16, 32}
    add = [r for r in sel["validation"] if r["choice"] == "RGCN (rung 5), aggr=add"]
    assert sel["chosen"]["add_rgcn_hidden"] == max(add, key=lambda r: r["valid_mrr_select"])["rgcn_hidden"]
    rung6 = [r for r in sel["validation"] if r["rung"] == 6]
    best6 = max(rung6, key=lambda r: r["valid_mrr_select"])
    assert len(rung6) >= 2 and all(
        sel["chosen"][k] == best6[k] for k in ("complex_dim", "complex_n3", "complex_lr", "complex_batch")
    )


def test_umls_load_and_leakage_meter(metrics):
    load = metrics["load"]
    assert load["split_sizes"] == {
        "entities": 135,
        "node_types": 15,
        "relations": 46,
        "train": 5216,
        "valid": 652,
        "test": 661,
    }
    assert load["load_report"]["rows_kept"] == 6529 == load["rdf_roundtrip_kept"]
    # deterministic on PyKEEN's split: 270/661 reversed pairs, 345/661 same pair under another relation
    assert load["leakage_test_reversed_pair_share"] == pytest.approx(270 / 661)
    assert load["leakage_test_same_pair_other_relation_share"] == pytest.approx(345 / 661)


def test_downstream_aggr_and_pitfalls(metrics):
    down = metrics["downstream"]
    # one embedding run per seed, each scored over 5 folds; the claim's interval is across the seeds
    assert len(down["seed_scores"]) == len(down["fold_scores"]) == down["seeds"] >= 2 and down["classes"] >= 2
    assert all(len(f) == 5 for f in down["fold_scores"]) and down["dropped_classes"]
    aggr = metrics["aggr"]
    assert {r["aggr"] for r in aggr["runs"]} == {"mean", "add"} and aggr["lr"] == 0.005
    pit = metrics["pitfalls"]
    status = [(f["check"], f["status"]) for f in pit["pitfall_findings"]]
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
    coalesce = pit["coalesce"]
    assert coalesce["edges_after_coalesce"] == coalesce["distinct_typed_edges"] and coalesce["pyg_version"]


def test_claims_rows_have_every_field(metrics):
    rows = as_claims(metrics["claims"])
    assert [r.key for r in rows] == [
        "reverse_edges_auc",
        "message_passing_helps",
        "downstream_f1",
        "embeddings_beat_random",
        "aggr_mean_stable",
        "coalesce_indexerror",
        "scale_curve_rises",
    ]
    for row in rows:
        # SMOKE measures at a size chosen to be fast, never to decide: every row is shown, none judged
        assert row.verdict == "not judged" and row.rule and row.n and row.why and row.measured
        assert row.p_holds_if_true is None and row.p_refuted_if_false is None
    coalesce = next(r for r in rows if r.key == "coalesce_indexerror")
    assert (
        coalesce.kind == "library fact"
        and "PyG" in coalesce.why + coalesce.claim + coalesce.field_note + coalesce.measured
    )


def test_minibatch_section_measured_both_modes_and_the_scale_run(metrics):
    rows = {r["mode"]: r for r in metrics["minibatch"]["rows"]}
    assert set(rows) == {"mini-batch", "full graph"}
    mini, full = rows["mini-batch"], rows["full graph"]
    # on UMLS (135 entities) chance MRR is ~0.04: the mini-batch model must have learnt something
    assert mini["valid_mrr"] > 0.08
    assert mini["edges_per_step"] < mini["message_graph_edges"] == full["edges_per_step"]
    assert mini["steps"] == full["steps"]  # same batches, same loss
    scale = metrics["scale"]
    first = scale["rows"][0]
    assert scale["graph_seed"] == 1 and scale["sizes"]["entities"] >= 1000
    # the smoke preset: 12 steps, validated at step 0, 6 and 12 on 500 sampled validation triples
    assert first["mode"] == "mini-batch" and first["steps"] == 12 and first["curve_steps"] == [0, 6, 12]
    assert first["evaluated_triples"] == 500 and first["memory_measured_as"]
    # the share of nodes one step's encoder runs on: the whole graph in full-graph mode, at most that sampled
    assert (
        full["nodes_fraction"] == 1.0 and 0 < mini["nodes_fraction"] <= 1 and 0 < first["nodes_fraction"] <= 1
    )
    assert first["steps_per_s"] > 0 and 0 < first["ceiling_mrr"] < 1
    rise = next(r for r in as_claims(metrics["claims"]) if r.key == "scale_curve_rises")
    # decided across the scale run's training seeds: each run's step-0 and last points, both sides
    assert rise.n.startswith("2 training runs on one graph, each scored on 1000 validation queries")
