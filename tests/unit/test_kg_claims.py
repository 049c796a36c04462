"""Every KG verdict function driven through every outcome it returns, on fabricated measurements
with the same keys the experiments write; and the claims rows built from fabricated Results."""

import math

import pytest

from nbkit.claims import HOLDS, INCONCLUSIVE, REFUTED, Claim, claims_frame
from nbkit.kg import claims
from nbkit.result import Result


@pytest.mark.parametrize(
    ("without", "with_", "verdict", "why"),
    [
        ([0.53, 0.54, 0.52], [0.79, 0.80, 0.78], HOLDS, "≥"),
        ([0.75, 0.76, 0.74], [0.77, 0.775, 0.76], REFUTED, "<"),
        ([0.50, 0.60, 0.55], [0.60, 0.90, 0.70], INCONCLUSIVE, "n too small"),
        ([0.53], [0.79], INCONCLUSIVE, "one seed"),
        ([], [], INCONCLUSIVE, "not measured"),
        ([math.nan, math.nan], [math.nan, math.nan], INCONCLUSIVE, "not measured"),
    ],
)
def test_verdict_reverse_edges(without, with_, verdict, why):
    v = claims.verdict_reverse_edges(without, with_)
    assert v.verdict == verdict and why in v.why


@pytest.mark.parametrize(
    ("folds", "control", "verdict", "why"),
    [
        ([0.85, 0.86, 0.84, 0.85, 0.86], [0.30, 0.31, 0.29, 0.30, 0.32], HOLDS, "≥"),
        ([0.50, 0.52, 0.49, 0.51, 0.50], [0.30, 0.31, 0.29, 0.30, 0.32], REFUTED, "macro-F1"),
        ([0.85, 0.86, 0.84, 0.85, 0.86], [0.84, 0.85, 0.84, 0.85, 0.85], REFUTED, "margin"),
        ([0.60, 0.95, 0.70, 0.90, 0.80], [0.30, 0.31, 0.29, 0.30, 0.32], INCONCLUSIVE, "n too small"),
        ([], [], INCONCLUSIVE, "not measured"),
    ],
)
def test_verdict_f1(folds, control, verdict, why):
    v = claims.verdict_f1(folds, control)
    assert v.verdict == verdict and why in v.why


def _runs(mean_rough, add_rough, mean_div=(), add_div=()):
    out = []
    for aggr, rough, div in (("mean", mean_rough, mean_div), ("add", add_rough, add_div)):
        for seed, r in enumerate(rough):
            diverged = seed in div
            out.append({"aggr": aggr, "seed": seed, "valid_mrr": math.nan if diverged else 0.5, "roughness": math.nan if diverged else r, "diverged": diverged})
    return out


@pytest.mark.parametrize(
    ("runs", "verdict", "why"),
    [
        (_runs([0.1, 0.1, 0.1], [0.2, 0.2, 0.2], add_div=(1,)), HOLDS, "add diverged in 1 of 3"),
        (_runs([0.1, 0.1, 0.1], [0.2, 0.2, 0.2], mean_div=(0, 2)), REFUTED, "mean diverged in 2 of 3"),  # two-sided (#2)
        (_runs([0.10, 0.11, 0.09], [0.20, 0.21, 0.19]), HOLDS, "≥"),
        (_runs([0.20, 0.21, 0.19], [0.10, 0.11, 0.09]), REFUTED, "<"),
        (_runs([0.10, 0.30, 0.12], [0.20, 0.11, 0.25]), INCONCLUSIVE, "n too small"),
        (_runs([0.1], [0.2]), INCONCLUSIVE, "n too small"),
    ],
)
def test_verdict_aggr(runs, verdict, why):
    v = claims.verdict_aggr(runs)
    assert v.verdict == verdict and why in v.why


@pytest.mark.parametrize(
    ("mp", "base", "verdict", "why"),
    [
        ([0.80, 0.81, 0.79], [0.70, 0.71, 0.70], HOLDS, "≥"),
        ([0.80, 0.81, 0.79], [0.95, 0.96, 0.95], REFUTED, "<"),  # message passing loses to the baseline
        ([0.905, 0.906, 0.904], [0.90, 0.901, 0.899], REFUTED, "<"),  # gains, but less than +0.01
        ([0.80, 0.95, 0.70], [0.78, 0.80, 0.75], INCONCLUSIVE, "n too small"),
        ([0.8], [0.7], INCONCLUSIVE, "one seed"),
        ([], [0.7, 0.7], INCONCLUSIVE, "not measured"),
    ],
)
def test_verdict_message_passing(mp, base, verdict, why):
    v = claims.verdict_message_passing(mp, base)
    assert v.verdict == verdict and why in v.why


def test_message_passing_pair_takes_the_better_rgcn_rung():
    rm = {"4": {"valid_mrr": 0.8, "valid_mrr_per_seed": [0.8, 0.8]}, "5": {"valid_mrr": 0.85, "valid_mrr_per_seed": [0.84, 0.86]},
          "6": {"valid_mrr": 0.95, "valid_mrr_per_seed": [0.95, 0.95]}}
    assert claims.message_passing_pair(rm) == ("5", [0.84, 0.86], [0.95, 0.95])
    assert claims.message_passing_pair({k: rm[k] for k in ("4", "5")}) == (None, [], [])


def _coalesce(add: bool, mean: bool) -> dict:
    return {"unsorted_raises": {"add": add, "mean": mean}, "edges": 500, "distinct_typed_edges": 400, "edges_after_coalesce": 400,
            "coalesced_vs_raw_max_abs_diff_add": 0.7, "coalesced_vs_raw_max_abs_diff_mean": 0.1,
            "out_of_range_raises_even_after_coalesce": True, "out_of_range_after_coalesce_error": "IndexError: index out of range"}


@pytest.mark.parametrize(
    ("exp", "verdict", "why"),
    [
        (_coalesce(True, True), HOLDS, "raised"),
        (_coalesce(False, False), REFUTED, "100 exact duplicates"),
        (_coalesce(True, False), INCONCLUSIVE, "only under add"),
        (None, INCONCLUSIVE, "not measured"),
    ],
)
def test_verdict_coalesce(exp, verdict, why):
    v = claims.verdict_coalesce(exp)
    assert v.verdict == verdict and why in v.why


def _ablation(auc2, auc3, mrr5=(), mrr6=()):
    rm = {"2": {"valid_auc": sum(auc2) / len(auc2), "valid_auc_per_seed": auc2}, "3": {"valid_auc": sum(auc3) / len(auc3), "valid_auc_per_seed": auc3}}
    if mrr5:
        rm["5"] = {"valid_mrr": sum(mrr5) / len(mrr5), "valid_mrr_per_seed": list(mrr5)}
        rm["6"] = {"valid_mrr": sum(mrr6) / len(mrr6), "valid_mrr_per_seed": list(mrr6)}
    return Result(metrics={"rung_metrics": rm, "best_rung": 3, "test_mrr": 0.4, "test_hits_at_10": 0.6})


def test_claims_rows_from_fabricated_results_and_skipped_downstream():
    downstream = Result(metrics={"macro_f1": 0.85, "macro_f1_control": 0.3, "fold_scores": [0.85, 0.86, 0.84, 0.85, 0.86],
                                 "control_fold_scores": [0.30, 0.31, 0.29, 0.30, 0.32], "samples": 135, "classes": 9})
    aggr = Result(metrics={"runs": _runs([0.1, 0.11, 0.09], [0.2, 0.21, 0.19]),
                           "summary": {a: {"roughness": 0.1, "valid_mrr_mean": 0.5, "diverged": 0} for a in ("mean", "add")}})
    pitfalls = Result(metrics={"coalesce_experiment": _coalesce(False, False)})
    ablation = _ablation([0.53, 0.54, 0.52], [0.79, 0.80, 0.78], mrr5=[0.80, 0.81, 0.79], mrr6=[0.95, 0.96, 0.95])
    rows = claims.claims(ablation=ablation, downstream=downstream, aggr=aggr, pitfalls=pitfalls)
    assert all(isinstance(r, Claim) for r in rows)
    assert [r.key for r in rows] == ["reverse_edges_auc", "downstream_f1", "aggr_mean_stable", "message_passing_helps", "coalesce_indexerror",
                                     "scale_curve_rises"]
    assert [r.verdict for r in rows] == [HOLDS, HOLDS, HOLDS, REFUTED, REFUTED, INCONCLUSIVE]  # no scale run given: not measured
    assert rows[3].measured.startswith("rung 5 (RGCN) 0.800 vs rung 6 (ComplEx-N3) 0.953") and rows[3].n == "3 seeds"
    assert rows[0].n == "3 seeds" and rows[0].interval.startswith("[") and rows[2].interval.startswith("[")
    assert list(claims_frame(rows).columns)[:4] == ["claim", "field_note", "measured", "verdict"]
    skipped = claims.claims(ablation=_ablation([0.6], [0.7]), downstream=Result(metrics={"skipped": "one class"}))
    assert skipped[1].verdict == INCONCLUSIVE and "one class" in skipped[1].why
    assert skipped[0].verdict == INCONCLUSIVE and skipped[2].measured == "not measured"
    assert skipped[3].verdict == INCONCLUSIVE and skipped[3].measured == "not measured" and skipped[4].verdict == INCONCLUSIVE
    assert skipped[5].verdict == INCONCLUSIVE and skipped[5].measured == "not measured"


def test_headline_has_the_first_numbers():
    h = claims.headline(ablation=_ablation([0.5, 0.5], [0.7, 0.7]), downstream=Result(metrics={"skipped": "x"}))
    assert h["best_rung"] == 3 and h["reverse_edge_valid_auc_gain"] == pytest.approx(0.2) and math.isnan(h["downstream_macro_f1"])
    assert 3 <= len(h) <= 6


def _rr(n, level, seed, spread=0.002):
    """n per-query reciprocal ranks around ``level`` (seeded)."""
    import random

    rng = random.Random(seed)
    return [max(0.0, level + rng.uniform(-spread, spread)) for _ in range(n)]


@pytest.mark.parametrize(
    ("first", "last", "verdict", "why"),
    [
        (_rr(400, 0.001, 0), _rr(400, 0.010, 1), HOLDS, "rises"),
        (_rr(400, 0.001, 0), _rr(400, 0.0011, 1), REFUTED, "flat"),  # gains, but far less than the minimum rise
        (_rr(400, 0.010, 0), _rr(400, 0.002, 1), REFUTED, "flat"),  # falls
        (_rr(400, 0.001, 0, spread=0.0), [0.001] * 399 + [1.0], INCONCLUSIVE, "n too small"),  # one lucky query: the interval straddles
        (_rr(1, 0.001, 0), _rr(1, 0.01, 1), INCONCLUSIVE, "n too small"),
        ([], [], INCONCLUSIVE, "fewer than two validation points"),
    ],
)
def test_verdict_curve_rises(first, last, verdict, why):
    v = claims.verdict_curve_rises(first, last, min_rise=0.0015)
    assert v.verdict == verdict and why in v.why


def test_verdict_curve_rises_needs_the_same_queries():
    with pytest.raises(ValueError, match="same queries"):
        claims.verdict_curve_rises([0.1, 0.2], [0.1], min_rise=0.01)


def _scale(first, last, points=3, ceiling=0.031):
    row = {"mode": "mini-batch", "steps": 40, "steps_per_s": 1.3, "curve_train_s": [10.0, 20.0, 30.0][:points],
           "curve_valid_mrr": [sum(first) / len(first), 0.004, sum(last) / len(last)][-points:], "evaluated_triples": len(first) // 2}
    if ceiling:
        row["ceiling_mrr"] = ceiling
    return Result(metrics={"rows": [row], "sizes": {"entities": 47_000}}, data={"reciprocal_ranks": {"mini-batch": (first, last)}})


def test_scale_claim_from_fabricated_scale_runs():
    up = claims.scale_claim(_scale(_rr(400, 0.001, 0), _rr(400, 0.010, 1)))
    assert up.key == "scale_curve_rises" and up.verdict == HOLDS and up.n.startswith("400 validation queries (both sides of 200")
    assert " after 10 s → 0.0100 after 30 s" in up.measured and "ceiling 0.0310" in up.measured and up.interval.startswith("[")
    assert "0.00155" in up.rule  # 5% of the ceiling
    flat = claims.scale_claim(_scale(_rr(400, 0.001, 0), _rr(400, 0.0011, 1)))
    assert flat.verdict == REFUTED and "flat" in flat.why
    one_point = claims.scale_claim(_scale(_rr(400, 0.001, 0), _rr(400, 0.010, 1), points=1))
    assert one_point.verdict == INCONCLUSIVE and one_point.measured == "not measured" and one_point.n == "1 curve points"
    no_ceiling = claims.scale_claim(_scale(_rr(400, 0.001, 0), _rr(400, 0.010, 1), ceiling=None))
    assert no_ceiling.verdict == REFUTED and "0.01 (absolute" in no_ceiling.rule  # a dataset run: the fixed minimum rise of 0.01
