"""A claim's rule as data, and the one place it is decided.

A :class:`Rule` is the kind of claim (:data:`AT_LEAST`, :data:`AT_MOST`, :data:`WITHIN` a tolerance, a
:data:`FLAG`), its numbers (threshold; claimed value and tolerance), the estimator whose interval it
judges, the unit of replication and the value at which the claim is false. :meth:`Rule.decide` is
two-sided by construction — holds, refuted or inconclusive from the same inputs:

* at least ``threshold``: holds when the whole interval lies at or above it, refuted when the whole
  interval lies below it, else inconclusive;
* at most: the mirror image;
* within ``claimed ± tolerance``: holds when the whole interval lies inside the band, refuted when it
  misses the band entirely, else inconclusive;
* a flag: holds when the observation is true, refuted when false, inconclusive when not observed.

The ledger's words for the rule (:attr:`Rule.text`, :attr:`Rule.bar`) and its operating
characteristics' two points (:attr:`Rule.claimed`, :meth:`Rule.false_values`) are rendered from the
same data, so changing a threshold changes the verdict, the rule's words and the design together.
The false value is the rule's own: no effect (``null``) where the claim is an effect, twice the
tolerance away on either side where the claim is a value within a tolerance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from nbkit.claims.estimators import EXACT, FLAG, Estimator, T
from nbkit.claims.intervals import fmt_level
from nbkit.claims.ledger import HOLDS, INCONCLUSIVE, REFUTED, Verdict

AT_LEAST, AT_MOST, WITHIN, FLAG_KIND = "at least", "at most", "within", "flag"
RULE_KINDS = (AT_LEAST, AT_MOST, WITHIN, FLAG_KIND)
# Codes a batch of decisions uses (numpy int arrays): the verdict of each simulated run.
HOLD, REFUTE, OPEN = 1, -1, 0


def plural(unit: str, n: int = 2) -> str:
    """``unit`` in the plural when ``n`` is not 1 (seed → seeds, launch → launches)."""
    if n == 1 or not unit:
        return unit
    head, _, last = unit.rpartition(" ")
    word = last + ("es" if last.endswith(("s", "sh", "ch", "x")) else "s")
    return f"{head} {word}" if head else word


def num(x: float | None, digits: int = 3) -> str:
    """A number as the ledger shows it: ``digits`` significant digits, no trailing noise."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.{digits}g}"


def halfway(claimed: float, null: float, *, log: bool = False) -> float:
    """The bar halfway between a claimed effect and no effect (on the log scale for a ratio): the point a
    run of the claimed effect and a run of none are equally far from."""
    return math.sqrt(claimed * null) if log else (claimed + null) / 2


@dataclass(frozen=True)
class Rule:
    """A claim's two-sided rule (see the module docstring). ``what`` names the quantity judged, in words
    ("per-seed AUC gain, rung 3 − rung 2"); ``unit`` the unit of replication ("" for an exact figure);
    ``holds``/``refuted`` a flag's two observations in words; ``digits`` the significant digits shown."""

    kind: str
    what: str
    estimator: Estimator = T
    threshold: float | None = None
    claimed: float | None = None
    null: float | None = None
    tolerance: float | None = None
    relative: bool = False
    unit: str = ""
    holds: str = ""
    refuted: str = ""
    digits: int = 3

    def __post_init__(self) -> None:
        if self.kind not in RULE_KINDS:
            raise ValueError(f"rule {self.what!r}: kind must be one of {RULE_KINDS}, got {self.kind!r}")
        if self.kind in (AT_LEAST, AT_MOST) and self.threshold is None:
            raise ValueError(f"rule {self.what!r}: {self.kind} needs a threshold")
        if self.kind == WITHIN and (self.claimed is None or self.tolerance is None):
            raise ValueError(f"rule {self.what!r}: within needs the claimed value and a tolerance")
        if self.kind == FLAG_KIND and not (self.holds and self.refuted):
            raise ValueError(f"rule {self.what!r}: a flag needs the words for holds and for refuted")
        if self.estimator.replicated and not self.unit:
            raise ValueError(f"rule {self.what!r}: a replicated estimator needs its unit of replication")
        # The design's two points must lie on the two sides of the rule, or its simulation is vacuous.
        if self.claimed is not None and self.kind in (AT_LEAST, AT_MOST):
            if self._side(self.claimed) != HOLD:
                raise ValueError(f"rule {self.what!r}: the claimed value {self.claimed} does not satisfy it")
        for false in self.false_values():
            if self._side(false) == HOLD:
                raise ValueError(f"rule {self.what!r}: its false value {false} satisfies it")

    # -- the band and the two points of the design --------------------------------------------------

    @property
    def band(self) -> tuple[float, float]:
        """The interval a value must lie in for the claim (``(threshold, inf)`` for at least)."""
        if self.kind == AT_LEAST:
            return (float(self.threshold), math.inf)  # type: ignore[arg-type]
        if self.kind == AT_MOST:
            return (-math.inf, float(self.threshold))  # type: ignore[arg-type]
        if self.kind == WITHIN:
            width = self._width(1.0)
            return (self.claimed - width, self.claimed + width)  # type: ignore[operator]
        return (math.nan, math.nan)

    def _width(self, times: float) -> float:
        tol = float(self.tolerance or 0.0) * times
        return tol * abs(float(self.claimed or 0.0)) if self.relative else tol

    def false_values(self) -> tuple[float, ...]:
        """The values at which the claim is false, for its operating characteristics: no effect
        (``null``) for an effect; twice the tolerance away on either side for a value within one."""
        if self.kind in (AT_LEAST, AT_MOST):
            return () if self.null is None else (float(self.null),)
        if self.kind == WITHIN:
            width = self._width(2.0)
            return (self.claimed - width, self.claimed + width)  # type: ignore[operator]
        return ()

    def _side(self, x: float) -> int:
        lo, hi = self.band
        return HOLD if lo <= x <= hi else REFUTE

    # -- words ------------------------------------------------------------------------------------

    def fmt(self, x: float | None) -> str:
        return num(x, self.digits)

    @property
    def bar(self) -> str:
        """The rule's bar in a few characters: "≥ 0.13", "≤ 0.98", "0.07 ± 0.05", "flag"."""
        if self.kind == AT_LEAST:
            return f"≥ {self.fmt(self.threshold)}"
        if self.kind == AT_MOST:
            return f"≤ {self.fmt(self.threshold)}"
        if self.kind == WITHIN:
            tol = f"{self.tolerance:.0%}" if self.relative else self.fmt(self.tolerance)
            return f"{self.fmt(self.claimed)} ± {tol}"
        return "flag"

    def how(self, units: int | None = None) -> str:
        """How the quantity is estimated, in words: "a Student-t interval across seeds"; "exact"."""
        if self.estimator.exact:
            return "exact"
        unit = plural(self.unit) if units is None else f"{units} {plural(self.unit, units)}"
        return f"{self.estimator.words} {unit}".strip()

    @property
    def text(self) -> str:
        """The rule in words, as the ledger and ``docs/claims.md`` show it."""
        if self.kind == FLAG_KIND:
            return f"holds if {self.holds}; refuted if {self.refuted}; inconclusive if not observed"
        exact = self.estimator.exact
        subject = f"{self.what}" if exact else f"{self.how()} of {self.what}"
        if self.kind == WITHIN:
            lo, hi = self.band
            return (
                f"holds if {subject} lies inside {self.bar} ([{self.fmt(lo)}, {self.fmt(hi)}]); refuted if "
                f"{'it' if exact else 'the interval'} misses that band; else inconclusive"
            )
        word = "at or above" if self.kind == AT_LEAST else "at or below"
        other = "below" if self.kind == AT_LEAST else "above"
        t = self.fmt(self.threshold)
        if exact:
            return f"holds if {subject} is {word} {t}; refuted if it is {other} {t}"
        return f"holds if {subject} lies {word} {t}; refuted if it lies wholly {other}; else inconclusive"

    # -- deciding -----------------------------------------------------------------------------------

    def decide(self, sample: Any, level: float = 0.95) -> Verdict:
        """The verdict on ``sample`` (the estimator's kind of sample) at ``level``."""
        if self.kind == FLAG_KIND or self.estimator is FLAG:
            return self.decide_flag(sample)
        lo, hi = self.estimator.interval(sample, level)
        units = None if self.estimator.exact else self.estimator.units(sample)
        return self.decide_interval(lo, hi, level=level, units=units)

    def decide_flag(self, observed: bool | None) -> Verdict:
        if observed is None:
            return Verdict(INCONCLUSIVE, f"{self.what}: not observed in this run")
        return Verdict(HOLDS, self.holds) if observed else Verdict(REFUTED, self.refuted)

    def decide_interval(
        self, lo: float, hi: float, *, level: float | None = None, units: int | None = None
    ) -> Verdict:
        """The verdict on an interval ``(lo, hi)`` (``lo == hi`` for an exact figure)."""
        if math.isnan(lo) or math.isnan(hi):
            why = "not measured" if units in (None, 0) else self._no_interval(units)
            return Verdict(INCONCLUSIVE, f"{self.what}: {why}")
        if lo > hi:
            lo, hi = hi, lo
        shown = self.fmt(lo) if lo == hi else f"[{self.fmt(lo)}, {self.fmt(hi)}]"
        where = (
            ""
            if lo == hi
            else f" ({fmt_level(level or 0.95)} interval over {units} {plural(self.unit, units or 0)})"
        )
        got = f"{self.what} {shown}{where}"
        band_lo, band_hi = self.band
        if self.kind == WITHIN:
            if band_lo <= lo and hi <= band_hi:
                return Verdict(HOLDS, f"{got} within {self.bar}")
            if hi < band_lo or lo > band_hi:
                return Verdict(REFUTED, f"{got} outside {self.bar}")
            return Verdict(INCONCLUSIVE, f"{got} overlaps the edge of {self.bar}")
        t = self.fmt(self.threshold)
        if self.kind == AT_LEAST:
            if lo >= band_lo:
                return Verdict(HOLDS, f"{got} ≥ {t}")
            if hi < band_lo:
                return Verdict(REFUTED, f"{got} < {t}")
        else:
            if hi <= band_hi:
                return Verdict(HOLDS, f"{got} ≤ {t}")
            if lo > band_hi:
                return Verdict(REFUTED, f"{got} > {t}")
        return Verdict(INCONCLUSIVE, f"{got} straddles {t}")

    def _no_interval(self, units: int) -> str:
        if units < 2:
            return f"{units} {plural(self.unit, units)}: no interval (it needs at least 2)"
        return f"no interval over {units} {plural(self.unit)} (tied units, or a value that is not finite)"

    def batch_decide(self, lo: Any, hi: Any) -> Any:
        """The verdict codes (:data:`HOLD`, :data:`REFUTE`, :data:`OPEN`) of many intervals at once."""
        import numpy as np

        band_lo, band_hi = self.band
        ok = np.isfinite(lo) & np.isfinite(hi)
        if self.kind == WITHIN:
            holds = (band_lo <= lo) & (hi <= band_hi)
            refuted = (hi < band_lo) | (lo > band_hi)
        elif self.kind == AT_LEAST:
            holds, refuted = lo >= band_lo, hi < band_lo
        else:
            holds, refuted = hi <= band_hi, lo > band_hi
        return np.where(ok & holds, HOLD, np.where(ok & refuted, REFUTE, OPEN))


# -- the four kinds, as a row writes them --------------------------------------------------------


def at_least(
    threshold: float,
    what: str,
    *,
    estimator: Estimator = T,
    unit: str = "",
    claimed: float | None = None,
    null: float | None = None,
    digits: int = 3,
) -> Rule:
    """Claim: ``what`` ≥ ``threshold``; ``claimed`` the claimed effect and ``null`` no effect (the
    design's two points)."""
    return Rule(AT_LEAST, what, estimator, threshold, claimed, null, unit=unit, digits=digits)


def at_most(
    threshold: float,
    what: str,
    *,
    estimator: Estimator = T,
    unit: str = "",
    claimed: float | None = None,
    null: float | None = None,
    digits: int = 3,
) -> Rule:
    """Claim: ``what`` ≤ ``threshold`` (the mirror of :func:`at_least`)."""
    return Rule(AT_MOST, what, estimator, threshold, claimed, null, unit=unit, digits=digits)


def within(
    claimed: float,
    tolerance: float,
    what: str,
    *,
    relative: bool = False,
    estimator: Estimator = T,
    unit: str = "",
    digits: int = 3,
) -> Rule:
    """Claim: ``what`` equals ``claimed`` within ``tolerance`` (a share of it when ``relative``)."""
    return Rule(WITHIN, what, estimator, None, claimed, None, tolerance, relative, unit, digits=digits)


def flag(what: str, holds: str, refuted: str) -> Rule:
    """Claim: an observation; ``holds``/``refuted`` say in words what makes it hold or refute it."""
    return Rule(FLAG_KIND, what, FLAG, holds=holds, refuted=refuted)


def exact_at_least(threshold: float, what: str, **kw: Any) -> Rule:
    """:func:`at_least` on an exactly measured figure (a count, a formula)."""
    return at_least(threshold, what, estimator=EXACT, **kw)


def exact_at_most(threshold: float, what: str, **kw: Any) -> Rule:
    """:func:`at_most` on an exactly measured figure."""
    return at_most(threshold, what, estimator=EXACT, **kw)


def exact_within(claimed: float, tolerance: float, what: str, **kw: Any) -> Rule:
    """:func:`within` on an exactly measured figure (the tolerance is then the figure's own rounding or the
    notes' stated precision, not a sampling allowance)."""
    return within(claimed, tolerance, what, estimator=EXACT, **kw)
