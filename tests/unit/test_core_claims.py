"""The core verdict deciders reach every outcome; Claim rows validate; intervals behave."""

from __future__ import annotations

import math

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
    decide_at_least,
    decide_at_most,
    decide_close,
    mean_interval,
    needs_gpu,
    rate_interval,
)


@pytest.mark.parametrize(
    "value, expected",
    [((0.3, 0.5), HOLDS), (0.2, HOLDS), ((0.05, 0.15), REFUTED), ((0.1, 0.3), INCONCLUSIVE), ((math.nan, 1.0), INCONCLUSIVE)],
)
def test_decide_at_least(value, expected):
    assert decide_at_least(value, 0.2).verdict == expected


@pytest.mark.parametrize("value, expected", [((0.0, 0.1), HOLDS), ((0.3, 0.4), REFUTED), ((0.1, 0.3), INCONCLUSIVE)])
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
    assert needs_gpu("flash-attention throughput") == Verdict(NEEDS_GPU, needs_gpu("flash-attention throughput").why)


def test_claim_rejects_unknown_verdict_and_empty_rule():
    common = dict(claim="c", field_note="1", measured="2", rule="r", n="3 seeds", why="w")
    with pytest.raises(ValueError, match="verdict must be one of"):
        Claim(verdict="maybe", **common)
    with pytest.raises(ValueError, match="'rule' must not be empty"):
        Claim(verdict=HOLDS, **{**common, "rule": " "})


def test_claims_roundtrip_through_record():
    from nbkit.record import record

    row = Claim.from_verdict(decide_at_least(0.5, 0.2), claim="c", field_note="0.2", measured="0.5", rule="≥ 0.2", n="1 run")
    stored = record("claims", [row])
    back = as_claims(stored)
    assert back == [row]
    frame = claims_frame(stored)
    assert list(frame.columns)[:4] == ["claim", "field_note", "measured", "verdict"] and frame.loc[0, "verdict"] == HOLDS
    with pytest.raises(ValueError, match="claims row 0: missing field"):
        as_claims([{"claim": "x"}])


def test_intervals():
    lo, hi = mean_interval([1.0, 2.0, 3.0])
    assert lo < 2.0 < hi
    assert all(math.isnan(x) for x in mean_interval([1.0]))
    assert mean_interval([2.0, 2.0, 2.0]) == (2.0, 2.0)
    lo, hi = bootstrap_interval([0, 1] * 50)
    assert 0.35 < lo < 0.5 < hi < 0.65
    lo, hi = bootstrap_interval(([1.0] * 30 + [0.0] * 30, [0.0] * 60), paired=True)
    assert 0.3 < lo < 0.5 < hi < 0.7
    lo, hi = rate_interval(7, 100)
    assert lo < 0.07 < hi
    assert all(math.isnan(x) for x in rate_interval(0, 0))
