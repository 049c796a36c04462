"""Every KG verdict function driven through every outcome it returns at the notebook's real n, on
fabricated measurements with the fields the experiments write; the ledger judged through the registry
from fabricated, typed results; and each spec's operating characteristics asserted."""

import math

import pytest

from nbkit.claims import (
    DEFAULT,
    FULL,
    HOLDS,
    INCONCLUSIVE,
    LIBRARY_FACT,
    MEASURED,
    REFUTED,
    operating_characteristics,
)
from nbkit.kg import claims
from nbkit.kg.config import AblationConfig, AggrConfig, DownstreamConfig, ScaleConfig
from nbkit.kg.context import KGContext
from nbkit.kg.experiments import REGISTRY
from nbkit.kg.metrics import (
    AblationMetrics,
    AggrMetrics,
    AggrRun,
    AggrSummary,
    CoalesceMetrics,
    DownstreamMetrics,
    MinibatchMetrics,
    MinibatchRow,
    PitfallMetrics,
    RungMetrics,
)
from nbkit.result import Result

NAN = float("nan")
N_ABLATION, N_AGGR, N_DOWN, N_SCALE = (
    AblationConfig().seeds,
    AggrConfig().seeds,
    DownstreamConfig().seeds,
    ScaleConfig().seeds,
)
LEVEL = 0.99  # the Bonferroni level of notebook 01's family (5 noisy rows): what Holm judges first at


def spec(key):
    return next(s for s in REGISTRY.claims if s.key == key)


# -- reverse edges --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("without", "with_", "verdict", "why"),
    [
        ([0.53, 0.54, 0.52], [0.78, 0.80, 0.79], HOLDS, "≥"),
        ([0.75, 0.76, 0.74], [0.77, 0.775, 0.76], REFUTED, "<"),
        ([0.50, 0.60, 0.55], [0.60, 0.90, 0.70], INCONCLUSIVE, "n too small"),
        ([0.53], [0.79], INCONCLUSIVE, "one seed"),
        ([], [], INCONCLUSIVE, "not measured"),
        ([math.nan, math.nan], [math.nan, math.nan], INCONCLUSIVE, "not measured"),
    ],
)
def test_verdict_reverse_edges(without, with_, verdict, why):
    assert len(without) <= N_ABLATION
    v = claims.verdict_reverse_edges(without, with_, level=LEVEL)
    assert v.verdict == verdict and why in v.why


# -- downstream -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("seeds", "control", "skipped", "verdict", "why"),
    [
        ([0.85, 0.86, 0.84], [0.30, 0.32, 0.29], "", HOLDS, "≥"),
        ([0.50, 0.52, 0.49], [0.30, 0.31, 0.29], "", REFUTED, "macro-F1"),
        ([0.85, 0.86, 0.84], [0.84, 0.85, 0.84], "", REFUTED, "margin"),
        ([0.60, 0.95, 0.80], [0.30, 0.31, 0.29], "", INCONCLUSIVE, "n too small"),
        ([0.90], [0.30], "", INCONCLUSIVE, "one embedding run"),  # its folds share the embedding
        ([], [], "", INCONCLUSIVE, "not measured"),
        ([], [], "one class", INCONCLUSIVE, "not measured: one class"),
    ],
)
def test_verdict_f1(seeds, control, skipped, verdict, why):
    assert len(seeds) <= N_DOWN
    v = claims.verdict_f1(seeds, control, skipped, level=LEVEL)
    assert v.verdict == verdict and why in v.why


# -- aggr -----------------------------------------------------------------------------------------
def _log_ratios(add, mean):
    return [
        math.log((a + claims.WOBBLE_FLOOR) / (m + claims.WOBBLE_FLOOR))
        for a, m in zip(add, mean, strict=True)
    ]


@pytest.mark.parametrize(
    ("args", "verdict", "why"),
    [
        # divergence decides only through the exact test: 0 of 12 against 9 of 12, either way round
        ((0, 12, 9, 12, []), HOLDS, "Boschloo"),
        ((9, 12, 0, 12, []), REFUTED, "Boschloo"),
        # one divergence at the default 3 seeds per arm is not evidence: the wobble decides
        ((0, 3, 1, 3, _log_ratios([0.02, 0.005], [0.004, 0.0041])), INCONCLUSIVE, "n too small"),
        ((0, 3, 0, 3, _log_ratios([0.020, 0.021, 0.019], [0.005, 0.005, 0.0051])), HOLDS, "≥"),
        ((0, 3, 0, 3, _log_ratios([0.005, 0.0051, 0.005], [0.005, 0.005, 0.0051])), REFUTED, "<"),
        ((0, 3, 0, 3, _log_ratios([0.02, 0.003, 0.012], [0.005, 0.009, 0.004])), INCONCLUSIVE, "straddles"),
        ((0, 3, 0, 3, [0.0, 0.0, 0.0]), INCONCLUSIVE, "tied"),  # no spread: no zero-width interval
        ((0, 3, 0, 3, [0.4]), INCONCLUSIVE, "n too small"),
    ],
)
def test_verdict_aggr(args, verdict, why):
    v = claims.verdict_aggr(*args, level=LEVEL)
    assert v.verdict == verdict and why in v.why


def _aggr(mean_rough, add_rough, mean_div=(), add_div=()):
    runs = []
    for aggr, rough, div in (("mean", mean_rough, mean_div), ("add", add_rough, add_div)):
        for seed, r in enumerate(rough):
            d = seed in div
            runs.append(AggrRun(aggr, seed, NAN if d else 0.5, NAN if d else r, d))
    summ = {
        a: AggrSummary("complex", 0.5, 64, 0.5, 0.01, len(div), len(rough))
        for a, rough, div in (("mean", mean_rough, mean_div), ("add", add_rough, add_div))
    }
    return AggrMetrics(runs=tuple(runs), mean=summ["mean"], add=summ["add"], seeds=len(mean_rough), lr=0.005)


def test_wobble_log_ratios_use_the_floor_and_drop_diverged_seeds():
    m = _aggr([0.0, 0.01, 0.02], [0.0, 0.04, 0.02], add_div=(2,))
    assert claims.wobble_log_ratios(m) == pytest.approx([0.0, math.log(0.0401 / 0.0101)])
    reading = claims.read_aggr(m)
    assert reading.args[:4] == (0, 3, 1, 3) and reading.n == "3 seeds per aggregation"
    assert "lr 0.005" in reading.measured and "add (complex, dropout 0.5, width 64)" in reading.measured


def test_roughness_is_wobble_around_the_trend_not_the_speed_of_learning():
    from nbkit.kg.experiments import loss_roughness

    epochs = range(60)
    smooth_fast = [0.05 + 2.0 * math.exp(-e / 4) for e in epochs]  # falls by 2.0, steeply, never rises
    slow_noisy = [1.0 - 0.002 * e + 0.03 * (-1) ** e for e in epochs]  # falls by 0.12, zig-zagging
    assert loss_roughness(smooth_fast) == pytest.approx(0.0, abs=1e-12)
    assert loss_roughness(slow_noisy) > 0.02
    assert math.isnan(loss_roughness([1.0, 0.9])) and math.isnan(loss_roughness([1.0, math.nan, 0.8]))


# -- message passing ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mp", "base", "verdict", "why"),
    [
        ([0.80, 0.81, 0.79], [0.70, 0.71, 0.70], HOLDS, "≥"),
        ([0.80, 0.81, 0.79], [0.95, 0.96, 0.95], REFUTED, "<"),  # message passing loses to the baseline
        ([0.905, 0.907, 0.904], [0.90, 0.901, 0.899], REFUTED, "<"),  # gains, but less than +0.01
        ([0.80, 0.95, 0.70], [0.78, 0.80, 0.75], INCONCLUSIVE, "n too small"),
        ([0.8], [0.7], INCONCLUSIVE, "one seed"),
        ([], [0.7, 0.7], INCONCLUSIVE, "not measured"),
    ],
)
def test_verdict_message_passing(mp, base, verdict, why):
    v = claims.verdict_message_passing(base, mp, level=LEVEL)
    assert v.verdict == verdict and why in v.why


def _rung(key, auc=(), select=(), judge=(), auc_judge=()):
    """A rung's metrics with the fields the claims read filled, the others NaN / empty."""
    both = list(select) + list(judge)
    return RungMetrics(
        rung=key,
        valid_mrr=sum(both) / len(both) if both else NAN,
        valid_hits_at_10=NAN,
        valid_auc=sum(auc) / len(auc) if auc else NAN,
        valid_mrr_select=sum(select) / len(select) if select else NAN,
        valid_mrr_judge=NAN,
        valid_auc_judge=sum(auc_judge) / len(auc_judge) if auc_judge else NAN,
        valid_mrr_per_seed=(),
        valid_hits_at_10_per_seed=(),
        valid_auc_per_seed=tuple(auc),
        valid_mrr_select_per_seed=tuple(select),
        valid_mrr_judge_per_seed=tuple(judge),
        valid_auc_judge_per_seed=tuple(auc_judge),
        valid_mrr_interval=(NAN, NAN),
        train_s=0.0,
        epochs=0,
    )


def _ablation(*rungs, best=3):
    return AblationMetrics(
        best_rung=best,
        seeds=3,
        test_mrr=0.4,
        test_hits_at_1=NAN,
        test_hits_at_3=NAN,
        test_hits_at_10=0.6,
        test_mean_rank=NAN,
        test_auc=NAN,
        test_mrr_per_seed=(),
        rungs=tuple(rungs),
        interrupted=False,
    )


def test_message_passing_pair_chooses_on_one_half_and_judges_on_the_other():
    # rung 5 is better on the selecting half, rung 4 on the judging half: the choice follows the selecting
    # half only, and the figures returned are the judging half's
    ab = _ablation(
        _rung(4, select=[0.80, 0.80, 0.80], judge=[0.95, 0.95, 0.95]),
        _rung(5, select=[0.85, 0.84, 0.86], judge=[0.83, 0.82, 0.84]),
        _rung(6, select=[0.90, 0.90, 0.90], judge=[0.91, 0.92, 0.90]),
    )
    assert claims.message_passing_pair(ab) == (5, [0.83, 0.82, 0.84], [0.91, 0.92, 0.90])
    assert claims.message_passing_pair(_ablation(*ab.rungs[:2])) == (None, [], [])


def test_reverse_edges_read_the_judging_half():
    ab = _ablation(
        _rung(2, auc=[0.9, 0.9, 0.9], auc_judge=[0.53, 0.54, 0.52]),
        _rung(3, auc=[0.9, 0.9, 0.9], auc_judge=[0.79, 0.80, 0.78]),
    )
    r = claims.read_reverse_edges(ab)
    assert r.args == ([0.53, 0.54, 0.52], [0.79, 0.80, 0.78]) and r.measured == "0.530 -> 0.790 (+0.260)"


# -- coalesce -------------------------------------------------------------------------------------
def _coalesce(add: str, mean: str) -> CoalesceMetrics:
    return CoalesceMetrics(
        pyg_version="2.8.1",
        edges=500,
        distinct_typed_edges=400,
        edges_after_coalesce=400,
        pairs_with_several_relations=3,
        error_add=add,
        error_mean=mean,
        max_abs_diff_add=NAN if add else 0.7,
        max_abs_diff_mean=NAN if mean else 0.1,
        out_of_range_error="IndexError: index out of range",
        out_of_range_after_coalesce_error="IndexError: index out of range",
    )


@pytest.mark.parametrize(
    ("c", "verdict", "why"),
    [
        (_coalesce("IndexError: x", "IndexError: y"), HOLDS, "PyG 2.8.1"),
        (_coalesce("", ""), REFUTED, "100 exact duplicates"),
        (_coalesce("IndexError: x", ""), INCONCLUSIVE, "only under add"),
    ],
)
def test_verdict_coalesce(c, verdict, why):
    v = claims.verdict_coalesce(c)
    assert v.verdict == verdict and why in v.why


# -- the scale curve ------------------------------------------------------------------------------
CEILING = 0.07
MIN_RISE = claims.curve_min_rise(CEILING)


@pytest.mark.parametrize(
    ("gains", "verdict", "why"),
    [
        ([0.040, 0.041, 0.039], HOLDS, "rises"),
        ([0.002, 0.0021, 0.0019], REFUTED, "flat"),  # gains, far less than a quarter of the ceiling
        ([-0.01, -0.011, -0.009], REFUTED, "flat"),  # falls
        ([0.001, 0.05, 0.02], INCONCLUSIVE, "n too small"),  # one lucky run: the interval straddles
        ([0.04], INCONCLUSIVE, "one training run"),  # one run's queries share its model: no interval
        ([], INCONCLUSIVE, "fewer than two validation points"),
    ],
)
def test_verdict_curve_rises(gains, verdict, why):
    assert MIN_RISE == pytest.approx(0.25 * CEILING) and len(gains) <= N_SCALE
    v = claims.verdict_curve_rises(gains, MIN_RISE, level=LEVEL)
    assert v.verdict == verdict and why in v.why


def minibatch_row(**fields):
    """A MinibatchRow with every field the test does not care about filled."""
    base = dict(
        mode="mini-batch",
        seed=1,
        valid_mrr=0.04,
        valid_hits_at_10=0.08,
        evaluated_triples=1000,
        epochs=1,
        steps=90,
        train_s=30.0,
        steps_per_s=3.0,
        curve_steps=(0, 45, 90),
        curve_valid_mrr=(0.004, 0.02, 0.044),
        edges_per_step=100,
        nodes_per_step=50,
        nodes_fraction=0.3,
        message_graph_edges=1000,
        peak_memory_mb=100.0,
        peak_memory_growth_mb=10.0,
        memory_measured_as="rss",
        interrupted=False,
        ceiling_mrr=CEILING,
    )
    return MinibatchRow(**{**base, **fields})


def _scale(curves, ceiling=CEILING):
    rows = tuple(
        minibatch_row(seed=1 + i, curve_valid_mrr=c, ceiling_mrr=ceiling) for i, c in enumerate(curves)
    )
    return MinibatchMetrics(rows=rows, sizes={"entities": 47_000, "train": 1_600_000}, graph_seed=1)


def test_the_scale_reading_takes_each_runs_gain_from_step_0_against_a_quarter_of_the_ceiling():
    r = claims.read_curve(_scale([(0.004, 0.02, 0.044), (0.005, 0.03, 0.045), (0.004, 0.025, 0.043)]))
    gains, min_rise = r.args
    assert gains == pytest.approx([0.040, 0.040, 0.039]) and min_rise == pytest.approx(0.0175)
    assert r.measured.startswith(
        "graph seed 1, run seed 1: validation MRR 0.0040 at step 0 → 0.0440 after 90"
    )
    assert r.n == "3 training runs (seeds) on one graph, each scored on 2000 validation queries"
    assert "0.0175 (25% of the ceiling MRR)" in r.rule and "not chosen on" in r.rule
    no_ceiling = claims.read_curve(_scale([(0.1, 0.2), (0.1, 0.25)], ceiling=None))
    assert no_ceiling.args[1] == claims.CURVE_MIN_RISE and "absolute" in no_ceiling.rule
    one_point = claims.read_curve(_scale([(0.1,), (0.2,)]))
    assert one_point.args[0] == [] and one_point.measured == "not measured"


# -- the ledger through the registry -------------------------------------------------------------
def _results():
    ablation = _ablation(
        _rung(2, auc_judge=[0.53, 0.54, 0.52]),
        _rung(3, auc_judge=[0.78, 0.80, 0.79]),
        _rung(5, select=[0.80, 0.81, 0.79], judge=[0.80, 0.81, 0.79]),
        _rung(6, select=[0.95, 0.96, 0.95], judge=[0.95, 0.96, 0.95]),
    )
    downstream = DownstreamMetrics(
        macro_f1=0.85,
        macro_f1_control=0.3,
        seed_scores=(0.85, 0.86, 0.84),
        control_seed_scores=(0.30, 0.32, 0.29),
        seeds=3,
        samples=125,
        classes=11,
        dropped_classes=("GEOG (1)", "OCCU (2)"),
        dropped_entities=3,
    )
    return {
        "ablation": ablation,
        "downstream": downstream,
        "aggr": _aggr([0.005, 0.0051, 0.005], [0.02, 0.021, 0.019]),
        "pitfalls": PitfallMetrics(pitfall_findings=[], coalesce=_coalesce("", "")),
        "scale": _scale([(0.004, 0.02, 0.044), (0.005, 0.03, 0.045), (0.004, 0.025, 0.043)]),
    }


def test_the_ledger_from_fabricated_results_in_a_context(monkeypatch):
    seen = []
    monkeypatch.setattr("nbkit.experiment.record", lambda name, value: seen.append(name))
    ctx = KGContext("cpu")
    rows = claims.judge(ctx)
    assert [r.key for r in rows] == [
        "reverse_edges_auc",
        "downstream_f1",
        "aggr_mean_stable",
        "message_passing_helps",
        "coalesce_indexerror",
        "scale_curve_rises",
    ]
    assert all(r.measured == "not measured" and r.verdict == INCONCLUSIVE for r in rows)
    for slug, metrics in _results().items():
        ctx.keep(slug, Result(metrics=metrics))
    rows = {r.key: r for r in claims.judge(ctx)}
    assert seen == ["claims", "claims"]
    assert rows["coalesce_indexerror"].verdict == REFUTED and rows["coalesce_indexerror"].kind == LIBRARY_FACT
    assert (
        rows["coalesce_indexerror"].p_holds_if_true is None and "PyG 2.8.1" in rows["coalesce_indexerror"].n
    )
    assert "left out (fewer entities than folds): GEOG (1), OCCU (2)" in rows["downstream_f1"].n
    for key, row in rows.items():
        if row.kind != MEASURED:
            continue
        oc = operating_characteristics(spec(key), DEFAULT)
        assert row.decided_at_defaults == oc.decided and row.p_holds_if_true == oc.p_holds_if_true
        if not oc.decided:  # never a verdict the design cannot support
            assert row.verdict == INCONCLUSIVE and row.why.startswith("not decided at defaults: needs n ≥ ")
            assert "run the full profile" in row.why
    full = KGContext("cpu", profile=FULL)
    for slug, metrics in _results().items():
        full.keep(slug, Result(metrics=metrics))
    judged = {r.key: r.verdict for r in claims.judge(full)}
    assert judged == {
        "reverse_edges_auc": HOLDS,
        "downstream_f1": HOLDS,
        "aggr_mean_stable": HOLDS,
        "message_passing_helps": REFUTED,
        "coalesce_indexerror": REFUTED,
        "scale_curve_rises": HOLDS,
    }


def test_the_headline_has_the_first_numbers(monkeypatch):
    monkeypatch.setattr("nbkit.experiment.record", lambda name, value: None)
    ctx = KGContext("cpu")
    for slug, metrics in _results().items():
        ctx.keep(slug, Result(metrics=metrics))
    h = claims.headline(ctx)
    assert set(h) == {
        "best_rung",
        "test_mrr",
        "test_hits_at_10",
        "reverse_edge_valid_auc_gain",
        "downstream_macro_f1",
    }
    assert (h["best_rung"], h["test_mrr"], h["test_hits_at_10"]) == (3, 0.4, 0.6)
    assert h["reverse_edge_valid_auc_gain"] == pytest.approx(0.26) and h["downstream_macro_f1"] == 0.85
    assert math.isnan(claims.headline(KGContext("cpu"))["downstream_macro_f1"])


# -- the designs -----------------------------------------------------------------------------------
def test_every_measured_spec_states_its_design_at_the_configs_it_runs():
    kinds = {s.key: s.kind for s in REGISTRY.claims}
    assert kinds == {
        "reverse_edges_auc": MEASURED,
        "downstream_f1": MEASURED,
        "aggr_mean_stable": MEASURED,
        "message_passing_helps": MEASURED,
        "coalesce_indexerror": LIBRARY_FACT,
        "scale_curve_rises": MEASURED,
    }
    assert spec("aggr_mean_stable").design.full_n >= 10  # an exact test needs >= 10 runs per arm
    for s in REGISTRY.claims:
        if s.design is None:
            continue
        Config = REGISTRY[s.reads[0]].Config
        assert s.design.units(Config()) == s.design.n
        if s.design.full_n:  # a row decided at its defaults needs no full profile
            assert s.design.units(Config.full()) == s.design.full_n


@pytest.mark.parametrize(
    ("key", "decided"),
    [
        ("reverse_edges_auc", True),
        ("downstream_f1", True),
        ("aggr_mean_stable", False),
        ("message_passing_helps", False),
        ("scale_curve_rises", True),
    ],
)
def test_operating_characteristics_at_the_defaults_and_in_the_full_profile(key, decided):
    s = spec(key)
    oc = operating_characteristics(s, DEFAULT)
    assert oc.decided is decided, oc
    full = operating_characteristics(s, FULL)
    assert full.decided and full.p_holds_if_true >= 0.8 and full.p_refuted_if_false >= 0.8
    assert max(full.p_refuted_if_true, full.p_holds_if_false) <= 0.05
