"""Every KG row driven through every outcome at the notebook's real n (its first look and its budget), on
fabricated measurements with the fields the experiments write; its reader; the ledger judged through the
registry from fabricated, typed results; and each row's design at both profiles."""

import math

import pytest

from nbkit.claims import (
    HOLDS,
    INCONCLUSIVE,
    LIBRARY_FACT,
    MEASURED,
    NOT_JUDGED,
    REFUTED,
    family_level,
)
from nbkit.claims.judge import replicates_of, size
from nbkit.kg import claims
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
LEVEL = family_level(REGISTRY.claims)  # the Bonferroni level of notebook 01's family: Holm's first


def spec(key):
    return next(s for s in REGISTRY.claims if s.key == key)


def budget(key, profile="default"):
    slug, rep = replicates_of(spec(key), REGISTRY.sizes)
    return rep.budget(REGISTRY[slug].config(False, profile)), rep.least


# -- each row through each outcome at its first look and at its budget ----------------------------------
# (key, a per-unit value where it holds, where it is refuted, two values whose interval straddles the bar)
GENERIC = [
    ("reverse_edges_auc", 0.26, 0.0, (-0.2, 0.5)),
    ("message_passing_helps", 0.2, -0.2, (-0.05, 0.08)),
    ("downstream_f1", 0.9, 0.5, (0.6, 0.95)),
    ("embeddings_beat_random", 0.7, 0.0, (-0.2, 0.5)),
    ("scale_curve_rises", 0.7, 0.0, (-0.2, 0.8)),
]


@pytest.mark.parametrize("key, up, down, spread", GENERIC)
def test_each_generic_row_reaches_every_outcome_at_its_real_n(key, up, down, spread):
    s = spec(key)
    n_budget, least = budget(key)
    for n in (least, n_budget):
        jitter = [0.001 * (i % 3 - 1) for i in range(n)]
        assert s.decide([up + j for j in jitter], LEVEL).verdict == HOLDS
        assert s.decide([down + j for j in jitter], LEVEL).verdict == REFUTED
        wide = [spread[i % 2] for i in range(n)]
        assert s.decide(wide, LEVEL).verdict == INCONCLUSIVE
    assert s.decide([up], LEVEL).verdict == INCONCLUSIVE  # one unit: no interval
    assert s.decide([up] * 3, LEVEL).verdict == INCONCLUSIVE  # tied units: no zero-width interval


def _units(ratios, div_mean=(), div_add=()):
    return [(i in div_mean, i in div_add, r) for i, r in enumerate(ratios)]


@pytest.mark.parametrize(
    ("units", "verdict", "why"),
    [
        # divergence decides only through the exact test: 9 of 12 add runs against 0 of 12, either way round
        (_units([NAN] * 12, div_add=range(9)), HOLDS, "Boschloo"),
        (_units([NAN] * 12, div_mean=range(9)), REFUTED, "Boschloo"),
        # one divergence at 3 seeds is not evidence: the wobble of the other seeds decides
        (_units([NAN, 1.4, -0.5], div_add=(0,)), INCONCLUSIVE, "straddles"),
        (_units([1.4, 1.41, 1.39]), HOLDS, "≥"),
        (_units([0.0, 0.01, -0.01]), REFUTED, "<"),
        (_units([1.0, -1.0, 0.5]), INCONCLUSIVE, "straddles"),
        (_units([0.4]), INCONCLUSIVE, "no interval"),
    ],
)
def test_the_aggr_verdict_reaches_every_outcome(units, verdict, why):
    v = spec("aggr_mean_stable").decide(units, LEVEL)
    assert v.verdict == verdict and why in v.why


def test_the_coalesce_flag_reaches_every_outcome():
    s = spec("coalesce_indexerror")
    pit = lambda a, m: PitfallMetrics(pitfall_findings=[], coalesce=_coalesce(a, m))  # noqa: E731
    assert s.decide(s.read(pit("IndexError: x", "IndexError: y")).sample).verdict == HOLDS
    assert s.decide(s.read(pit("", "")).sample).verdict == REFUTED
    only_add = s.read(pit("IndexError: x", ""))
    assert only_add.missing == "the two aggregations disagree" and "raised under add" in only_add.measured


# -- readers ----------------------------------------------------------------------------------------------


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


def test_reverse_edges_read_the_judging_half():
    ab = _ablation(
        _rung(2, auc=[0.9, 0.9, 0.9], auc_judge=[0.53, 0.54, 0.52]),
        _rung(3, auc=[0.9, 0.9, 0.9], auc_judge=[0.79, 0.80, 0.78]),
    )
    r = claims.read_reverse_edges(ab)
    assert r.sample == pytest.approx([0.26, 0.26, 0.26]) and r.measured == "0.530 → 0.790 (+0.260)"
    assert claims.read_reverse_edges(_ablation()).missing


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


def test_the_aggr_reading_is_one_unit_per_seed_with_the_floor():
    m = _aggr([0.0, 0.01, 0.02], [0.0, 0.04, 0.02], add_div=(2,))
    units = claims.read_aggr(m).sample
    assert [u[:2] for u in units] == [(False, False), (False, False), (False, True)]
    assert units[0][2] == 0.0 and units[1][2] == pytest.approx(math.log(0.0401 / 0.0101))
    assert math.isnan(units[2][2])
    assert "lr 0.005" in claims.read_aggr(m).measured


def test_roughness_is_wobble_around_the_trend_not_the_speed_of_learning():
    from nbkit.kg.experiments import loss_roughness

    epochs = range(60)
    smooth_fast = [0.05 + 2.0 * math.exp(-e / 4) for e in epochs]  # falls by 2.0, steeply, never rises
    slow_noisy = [1.0 - 0.002 * e + 0.03 * (-1) ** e for e in epochs]  # falls by 0.12, zig-zagging
    assert loss_roughness(smooth_fast) == pytest.approx(0.0, abs=1e-12)
    assert loss_roughness(slow_noisy) > 0.02
    assert math.isnan(loss_roughness([1.0, 0.9])) and math.isnan(loss_roughness([1.0, math.nan, 0.8]))


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


CEILING = 0.07


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


def _scale(curves, ceiling=CEILING):
    rows = tuple(
        minibatch_row(seed=1 + i, curve_valid_mrr=c, ceiling_mrr=ceiling) for i, c in enumerate(curves)
    )
    return MinibatchMetrics(rows=rows, sizes={"entities": 47_000, "train": 1_600_000}, graph_seed=1)


def test_the_scale_reading_is_each_runs_gain_as_a_share_of_the_ceiling():
    r = claims.read_curve(_scale([(0.004, 0.02, 0.039), (0.005, 0.03, 0.040), (0.004, 0.025, 0.039)]))
    assert r.sample == pytest.approx([0.5, 0.5, 0.5])
    assert r.measured.startswith("graph seed 1: validation MRR 0.0040 at step 0 → 0.0390 after 90 steps")
    assert r.n == "3 training runs on one graph, each scored on 2000 validation queries"
    assert "no known ceiling" in claims.read_curve(_scale([(0.1, 0.2), (0.1, 0.25)], ceiling=None)).missing
    assert claims.read_curve(_scale([(0.1,), (0.2,)])).missing


# -- the ledger through the registry ---------------------------------------------------------------------
def _results():
    wobble = [0.001 * (i % 3 - 1) for i in range(12)]  # 12 seeds: a clear effect decides within them
    ablation = _ablation(
        _rung(2, auc_judge=[0.53 + w for w in wobble]),
        _rung(3, auc_judge=[0.79 - w for w in wobble]),
        _rung(5, select=[0.80 + w for w in wobble], judge=[0.80 + w for w in wobble]),
        _rung(6, select=[0.95 - w for w in wobble], judge=[0.95 - w for w in wobble]),
    )
    downstream = DownstreamMetrics(
        macro_f1=0.85,
        macro_f1_control=0.3,
        seed_scores=(0.85, 0.86, 0.84, 0.85, 0.86, 0.84),
        control_seed_scores=(0.30, 0.32, 0.29, 0.31, 0.30, 0.30),
        seeds=6,
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
        "scale": _scale([(0.004, 0.02, 0.044 + 0.001 * (i % 3)) for i in range(5)]),
    }


def _ctx(**kw):
    ctx = KGContext("cpu", **kw)
    for slug, metrics in _results().items():
        ctx.keep(slug, Result(metrics=metrics, config=REGISTRY[slug].config(False, ctx.profile)))
    return ctx


def test_the_ledger_from_fabricated_results_in_a_context(monkeypatch):
    seen = []
    monkeypatch.setattr("nbkit.experiment.record", lambda name, value: seen.append(name))
    rows = claims.judge(KGContext("cpu"))
    assert [r.key for r in rows] == [s.key for s in REGISTRY.claims]
    assert all(r.measured == "not measured" and r.verdict == INCONCLUSIVE for r in rows)
    rows = {r.key: r for r in claims.judge(_ctx())}
    assert seen == ["claims", "claims"]
    coalesce = rows.pop("coalesce_indexerror")
    assert coalesce.verdict == REFUTED and coalesce.kind == LIBRARY_FACT and coalesce.exact
    assert coalesce.p_holds_if_true is None
    assert "left out (fewer entities than folds): GEOG (1), OCCU (2)" in rows["downstream_f1"].n
    for key, row in rows.items():
        assert row.kind == MEASURED and not row.exact and row.budget >= budget(key)[0]
        if not row.decided:  # never a verdict the design cannot support
            assert row.verdict == INCONCLUSIVE and row.why.startswith("not decided at defaults")
    assert rows["reverse_edges_auc"].verdict == HOLDS and rows["scale_curve_rises"].verdict == HOLDS
    assert rows["embeddings_beat_random"].verdict == HOLDS
    assert (
        rows["message_passing_helps"].verdict == INCONCLUSIVE
    )  # its design decides only in the full profile
    full = {r.key: r for r in claims.judge(_ctx(profile="full"))}
    assert full["message_passing_helps"].verdict == REFUTED and full["message_passing_helps"].decided
    smoke = claims.judge(_ctx(smoke=True))
    assert {r.verdict for r in smoke} == {NOT_JUDGED}


def test_the_headline_has_the_first_numbers_in_words(monkeypatch):
    seen = {}
    monkeypatch.setattr("nbkit.experiment.record", lambda name, value: seen.__setitem__(name, value))
    h = claims.headline(_ctx())
    assert set(h) == {
        "best_rung",
        "test_mrr",
        "test_hits_at_10",
        "reverse_edge_valid_auc_gain",
        "downstream_macro_f1",
    }
    assert (h["best_rung"], h["test_mrr"], h["test_hits_at_10"]) == (3, 0.4, 0.6)
    assert h["reverse_edge_valid_auc_gain"] == pytest.approx(0.26) and h["downstream_macro_f1"] == 0.85
    assert seen["headline_spec"]["test_mrr"]["label"] == "test MRR of the best rung"
    assert math.isnan(claims.headline(KGContext("cpu"))["downstream_macro_f1"])


# -- the designs -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "at_defaults", "in_full"),
    [
        ("reverse_edges_auc", True, True),
        ("message_passing_helps", False, True),
        ("downstream_f1", False, True),
        ("embeddings_beat_random", True, True),
        ("aggr_mean_stable", False, True),
        ("scale_curve_rises", True, True),
    ],
)
def test_each_design_at_the_defaults_and_in_the_full_profile(key, at_defaults, in_full):
    s = spec(key)
    for profile, expected in (("default", at_defaults), ("full", in_full)):
        n, least = budget(key, profile)
        results = {
            slug: Result(metrics=None, config=REGISTRY[slug].config(False, profile)) for slug in s.reads
        }
        sized = size(s, claims.Reading([0.0] * least, ""), results, REGISTRY.sizes, LEVEL)
        assert sized.budget == n and sized.oc.decided is expected, (profile, sized.oc)
        if expected:
            assert max(sized.oc.p_refuted_if_true, sized.oc.p_holds_if_false) <= 0.05
