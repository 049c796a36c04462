"""The claims core: a rule's data decides (every kind through every outcome, its words and verdict moving
together), intervals never collapse, sequential looks keep their error rate, designs are honest, and the
judge runs rows as data (Holm, smoke, needs GPU, undecided designs, the n that ran)."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest

from nbkit.claims import (
    CLUSTER,
    EXACT,
    HOLDS,
    INCONCLUSIVE,
    LOG_T,
    MEASURED,
    NEEDS_GPU,
    NOT_JUDGED,
    OWN,
    REFUTED,
    WILSON,
    Claim,
    ClaimSpec,
    Plan,
    Reading,
    Replicates,
    as_claims,
    at_least,
    at_most,
    bootstrap_interval,
    claims_frame,
    clustered_rate_interval,
    crossed_mean_interval,
    decided,
    exact_at_least,
    exact_at_most,
    exact_within,
    flag,
    judge,
    mean_interval,
    paired_rate_difference_interval,
    rate_interval,
    run_family,
    within,
)
from nbkit.claims.design import simulate
from nbkit.claims.estimators import CROSSED, FLAG, NORMAL, PAIRED_RATE, T
from nbkit.claims.judge import holm
from nbkit.claims.sequential import boundaries, looks, nominal_levels

# -- every generic kind, through every outcome, its threshold moving verdict and words together ----------

KINDS = [
    # (make(threshold) -> rule, sample that holds, sample that refutes, sample that straddles)
    (
        lambda t: at_least(t, "gain", unit="seed", claimed=2 * t, null=0.0),
        [0.30, 0.31, 0.29, 0.30],
        [0.01, 0.02, 0.00, 0.01],
        [0.0, 0.4, 0.1, 0.3],
    ),
    (
        lambda t: at_most(t, "ratio", unit="launch", claimed=t / 2, null=2 * t),
        [0.05, 0.06, 0.05],
        [0.31, 0.30, 0.29],
        [0.0, 0.3, 0.1],
    ),
    (
        lambda t: within(t, 0.05, "rate", unit="request"),
        [0.15, 0.151, 0.149, 0.15],
        [0.4, 0.41, 0.39],
        [0.1, 0.3, 0.2],
    ),
    (lambda t: exact_at_least(t, "count"), 0.3, 0.0, math.nan),
    (lambda t: exact_at_most(t, "F1"), 0.05, 0.3, math.nan),
    (lambda t: exact_within(t, 0.01, "share", relative=True), 0.15, 0.2, math.nan),
]


@pytest.mark.parametrize("make, holds, refuted, open_", KINDS)
def test_every_generic_kind_reaches_every_outcome_and_moves_with_its_threshold(make, holds, refuted, open_):
    rule = make(0.15)
    assert rule.decide(holds, 0.95).verdict == HOLDS
    assert rule.decide(refuted, 0.95).verdict == REFUTED
    assert rule.decide(open_, 0.95).verdict == INCONCLUSIVE
    # the same data under a threshold moved past it: the verdict and the rule's words change together
    moved = make(0.45 if rule.kind != "at most" else 0.01)
    assert moved.decide(holds, 0.95).verdict != HOLDS
    assert moved.text != rule.text and moved.bar != rule.bar
    assert rule.fmt(rule.band[0] if math.isfinite(rule.band[0]) else rule.band[1]) in rule.text


def test_a_flag_reaches_every_outcome():
    rule = flag("the op", holds="it raises", refuted="it runs")
    assert rule.decide(True).verdict == HOLDS and rule.decide(True).why == "it raises"
    assert rule.decide(False).verdict == REFUTED
    assert rule.decide(None).verdict == INCONCLUSIVE
    assert "holds if it raises" in rule.text


def test_a_rule_refuses_design_points_on_the_wrong_side():
    with pytest.raises(ValueError, match="claimed value"):
        at_least(0.5, "x", unit="seed", claimed=0.1, null=0.0)
    with pytest.raises(ValueError, match="false value"):
        at_least(0.5, "x", unit="seed", claimed=1.0, null=0.7)
    with pytest.raises(ValueError, match="unit of replication"):
        at_least(0.5, "x", claimed=1.0, null=0.0)
    assert within(1.0, 0.1, "x", unit="u").false_values() == pytest.approx((0.8, 1.2))
    assert within(2.0, 0.1, "x", relative=True, unit="u").false_values() == pytest.approx((1.6, 2.4))


def test_the_estimators_read_their_own_kind_of_sample():
    assert LOG_T.interval([2.0, 2.2, 1.8, 2.1], 0.95)[0] > 1.5
    assert math.isnan(LOG_T.interval([2.0, -1.0], 0.95)[0])  # a ratio must be positive
    assert WILSON.interval([1, 1, 0, 1], 0.95) == pytest.approx(rate_interval(3, 4))
    assert CLUSTER.interval([(1, 2), (2, 2), (0, 2)], 0.95) == pytest.approx(
        clustered_rate_interval([1, 2, 0], [2, 2, 2])
    )
    assert EXACT.interval(3.0, 0.95) == (3.0, 3.0)


def test_each_interval_is_built_around_its_estimators_point():
    """The ledger's estimate is the figure each interval is centred on, on the rule's scale."""
    assert T.point([1.0, 2.0, 6.0]) == pytest.approx(3.0)
    lo, hi = LOG_T.interval([2.0, 8.0, 4.0], 0.95)
    assert LOG_T.point([2.0, 8.0, 4.0]) == pytest.approx(4.0) == pytest.approx(math.sqrt(lo * hi))
    assert WILSON.point([1, 1, 0, 1]) == 0.75
    assert CLUSTER.point([(1, 2), (2, 2), (0, 4)]) == 0.375
    assert PAIRED_RATE.point([(1, 0), (1, 1), (0, 0), (1, 0)]) == 0.5
    table = [[0.2, 0.4, 0.9], [0.1, 0.3, 0.5]]
    assert CROSSED.point(table) == pytest.approx(sum(crossed_mean_interval(table, 0.9)) / 2)
    assert NORMAL.point((0.3, 0.1, 40)) == 0.3
    assert FLAG.point is None


# -- intervals -------------------------------------------------------------------------------------------


def _paired(both, only_a, only_b, neither):
    """0/1 outcomes of two programs on the same items from the four cells of a paired 2×2 table."""
    a = [1] * both + [1] * only_a + [0] * only_b + [0] * neither
    b = [1] * both + [0] * only_a + [1] * only_b + [0] * neither
    return a, b


def test_paired_rate_difference_matches_a_published_example():
    """Cavo et al. (2012), as worked in Fagerland, Lydersen & Laake, *Statistical Analysis of Contingency
    Tables* (2017), ch. 8: table [[59, 6], [16, 80]], Newcombe square-and-add 95 % CI −0.1186 to −0.0046."""
    lo, hi = paired_rate_difference_interval(*_paired(59, 6, 16, 80))
    assert lo == pytest.approx(-0.1186, abs=5e-5) and hi == pytest.approx(-0.0046, abs=5e-5)


@pytest.mark.parametrize("n", [15, 30])
def test_paired_rate_difference_keeps_its_width_without_discordant_pairs(n):
    for cells in ((n, 0, 0, 0), (0, 0, 0, n), (n // 2, 0, 0, n - n // 2)):
        a, b = _paired(*cells)
        assert all(map(math.isnan, bootstrap_interval((a, b), paired=True)))  # never a zero width
        lo, hi = paired_rate_difference_interval(a, b)
        assert lo < -0.05 and hi > 0.05 and lo == pytest.approx(-hi)


def test_intervals_and_their_edges():
    lo, hi = mean_interval([1.0, 2.0, 3.0])
    assert lo < 2.0 < hi
    assert all(math.isnan(x) for x in mean_interval([1.0]))
    assert all(math.isnan(x) for x in mean_interval([2.0, 2.0, 2.0]))  # tied units: no interval
    assert mean_interval([2.0, 2.0, 2.0], resolution=0.1)[0] < 2.0  # ... unless the resolution is known
    assert all(math.isnan(x) for x in mean_interval([math.nan, 0.2, 0.4]))  # never a quietly dropped unit
    assert all(math.isnan(x) for x in rate_interval(0, 0))
    assert all(math.isnan(x) for x in rate_interval(5, 3))  # impossible counts: no interval, no crash
    assert all(math.isnan(x) for x in rate_interval(math.nan, 3))
    assert all(math.isnan(x) for x in clustered_rate_interval([3], [2]))
    assert all(math.isnan(x) for x in clustered_rate_interval([1], [2]))  # one cluster
    agree = clustered_rate_interval([2] * 10 + [0] * 5, [2] * 15)
    assert agree == pytest.approx(rate_interval(10, 15), abs=1e-9)  # two phrasings that agree: one case


def test_no_public_interval_function_gives_a_zero_width_interval_from_a_tied_sample():
    import inspect

    from nbkit.claims import intervals

    calls = {
        "mean_interval": lambda f: f([0.0, 0.0, 0.0]),
        "bootstrap_interval": lambda f: f([0.0, 0.0, 0.0]),
        "rate_interval": lambda f: f(0, 3),
        "paired_rate_difference_interval": lambda f: f([0.0, 0.0, 0.0], [0.0, 0.0, 0.0]),
        "clustered_rate_interval": lambda f: f([0, 0, 0], [2, 2, 2]),
        "crossed_mean_interval": lambda f: f([[0.0, 0.0, 0.0]]),
    }
    public = {
        n
        for n, f in vars(intervals).items()
        if n.endswith("interval") and not n.startswith(("_", "fmt")) and inspect.isfunction(f)
    }
    assert public == set(calls), "a new interval function needs a tied-sample case here"
    for name, call in calls.items():
        lo, hi = call(getattr(intervals, name))
        assert (math.isnan(lo) and math.isnan(hi)) or hi > lo, name


def test_crossed_mean_interval_is_limited_by_rows_and_by_columns():
    rng = np.random.default_rng(0)
    row = rng.normal(0.3, 0.4, 15)
    assert crossed_mean_interval([list(row)]) == pytest.approx(mean_interval(list(row)), abs=1e-9)
    cases = rng.normal(0.0, 0.1, 15)
    table = [list(0.3 + shift + cases + rng.normal(0, 0.05, 15)) for shift in (-0.3, 0.0, 0.3)]
    lo, hi = crossed_mean_interval(table)
    cells = mean_interval([v for r in table for v in r])
    assert hi - lo > 3 * (cells[1] - cells[0])


# -- sequential looks --------------------------------------------------------------------------------------


def test_boundaries_are_gsdesigns_obrien_fleming_spending():
    """R gsDesign's ``gsDesign(k = 5, test.type = 2, alpha = 0.025, sfu = sfLDOF)`` boundaries for 5
    equally spaced looks: 4.877, 3.357, 2.680, 2.290, 2.031."""
    published = (4.877, 3.357, 2.680, 2.290, 2.031)
    assert boundaries(0.05, (1, 2, 3, 4, 5), 5) == pytest.approx(published, abs=1e-3)
    assert boundaries(0.05, (7,), 7) == pytest.approx((1.96,), abs=1e-3)  # one look: a fixed interval
    assert looks(2, 6) == (2, 3, 4, 5, 6) and len(looks(3, 400)) == 20 and looks(3, 400)[-1] == 400


def test_repeated_intervals_keep_the_error_rate_however_often_they_are_looked_at():
    """Under a true mean exactly at the bar, a t rule looked at after every unit up to 30 may hold or refute
    only by a wrong verdict: with the repeated intervals that happens at most α of the time; with a plain
    95 % interval at every look, far more often."""
    rule = at_least(0.0, "x", unit="seed", claimed=1.0, null=-1.0)
    rng = np.random.default_rng(1)
    at = looks(3, 30, most=30)
    levels = nominal_levels(0.05, at, 30)
    wrong_rci = wrong_naive = 0
    runs = 800
    for _ in range(runs):
        x = list(rng.normal(0.0, 1.0, 30))
        wrong_rci += any(rule.decide(x[:n], lev).verdict == HOLDS for n, lev in zip(at, levels, strict=True))
        wrong_naive += any(rule.decide(x[:n], 0.95).verdict == HOLDS for n in at)
    assert wrong_rci / runs <= 0.025 + 0.012  # one side of a two-sided 5 %, plus Monte-Carlo error
    assert wrong_naive / runs > 0.06


# -- designs -----------------------------------------------------------------------------------------------


def test_a_spread_measured_on_few_units_is_planned_at_its_upper_bound():
    assert Plan(1.0, 6, "m").planning_spread == pytest.approx(math.sqrt(5 / 2.3425), rel=1e-3)
    assert Plan(1.0, 100, "m").planning_spread < 1.1
    assert Plan(1.0, 0, "assumed").planning_spread == 1.0


def test_a_design_is_simulated_at_the_budget_that_ran_and_stops_early_when_clear():
    rule = at_least(0.5, "gain", unit="seed", claimed=1.0, null=0.0)
    plan = Plan(0.5, 0, "assumed")
    small = simulate("k", rule, plan, budget=3, least=3, level=0.95, sequential=False, sims=500)
    large = simulate("k", rule, plan, budget=20, least=3, level=0.95, sequential=True, sims=500)
    assert small.p_holds_if_true < 0.8 and not small.decided
    assert large.decided and large.mean_units_true < 15 and large.mean_units_false < 15
    far = dataclasses.replace(rule, claimed=5.0)
    clear = simulate("k", far, plan, budget=20, least=3, level=0.95, sequential=True, sims=500)
    assert clear.mean_units_true < 0.5 * large.mean_units_true  # a clear effect stops after a few units


def test_a_forecast_at_a_measured_value_is_the_same_simulation_at_that_value():
    """At the claimed value with an assumed spread (planned as it is) a forecast is the design's own
    figure; a value far below the bar is refuted after a few units; one on the bar runs to the budget."""
    from nbkit.claims.design import forecast

    rule = at_least(0.5, "gain", unit="seed", claimed=1.0, null=0.0)
    plan = Plan(0.5, 0, "assumed")
    kw = dict(budget=20, least=3, level=0.95, sequential=True, sims=500)
    design = simulate("k", rule, plan, **kw)
    held, _, units = forecast("k", rule, plan, 1.0, **kw)
    assert held == pytest.approx(design.p_holds_if_true, abs=0.06)
    assert units == pytest.approx(design.mean_units_true, rel=0.1)
    held, refuted, units = forecast("k", rule, plan, -1.0, **kw)
    assert refuted > 0.95 and held == 0 and units < 0.5 * kw["budget"]
    held, refuted, units = forecast("k", rule, plan, 0.5, **kw)
    assert held < 0.1 and refuted < 0.1 and units > 19


# -- the judge -----------------------------------------------------------------------------------------------


def _spec(key, *, noisy=True, **kw):
    def read(m):
        return Reading(list(m.values), f"{len(m.values)} values")

    base = dict(
        key=key,
        claim="c",
        source=OWN,
        field_note="",
        kind=MEASURED,
        reads=("x",),
        read=read,
        rule=at_least(0.0, "mean", unit="seed", claimed=1.0, null=-1.0),
        plan=Plan(0.3, 0, "assumed") if noisy else None,
    )
    if not noisy:
        base["rule"] = exact_at_least(0.0, "count")
    base.update(kw)
    return ClaimSpec(**base)


def _results(values, seeds=None):
    cfg = SimpleNamespace(seeds=seeds or len(values))
    return {"x": SimpleNamespace(metrics=SimpleNamespace(values=values), config=cfg)}


SIZES = {"x": Replicates("seed", "seeds", full=30, cost_s=60, cost_source="m", least=3)}


def test_holm_settles_the_clear_rows_first_then_relaxes_the_level():
    a, b = _spec("a"), _spec("b")
    clear, borderline = [1.0, 1.1, 0.9], [0.2, 0.35, 0.1, 0.3, 0.0]
    assert b.decide(borderline, 0.95).verdict == HOLDS and b.decide(borderline, 0.975).verdict == INCONCLUSIVE
    readings = {"a": Reading(clear, ""), "b": Reading(borderline, "")}
    from nbkit.claims.judge import size

    sized = {k: size(s, readings[k], {}, {}, 0.975) for k, s in (("a", a), ("b", b))}
    out = holm([a, b], readings, sized, 0.05)
    assert out["a"].verdict.verdict == HOLDS and out["a"].level == pytest.approx(0.975)
    assert out["b"].verdict.verdict == HOLDS and out["b"].level == pytest.approx(0.95)
    c = _spec("c")
    readings["c"] = Reading(borderline, "")
    sized["c"] = sized["b"]
    out = holm([b, c], readings, sized, 0.05)
    assert {j.verdict.verdict for j in out.values()} == {INCONCLUSIVE}


def test_the_judge_runs_rows_as_data():
    rows = judge([_spec("k")], _results([1.0, 1.2, 0.9, 1.1, 1.0, 0.95]), SIZES)
    (row,) = rows
    assert row.verdict == HOLDS and row.units < 6 and row.budget == 6  # judged at its deciding look
    assert not row.exact
    assert row.p_holds_if_true is not None and row.decided and "sequential" in row.design
    assert row.interval.endswith(f"({row.level * 100:.3g}%)") and row.level > 0.95  # its look's interval
    assert "Holm" in row.why
    assert row.estimate == pytest.approx(np.mean([1.0, 1.2, 0.9, 1.1, 1.0, 0.95][: row.units]))
    exact = judge([_spec("e", noisy=False, read=lambda m: Reading(2.0, "2"))], _results([1.0]))
    assert exact[0].verdict == HOLDS and exact[0].exact and exact[0].p_holds_if_true is None


def test_a_smoke_run_measures_and_never_judges():
    (row,) = judge([_spec("k")], _results([1.0, 1.2, 0.9]), SIZES, smoke=True)
    assert row.verdict == NOT_JUDGED and row.why == "smoke size: not judged" and row.measured == "3 values"


def test_an_undecided_design_says_what_the_full_profile_runs():
    (row,) = judge([_spec("k", plan=Plan(3.0, 0, "assumed"))], _results([1.0, -2.0, 3.0]), SIZES)
    assert row.verdict == INCONCLUSIVE and not row.decided
    assert "not decided at defaults" in row.why and "the full profile runs up to 30 seeds" in row.why
    assert "≈ 30 CPU-minutes" in row.why
    (bounded,) = judge(
        [_spec("k", plan=Plan(3.0, 0, "assumed"), bounded_by="the data holds 3")], _results([1.0, 2.0]), SIZES
    )
    assert "no profile decides it: the data holds 3" in bounded.why


def test_the_oc_is_at_the_budget_that_ran():
    spec = _spec("k", plan=Plan(3.0, 0, "assumed"))
    few = judge([spec], _results([1.0, 1.1, 0.9]), SIZES)[0]
    many = judge([spec], _results([1.0, 1.1, 0.9], seeds=30), SIZES)[0]
    assert few.budget == 3 and many.budget == 30
    assert many.p_holds_if_true > few.p_holds_if_true


def test_needs_gpu_and_missing_rows_leave_the_family():
    gpu = _spec("g", read=lambda m: Reading([], "not measured", needs_gpu="a CUDA kernel"))
    gone = _spec("m", read=lambda m: Reading([], "not measured", missing="the drill did not run"))
    rows = judge([gpu, gone, _spec("z", reads=("absent",))], _results([1.0]), SIZES)
    assert [r.verdict for r in rows] == [NEEDS_GPU, INCONCLUSIVE, INCONCLUSIVE]
    assert "CUDA" in rows[0].why and "the drill did not run" in rows[1].why and "run absent" in rows[2].why


def test_an_exact_row_decides_only_where_it_was_measured():
    measured = _spec("e", noisy=False, read=lambda m: Reading(2.0, "2"))
    skipped = _spec("s", noisy=False, read=lambda m: Reading(None, "no sweep", missing="no sweep here"))
    absent = _spec("a", noisy=False, reads=("absent",))
    rows = judge([measured, skipped, absent], _results([1.0]))
    assert [r.exact for r in rows] == [True, True, True]
    assert [r.decided for r in rows] == [True, False, False]


def test_a_replicate_loop_stops_once_its_decidable_rows_are_decided():
    specs = [_spec("k")]
    cfg = SimpleNamespace(seeds=20)
    early = SimpleNamespace(values=[1.0, 1.1])  # before the first look
    assert not decided(specs, "x", early, {}, SIZES, cfg)
    assert decided(specs, "x", SimpleNamespace(values=[1.0, 1.1, 0.9, 1.05, 1.0]), {}, SIZES, cfg)
    assert not decided(specs, "x", SimpleNamespace(values=[0.1, -0.1, 0.2]), {}, SIZES, cfg)
    # A row no budget decides, or one this run cannot measure, does not hold the loop: it stops at the units
    # its figure needs (the first look).
    hopeless = [_spec("k", plan=Plan(30.0, 0, "assumed"))]
    assert not decided(hopeless, "x", SimpleNamespace(values=[1.0, 1.1]), {}, SIZES, cfg)
    assert decided(hopeless, "x", SimpleNamespace(values=[1.0, 1.1, 0.9]), {}, SIZES, cfg)
    gpu = [_spec("g", read=lambda m: Reading(list(m.values), "", needs_gpu="a CUDA kernel"))]
    assert decided(gpu, "x", SimpleNamespace(values=[1.0, 1.1, 0.9]), {}, SIZES, cfg)
    assert not decided([], "x", SimpleNamespace(values=[1.0] * 5), {}, SIZES, cfg)  # nothing reads it


def test_a_spec_is_checked_when_declared():
    with pytest.raises(ValueError, match="needs a Plan"):
        _spec("k", plan=None)
    with pytest.raises(ValueError, match="bespoke verdict needs its reason"):
        _spec("k", verdict=lambda s, level: None)
    with pytest.raises(ValueError, match="project's own claim"):
        _spec("k", source="§1")


# -- the row -----------------------------------------------------------------------------------------------


def test_claim_rejects_unknown_verdict_and_empty_rule():
    common = dict(claim="c", field_note="1", measured="2", rule="r", n="3 seeds", why="w")
    with pytest.raises(ValueError, match="verdict must be one of"):
        Claim(verdict="maybe", **common)
    with pytest.raises(ValueError, match="'rule' must not be empty"):
        Claim(verdict=HOLDS, **{**common, "rule": " "})


def test_claims_roundtrip_through_record_and_read_older_rows():
    from nbkit.record import record

    (row,) = judge([_spec("k")], _results([1.0, 1.2, 0.9, 1.1]), SIZES)
    stored = record("claims", [row])
    assert as_claims(stored) == [row]
    frame = claims_frame(stored)
    assert frame.loc[0, "verdict"] == HOLDS
    old = {k: "x" for k in ("claim", "field_note", "measured", "rule", "n", "why")}
    (back,) = as_claims([{**old, "verdict": HOLDS, "decided_at_defaults": "False", "p_holds_if_true": 0.9}])
    assert back.decided is False and back.exact is False
    with pytest.raises(ValueError, match="claims row 0: missing field"):
        as_claims([{"claim": "x"}])


def test_a_runs_notebooks_are_judged_as_one_family():
    """alpha_needed is the smallest α at which a row decides; a run of several notebooks re-judges their
    decisive rows by Holm over all of them, so a row decisive only in its own notebook's family reads
    inconclusive in the run, saying so."""
    (row,) = judge([_spec("k")], _results([1.0, 1.2, 0.9, 1.1, 1.0, 0.95]), SIZES)
    assert row.verdict == HOLDS and 0 < row.alpha_needed < 0.05
    spec = _spec("k")
    from nbkit.claims.judge import decide_at, size

    reading = Reading([1.0, 1.2, 0.9, 1.1, 1.0, 0.95], "")
    sized = size(spec, reading, _results(reading.sample), SIZES, 0.95)
    assert decide_at(spec, reading, sized, 1 - row.alpha_needed).verdict.verdict == HOLDS
    assert decide_at(spec, reading, sized, 1 - row.alpha_needed / 1.2).verdict.verdict == INCONCLUSIVE
    strong = dataclasses.replace(row, key="strong", alpha_needed=1e-6)
    weak = dataclasses.replace(row, key="weak", alpha_needed=0.03)
    weaker = dataclasses.replace(row, key="weaker", alpha_needed=0.04)
    exact = dataclasses.replace(row, key="exact", alpha_needed=None)
    out = {r["key"]: r for r in run_family([x.to_dict() for x in (strong, weak, weaker, exact)])}
    assert out["strong"]["verdict"] == HOLDS and out["exact"]["verdict"] == HOLDS  # 1e-6 ≤ 0.05 / 3
    assert out["weak"]["verdict"] == INCONCLUSIVE and "family of 3 decisive rows" in out["weak"]["why"]
    assert out["weaker"]["verdict"] == INCONCLUSIVE  # 0.04 > 0.05 / 2 after 0.03 failed
    assert run_family([weak.to_dict()])[0]["verdict"] == HOLDS  # alone, 0.03 ≤ 0.05
