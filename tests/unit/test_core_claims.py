"""The core verdict deciders reach every outcome; Claim rows validate; intervals behave."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nbkit.claims import (
    HOLDS,
    INCONCLUSIVE,
    NEEDS_GPU,
    REFUTED,
    Claim,
    Verdict,
    as_claims,
    bootstrap_interval,
    claims_frame,
    clustered_rate_interval,
    crossed_mean_interval,
    decide_at_least,
    decide_at_most,
    decide_close,
    mean_interval,
    needs_gpu,
    paired_rate_difference_interval,
    rate_interval,
)


@pytest.mark.parametrize(
    "value, expected",
    [
        ((0.3, 0.5), HOLDS),
        (0.2, HOLDS),
        ((0.05, 0.15), REFUTED),
        ((0.1, 0.3), INCONCLUSIVE),
        ((math.nan, 1.0), INCONCLUSIVE),
    ],
)
def test_decide_at_least(value, expected):
    assert decide_at_least(value, 0.2).verdict == expected


@pytest.mark.parametrize(
    "value, expected", [((0.0, 0.1), HOLDS), ((0.3, 0.4), REFUTED), ((0.1, 0.3), INCONCLUSIVE)]
)
def test_decide_at_most(value, expected):
    assert decide_at_most(value, 0.2).verdict == expected


@pytest.mark.parametrize(
    "value, expected",
    [((0.95, 1.05), HOLDS), (1.3, REFUTED), ((0.5, 0.7), REFUTED), ((1.05, 1.2), INCONCLUSIVE)],
)
def test_decide_close_relative(value, expected):
    assert decide_close(value, 1.0, 0.1, relative=True).verdict == expected


def test_straddle_names_what_would_decide():
    v = decide_at_least((0.1, 0.3), 0.2, what="gain", n_hint="about 12 seeds would decide it")
    assert v.verdict == INCONCLUSIVE and "n too small" in v.why and "12 seeds" in v.why


def test_needs_gpu_is_explicit():
    v = needs_gpu("flash-attention throughput")
    assert isinstance(v, Verdict) and v.verdict == NEEDS_GPU
    assert (
        v.why.startswith("flash-attention throughput is measured only on a CUDA device")
        and "this run had none" in v.why
    )


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
    """The case the paired bootstrap gets wrong: equal outcomes on every item give a zero-width bootstrap
    interval, Newcombe's interval stays wide at the n the notebooks have."""
    for cells in ((n, 0, 0, 0), (0, 0, 0, n), (n // 2, 0, 0, n - n // 2)):
        a, b = _paired(*cells)
        assert all(map(math.isnan, bootstrap_interval((a, b), paired=True)))  # never a zero width
        lo, hi = paired_rate_difference_interval(a, b)
        assert lo < -0.05 and hi > 0.05 and lo == pytest.approx(-hi)  # cannot exclude a 0.05 gain either way


def test_paired_rate_difference_edges():
    lo, hi = paired_rate_difference_interval(*_paired(0, 15, 0, 0))  # a wins everywhere
    assert 0.7 < lo < hi <= 1.0
    assert all(math.isnan(x) for x in paired_rate_difference_interval([], []))
    with pytest.raises(ValueError, match="0/1 outcomes"):
        paired_rate_difference_interval([0.5, 1.0], [0.0, 1.0])
    with pytest.raises(ValueError, match="equal lengths"):
        paired_rate_difference_interval([1.0], [1.0, 0.0])


def test_claim_rejects_unknown_verdict_and_empty_rule():
    common = dict(claim="c", field_note="1", measured="2", rule="r", n="3 seeds", why="w")
    with pytest.raises(ValueError, match="verdict must be one of"):
        Claim(verdict="maybe", **common)
    with pytest.raises(ValueError, match="'rule' must not be empty"):
        Claim(verdict=HOLDS, **{**common, "rule": " "})


def test_claims_roundtrip_through_record():
    from nbkit.record import record

    row = Claim.from_verdict(
        decide_at_least(0.5, 0.2), claim="c", field_note="0.2", measured="0.5", rule="≥ 0.2", n="1 run"
    )
    stored = record("claims", [row])
    back = as_claims(stored)
    assert back == [row]
    frame = claims_frame(stored)
    assert (
        list(frame.columns)[:4] == ["claim", "field_note", "measured", "verdict"]
        and frame.loc[0, "verdict"] == HOLDS
    )
    with pytest.raises(ValueError, match="claims row 0: missing field"):
        as_claims([{"claim": "x"}])


def test_intervals():
    lo, hi = mean_interval([1.0, 2.0, 3.0])
    assert lo < 2.0 < hi
    assert all(math.isnan(x) for x in mean_interval([1.0]))
    assert all(math.isnan(x) for x in mean_interval([2.0, 2.0, 2.0]))  # tied units: no interval
    lo, hi = mean_interval([2.0, 2.0, 2.0], resolution=0.1)  # ... unless the resolution is known
    assert lo < 2.0 < hi
    lo, hi = bootstrap_interval([0, 1] * 50)
    assert 0.35 < lo < 0.5 < hi < 0.65
    lo, hi = bootstrap_interval(([1.0] * 30 + [0.0] * 30, [0.0] * 60), paired=True)
    assert 0.3 < lo < 0.5 < hi < 0.7
    lo, hi = rate_interval(7, 100)
    assert lo < 0.07 < hi
    assert all(math.isnan(x) for x in rate_interval(0, 0))


def test_no_public_interval_function_gives_a_zero_width_interval_from_a_tied_sample():
    """Every public ``*interval*`` function of nbkit.claims on three tied zeros: NaNs or a positive width."""
    import inspect

    from nbkit import claims

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
        for n, f in vars(claims).items()
        if "interval" in n and not n.startswith(("_", "fmt")) and inspect.isfunction(f)
    }
    assert public == set(calls), "a new interval function needs a tied-sample case here"
    for name, call in calls.items():
        lo, hi = call(getattr(claims, name))
        assert (math.isnan(lo) and math.isnan(hi)) or hi > lo, name


def _spec(key, effect=1.0):
    from nbkit.claims import ClaimSpec, Design, Reading, Rule, normal_units

    def read(m) -> Reading:
        return Reading(args=(list(m),), measured="", n=f"{len(m)} seeds")

    def verdict(values, level=0.95):
        """t-interval of the values ≥ 0 holds, < 0 refutes."""
        return decide_at_least(mean_interval(values, level), 0.0, what="mean")

    design = Design(effect, -effect, "seed", 0.1, "assumed", normal_units(0.1), 3, lambda c: 3)
    return ClaimSpec(
        key,
        "c",
        "f",
        "§",
        "measured",
        ("x",),
        read,
        verdict,
        Rule("r", "t", "at least", 0.0, unit="seed"),
        design,
    )


def test_holm_settles_the_clear_rows_first_then_relaxes_the_level():
    """Holm's step-down over interval verdicts: B decides at 95 % but not at 97.5 %; it is settled only
    because A decided first at 97.5 % and the family then shrank to one."""
    from nbkit.claims import Reading, holm_levels

    a, b = _spec("a"), _spec("b")
    clear = Reading(args=([1.0, 1.1, 0.9],), measured="", n="3")
    borderline = Reading(args=([0.2, 0.35, 0.1, 0.3, 0.0],), measured="", n="5")
    assert b.decide(borderline, 0.95).verdict == HOLDS and b.decide(borderline, 0.975).verdict == INCONCLUSIVE
    out = holm_levels([a, b], {"a": clear, "b": borderline})
    assert out["a"].verdict == HOLDS and "97.50% interval" in out["a"].why
    assert out["b"].verdict == HOLDS and "95.00% interval" in out["b"].why
    c = _spec("c")
    out = holm_levels([b, c], {"b": borderline, "c": borderline})
    assert {v.verdict for v in out.values()} == {INCONCLUSIVE}
    assert all("Holm over 2 rows" in v.why for v in out.values())


def test_holm_keeps_a_needs_gpu_row_out_of_the_family():
    """A row whose verdict function says "needs GPU" (no CUDA in this run) keeps that verdict, and the
    family Holm corrects for is the rows that were tested: here one, at 95 %."""
    import dataclasses

    from nbkit.claims import NEEDS_GPU, Reading, holm_levels, needs_gpu

    def gpu_only(values, level=0.95):
        """Needs a GPU on this machine."""
        return needs_gpu("a CUDA kernel")

    b = _spec("b")
    gpu = dataclasses.replace(_spec("gpu"), verdict=gpu_only)
    borderline = Reading(args=([0.2, 0.35, 0.1, 0.3, 0.0],), measured="", n="5")
    out = holm_levels([gpu, b], {"gpu": borderline, "b": borderline})
    assert out["gpu"].verdict == NEEDS_GPU
    assert out["b"].verdict == HOLDS and "95.00% interval" in out["b"].why


def test_clustered_rate_interval_counts_a_cluster_for_less_than_its_outcomes():
    """Two phrasings of a case that always agree carry one case's information: the interval is the
    Wilson interval of the cases (deff 2); outcomes that vary within cases as much as between them keep
    the pooled n (deff 1); all-equal outcomes give the pooled Wilson interval (ρ cannot be estimated)."""
    agree = clustered_rate_interval([2] * 10 + [0] * 5, [2] * 15)
    assert agree == pytest.approx(rate_interval(10, 15), abs=1e-9)
    independent = clustered_rate_interval([1] * 20 + [2] * 5 + [0] * 5, [2] * 30)
    assert independent == pytest.approx(rate_interval(30, 60), abs=1e-9)
    assert clustered_rate_interval([0] * 15, [2] * 15) == pytest.approx(rate_interval(0, 30), abs=1e-9)
    assert all(math.isnan(x) for x in clustered_rate_interval([1], [2]))  # one cluster: no interval
    with pytest.raises(ValueError):
        clustered_rate_interval([3], [2])


def test_crossed_mean_interval_is_limited_by_rows_and_by_columns():
    """One row is the t-interval over columns; a shared row effect (a compile that helps every case)
    widens the interval beyond what the cells alone would say; no spread gives no interval."""
    rng = np.random.default_rng(0)
    row = rng.normal(0.3, 0.4, 15)
    assert crossed_mean_interval([list(row)]) == pytest.approx(mean_interval(list(row)), abs=1e-9)
    cases = rng.normal(0.0, 0.1, 15)
    table = [list(0.3 + shift + cases + rng.normal(0, 0.05, 15)) for shift in (-0.3, 0.0, 0.3)]
    lo, hi = crossed_mean_interval(table)
    cells = mean_interval([v for r in table for v in r])
    assert hi - lo > 3 * (cells[1] - cells[0])  # the 3 compiles, not the 45 cells, limit it
    assert all(math.isnan(x) for x in crossed_mean_interval([[0.5, 0.5], [0.5, 0.5]]))
    with pytest.raises(ValueError):
        crossed_mean_interval([[0.1, 0.2], [0.3]])
