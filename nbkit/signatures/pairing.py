"""Two programs compared question by question: pairing their answers, and the interval of the difference.

For 0/1 outcomes (hit@3) the interval is Newcombe's paired interval
(:func:`nbkit.claims.paired_rate_difference_interval`), which keeps its width when no question is discordant
(a paired bootstrap collapses to zero width there); a user's non-binary metric falls back to a paired
bootstrap over at least :data:`MIN_PAIRS` pairs. The claims ledger and the user-contract experiment both
compare programs this way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nbkit.claims import (
    INCONCLUSIVE,
    Verdict,
    at_least,
    bootstrap_interval,
    fmt_interval,
    paired_rate_difference_interval,
)

GAIN = 0.05  # an improvement of at least 0.05 (hit@3 or a user's score) counts
MIN_PAIRS = 10  # below 10 pairs a percentile bootstrap is overconfident (2 equal pairs: zero width)


def paired(a: Any, b: Any, what: str = "hit") -> tuple[list[float], list[float]]:
    """Per-question values of two programs on the questions both answered, in ``a``'s order. ``a`` and
    ``b`` are :class:`~nbkit.signatures.metrics.Outcomes` or dicts of equal-length lists with ``keys``."""
    a_keys, a_vals = _columns(a, what)
    b_by_key = dict(zip(*_columns(b, what), strict=True))
    pairs = [(v, b_by_key[k]) for k, v in zip(a_keys, a_vals, strict=True) if k in b_by_key]
    return [x for x, _ in pairs], [y for _, y in pairs]


def _columns(outcomes: Any, what: str) -> tuple[list, list]:
    if isinstance(outcomes, dict):
        return list(outcomes["keys"]), list(outcomes[what])
    return list(outcomes.keys), list(getattr(outcomes, what))


def binary(*values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for seq in values for v in seq)


def at_floor(*scores: Sequence[float]) -> bool:
    """Both programs score 0 on every question: nothing to compare."""
    return all(len(s) > 0 and max(s) == 0 for s in scores)


def paired_interval(a: Sequence[float], b: Sequence[float]) -> tuple[float, float] | None:
    """The interval of mean(a − b): Newcombe's paired interval for 0/1 outcomes, else the paired bootstrap
    ((nan, nan) under 2 pairs); None when there is none (no pairs, or non-binary pairs that all differ by
    the same amount, where a bootstrap has no width to give)."""
    if binary(a, b):
        return paired_rate_difference_interval(a, b) if a else None
    if len(a) < MIN_PAIRS:
        return (
            bootstrap_interval((list(a), list(b)), paired=True)
            if len(a) >= 2
            else (float("nan"), float("nan"))
        )
    if len({x - y for x, y in zip(a, b, strict=True)}) == 1:
        return None
    return bootstrap_interval((list(a), list(b)), paired=True)


def paired_gain(a: Sequence[float], b: Sequence[float], threshold: float, what: str) -> Verdict:
    """The rule "mean(a − b) at least ``threshold``" on the interval of :func:`paired_interval` over the
    paired questions; a non-binary sample needs MIN_PAIRS pairs and some spread."""
    if binary(a, b) and not a:
        return Verdict(INCONCLUSIVE, f"{what}: no paired questions")
    if not binary(a, b) and len(a) < MIN_PAIRS:
        why = f"{what}: only {len(a)} paired questions — n too small to decide (needs ≥ {MIN_PAIRS})"
        return Verdict(INCONCLUSIVE, why)
    interval = paired_interval(a, b)
    if interval is None:
        return Verdict(
            INCONCLUSIVE,
            f"{what}: all {len(a)} paired questions differ by the same amount — no spread to build an "
            "interval from",
        )
    return at_least(threshold, what, unit="question").decide_interval(*interval, level=0.95, units=len(a))


def floor_verdict() -> Verdict:
    return Verdict(
        INCONCLUSIVE, "floor effect: hit@3 is 0 on every question of both programs, nothing to compare"
    )


def program_beats(better: Sequence[float], baseline: Sequence[float], what: str) -> Verdict:
    """Program A beats program B when the paired (by question) interval of A − B lies at or above GAIN;
    refuted when it lies below GAIN; else inconclusive (also at the floor)."""
    if at_floor(better, baseline):
        return floor_verdict()
    return paired_gain(better, baseline, GAIN, what)


def shown_interval(a: Sequence[float], b: Sequence[float], *, floor: bool = False) -> str:
    """The interval shown beside a paired verdict ("" when it has none; with ``floor``, also when both
    programs score 0 on every question, where the verdict says "floor effect")."""
    if floor and at_floor(a, b):
        return ""
    interval = paired_interval(a, b)
    return "" if interval is None else fmt_interval(interval)


def compare_programs(a: Any, b: Any, what: str) -> tuple[str, str, str, int]:
    """Program ``a`` against ``b`` on the questions both answered: (verdict, why, interval, n)."""
    x, y = paired(a, b)
    verdict = program_beats(x, y, what)
    return verdict.verdict, verdict.why, shown_interval(x, y, floor=True), len(x)
