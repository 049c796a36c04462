"""Claims: declared specs, the one judge, the two-sided deciders and their intervals.

A field-note claim is a declared unit, :class:`ClaimSpec`, registered with its theme's registry beside
the experiments it reads (``REGISTRY.claim(ClaimSpec(...))`` in ``nbkit/<theme>/claims.py``): its key,
the field notes' text and figure (written once), their section, its **kind** (:data:`KINDS`), the
experiment slugs whose typed metrics it reads, a ``read`` function from those metrics to a
:class:`Reading` (the verdict function's arguments and the text of what was measured), the verdict
function itself, and its :class:`Rule` as data (interval, direction, threshold, tolerance, the unit of
replication, and the words the ledger shows). :func:`judge` turns every spec of a registry into one
:class:`Claim` row from what a context ran; a spec whose experiments did not run says "not measured".
``docs/claims.md`` is generated from the specs (``python -m nbkit.claims_doc``).

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
the same items: Newcombe's hybrid score interval), all via scipy. Each theme's ``claims.py`` holds small
named ``verdict_*`` functions built on these, its rule stated in the docstring; each returns a
:class:`Verdict` and is unit-tested through every outcome.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

HOLDS, REFUTED, INCONCLUSIVE, NEEDS_GPU = "holds", "refuted", "inconclusive", "needs GPU"
VERDICTS = (HOLDS, REFUTED, INCONCLUSIVE, NEEDS_GPU)
# What a row is: a measurement of this run, a formula on constants (16Ψ), a fact of a library's own
# convention (PEFT stores B as (out, r)), or a fixture written to show a failure. The ledger shows the
# kind, so a constant is never read as a measurement.
MEASURED, ARITHMETIC, LIBRARY_FACT, DEMONSTRATION = "measured", "arithmetic", "library fact", "demonstration"
KINDS = (MEASURED, ARITHMETIC, LIBRARY_FACT, DEMONSTRATION)
COLUMNS = ("claim", "field_note", "measured", "verdict", "kind", "rule", "n", "interval", "why")
NOT_MEASURED = "not measured"


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
    ``source`` where in the field notes (e.g. "§2.1"); ``kind`` one of :data:`KINDS`.
    ``p_holds_if_true`` / ``p_refuted_if_false`` are the rule's operating characteristics at the
    default n (None when the kind is not ``measured``); ``decided_at_defaults`` says whether both reach
    the bar a decisive verdict needs.
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
    kind: str = MEASURED
    p_holds_if_true: float | None = None
    p_refuted_if_false: float | None = None
    decided_at_defaults: bool = True

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(
                f"claim {self.key or self.claim!r}: verdict must be one of {VERDICTS}, got {self.verdict!r}"
            )
        if self.kind not in KINDS:
            raise ValueError(
                f"claim {self.key or self.claim!r}: kind must be one of {KINDS}, got {self.kind!r}"
            )
        for name in ("claim", "rule", "n", "why"):
            if not str(getattr(self, name)).strip():
                raise ValueError(f"claim {self.key or self.claim!r}: {name!r} must not be empty")

    @classmethod
    def from_verdict(cls, verdict: Verdict, **fields: Any) -> Claim:
        """A row from a verdict function's result plus the descriptive fields."""
        return cls(verdict=verdict.verdict, why=verdict.why, **fields)

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON values: text fields as strings, the operating characteristics as numbers
        (or None) and ``decided_at_defaults`` as a boolean."""
        out: dict[str, Any] = {}
        for k, v in dataclasses.asdict(self).items():
            out[k] = v if k in _TYPED_FIELDS else str(v)
        return out


_TYPED_FIELDS = {"p_holds_if_true", "p_refuted_if_false", "decided_at_defaults"}


def _typed(name: str, value: Any) -> Any:
    if name == "decided_at_defaults":
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if value is None or value == "":
        return None
    return float(value)


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
        fields: dict[str, Any] = {
            k: (_typed(k, v) if k in _TYPED_FIELDS else str(v)) for k, v in row.items() if k in known
        }
        out.append(Claim(**fields))
    return out


# -- claims as declared specs -------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """A claim's two-sided rule as data.

    ``text`` is the rule in words, as the ledger shows it; ``interval`` the interval it judges
    (``"t"`` across units, ``"wilson"`` on k of n, ``"newcombe"`` on paired 0/1 outcomes,
    ``"bootstrap"``, ``"exact"`` for a figure measured or computed without noise, ``"flag"`` for a
    yes/no observation); ``direction`` ``"at least"``, ``"at most"``, ``"within"`` or ``"flag"``;
    ``threshold`` and ``tolerance`` the numbers the rule compares with; ``unit`` what is replicated
    (seed, case, prompt, launch, compile), empty for an exact figure.
    """

    text: str
    interval: str = "exact"
    direction: str = "flag"
    threshold: float | None = None
    tolerance: float | None = None
    unit: str = ""


@dataclass(frozen=True)
class Reading:
    """What a claim reads off this run's typed metrics: ``args`` for its verdict function, the text of
    what was ``measured``, what it rests on (``n``), the ``interval`` shown ("" for an exact figure),
    and ``rule``, the rule's words where they depend on the run (else the spec's)."""

    args: tuple
    measured: str
    n: str
    interval: str = ""
    rule: str = ""


DEFAULT, FULL = "default", "full"
PROFILES = (DEFAULT, FULL)
FAMILY_ALPHA = 0.05  # the family-wise error rate of one notebook's decisive rows (Holm)
POWER = 0.8  # P(holds | true) and P(refuted | false) a row needs to count as decided
WRONG = 0.05  # the most P(refuted | true) and P(holds | false) a decided row may have
SIMULATIONS = 400  # draws per hypothesis: the probabilities' standard error is at most 0.025


@dataclass(frozen=True)
class Design:
    """A measured claim's statistical design, stated before it runs, as a trial states its power.

    ``effect`` is the value the field notes claim (where the claim is true) and ``null`` the value at
    which it is false; both are on the scale the verdict judges (e.g. a per-seed gain, a rate).
    ``unit`` is what is replicated (seed, case, prompt, launch, compile); ``spread`` the spread of one
    unit (a planning value) and ``spread_source`` where it comes from (a run that measured it, or
    "assumed: …"). ``draw(rng, value, n)`` returns the verdict function's arguments for one simulated
    run of ``n`` units whose true value is ``value`` — the same arguments ``read`` gives it.
    ``n`` is the default profile's number of units and ``full_n`` the full profile's;
    ``units(cfg)`` counts the units an experiment config runs (a test holds ``units(Config()) == n``
    and ``units(Config.full()) == full_n``); ``full_minutes`` is what the full profile's n costs on
    2 cores, measured or extrapolated, ``full_minutes_source`` how it was obtained.
    ``beyond_data`` says why no profile can run the n the rule needs, ``needed_n`` (the data holds fewer
    units than that, e.g. 15 dev cases where 100 are needed): such a row reads "not decided" in every
    profile, naming the n it needs, rather than a full profile that could not reach it.
    """

    effect: float
    null: float
    unit: str
    spread: float
    spread_source: str
    draw: Callable[..., tuple]
    n: int
    units: Callable[[Any], int]
    full_n: int | None = None
    full_minutes: float | None = None
    full_minutes_source: str = ""
    needed_n: int | None = None
    beyond_data: str = ""


@dataclass(frozen=True)
class ClaimSpec:
    """One field-note claim, declared once.

    ``reads`` names the experiments (slugs of the same registry) whose metrics ``read`` takes, in
    order; ``read(*metrics) -> Reading``; ``verdict(*reading.args) -> Verdict`` is the named,
    two-sided rule (its docstring states it); ``rule`` the rule as data. ``field_note`` is the notes'
    figure as they state it and ``claim`` their statement; ``source`` the notes' section (or the
    notebook, for a claim the notebook itself makes).
    """

    key: str
    claim: str
    field_note: str
    source: str
    kind: str
    reads: tuple[str, ...]
    read: Callable[..., Reading]
    verdict: Callable[..., Verdict]
    rule: Rule
    design: Design | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"claim spec {self.key!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if not self.reads:
            raise ValueError(f"claim spec {self.key!r}: reads no experiment")
        if (self.kind == MEASURED) != (self.design is not None):
            raise ValueError(
                f"claim spec {self.key!r}: a measured claim needs a Design (its operating characteristics), "
                "and only a measured one has one"
            )

    @property
    def noisy(self) -> bool:
        """Measured through an interval over replicated units: its verdict can be wrong by chance, so
        it belongs to the notebook's family of decisive rows and has operating characteristics."""
        return self.kind == MEASURED and self.rule.interval not in ("exact", "flag")

    def row(self, reading: Reading, verdict: Verdict, oc: OperatingCharacteristics | None = None) -> Claim:
        """The ledger row of this claim from what it read and what its verdict function said."""
        return Claim(
            claim=self.claim,
            field_note=self.field_note,
            measured=reading.measured,
            verdict=verdict.verdict,
            rule=reading.rule or self.rule.text,
            n=reading.n,
            why=verdict.why,
            interval=reading.interval,
            key=self.key,
            source=self.source,
            kind=self.kind,
            **_oc_fields(self, oc),
        )

    def not_measured(self, missing: Sequence[str], oc: OperatingCharacteristics | None = None) -> Claim:
        """The row when an experiment it reads did not run in this context."""
        return Claim(
            claim=self.claim,
            field_note=self.field_note,
            measured=NOT_MEASURED,
            verdict=INCONCLUSIVE,
            rule=self.rule.text,
            n="0",
            why=f"not measured: run {', '.join(missing)} to test this claim",
            key=self.key,
            source=self.source,
            kind=self.kind,
            **_oc_fields(self, oc),
        )

    def decide(self, reading: Reading, level: float = 0.95) -> Verdict:
        """The verdict function on what was read; a noisy claim's interval at ``level``."""
        return self.call(reading.args, level)

    def call(self, args: tuple, level: float = 0.95) -> Verdict:
        """The verdict function on ``args``; only a noisy claim's takes ``level``."""
        return self.verdict(*args, level=level) if self.noisy else self.verdict(*args)


@dataclass(frozen=True)
class HeadlineSpec:
    """One headline number: ``value(*metrics)`` of the experiments ``reads`` names; ``tolerance`` is
    how far it may move between two runs before a comparison reports it (absolute, or relative when
    ``relative``)."""

    name: str
    reads: tuple[str, ...]
    value: Callable[..., Any]
    tolerance: float = 0.0
    relative: bool = False
    help: str = ""


class Ledger(list):
    """A notebook's claims rows (a list of :class:`Claim`) that shows itself as the claims table."""

    def frame(self):
        return claims_frame(self)

    def _repr_html_(self) -> str:
        return self.frame().to_html(index=False)


def claims_frame(rows: Iterable[Claim | dict[str, Any]]):
    """A pandas DataFrame of claims, columns in :data:`COLUMNS` order (what notebooks display)."""
    import pandas as pd

    claims = as_claims(rows)
    return pd.DataFrame([{c: getattr(x, c) for c in COLUMNS} for x in claims], columns=list(COLUMNS))


def judge_specs(specs: Iterable[ClaimSpec], results: Any, profile: str = DEFAULT) -> Ledger:
    """One row per spec from ``results`` (a mapping of slug to a ``Result``, what a context ran).

    A spec whose experiments did not run says "not measured". A noisy measured spec that its design
    cannot decide at this profile's n reads inconclusive, "not decided at defaults", with the n and
    minutes the full profile needs. The others are judged, the noisy ones as one family: Holm's
    step-down over their intervals (:func:`holm_levels`), so the chance of any wrong decisive verdict
    among them stays at most :data:`FAMILY_ALPHA` when every rule's interval is valid.
    """
    specs = list(specs)
    ocs = {s.key: operating_characteristics(s, profile) for s in specs if s.design is not None}
    readings: dict[str, Reading] = {}
    for spec in specs:
        if all(slug in results for slug in spec.reads):
            readings[spec.key] = spec.read(*(results[slug].metrics for slug in spec.reads))
    family = [s for s in specs if s.noisy and s.key in readings and ocs[s.key].decided]
    verdicts = holm_levels(family, readings)
    rows = Ledger()
    for spec in specs:
        oc = ocs.get(spec.key)
        if spec.key not in readings:
            rows.append(spec.not_measured([x for x in spec.reads if x not in results], oc))
        elif oc is not None and not oc.decided:
            rows.append(spec.row(readings[spec.key], _undecided(spec, oc, profile, readings[spec.key]), oc))
        else:
            rows.append(
                spec.row(readings[spec.key], verdicts.get(spec.key) or spec.decide(readings[spec.key]), oc)
            )
    return rows


def holm_levels(family: Sequence[ClaimSpec], readings: dict[str, Reading]) -> dict[str, Verdict]:
    """Holm–Bonferroni over interval verdicts, without p-values: judge every open row at level
    1 − α/m (m = the rows still open); those that decide are settled, and the rest are judged again at
    the level their smaller m allows, until a round settles none. This rejects exactly the hypotheses
    Holm's step-down rejects (a row decides at level 1 − α/m iff its p-value is ≤ α/m). A row that
    never settles is inconclusive, naming the family. A row its verdict function calls "needs GPU"
    (the run had no CUDA to measure it) is no hypothesis tested here: it keeps that verdict and leaves
    the family."""
    out: dict[str, Verdict] = {}
    for spec in family:
        v = spec.decide(readings[spec.key])
        if v.verdict == NEEDS_GPU:
            out[spec.key] = v
    open_ = [s for s in family if s.key not in out]
    while open_:
        level = 1 - FAMILY_ALPHA / len(open_)
        settled = []
        for spec in open_:
            v = spec.decide(readings[spec.key], level)
            if v.verdict in (HOLDS, REFUTED):
                out[spec.key] = Verdict(
                    v.verdict, f"{v.why} (Holm: {level:.2%} interval, family of {len(family)})"
                )
                settled.append(spec)
        if not settled:
            break
        open_ = [s for s in open_ if s not in settled]
    for spec in open_:
        v = spec.decide(readings[spec.key], 1 - FAMILY_ALPHA / len(open_))
        out[spec.key] = Verdict(
            INCONCLUSIVE, f"{v.why} — not decisive at the family-wise level (Holm over {len(family)} rows)"
        )
    return out


def _plural(unit: str) -> str:
    """English plural of a unit's name (seed → seeds, launch → launches)."""
    return unit + ("es" if unit.endswith(("s", "sh", "ch", "x")) else "s")


def _undecided(
    spec: ClaimSpec, oc: OperatingCharacteristics, profile: str, reading: Reading | None = None
) -> Verdict:
    """Inconclusive, with the n the full profile needs — unless this run could not measure the row at
    all (its verdict function says ``needs GPU``): more units on this machine would not help, so the row
    says that first."""
    d = spec.design
    assert d is not None  # a noisy spec always has one
    need = f"n ≥ {d.full_n} {_plural(d.unit)}" if d.full_n else "a larger n than the full profile runs"
    cost = f" (≈ {d.full_minutes:.0f} min on 2 cores)" if d.full_minutes else ""
    where = "run the full profile" if profile == DEFAULT and d.full_n else "no profile decides it yet"
    if d.beyond_data:
        need, cost = f"n ≥ {d.needed_n} {_plural(d.unit)}", ""
        where = f"{d.beyond_data}: no profile decides it"
    why = (
        f"not decided at {'defaults' if profile == DEFAULT else 'the full profile'}: needs {need}{cost} — "
        f"{where}; at n = {oc.n} the rule holds a true claim with P = {oc.p_holds_if_true:.2f} and refutes a "
        f"false one with P = {oc.p_refuted_if_false:.2f}"
    )
    own = spec.decide(reading) if reading is not None else None
    if own is not None and own.verdict == NEEDS_GPU:
        return Verdict(NEEDS_GPU, f"{own.why}; on CUDA, {why}")
    return Verdict(INCONCLUSIVE, why)


# The record beside ``headline`` that keeps each number's tolerance (a run's comparison reads both).
HEADLINE_TOLERANCE = "headline_tolerance"


def headline_tolerances(specs: Iterable[HeadlineSpec]) -> dict[str, dict[str, Any]]:
    """``{name: {"tolerance": t, "relative": bool}}`` of each headline number: how far it may move between
    two runs before a comparison reports it."""
    return {s.name: {"tolerance": float(s.tolerance), "relative": bool(s.relative)} for s in specs}


def headline_values(specs: Iterable[HeadlineSpec], results: Any) -> dict[str, Any]:
    """Each headline number from ``results`` (slug → ``Result``); NaN when its experiments did not run."""
    out: dict[str, Any] = {}
    for spec in specs:
        if all(slug in results for slug in spec.reads):
            out[spec.name] = spec.value(*(results[slug].metrics for slug in spec.reads))
        else:
            out[spec.name] = float("nan")
    return out


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
        return Verdict(
            INCONCLUSIVE, f"{what} has no interval in this run (not measured, or tied units: no spread)"
        )
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
        return Verdict(
            INCONCLUSIVE, f"{what} has no interval in this run (not measured, or tied units: no spread)"
        )
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
        return Verdict(
            INCONCLUSIVE, f"{what} has no interval in this run (not measured, or tied units: no spread)"
        )
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


def mean_interval(
    values: Sequence[float], level: float = 0.95, *, resolution: float = 0.0
) -> tuple[float, float]:
    """Student-t interval of the mean across units (seeds, runs); (nan, nan) with fewer than two
    finite values.

    Never zero width: tied units (3 seeds that all scored 0) say nothing about the spread of a fourth,
    so with no spread the interval is (nan, nan) — inconclusive — unless the measurement's
    ``resolution`` is known (a rate counted in 1/16ths, a loss printed to 1e-4): then the unit sd is
    taken as at least that of a value rounded to it, ``resolution / √12``.
    """
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if len(xs) < 2:
        return (float("nan"), float("nan"))
    from scipy import stats

    mean = sum(xs) / len(xs)
    sd = max(statistics.stdev(xs), resolution / math.sqrt(12))
    if sd == 0:
        return (float("nan"), float("nan"))
    lo, hi = stats.t.interval(level, len(xs) - 1, loc=mean, scale=sd / math.sqrt(len(xs)))
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
        return (float("nan"), float("nan"))
    if all(np.all(d == d.flat[0]) for d in data):  # no spread: a zero-width interval would be a lie
        return (float("nan"), float("nan"))
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
        return (float("nan"), float("nan"))
    return (lo, hi)


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
    pairs = [(int(k), int(n)) for k, n in zip(successes, trials, strict=True) if int(n) > 0]
    if any(not 0 <= k <= n for k, n in pairs):
        raise ValueError("clustered_rate_interval: each cluster needs 0 <= successes <= trials")
    g, total = len(pairs), sum(n for _, n in pairs)
    if g < 2:
        return (float("nan"), float("nan"))
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
        return (float("nan"), float("nan"))
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
        return (float("nan"), float("nan"))
    half = float(stats.t.ppf(0.5 + level / 2, df)) * math.sqrt(ms / (r * c))
    return (grand - half, grand + half)


# -- operating characteristics --------------------------------------------------------------------


@dataclass(frozen=True)
class OperatingCharacteristics:
    """How a claim's own verdict function behaves at ``n`` units, by simulation at ``level``:
    P(holds | the claimed effect), P(refuted | the null), and the wrong decisive verdicts under each."""

    n: int
    level: float
    p_holds_if_true: float
    p_refuted_if_false: float
    p_refuted_if_true: float
    p_holds_if_false: float

    @property
    def decided(self) -> bool:
        return (
            self.p_holds_if_true >= POWER
            and self.p_refuted_if_false >= POWER
            and self.p_refuted_if_true <= WRONG
            and self.p_holds_if_false <= WRONG
        )


def family_size(specs: Iterable[ClaimSpec]) -> int:
    """How many rows the Holm family of a notebook can hold: its noisy measured specs."""
    return sum(1 for s in specs if s.noisy)


_FAMILY: dict[int, int] = {}


def register_family(specs: Iterable[ClaimSpec]) -> None:
    """Remember each spec's family size (a registry calls this as specs are added)."""
    specs = list(specs)
    m = family_size(specs)
    for s in specs:
        _FAMILY[id(s)] = m


def simulate(
    spec: ClaimSpec, n: int, level: float, sims: int = SIMULATIONS, seed: int = 0
) -> OperatingCharacteristics:
    """Draw ``sims`` runs of ``n`` units at the design's effect and at its null (``Design.draw``) and
    count what the spec's own verdict function says at ``level``. Seeded: the same figures every time."""
    import numpy as np

    d = spec.design
    if d is None:
        raise ValueError(f"claim spec {spec.key!r} has no design to simulate")
    counts = {}
    for name, value in (("true", d.effect), ("false", d.null)):
        rng = np.random.default_rng([seed, n, int(round(level * 1e6)), 0 if name == "true" else 1])
        got = {HOLDS: 0, REFUTED: 0}
        for _ in range(sims):
            v = spec.call(d.draw(rng, value, n), level).verdict
            if v in got:
                got[v] += 1
        counts[name] = {k: c / sims for k, c in got.items()}
    return OperatingCharacteristics(
        n=n,
        level=level,
        p_holds_if_true=counts["true"][HOLDS],
        p_refuted_if_false=counts["false"][REFUTED],
        p_refuted_if_true=counts["true"][REFUTED],
        p_holds_if_false=counts["false"][HOLDS],
    )


_OC_CACHE: dict[tuple[int, int, float], OperatingCharacteristics] = {}


def operating_characteristics(spec: ClaimSpec, profile: str = DEFAULT) -> OperatingCharacteristics:
    """The spec's operating characteristics at the profile's n (``Design.n`` or ``Design.full_n``) and
    at the Bonferroni level of its notebook's family, 1 − α/m — the strictest level Holm can judge it
    at, so the figures are a floor for the ledger's real procedure. Cached per process."""
    d = spec.design
    if d is None:
        raise ValueError(f"claim spec {spec.key!r} has no design")
    n = d.full_n if profile == FULL and d.full_n else d.n
    level = 1 - FAMILY_ALPHA / max(1, _FAMILY.get(id(spec), 1))
    key = (id(spec), n, level)
    if key not in _OC_CACHE:
        _OC_CACHE[key] = simulate(spec, n, level)
    return _OC_CACHE[key]


def _oc_fields(spec: ClaimSpec, oc: OperatingCharacteristics | None) -> dict[str, Any]:
    if oc is None:
        return {"p_holds_if_true": None, "p_refuted_if_false": None, "decided_at_defaults": True}
    at_defaults = oc if oc.n == spec.design.n else operating_characteristics(spec, DEFAULT)  # type: ignore[union-attr]
    return {
        "p_holds_if_true": oc.p_holds_if_true,
        "p_refuted_if_false": oc.p_refuted_if_false,
        "decided_at_defaults": at_defaults.decided,
    }


# -- draws for designs: one simulated run's verdict arguments ------------------------------------


def normal_units(spread: float) -> Callable[..., tuple]:
    """A draw of ``n`` per-unit values around the true value with sd ``spread``: ``(values,)``."""

    def draw(rng: Any, value: float, n: int) -> tuple:
        return (list(rng.normal(value, spread, n)),)

    return draw


def paired_normal_units(base: float, spread: float) -> Callable[..., tuple]:
    """A draw of ``n`` paired units (before, after) whose per-unit difference has mean = the true value
    and sd ``spread``: ``(before, after)``."""

    def draw(rng: Any, value: float, n: int) -> tuple:
        before = rng.normal(base, spread, n)
        after = before + rng.normal(value, spread, n)
        return (list(before), list(after))

    return draw


def binomial_units(per_unit: int = 1) -> Callable[..., tuple]:
    """A draw of k successes in ``n`` units of ``per_unit`` trials each at the true rate: ``(k, total)``."""

    def draw(rng: Any, value: float, n: int) -> tuple:
        total = n * per_unit
        return (int(rng.binomial(total, min(1.0, max(0.0, value)))), total)

    return draw


def paired_binary_units(base_rate: float, tie: float = 0.5) -> Callable[..., tuple]:
    """A draw of ``n`` paired 0/1 outcomes (a, b): b at ``base_rate``, a at ``base_rate`` + the true
    difference. With probability ``tie`` an item's two outcomes come from one uniform draw (as
    concordant as the margins allow), else from two independent ones: ``(a, b)``."""

    def draw(rng: Any, value: float, n: int) -> tuple:
        rate_a = min(1.0, max(0.0, base_rate + value))
        u = rng.random(n)
        v = [x if t else y for x, y, t in zip(u, rng.random(n), rng.random(n) < tie, strict=True)]
        return ([float(x < rate_a) for x in u], [float(x < base_rate) for x in v])

    return draw


def exact_value() -> Callable[..., tuple]:
    """A draw for an exact measurement (no sampling error): the true value itself, ``(value,)``."""

    def draw(rng: Any, value: float, n: int) -> tuple:
        return (value,)

    return draw
