"""Estimators: how a rule turns what a run read into an interval, and how its design draws a run.

A rule names one estimator, and a claim's reading gives the estimator's kind of sample:

========== ========================================== ==============================================
estimator  sample (per unit of replication, in order)  interval
========== ========================================== ==============================================
``T``      one value per unit (a per-seed gain)         Student t of their mean
``LOG_T``  one positive ratio per unit                  t on the logs, exponentiated (geometric mean)
``WILSON`` one 0/1 outcome per unit                     Wilson on k of n
``CLUSTER`` ``(successes, trials)`` per cluster        Wilson at Kish's effective n (ICC)
``PAIRED_RATE`` ``(a, b)`` 0/1 outcomes per item       Newcombe's hybrid score interval of a − b
``CROSSED`` one row of cells per unit (compile × case)  two-way random-effects t
``NORMAL`` ``(estimate, standard error[, units])``      estimate ± z·se (a bootstrap se)
``EXACT``  a number computed or counted without noise   the number itself
``FLAG``   True, False or None (not observed)           —
========== ========================================== ==============================================

The sample of a replicated estimator is ordered by unit (seed order), so a sequential rule can judge
its first ``n`` units (:meth:`Estimator.head`) at each look. ``draw`` simulates the sample of a run of
``n`` units at a true value, for a rule's operating characteristics; ``batch`` computes many intervals
at once (numpy) where that is simple, so a few thousand simulated runs cost milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nbkit.claims.intervals import (
    NAN,
    clustered_rate_interval,
    crossed_mean_interval,
    mean_interval,
    paired_rate_difference_interval,
    rate_interval,
)


@dataclass(frozen=True)
class Estimator:
    """``name`` as rules and docs show it; ``words`` the interval in a phrase ("a t interval across");
    ``interval(sample, level)``; ``units(sample)`` the units it rests on; ``head(sample, n)`` its first
    ``n`` units (None: not replicated unit by unit, judged once); ``exact``: no noise, no design;
    ``point(sample)`` the estimate the interval is built around, on the rule's scale (None: no single
    figure, as a flag)."""

    name: str
    words: str
    interval: Callable[[Any, float], tuple[float, float]]
    units: Callable[[Any], int]
    head: Callable[[Any, int], Any] | None = None
    exact: bool = False
    # (samples stacked as an array of shape (runs, n), level) -> (low, high) arrays
    batch: Callable[[Any, float], tuple[Any, Any]] | None = None
    point: Callable[[Any], float] | None = None

    @property
    def replicated(self) -> bool:
        return self.head is not None


def _t_batch(values: Any, level: float) -> tuple[Any, Any]:
    import numpy as np
    from scipy import stats

    n = values.shape[1]
    mean = values.mean(axis=1)
    if n < 2:
        return np.full_like(mean, np.nan), np.full_like(mean, np.nan)
    sd = values.std(axis=1, ddof=1)
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    half = np.where(sd > 0, half, np.nan)
    return mean - half, mean + half


def _log_t_interval(sample: Sequence[float], level: float) -> tuple[float, float]:
    xs = [float(x) for x in sample]
    if not all(math.isfinite(x) and x > 0 for x in xs):
        return NAN
    lo, hi = mean_interval([math.log(x) for x in xs], level)
    if not math.isfinite(lo):
        return NAN
    # An early look's nominal level can make the log interval wider than exp can hold: that bound is infinite.
    return (math.exp(lo) if lo < 709.0 else math.inf, math.exp(hi) if hi < 709.0 else math.inf)


def _log_t_batch(values: Any, level: float) -> tuple[Any, Any]:
    import numpy as np

    lo, hi = _t_batch(np.log(values), level)
    with np.errstate(over="ignore"):  # an infinite bound, as in _log_t_interval
        return np.exp(lo), np.exp(hi)


def _wilson_batch(values: Any, level: float) -> tuple[Any, Any]:
    import numpy as np
    from scipy import stats

    n = values.shape[1]
    p = values.mean(axis=1)
    z = float(stats.norm.ppf(0.5 + level / 2))
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return np.maximum(0.0, centre - half), np.minimum(1.0, centre + half)


def _normal_interval(sample: tuple, level: float) -> tuple[float, float]:
    from scipy import stats

    estimate, se = (float(x) for x in sample[:2])
    # A standard error of 0 (every bootstrap resample agreed) is no interval, never a zero-width one.
    if not (math.isfinite(estimate) and math.isfinite(se)) or se <= 0:
        return NAN
    z = float(stats.norm.ppf(0.5 + level / 2))
    return (estimate - z * se, estimate + z * se)


def _mean(values: Any) -> float:
    xs = [float(x) for x in values]
    return sum(xs) / len(xs) if xs else math.nan


def _geometric_mean(values: Any) -> float:
    xs = [float(x) for x in values]
    if not xs or not all(x > 0 for x in xs):
        return math.nan
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _pooled_rate(sample: Any) -> float:
    trials = sum(n for _, n in sample)
    return sum(k for k, _ in sample) / trials if trials else math.nan


def _rate_difference(sample: Any) -> float:
    pairs = list(sample)
    return _mean([a for a, _ in pairs]) - _mean([b for _, b in pairs]) if pairs else math.nan


def _grand_mean(sample: Any) -> float:
    return _mean([x for row in sample for x in row])


def _one(sample: Any) -> int:
    return 1


def _exact_interval(sample: float, level: float) -> tuple[float, float]:
    x = float(sample) if sample is not None else math.nan
    return (x, x) if math.isfinite(x) else NAN


T = Estimator(
    "t",
    "a Student-t interval across",
    lambda s, level: mean_interval(s, level),
    len,
    lambda s, n: list(s)[:n],
    batch=_t_batch,
    point=_mean,
)
LOG_T = Estimator(
    "log-t",
    "a t interval of the geometric mean across",
    _log_t_interval,
    len,
    lambda s, n: list(s)[:n],
    batch=_log_t_batch,
    point=_geometric_mean,
)
WILSON = Estimator(
    "wilson",
    "a Wilson interval over",
    lambda s, level: rate_interval(sum(s), len(s), level),
    len,
    lambda s, n: list(s)[:n],
    batch=_wilson_batch,
    point=_mean,
)
CLUSTER = Estimator(
    "clustered",
    "a Wilson interval at the clusters' effective size (Kish's design effect), over",
    lambda s, level: clustered_rate_interval([k for k, _ in s], [n for _, n in s], level),
    len,
    lambda s, n: list(s)[:n],
    point=_pooled_rate,
)
PAIRED_RATE = Estimator(
    "newcombe",
    "Newcombe's paired score interval over",
    lambda s, level: paired_rate_difference_interval([a for a, _ in s], [b for _, b in s], level),
    len,
    lambda s, n: list(s)[:n],
    point=_rate_difference,
)
CROSSED = Estimator(
    "crossed",
    "a two-way random-effects t interval (compile sets × cases) over",
    lambda s, level: crossed_mean_interval(s, level) if len(s) and len(s[0]) else NAN,
    len,
    lambda s, n: list(s)[:n],
    point=_grand_mean,
)
# (estimate, standard error[, units it rests on]): a bootstrapped figure's units are what it resampled.
NORMAL = Estimator(
    "normal",
    "a normal interval from the bootstrap standard error over",
    _normal_interval,
    lambda s: int(s[2]) if len(s) > 2 else 1,
    point=lambda s: float(s[0]),
)
EXACT = Estimator("exact", "", _exact_interval, _one, exact=True)
FLAG = Estimator("flag", "", lambda s, level: NAN, _one, exact=True)
