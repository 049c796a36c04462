"""Every KG verdict function driven through every outcome it returns, on fabricated measurements
with the same fields the experiments write; and the claims rows built from fabricated, typed Results."""

import math

import pytest

from nbkit.claims import HOLDS, INCONCLUSIVE, REFUTED, Claim, claims_frame
from nbkit.kg import claims
from nbkit.kg.metrics import (
    AblationMetrics,
    AggrMetrics,
    AggrRun,
    AggrSummary,
    DownstreamMetrics,
    MinibatchMetrics,
    MinibatchRow,
    PitfallMetrics,
    RungMetrics,
)
from nbkit.result import Result

NAN = float("nan")


def minibatch_row(**fields):
    """A MinibatchRow with every field the test does not care about filled."""
    base = dict(
        mode="mini-batch",
        seed=0,
        valid_mrr=0.01,
        valid_hits_at_10=0.02,
        evaluated_triples=500,
        epochs=1,
        steps=10,
        train_s=5.0,
        steps_per_s=2.0,
        curve_steps=[5, 10],
        curve_train_s=[2.0, 5.0],
        curve_valid_mrr=[0.005, 0.01],
        edges_per_step=100,
        nodes_per_step=50,
        nodes_fraction=0.1,
        message_graph_edges=1000,
        peak_memory_mb=100.0,
        peak_memory_growth_mb=10.0,
        memory_measured_as="rss",
        interrupted=False,
    )
    return MinibatchRow(**{**base, **fields})


def _rung(auc=(), select=(), judge=()):
    """A rung's metrics with the fields the claims read filled, the others NaN / empty."""
    both = list(select) + list(judge)
    return RungMetrics(
        valid_mrr=sum(both) / len(both) if both else NAN,
        valid_hits_at_10=NAN,
        valid_auc=sum(auc) / len(auc) if auc else NAN,
        valid_mrr_select=NAN,
        valid_mrr_judge=NAN,
        valid_mrr_per_seed=[],
        valid_hits_at_10_per_seed=[],
        valid_auc_per_seed=list(auc),
        valid_mrr_select_per_seed=list(select),
        valid_mrr_judge_per_seed=list(judge),
        valid_mrr_interval=[],
        train_s=0.0,
        epochs=0,
    )


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


# One macro-F1 per embedding run (seed), as run_downstream writes it; the notebook runs
# DownstreamConfig.seeds = 3.
@pytest.mark.parametrize(
    ("seeds", "control", "verdict", "why"),
    [
        ([0.85, 0.86, 0.84], [0.30, 0.31, 0.29], HOLDS, "≥"),
        ([0.50, 0.52, 0.49], [0.30, 0.31, 0.29], REFUTED, "macro-F1"),
        ([0.85, 0.86, 0.84], [0.84, 0.85, 0.84], REFUTED, "margin"),
        ([0.60, 0.95, 0.80], [0.30, 0.31, 0.29], INCONCLUSIVE, "n too small"),
        ([0.90], [0.30], INCONCLUSIVE, "one embedding run"),  # its folds share the embedding: no interval
        ([], [], INCONCLUSIVE, "not measured"),
    ],
)
def test_verdict_f1(seeds, control, verdict, why):
    v = claims.verdict_f1(seeds, control)
    assert v.verdict == verdict and why in v.why


def _runs(mean_rough, add_rough, mean_div=(), add_div=()):
    out = []
    for aggr, rough, div in (("mean", mean_rough, mean_div), ("add", add_rough, add_div)):
        for seed, r in enumerate(rough):
            diverged = seed in div
            out.append(
                AggrRun(aggr, seed, math.nan if diverged else 0.5, math.nan if diverged else r, diverged)
            )
    return out


@pytest.mark.parametrize(
    ("runs", "verdict", "why"),
    [
        (_runs([0.1, 0.1, 0.1], [0.2, 0.2, 0.2], add_div=(1,)), HOLDS, "add diverged in 1 of 3"),
        (
            _runs([0.1, 0.1, 0.1], [0.2, 0.2, 0.2], mean_div=(0, 2)),
            REFUTED,
            "mean diverged in 2 of 3",
        ),  # two-sided (#2)
        (_runs([0.10, 0.11, 0.09], [0.20, 0.21, 0.19]), HOLDS, "≥"),
        (_runs([0.20, 0.21, 0.19], [0.10, 0.11, 0.09]), REFUTED, "<"),
        (_runs([0.10, 0.30, 0.12], [0.20, 0.11, 0.25]), INCONCLUSIVE, "n too small"),
        (_runs([0.1], [0.2]), INCONCLUSIVE, "n too small"),
    ],
)
def test_verdict_aggr(runs, verdict, why):
    v = claims.verdict_aggr(runs)
    assert v.verdict == verdict and why in v.why


def test_roughness_is_wobble_around_the_trend_not_the_speed_of_learning():
    from nbkit.kg.experiments import loss_roughness

    epochs = range(60)
    smooth_fast = [0.05 + 2.0 * math.exp(-e / 4) for e in epochs]  # falls by 2.0, steeply, never rises
    slow_noisy = [1.0 - 0.002 * e + 0.03 * (-1) ** e for e in epochs]  # falls by 0.12, zig-zagging
    assert loss_roughness(smooth_fast) == pytest.approx(0.0, abs=1e-12)
    assert loss_roughness(slow_noisy) > 0.02

    # the measure this replaces (mean |step change| / level) ranked them the other way round
    def step_change(xs):
        return sum(abs(b - a) for a, b in zip(xs, xs[1:], strict=False)) / (len(xs) - 1) / (sum(xs) / len(xs))

    assert step_change(smooth_fast) > step_change(slow_noisy)
    assert math.isnan(loss_roughness([1.0, 0.9])) and math.isnan(loss_roughness([1.0, math.nan, 0.8]))


def test_aggr_on_smooth_and_wobbling_curves_is_decided_both_ways():
    from nbkit.kg.experiments import loss_roughness

    def run(aggr, seed, curve):
        return AggrRun(aggr, seed, 0.5, loss_roughness(curve), diverged=False)

    fast = [[0.05 + 2.0 * math.exp(-e / (3 + s)) for e in range(60)] for s in range(3)]
    noisy = [[1.0 - 0.002 * e + (0.03 + 0.005 * s) * (-1) ** e for e in range(60)] for s in range(3)]
    mean_smooth = [run("mean", s, fast[s]) for s in range(3)] + [run("add", s, noisy[s]) for s in range(3)]
    assert claims.verdict_aggr(mean_smooth).verdict == HOLDS
    add_smooth = [run("mean", s, noisy[s]) for s in range(3)] + [run("add", s, fast[s]) for s in range(3)]
    assert claims.roughness_reductions(add_smooth) == [-1.0, -1.0, -1.0]  # add has no wobble, mean does
    assert claims.verdict_aggr(add_smooth).verdict == REFUTED
    both_smooth = [run(a, s, fast[s]) for a in ("mean", "add") for s in range(3)]
    assert (
        claims.roughness_reductions(both_smooth) == [0.0, 0.0, 0.0]
        and claims.verdict_aggr(both_smooth).verdict == REFUTED
    )


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


def _halves(select, judge):
    return _rung(select=select, judge=judge)


def test_message_passing_pair_chooses_on_one_half_and_judges_on_the_other():
    # rung 5 is better on the selecting half, rung 4 on the judging half (and overall): the choice follows the
    # selecting half only, and the figures returned are the judging half's
    rm = {
        "4": _halves([0.80, 0.80, 0.80], [0.95, 0.95, 0.95]),
        "5": _halves([0.85, 0.84, 0.86], [0.83, 0.82, 0.84]),
        "6": _halves([0.90, 0.90, 0.90], [0.91, 0.92, 0.90]),
    }
    assert claims.message_passing_pair(rm) == ("5", [0.83, 0.82, 0.84], [0.91, 0.92, 0.90])
    assert claims.message_passing_pair({k: rm[k] for k in ("4", "5")}) == (None, [], [])


def _coalesce(add: bool, mean: bool) -> dict:
    return {
        "unsorted_raises": {"add": add, "mean": mean},
        "edges": 500,
        "distinct_typed_edges": 400,
        "edges_after_coalesce": 400,
        "coalesced_vs_raw_max_abs_diff_add": 0.7,
        "coalesced_vs_raw_max_abs_diff_mean": 0.1,
        "out_of_range_raises_even_after_coalesce": True,
        "out_of_range_after_coalesce_error": "IndexError: index out of range",
    }


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
    rm = {"2": _rung(auc=auc2), "3": _rung(auc=auc3)}
    if mrr5:
        rm["5"] = _halves(mrr5, mrr5)
        rm["6"] = _halves(mrr6, mrr6)
    return Result(
        metrics=AblationMetrics(
            best_rung=3,
            seeds=len(auc2),
            test_mrr=0.4,
            test_hits_at_1=NAN,
            test_hits_at_3=NAN,
            test_hits_at_10=0.6,
            test_mean_rank=NAN,
            test_auc=NAN,
            test_mrr_per_seed=[],
            rung_metrics=rm,
            interrupted=False,
        )
    )


def test_claims_rows_from_fabricated_results_and_skipped_downstream():
    downstream = Result(
        metrics=DownstreamMetrics(
            macro_f1=0.85,
            macro_f1_control=0.3,
            seed_scores=[0.85, 0.86, 0.84],
            control_seed_scores=[0.30, 0.31, 0.29],
            samples=135,
            classes=9,
        )
    )
    summary = {
        a: AggrSummary(valid_mrr_mean=0.5, valid_mrr_std=NAN, roughness=0.1, diverged=0)
        for a in ("mean", "add")
    }
    aggr = Result(
        metrics=AggrMetrics(runs=_runs([0.1, 0.11, 0.09], [0.2, 0.21, 0.19]), summary=summary, seeds=3)
    )
    pitfalls = Result(
        metrics=PitfallMetrics(pitfall_findings=[], coalesce_experiment=_coalesce(False, False))
    )
    ablation = _ablation(
        [0.53, 0.54, 0.52], [0.79, 0.80, 0.78], mrr5=[0.80, 0.81, 0.79], mrr6=[0.95, 0.96, 0.95]
    )
    rows = claims.claims(ablation=ablation, downstream=downstream, aggr=aggr, pitfalls=pitfalls)
    assert all(isinstance(r, Claim) for r in rows)
    assert [r.key for r in rows] == [
        "reverse_edges_auc",
        "downstream_f1",
        "aggr_mean_stable",
        "message_passing_helps",
        "coalesce_indexerror",
        "scale_curve_rises",
    ]
    assert [r.verdict for r in rows] == [
        HOLDS,
        HOLDS,
        HOLDS,
        REFUTED,
        REFUTED,
        INCONCLUSIVE,
    ]  # no scale run given: not measured
    assert (
        rows[3].measured.startswith("rung 5 (RGCN) 0.800 vs rung 6 (ComplEx-N3) 0.953")
        and rows[3].n == "3 seeds"
    )
    assert rows[0].n == "3 seeds" and rows[0].interval.startswith("[") and rows[2].interval.startswith("[")
    assert rows[1].n.startswith("3 embedding runs (seeds) × 5 folds") and rows[1].interval.startswith("[")
    assert list(claims_frame(rows).columns)[:4] == ["claim", "field_note", "measured", "verdict"]
    skipped = claims.claims(
        ablation=_ablation([0.6], [0.7]), downstream=Result(metrics=DownstreamMetrics(skipped="one class"))
    )
    assert skipped[1].verdict == INCONCLUSIVE and "one class" in skipped[1].why
    assert skipped[0].verdict == INCONCLUSIVE and skipped[2].measured == "not measured"
    assert (
        skipped[3].verdict == INCONCLUSIVE
        and skipped[3].measured == "not measured"
        and skipped[4].verdict == INCONCLUSIVE
    )
    assert skipped[5].verdict == INCONCLUSIVE and skipped[5].measured == "not measured"


def test_headline_has_the_first_numbers():
    h = claims.headline(
        ablation=_ablation([0.5, 0.5], [0.7, 0.7]), downstream=Result(metrics=DownstreamMetrics(skipped="x"))
    )
    assert set(h) == {
        "best_rung",
        "test_mrr",
        "test_hits_at_10",
        "reverse_edge_valid_auc_gain",
        "downstream_macro_f1",
    }
    assert (h["best_rung"], h["test_mrr"], h["test_hits_at_10"]) == (3, 0.4, 0.6)
    assert h["reverse_edge_valid_auc_gain"] == pytest.approx(0.2) and math.isnan(h["downstream_macro_f1"])
    measured = claims.headline(
        ablation=_ablation([0.5, 0.5], [0.7, 0.7]),
        downstream=Result(metrics=DownstreamMetrics(macro_f1=0.81)),
    )
    assert measured["downstream_macro_f1"] == 0.81
    only_rung_2 = _ablation([0.5, 0.5], [0.7, 0.7])
    del only_rung_2.metrics.rung_metrics["3"]
    assert math.isnan(claims.headline(ablation=only_rung_2)["reverse_edge_valid_auc_gain"])


def _rr(n, level, seed, spread=0.002):
    """n per-query reciprocal ranks around ``level`` (seeded)."""
    import random

    rng = random.Random(seed)
    return [max(0.0, level + rng.uniform(-spread, spread)) for _ in range(n)]


def _runs_rr(levels_first, levels_last, n=2000):
    """Per training run (ScaleConfig.seeds = 3 in the notebook), 2,000 queries (1,000 triples) at two
    curve points."""
    return (
        [_rr(n, lv, 10 * i) for i, lv in enumerate(levels_first)],
        [_rr(n, lv, 10 * i + 1) for i, lv in enumerate(levels_last)],
    )


@pytest.mark.parametrize(
    ("runs", "verdict", "why"),
    [
        (_runs_rr([0.001, 0.0012, 0.0011], [0.010, 0.011, 0.0095]), HOLDS, "rises"),
        (
            _runs_rr([0.001, 0.0012, 0.0011], [0.0011, 0.0013, 0.0012]),
            REFUTED,
            "flat",
        ),  # gains, far less than the minimum rise
        (_runs_rr([0.010, 0.011, 0.012], [0.002, 0.003, 0.002]), REFUTED, "flat"),  # falls
        (
            _runs_rr([0.001, 0.001, 0.001], [0.0005, 0.010, 0.001]),
            INCONCLUSIVE,
            "n too small",
        ),  # one lucky run: the interval straddles
        (
            _runs_rr([0.001], [0.010]),
            INCONCLUSIVE,
            "one training run",
        ),  # one run's queries share its model: no interval
        (([[]], [[]]), INCONCLUSIVE, "fewer than two validation points"),
    ],
)
def test_verdict_curve_rises(runs, verdict, why):
    v = claims.verdict_curve_rises(*runs, min_rise=0.0015)
    assert v.verdict == verdict and why in v.why


def test_verdict_curve_rises_needs_the_same_queries():
    with pytest.raises(ValueError, match="same queries"):
        claims.verdict_curve_rises([[0.1, 0.2]], [[0.1]], min_rise=0.01)


def _scale(first, last, points=3, ceiling=0.031):
    """Shaped like run_minibatch(ScaleConfig()): one mini-batch row and one (first, last) pair per
    training seed."""
    rows = []
    for seed, (f, la) in enumerate(zip(first, last, strict=True)):
        curve = [sum(f) / len(f), 0.004, sum(la) / len(la)][-points:]
        rows.append(
            minibatch_row(
                seed=seed,
                steps=40,
                steps_per_s=1.3,
                curve_train_s=[10.0, 20.0, 30.0][:points],
                curve_valid_mrr=curve,
                evaluated_triples=len(f) // 2,
                ceiling_mrr=ceiling,
            )
        )
    pairs = {"mini-batch": list(zip(first, last, strict=True))}
    return Result(metrics=MinibatchMetrics(rows=rows, sizes={"entities": 47_000}, reciprocal_ranks=pairs))


def test_scale_claim_from_fabricated_scale_runs():
    up = claims.scale_claim(_scale(*_runs_rr([0.001, 0.0012, 0.0011], [0.010, 0.011, 0.0095])))
    assert up.key == "scale_curve_rises" and up.verdict == HOLDS
    assert up.n.startswith(
        "3 training runs (seeds) on one graph, each scored on 2000 validation queries (both sides of 1000"
    )
    assert (
        " after 10 s → 0.0100 after 30 s" in up.measured
        and "ceiling 0.0310" in up.measured
        and up.interval.startswith("[")
    )
    assert (
        "0.00155" in up.rule and "not chosen on" in up.rule
    )  # 5% of the ceiling, on a slice the defaults were not chosen on
    flat = claims.scale_claim(_scale(*_runs_rr([0.001, 0.0012, 0.0011], [0.0011, 0.0013, 0.0012])))
    assert flat.verdict == REFUTED and "flat" in flat.why
    one_run = claims.scale_claim(_scale(*_runs_rr([0.001], [0.010])))
    assert one_run.verdict == INCONCLUSIVE and "one training run" in one_run.why and one_run.interval == ""
    one_point = claims.scale_claim(
        _scale(*_runs_rr([0.001, 0.0012, 0.0011], [0.010, 0.011, 0.0095]), points=1)
    )
    assert (
        one_point.verdict == INCONCLUSIVE
        and one_point.measured == "not measured"
        and one_point.n == "1 curve points"
    )
    no_ceiling = claims.scale_claim(
        _scale(*_runs_rr([0.001, 0.0012, 0.0011], [0.0060, 0.0065, 0.0062]), ceiling=None)
    )
    assert (
        no_ceiling.verdict == REFUTED and "0.01 (absolute" in no_ceiling.rule
    )  # a dataset run: the fixed minimum rise of 0.01
