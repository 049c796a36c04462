"""The one shape of a verdict: a field-note claim, what this run measured, and a two-sided rule.

Every notebook ends in a claims table built from :class:`Claim` rows and recorded as ``claims``
(``nbkit.record("claims", rows)``); the run's index page reads that one shape back.

A verdict is only worth reading when its rule could have said the opposite. The deciders below are
two-sided by construction — each returns ``holds``, ``refuted`` or ``inconclusive`` from the same
inputs — and take the *interval* of a noisy figure, not its point value:

* :func:`decide_at_least` — the claim is "the effect is at least ``threshold``": holds when the whole
  interval lies at or above it, refuted when the whole interval lies below it, else inconclusive.
* :func:`decide_at_most` — the mirror image ("at most ``threshold``").
* :func:`decide_close` — the claim is "the value is ``claimed`` within ``tol``": holds when the whole
  interval lies inside the band, refuted when the interval misses the band entirely, else
  inconclusive.

An exactly measured figure (a byte count, a flag) is a degenerate interval ``(x, x)``. Intervals come
from :func:`mean_interval` (seeds: Student t), :func:`bootstrap_interval` (per-item scores),
:func:`rate_interval` (k of n: Wilson) and :func:`paired_rate_difference_interval` (two 0/1 outcomes on
the same items: Newcombe's hybrid score interval), all via scipy. Each theme's ``claims.py`` holds small named
``verdict_*`` functions built on these, its rule stated in the docstring; each returns a
:class:`Verdict` and is unit-tested through every outcome.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

HOLDS, REFUTED, INCONCLUSIVE, NEEDS_GPU = "holds", "refuted", "inconclusive", "needs GPU"
VERDICTS = (HOLDS, REFUTED, INCONCLUSIVE, NEEDS_GPU)
COLUMNS = ("claim", "field_note", "measured", "verdict", "rule", "n", "interval", "why")


class Verdict(NamedTuple):
    """What a verdict function returns: the verdict and the one-line reason for it."""

    verdict: str
    why: str


@dataclass(frozen=True)
class Claim:
    """One row of a notebook's claims table.

    ``claim`` the field-note claim in words; ``field_note`` the value the field notes state;
    ``measured`` the value this run measured (formatted for a reader); ``verdict`` one of
    :data:`VERDICTS`; ``rule`` the two-sided rule in words with its tolerance; ``n`` what the
    measurement rests on (seeds, questions, steps); ``interval`` the interval of a noisy figure
    ("" when the figure is exact); ``why`` the reason this verdict came out; ``key`` a stable slug;
    ``source`` where in the field notes (e.g. "§2.1").
    """

    claim: str
    field_note: str
    measured: str
    verdict: str
    rule: str
    n: str
    why: str
    interval: str = ""
    key: str = ""
    source: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(
                f"claim {self.key or self.claim!r}: verdict must be one of {VERDICTS}, got {self.verdict!r}"
            )
        for name in ("claim", "rule", "n", "why"):
            if not str(getattr(self, name)).strip():
                raise ValueError(f"claim {self.key or self.claim!r}: {name!r} must not be empty")

    @classmethod
    def from_verdict(cls, verdict: Verdict, **fields: Any) -> Claim:
        """A row from a verdict function's result plus the descriptive fields."""
        return cls(verdict=verdict.verdict, why=verdict.why, **fields)

    def to_dict(self) -> dict[str, str]:
        return {k: str(v) for k, v in dataclasses.asdict(self).items()}


def as_claims(rows: Iterable[Claim | dict[str, Any]]) -> list[Claim]:
    """Claims from ``Claim`` objects or their dicts (as ``record`` stores them); a bad row is named."""
    out = []
    known = {f.name for f in dataclasses.fields(Claim)}
    for i, row in enumerate(rows):
        if isinstance(row, Claim):
            out.append(row)
            continue
        if not isinstance(row, dict):
            raise TypeError(f"claims row {i}: expected a Claim or a dict, got {type(row).__name__}")
        missing = {"claim", "field_note", "measured", "verdict", "rule", "n", "why"} - set(row)
        if missing:
            raise ValueError(f"claims row {i}: missing field(s) {sorted(missing)}")
        out.append(Claim(**{k: str(v) for k, v in row.items() if k in known}))
    return out


def claims_frame(rows: Iterable[Claim | dict[str, Any]]):
    """A pandas DataFrame of claims, columns in :data:`COLUMNS` order (what notebooks display)."""
    import pandas as pd

    claims = as_claims(rows)
    return pd.DataFrame([{c: getattr(x, c) for c in COLUMNS} for x in claims], columns=list(COLUMNS))


# -- two-sided deciders -------------------------------------------------------------------------


def _interval(value: float | tuple[float, float]) -> tuple[float, float]:
    if isinstance(value, (tuple, list)):
        lo, hi = float(value[0]), float(value[1])
    else:
        lo = hi = float(value)
    if lo > hi:
        lo, hi = hi, lo
    return lo, hi


def fmt_interval(interval: tuple[float, float], digits: int = 3, level: float | None = 0.95) -> str:
    lo, hi = interval
    if any(map(math.isnan, (lo, hi))):
        return "n/a"
    text = f"[{lo:.{digits}g}, {hi:.{digits}g}]"
    return f"{text} ({level:.0%})" if level else text


def decide_at_least(
    value: float | tuple[float, float], threshold: float, *, what: str = "effect", n_hint: str = ""
) -> Verdict:
    """Claim: ``what`` ≥ ``threshold``. Holds if the interval's low end ≥ threshold, refuted if its
    high end < threshold, inconclusive when it straddles (``n_hint`` says what would decide it)."""
    lo, hi = _interval(value)
    if math.isnan(lo) or math.isnan(hi):
        return Verdict(INCONCLUSIVE, f"{what} was not measured in this run")
    shown = f"{lo:.4g}" if lo == hi else f"[{lo:.4g}, {hi:.4g}]"
    if lo >= threshold:
        return Verdict(HOLDS, f"{what} {shown} ≥ {threshold:.4g}")
    if hi < threshold:
        return Verdict(REFUTED, f"{what} {shown} < {threshold:.4g}")
    tail = f"; {n_hint}" if n_hint else ""
    return Verdict(INCONCLUSIVE, f"{what} {shown} straddles {threshold:.4g} — n too small{tail}")


def decide_at_most(
    value: float | tuple[float, float], threshold: float, *, what: str = "effect", n_hint: str = ""
) -> Verdict:
    """Claim: ``what`` ≤ ``threshold``; the mirror of :func:`decide_at_least`."""
    lo, hi = _interval(value)
    if math.isnan(lo) or math.isnan(hi):
        return Verdict(INCONCLUSIVE, f"{what} was not measured in this run")
    shown = f"{lo:.4g}" if lo == hi else f"[{lo:.4g}, {hi:.4g}]"
    if hi <= threshold:
        return Verdict(HOLDS, f"{what} {shown} ≤ {threshold:.4g}")
    if lo > threshold:
        return Verdict(REFUTED, f"{what} {shown} > {threshold:.4g}")
    tail = f"; {n_hint}" if n_hint else ""
    return Verdict(INCONCLUSIVE, f"{what} {shown} straddles {threshold:.4g} — n too small{tail}")


def decide_close(
    value: float | tuple[float, float],
    claimed: float,
    tol: float,
    *,
    what: str = "value",
    relative: bool = False,
    n_hint: str = "",
) -> Verdict:
    """Claim: ``what`` equals ``claimed`` within ``tol`` (a fraction of ``claimed`` when ``relative``).

    Holds when the whole interval lies inside the band, refuted when none of it does, else
    inconclusive.
    """
    lo, hi = _interval(value)
    if math.isnan(lo) or math.isnan(hi):
        return Verdict(INCONCLUSIVE, f"{what} was not measured in this run")
    width = tol * abs(claimed) if relative else tol
    band_lo, band_hi = claimed - width, claimed + width
    band = f"{claimed:.4g} ± {tol:.0%}" if relative else f"{claimed:.4g} ± {tol:.4g}"
    shown = f"{lo:.4g}" if lo == hi else f"[{lo:.4g}, {hi:.4g}]"
    if band_lo <= lo and hi <= band_hi:
        return Verdict(HOLDS, f"{what} {shown} within {band}")
    if hi < band_lo or lo > band_hi:
        return Verdict(REFUTED, f"{what} {shown} outside {band}")
    tail = f"; {n_hint}" if n_hint else ""
    return Verdict(INCONCLUSIVE, f"{what} {shown} overlaps the edge of {band} — n too small{tail}")


def needs_gpu(what: str) -> Verdict:
    """Only for a measurement that truly needs CUDA (a CUDA kernel, CUDA allocator, GPU throughput)."""
    return Verdict(NEEDS_GPU, f"{what} is measured only on a CUDA device; this run had none")


# -- intervals ------------------------------------------------------------------------------------


def mean_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Student-t interval of the mean across seeds; (nan, nan) with fewer than two finite values."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if len(xs) < 2:
        return (float("nan"), float("nan"))
    from scipy import stats

    mean = sum(xs) / len(xs)
    sem = stats.sem(xs)
    if sem == 0:
        return (mean, mean)
    lo, hi = stats.t.interval(level, len(xs) - 1, loc=mean, scale=sem)
    return (float(lo), float(hi))


def _mean(x: Any, *, axis: int = -1) -> Any:
    return x.mean(axis=axis)


def _mean_difference(x: Any, y: Any, *, axis: int = -1) -> Any:
    return (x - y).mean(axis=axis)


def bootstrap_interval(
    values: Sequence[float] | Sequence[Sequence[float]],
    statistic: Callable[..., float] | None = None,
    *,
    paired: bool = False,
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval (scipy.stats.bootstrap) of ``statistic`` (default: the mean).

    With ``paired=True`` ``values`` is ``(a, b)`` per-item scores on the same items and the default
    statistic is mean(a − b) — the interval of a paired difference.
    """
    import numpy as np
    from scipy import stats

    fn: Callable[..., Any]
    if paired:
        a, b = (np.asarray(v, dtype=float) for v in values)
        if a.shape != b.shape:
            raise ValueError(f"paired bootstrap needs equal lengths, got {a.shape[0]} and {b.shape[0]}")
        data: tuple = (a, b)
        fn = statistic or _mean_difference
    else:
        data = (np.asarray(values, dtype=float),)
        fn = statistic or _mean
    if data[0].size < 2:
        return (float("nan"), float("nan"))
    if all(np.all(d == d.flat[0]) for d in data):  # no spread: the bootstrap is degenerate
        point = float(fn(*data, axis=-1))
        return (point, point)
    res = stats.bootstrap(
        data,
        fn,
        paired=paired,
        vectorized=True,
        confidence_level=level,
        n_resamples=n_resamples,
        method="percentile",
        random_state=seed,
    )
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def rate_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson interval of a rate k/n; (nan, nan) when n is 0."""
    if n <= 0:
        return (float("nan"), float("nan"))
    from scipy import stats

    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return (float(ci.low), float(ci.high))


def paired_rate_difference_interval(
    a: Sequence[float], b: Sequence[float], level: float = 0.95
) -> tuple[float, float]:
    """Interval of mean(a) − mean(b) for two 0/1 outcomes on the same items (Newcombe 1998, method 10).

    Why not the paired bootstrap: when no item is discordant (a = b everywhere) every resample gives
    the same difference and the percentile interval has zero width — a confident verdict from 15
    equal pairs. Newcombe's hybrid score ("square-and-add") interval combines the two Wilson intervals
    of the marginal rates with their estimated correlation (continuity-corrected φ, 0 when a margin
    is empty), so it keeps its width at small n and with no discordant pairs. Written here because
    no released library provides it: statsmodels' ``confint_proportions_paired`` exists only on its
    development branch (not in 0.15.0), scipy has none. ``(nan, nan)`` for no items; a value other
    than 0/1 is an error (a score is not a proportion).
    """
    if len(a) != len(b):
        raise ValueError(f"paired outcomes need equal lengths, got {len(a)} and {len(b)}")
    pairs = [(float(x), float(y)) for x, y in zip(a, b, strict=True)]
    if any(v not in (0.0, 1.0) for pair in pairs for v in pair):
        raise ValueError("paired_rate_difference_interval needs 0/1 outcomes")
    n = len(pairs)
    if n == 0:
        return (float("nan"), float("nan"))
    both = sum(1 for x, y in pairs if x == 1 and y == 1)
    only_a = sum(1 for x, y in pairs if x == 1 and y == 0)
    only_b = sum(1 for x, y in pairs if x == 0 and y == 1)
    neither = n - both - only_a - only_b
    p1, p2 = (both + only_a) / n, (both + only_b) / n
    l1, u1 = rate_interval(both + only_a, n, level)
    l2, u2 = rate_interval(both + only_b, n, level)
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = 0.0
    if margins > 0:
        cross = both * neither - only_a * only_b
        corrected = cross - n / 2 if cross > n / 2 else (0.0 if cross >= 0 else cross)
        phi = corrected / math.sqrt(margins)
    d = p1 - p2
    lower = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    upper = d + math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    return (lower, upper)
