"""A noisy row's design, stated before it runs as a trial states its power, and simulated.

A :class:`Plan` gives the spread of one unit of replication (on the scale the rule judges), how many
units that spread was measured on and where (or that it is assumed), and — where the estimator's own
draw does not fit — how to draw one simulated run. The spread is planned at an upper confidence bound
of its measured value (:attr:`Plan.planning_spread`), so a spread measured on few units cannot make a
row look decidable that is not.

:func:`simulate` runs the row's own rule (or its bespoke verdict) on simulated runs at the rule's two
points — the claimed value and its false value (:meth:`nbkit.claims.rules.Rule.false_values`) — at the
budget and the looks the run has, sequentially as the run judges it, and counts what it says: the
operating characteristics P(holds | true), P(refuted | false), the two wrong decisive verdicts, and the
expected number of units under each value. Seeded by the row's key: the same figures every time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nbkit.cache import cache_dir
from nbkit.claims.estimators import LOG_T, WILSON, T
from nbkit.claims.ledger import HOLDS, REFUTED
from nbkit.claims.rules import HOLD, OPEN, REFUTE, Rule
from nbkit.claims.sequential import looks, nominal_levels

POWER = 0.8  # P(holds | true) and P(refuted | false) a row needs to count as decided
WRONG = 0.05  # the most P(refuted | true) and P(holds | false) a decided row may have
SIMULATIONS = 2000  # simulated runs per value: a probability near 0.8 to within ±0.02 (two standard errors)
# A measured spread is planned at this one-sided upper confidence bound (chi-square on its units).
SPREAD_CONFIDENCE = 0.8
# Part of every simulation's fingerprint: raise it when the simulation itself changes.
DESIGN_VERSION = 1


@dataclass(frozen=True)
class Plan:
    """``spread``: the sd of one unit on the rule's scale (a per-seed gain's; a log ratio's);
    ``measured_on``: how many units it was measured on (0: assumed, ``source`` says on what grounds);
    ``draw(rng, value, n, spread)``: one simulated run of ``n`` units whose true value is ``value``,
    as the row's reading gives it — needed where the estimator has no draw of its own (clustered,
    crossed and paired rates, bespoke verdicts); ``measure``: what ``spread`` is, in words, where it is
    not the sd of one unit (a clustered rate's draw takes the clusters' intraclass correlation)."""

    spread: float
    measured_on: int
    source: str
    draw: Callable[..., Any] | None = None
    measure: str = ""

    @property
    def planning_spread(self) -> float:
        """The spread the design plans with: the measured one's upper confidence bound
        (:data:`SPREAD_CONFIDENCE`, from the chi-square distribution of a sample variance on
        ``measured_on − 1`` degrees of freedom); an assumed spread as it is."""
        k = self.measured_on
        if k < 2 or self.spread <= 0:
            return float(self.spread)
        from scipy.stats import chi2

        return float(self.spread * math.sqrt((k - 1) / chi2.ppf(1 - SPREAD_CONFIDENCE, k - 1)))

    def words(self, unit: str) -> str:
        what = self.measure or f"sd of one {unit}"
        if self.measured_on >= 2:
            return (
                f"{what} {self.spread:.3g} measured on {self.measured_on} (planned at its "
                f"{SPREAD_CONFIDENCE:.0%} upper bound, {self.planning_spread:.3g}; {self.source})"
            )
        return f"{what} {self.spread:.3g}, {self.source}"


@dataclass(frozen=True)
class OC:
    """A design's operating characteristics at ``budget`` units, judged at ``looks`` at family level
    ``level``: the probabilities of each verdict at the claimed value (``true``) and at the false value
    (``false``; the worse of two for a tolerance band), and the expected units used under each."""

    budget: int
    looks: tuple[int, ...]
    level: float
    true_value: float
    false_values: tuple[float, ...]
    p_holds_if_true: float
    p_refuted_if_false: float
    p_refuted_if_true: float
    p_holds_if_false: float
    mean_units_true: float
    mean_units_false: float

    @property
    def decided(self) -> bool:
        """Both operating characteristics reach :data:`POWER` and neither wrong verdict exceeds
        :data:`WRONG`: a row the design can decide."""
        return (
            self.p_holds_if_true >= POWER
            and self.p_refuted_if_false >= POWER
            and self.p_refuted_if_true <= WRONG
            and self.p_holds_if_false <= WRONG
        )

    @property
    def sequential(self) -> bool:
        return len(self.looks) > 1


def default_draw(rule: Rule, rng: Any, value: float, n: int, spread: float, runs: int) -> Any:
    """``runs`` simulated runs of ``n`` units at ``value`` for the estimators that have their own draw
    (an array of shape (runs, n)), or None."""
    if rule.estimator is T:
        return rng.normal(value, spread, (runs, n))
    if rule.estimator is LOG_T:
        return rng.lognormal(math.log(value), spread, (runs, n))
    if rule.estimator is WILSON:
        return (rng.random((runs, n)) < min(1.0, max(0.0, value))).astype(float)
    return None


def fingerprint(*parts: Any) -> str:
    """A stable key for a design's simulation: its data and the source of the functions it runs."""

    def norm(x: Any) -> Any:
        if callable(x):
            try:
                return inspect.getsource(x)
            except (OSError, TypeError):
                return getattr(x, "__qualname__", repr(x))
        if hasattr(x, "__dataclass_fields__"):
            return {k: norm(getattr(x, k)) for k in x.__dataclass_fields__}
        if isinstance(x, (list, tuple)):
            return [norm(v) for v in x]
        return repr(x)

    return hashlib.sha256(json.dumps(norm(list(parts)), sort_keys=True).encode()).hexdigest()[:20]


def simulate(
    key: str,
    rule: Rule,
    plan: Plan,
    *,
    budget: int,
    least: int,
    level: float,
    sequential: bool,
    verdict: Callable[..., Any] | None = None,
    head: Callable[[Any, int], Any] | None = None,
    sims: int = SIMULATIONS,
) -> OC:
    """The operating characteristics of row ``key`` (see the module docstring). ``verdict(sample,
    level)`` replaces the rule's decision for a bespoke row; ``head(sample, n)`` takes a sample's first
    ``n`` units (the estimator's, by default).

    Kept under ``designs/`` in nbkit's cache (``nbkit.cache``) by a fingerprint of everything the figures
    depend on (the rule, the plan, the source of the functions it runs, the budget, looks and level): a
    design simulated once is read back, and any change to it simulates again."""
    args = (key, rule, plan, verdict, head, budget, least, level, sequential, sims, DESIGN_VERSION)
    path = cache_dir("designs", f"{fingerprint(*args)}.json")
    try:
        kept: dict[str, Any] = json.loads(path.read_text())
        return OC(**{k: tuple(v) if isinstance(v, list) else v for k, v in kept.items()})  # type: ignore[arg-type]
    except (OSError, ValueError, TypeError):
        pass
    oc = _simulate(key, rule, plan, budget, least, level, sequential, verdict, head, sims)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(oc)))
        tmp.replace(path)
    except OSError:  # a read-only cache only costs the next run the simulation
        pass
    return oc


def _simulate(
    key: str,
    rule: Rule,
    plan: Plan,
    budget: int,
    least: int,
    level: float,
    sequential: bool,
    verdict: Callable[..., Any] | None,
    head: Callable[[Any, int], Any] | None,
    sims: int,
) -> OC:
    import numpy as np

    at, levels = _schedule(least, budget, level, sequential)
    spread = plan.planning_spread
    head = head or rule.estimator.head or (lambda s, n: s)
    points = (rule.claimed, *rule.false_values())
    if points[0] is None or len(points) < 2:
        raise ValueError(f"claim {key!r}: a noisy row's rule needs its claimed value and its false value")
    seed = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    results = []
    for i, value in enumerate(points):
        rng = np.random.default_rng([seed, budget, int(round(level * 1e9)), i])
        at_value = float(value)  # type: ignore[arg-type]
        results.append(_run_at(rule, plan, at_value, spread, budget, at, levels, verdict, head, sims, rng))
    true = results[0]
    falses = results[1:]
    return OC(
        budget=budget,
        looks=at,
        level=level,
        true_value=float(points[0]),
        false_values=tuple(float(x) for x in points[1:]),  # type: ignore[arg-type]
        p_holds_if_true=true[0],
        p_refuted_if_false=min(f[1] for f in falses),
        p_refuted_if_true=true[1],
        p_holds_if_false=max(f[0] for f in falses),
        mean_units_true=true[2],
        mean_units_false=max(f[2] for f in falses),
    )


def _schedule(
    least: int, budget: int, level: float, sequential: bool
) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The looks a row is judged at and each look's nominal level: every unit from ``least`` (sequential),
    or the budget alone at the family level."""
    if not sequential:
        return (budget,), (level,)
    at = looks(least, budget)
    return at, nominal_levels(round(1 - level, 12), at, budget)


def _run_at(
    rule: Rule,
    plan: Plan,
    value: float,
    spread: float,
    budget: int,
    at: tuple[int, ...],
    levels: tuple[float, ...],
    verdict: Callable[..., Any] | None,
    head: Callable[[Any, int], Any],
    sims: int,
    rng: Any,
) -> tuple[float, float, float]:
    """P(holds), P(refuted) and the mean units used over ``sims`` simulated runs at true ``value``, each
    judged at the looks ``at`` at their nominal ``levels`` and stopped at its first decisive look."""
    import numpy as np

    batch = None
    if verdict is None and plan.draw is None and rule.estimator.batch is not None:
        batch = default_draw(rule, rng, value, budget, spread, sims)
    codes = np.zeros(sims, dtype=int)
    stop = np.full(sims, float(budget))
    if batch is not None:
        open_ = np.ones(sims, dtype=bool)
        for n, lev in zip(at, levels, strict=True):
            lo, hi = rule.estimator.batch(batch[:, :n], lev)  # type: ignore[misc]
            got = rule.batch_decide(lo, hi)
            new = open_ & (got != OPEN)
            codes[new], stop[new] = got[new], n
            open_ &= ~new
    else:
        draw = plan.draw or (lambda rng, v, n, sd: list(default_draw(rule, rng, v, n, sd, 1)[0]))
        decide = verdict or rule.decide
        for j in range(sims):
            sample = draw(rng, value, budget, spread)
            for n, lev in zip(at, levels, strict=True):
                v = decide(head(sample, n), lev).verdict
                if v in (HOLDS, REFUTED):
                    codes[j], stop[j] = (HOLD if v == HOLDS else REFUTE), n
                    break
    return float(np.mean(codes == HOLD)), float(np.mean(codes == REFUTE)), float(np.mean(stop))


def forecast(
    key: str,
    rule: Rule,
    plan: Plan,
    value: float,
    *,
    budget: int,
    least: int,
    level: float,
    sequential: bool,
    verdict: Callable[..., Any] | None = None,
    head: Callable[[Any, int], Any] | None = None,
    sims: int = SIMULATIONS,
) -> tuple[float, float, float]:
    """What a run of row ``key`` at ``budget`` is likely to say and cost where its truth is ``value``
    (a value a run measured) and its spread the measured one (not its upper bound): P(holds),
    P(refuted) and the expected units, simulated as :func:`simulate` does. A forecast of cost, never a
    design: the row's operating characteristics stay those of :func:`simulate`."""
    import numpy as np

    at, levels = _schedule(least, budget, level, sequential)
    head = head or rule.estimator.head or (lambda s, n: s)
    seed = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    rng = np.random.default_rng([seed, budget, int(round(level * 1e9)), 7])
    return _run_at(rule, plan, float(value), float(plan.spread), budget, at, levels, verdict, head, sims, rng)
