"""Intervals: the uncertainty of a noisy figure over the units that really vary.

Each takes the per-unit data and a ``level`` and returns ``(low, high)``, or ``(nan, nan)`` when the data
cannot give an interval (too few units, no spread, a value that is not finite): a rule then reads
inconclusive rather than decide on a zero-width interval. All via scipy, except where no released
library gives the interval (each says why).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

NAN = (float("nan"), float("nan"))
# A spread this small relative to the values is float rounding, not a spread: equal units stay equal.
TIE = 1e-9


def fmt_interval(interval: tuple[float, float], digits: int = 3, level: float | None = 0.95) -> str:
    """``[lo, hi] (level)``; a level that is not a whole percentage (a Holm or a sequential look's) keeps
    its first decimals, so it never reads as a plain 95 % or 99 %."""
    lo, hi = interval
    if any(map(math.isnan, (lo, hi))):
        return "n/a"
    text = f"[{lo:.{digits}g}, {hi:.{digits}g}]"
    return f"{text} ({fmt_level(level)})" if level else text


def fmt_level(level: float) -> str:
    """A confidence level as a percentage with the digits it needs: 95%, 99.2%, 99.9994% (an early
    sequential look's nominal level never reads as 100%)."""
    pct = level * 100
    if abs(pct - round(pct)) < 1e-9:
        return f"{pct:.0f}%"
    digits = 3
    while digits < 12 and float(f"{pct:.{digits}g}") >= 100:
        digits += 1
    return f"{pct:.{digits}g}%"


def mean_interval(
    values: Sequence[float], level: float = 0.95, *, resolution: float = 0.0
) -> tuple[float, float]:
    """Student-t interval of the mean across units (seeds, runs); (nan, nan) with fewer than two values
    or any value that is not finite (a unit that diverged is not dropped quietly: the caller decides
    what it means and says so).

    Never zero width: tied units (3 seeds that all scored 0) say nothing about the spread of a fourth,
    so with no spread the interval is (nan, nan) — inconclusive — unless the measurement's
    ``resolution`` is known (a rate counted in 1/16ths, a loss printed to 1e-4): then the unit sd is
    taken as at least that of a value rounded to it, ``resolution / √12``.
    """
    xs = [float(v) for v in values]
    n = len(xs)
    if n < 2 or not all(math.isfinite(x) for x in xs):
        return NAN
    mean = math.fsum(xs) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    if sd <= TIE * max(1.0, abs(mean)):  # units equal but for float rounding: no spread at all
        sd = 0.0
    sd = max(sd, resolution / math.sqrt(12))
    if sd == 0:
        return NAN
    half = t_quantile(level, n - 1) * sd / math.sqrt(n)
    return (mean - half, mean + half)


@functools.lru_cache(maxsize=4096)
def t_quantile(level: float, df: int) -> float:
    """The two-sided Student-t quantile of ``level`` at ``df`` degrees of freedom (cached: rules judge the
    same few levels again and again, and a design simulates thousands of runs)."""
    from scipy import stats

    return float(stats.t.ppf(0.5 + level / 2, df))


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
    statistic is mean(a − b) — the interval of a paired difference. (nan, nan) when every value is
    the same: resampling ties gives a zero-width interval that says nothing.
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
        return NAN
    if all(np.all(d == d.flat[0]) for d in data):  # no spread: a zero-width interval would be a lie
        return NAN
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
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if lo == hi:  # every resample agreed (e.g. paired items that never differ): no interval
        return NAN
    return (lo, hi)


def rate_interval(k: float, n: float, level: float = 0.95) -> tuple[float, float]:
    """Wilson interval of a rate k/n; (nan, nan) when n is 0 or the counts are impossible (NaN, k < 0,
    k > n): a rule then reads inconclusive instead of failing."""
    if not (math.isfinite(k) and math.isfinite(n)) or n <= 0 or not 0 <= k <= n:
        return NAN
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
        return NAN
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


def clustered_rate_interval(
    successes: Sequence[int], trials: Sequence[int], level: float = 0.95
) -> tuple[float, float]:
    """Wilson interval of the pooled rate Σk / Σn of 0/1 outcomes that come in clusters (the two phrasings
    of one case, the requests of one prompt): ``successes[i]`` of ``trials[i]`` in cluster ``i``.

    Outcomes of one cluster share its cause, so they count for less than independent ones: the Wilson
    interval is taken at the effective sample size n / deff, with Kish's design effect
    deff = 1 + (m − 1)·ρ (m = Σn_i² / Σn_i, the size-weighted cluster size; ρ the one-way ANOVA
    intraclass correlation of the clusters, clamped to [0, 1]; Donner & Klar 2000, §6). When every
    outcome is the same (all 0 or all 1) ρ cannot be estimated and deff is 1. (nan, nan) with fewer than
    two clusters. Written here because scipy's and statsmodels' Wilson intervals take whole counts, not
    the fractional effective counts a design effect gives.
    """
    raw = [(float(k), float(n)) for k, n in zip(successes, trials, strict=True)]
    if not all(math.isfinite(k) and math.isfinite(n) and 0 <= k <= n for k, n in raw):
        return NAN
    pairs = [(int(k), int(n)) for k, n in raw if n > 0]
    g, total = len(pairs), sum(n for _, n in pairs)
    if g < 2:
        return NAN
    from scipy import stats

    p = sum(k for k, _ in pairs) / total
    deff = 1.0 + (sum(n * n for _, n in pairs) / total - 1.0) * _intraclass(pairs, p, total)
    n_eff = total / deff
    z = float(stats.norm.ppf(0.5 + level / 2))
    centre = (p + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    half = z / (1 + z * z / n_eff) * math.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff * n_eff))
    return (max(0.0, round(centre - half, 12)), min(1.0, round(centre + half, 12)))


def _intraclass(pairs: Sequence[tuple[int, int]], p: float, total: int) -> float:
    """The one-way ANOVA estimate of the intraclass correlation of clustered 0/1 outcomes, in [0, 1]."""
    g = len(pairs)
    if p in (0.0, 1.0) or total == g:
        return 0.0
    msb = sum(n * (k / n - p) ** 2 for k, n in pairs) / (g - 1)
    msw = sum(k * (1 - k / n) for k, n in pairs) / (total - g)
    n0 = (total - sum(n * n for _, n in pairs) / total) / (g - 1)
    denominator = msb + (n0 - 1) * msw
    return 0.0 if denominator <= 0 else min(1.0, max(0.0, (msb - msw) / denominator))


def crossed_mean_interval(values: Sequence[Sequence[float]], level: float = 0.95) -> tuple[float, float]:
    """Student-t interval of the grand mean of a table whose rows and columns are both random samples
    (``values[i][j]``: compile ``i`` on case ``j``), so neither more compiles alone nor more cases alone
    narrows it past what the other allows.

    The two-way random-effects model y_ij = μ + a_i + b_j + e_ij gives Var(ȳ) = σ_a²/R + σ_b²/C +
    σ_e²/(RC), estimated by (MS_rows + MS_cols − MS_resid) / (RC) with Satterthwaite's degrees of freedom,
    and never below either one-way figure (MS_rows or MS_cols over RC). One row is the per-case t-interval
    over columns; one column the t-interval over rows. (nan, nan) for a table with no spread or fewer
    than two cells, and for a ragged one an error. Written here because neither scipy nor statsmodels
    gives this interval for a crossed table without fitting a mixed model, which two or three rows cannot
    support.
    """
    import numpy as np
    from scipy import stats

    y = np.asarray(values, dtype=float)
    if y.ndim != 2:
        raise ValueError("crossed_mean_interval needs a rows × columns table of equal-length rows")
    r, c = y.shape
    if r * c < 2 or not np.isfinite(y).all() or np.all(y == y.flat[0]):
        return NAN
    grand = float(y.mean())
    terms = []  # (mean square, its degrees of freedom) of rows, columns, residual
    if r > 1:
        terms.append((c * float(((y.mean(axis=1) - grand) ** 2).sum()) / (r - 1), r - 1))
    if c > 1:
        terms.append((r * float(((y.mean(axis=0) - grand) ** 2).sum()) / (c - 1), c - 1))
    if r > 1 and c > 1:
        resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + grand
        ms_e, df_e = float((resid**2).sum()) / ((r - 1) * (c - 1)), (r - 1) * (c - 1)
        combined = terms[0][0] + terms[1][0] - ms_e
        df = combined**2 / (terms[0][0] ** 2 / terms[0][1] + terms[1][0] ** 2 / terms[1][1] + ms_e**2 / df_e)
        terms.append((combined, df))
    ms, df = max(terms, key=lambda t: t[0])  # the largest estimate: never below a one-way figure
    if ms <= 0:
        return NAN
    half = float(stats.t.ppf(0.5 + level / 2, df)) * math.sqrt(ms / (r * c))
    return (grand - half, grand + half)
