"""Claims as rows of data, and the one judge that runs them.

A :class:`ClaimSpec` is a row of a theme's claims table (``nbkit/<theme>/claims.py``): its key, the
claim in words, where the field notes state it and their figure (or :data:`~nbkit.claims.OWN` for a
claim the project makes itself), its kind, the experiments whose typed metrics it reads, ``read`` (those
metrics → a :class:`Reading`: the rule's sample and the words of what was measured), its
:class:`~nbkit.claims.rules.Rule` and — for a noisy measured row — its
:class:`~nbkit.claims.design.Plan`. A row whose verdict no generic rule can say names a bespoke
``verdict(sample, level)`` and ``bespoke``, the reason; its rule still gives its words and its two
design points.

:func:`judge` turns the rows into the ledger from what a context ran. The noisy rows whose design
decides at the budget that ran form one family, judged by Holm's step-down over their intervals; a
sequential row is judged at each look of its experiment's replicate loop, on the repeated confidence
intervals of a group-sequential design (:mod:`nbkit.claims.sequential`), and its verdict is the first
look that decides. A noisy row its design cannot decide says so, with the budget the full profile runs.
A smoke run's rows carry what was measured and no verdict.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nbkit.claims.design import OC, Plan, simulate
from nbkit.claims.intervals import fmt_interval
from nbkit.claims.ledger import (
    HOLDS,
    INCONCLUSIVE,
    KINDS,
    MEASURED,
    NEEDS_GPU,
    NOT_JUDGED,
    NOT_MEASURED,
    OWN,
    REFUTED,
    Claim,
    Ledger,
    Verdict,
)
from nbkit.claims.rules import Rule, plural
from nbkit.claims.sequential import looks, nominal_levels

DEFAULT, FULL = "default", "full"
PROFILES = (DEFAULT, FULL)
FAMILY_ALPHA = 0.05  # the family-wise error rate of one notebook's decisive rows (Holm)


@dataclass(frozen=True)
class Replicates:
    """How an experiment replicates, declared once where it is registered: its ``unit`` (seed, launch,
    case…); ``config_field``, the config field that holds its budget — the most units a run spends — whose
    default is the default profile's budget; ``full``, the full profile's; ``full_also``, other fields
    the full profile sets; ``cost_s``, what one unit costs in CPU-seconds on 2 cores and
    ``cost_source`` where that was measured; ``least``, the fewest units its figure needs (also its
    first look); ``sequential``: its replicate loop stops once every row reading it is decided."""

    unit: str
    config_field: str
    full: int
    cost_s: float
    cost_source: str
    least: int = 2
    sequential: bool = True
    full_also: Mapping[str, Any] = field(default_factory=dict)

    def budget(self, cfg: Any) -> int:
        return int(getattr(cfg, self.config_field))

    def minutes(self, units: int) -> float:
        return units * self.cost_s / 60


@dataclass(frozen=True)
class Reading:
    """What a claim reads off this run's typed metrics: ``sample``, the rule's (or bespoke verdict's)
    input — for a replicated estimator one item per unit, in unit order; ``measured``, the words of
    what was measured; ``n``, what it rests on (default: the units, counted); ``units``, the units of
    replication (default: counted by the estimator). ``missing`` says why the row could not be measured
    in this run; ``needs_gpu`` names what only a CUDA device measures, when this run had none."""

    sample: Any
    measured: str
    n: str = ""
    units: int | None = None
    missing: str = ""
    needs_gpu: str = ""


@dataclass(frozen=True)
class ClaimSpec:
    """One claim, a row of data (see the module docstring). ``source``: the field notes' section, or
    :data:`~nbkit.claims.OWN`; ``field_note``: their figure as stated ("" for the project's own)."""

    key: str
    claim: str
    source: str
    field_note: str
    kind: str
    reads: tuple[str, ...]
    read: Callable[..., Reading]
    rule: Rule
    plan: Plan | None = None
    verdict: Callable[..., Verdict] | None = None
    bespoke: str = ""
    # Why no profile's budget decides this row (the data bounds its interval): it says so in every run.
    bounded_by: str = ""

    def __post_init__(self) -> None:
        problems = []
        if self.kind not in KINDS:
            problems.append(f"kind must be one of {KINDS}, got {self.kind!r}")
        if not self.reads:
            problems.append("reads no experiment")
        if (self.source == OWN) == bool(self.field_note):
            problems.append("a field note needs its figure; the project's own claim (source OWN) has none")
        if self.noisy != (self.plan is not None):
            problems.append("a noisy measured row needs a Plan (its design), and only such a row has one")
        if bool(self.verdict) != bool(self.bespoke):
            problems.append(
                "a bespoke verdict needs its reason (bespoke=...), and only a bespoke row has one"
            )
        if self.noisy and self.rule.claimed is None:
            problems.append("a noisy row's rule needs its claimed value (the design's true point)")
        if problems:
            raise ValueError(f"claim spec {self.key!r}: " + "; ".join(problems))

    @property
    def noisy(self) -> bool:
        """Measured through an interval over replicated units: its verdict can be wrong by chance, so it
        has a design and belongs to the notebook's family of decisive rows."""
        return self.kind == MEASURED and not self.rule.estimator.exact

    def decide(self, sample: Any, level: float = 0.95) -> Verdict:
        """The row's verdict on ``sample`` at ``level``: its bespoke verdict, else its rule."""
        return self.verdict(sample, level) if self.verdict else self.rule.decide(sample, level)

    def units(self, reading: Reading) -> int:
        if reading.units is not None:
            return int(reading.units)
        return int(self.rule.estimator.units(reading.sample)) if self.rule.estimator.replicated else 1

    def head(self, sample: Any, n: int) -> Any:
        head = self.rule.estimator.head
        return head(sample, n) if head else list(sample)[:n]


@dataclass(frozen=True)
class HeadlineSpec:
    """One headline number: ``value(*metrics)`` of the experiments ``reads`` names, shown as ``label``
    (words) in ``unit``; ``tolerance`` is how far it may move between two runs before a comparison
    reports it (absolute, or relative when ``relative``)."""

    name: str
    label: str
    reads: tuple[str, ...]
    value: Callable[..., Any]
    unit: str = ""
    tolerance: float = 0.0
    relative: bool = False
    help: str = ""


# The record beside ``headline`` that keeps each number's words, unit and tolerance.
HEADLINE_SPEC = "headline_spec"
# An older run's record of the tolerances alone (``nbkit compare`` still reads it).
HEADLINE_TOLERANCE = "headline_tolerance"


def headline_specs(specs: Iterable[HeadlineSpec]) -> dict[str, dict[str, Any]]:
    return {
        s.name: {
            "label": s.label,
            "unit": s.unit,
            "help": s.help,
            "tolerance": float(s.tolerance),
            "relative": bool(s.relative),
        }
        for s in specs
    }


def headline_values(specs: Iterable[HeadlineSpec], results: Mapping[str, Any]) -> dict[str, Any]:
    """Each headline number from ``results`` (slug → ``Result``); NaN when its experiments did not run."""
    out: dict[str, Any] = {}
    for spec in specs:
        if all(slug in results for slug in spec.reads):
            out[spec.name] = spec.value(*(results[slug].metrics for slug in spec.reads))
        else:
            out[spec.name] = float("nan")
    return out


# -- the judge ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sized:
    """A noisy row's design as it ran: the units that ran, its budget and first look, whether it is
    judged sequentially, and its operating characteristics there."""

    units: int
    budget: int
    least: int
    sequential: bool
    oc: OC
    replicates: Replicates | None


@dataclass(frozen=True)
class Judged:
    verdict: Verdict
    level: float
    units: int
    interval: tuple[float, float] | None
    estimate: float | None = None


def replicates_of(spec: ClaimSpec, sizes: Mapping[str, Replicates]) -> tuple[str, Replicates] | None:
    """The experiment whose replicate loop supplies the row's units: the one it reads whose unit is the
    rule's."""
    for slug in spec.reads:
        r = sizes.get(slug)
        if r is not None and r.unit == spec.rule.unit:
            return slug, r
    return None


def size(
    spec: ClaimSpec,
    reading: Reading,
    results: Mapping[str, Any],
    sizes: Mapping[str, Replicates],
    level: float,
) -> Sized:
    """The design of noisy row ``spec`` at the units and budget that ran, and its operating
    characteristics at family level ``level``."""
    assert spec.plan is not None
    units = spec.units(reading)
    found = replicates_of(spec, sizes)
    rep = found[1] if found else None
    cfg = getattr(results.get(found[0]), "config", None) if found else None
    budget = max(units, rep.budget(cfg) if rep is not None and cfg is not None else units, 1)
    sequential = bool(rep and rep.sequential and spec.rule.estimator.replicated)
    least = min(rep.least if rep else 2, budget)
    oc = simulate(
        spec.key,
        spec.rule,
        spec.plan,
        budget=budget,
        least=least,
        level=level,
        sequential=sequential,
        verdict=spec.verdict,
        head=spec.head,
    )
    return Sized(units, budget, least, sequential, oc, rep)


def decide_at(spec: ClaimSpec, reading: Reading, sized: Sized, level: float) -> Judged:
    """Row ``spec``'s verdict at family level ``level``: one look at the units that ran, or — sequential —
    the first look whose repeated confidence interval decides (else the last look's, inconclusive)."""
    sample = reading.sample
    if not sized.sequential:
        interval = _interval(spec, sample, level)
        return Judged(spec.decide(sample, level), level, sized.units, interval, _estimate(spec, sample))
    # A look's boundary depends only on the looks before it: the looks that ran are enough.
    at = tuple(n for n in looks(sized.least, sized.budget) if n <= sized.units)
    levels = nominal_levels(round(1 - level, 12), at, sized.budget) if at else ()
    last: Judged | None = None
    for n, lev in zip(at, levels, strict=True):
        part = spec.head(sample, n)
        v = spec.decide(part, lev)
        last = Judged(v, lev, n, _interval(spec, part, lev), _estimate(spec, part))
        if v.verdict in (HOLDS, REFUTED):
            return last
    if last is None:
        need = f"{sized.least} {plural(spec.rule.unit, sized.least)}"
        why = f"{sized.units} {plural(spec.rule.unit, sized.units)} ran; its first look needs {need}"
        return Judged(Verdict(INCONCLUSIVE, why), level, sized.units, None)
    return last


def _interval(spec: ClaimSpec, sample: Any, level: float) -> tuple[float, float] | None:
    if spec.rule.estimator.exact:
        return None
    try:
        return spec.rule.estimator.interval(sample, level)
    except (TypeError, ValueError, IndexError):  # a bespoke row's sample is not the estimator's kind
        return None


def _estimate(spec: ClaimSpec, sample: Any) -> float | None:
    point = spec.rule.estimator.point
    if point is None:  # an exact figure or a flag: no interval to centre
        return None
    try:
        value = float(point(sample))
    except (TypeError, ValueError, IndexError, ZeroDivisionError):  # a bespoke row's sample, as above
        return None
    return value if math.isfinite(value) else None


def holm(
    family: Sequence[ClaimSpec], readings: Mapping[str, Reading], sized: Mapping[str, Sized], alpha: float
) -> dict[str, Judged]:
    """Holm–Bonferroni over interval verdicts, without p-values: judge every open row at level
    1 − α/m (m = the rows still open); those that decide are settled, and the rest are judged again at
    the level their smaller m allows, until a round settles none. This rejects exactly the hypotheses
    Holm's step-down rejects (a row decides at level 1 − α/m iff its p-value is ≤ α/m)."""
    out: dict[str, Judged] = {}
    open_ = list(family)
    while open_:
        level = 1 - alpha / len(open_)
        settled = []
        for spec in open_:
            j = decide_at(spec, readings[spec.key], sized[spec.key], level)
            if j.verdict.verdict in (HOLDS, REFUTED):
                why = f"{j.verdict.why} (Holm, family of {len(family)})"
                out[spec.key] = dataclasses.replace(j, verdict=Verdict(j.verdict.verdict, why))
                settled.append(spec)
        if not settled:
            break
        open_ = [s for s in open_ if s not in settled]
    for spec in open_:
        j = decide_at(spec, readings[spec.key], sized[spec.key], 1 - alpha / len(open_))
        why = f"{j.verdict.why} — not decisive at the family-wise level (Holm over {len(family)} rows)"
        out[spec.key] = dataclasses.replace(j, verdict=Verdict(INCONCLUSIVE, why))
    return out


def alpha_needed(
    spec: ClaimSpec, reading: Reading, sized: Sized, alpha: float = FAMILY_ALPHA
) -> float | None:
    """The smallest α at which the row decides (holds or refuted at level 1 − α), to a few per cent: the
    p-value of its decision, which a run of several notebooks needs to judge all their rows as one Holm
    family (:func:`run_family`); None when it does not decide even at ``alpha`` alone."""
    if decide_at(spec, reading, sized, 1 - alpha).verdict.verdict not in (HOLDS, REFUTED):
        return None
    lo, hi = 1e-9, alpha  # decisive at hi; bisect on the log scale
    for _ in range(14):
        mid = math.sqrt(lo * hi)
        if decide_at(spec, reading, sized, 1 - mid).verdict.verdict in (HOLDS, REFUTED):
            hi = mid
        else:
            lo = mid
    return hi


def run_family(rows: Sequence[Mapping[str, Any]], alpha: float = FAMILY_ALPHA) -> list[dict[str, Any]]:
    """The rows of a whole run — several notebooks, each judged by its own Holm family — judged as one
    family: Holm's step-down over every decisive noisy row's ``alpha_needed`` (rows as recorded,
    ``Claim.to_dict()``). A row decisive in its notebook but not in the run's family reads inconclusive,
    saying so; every other row is returned as it is."""
    family = [
        i
        for i, r in enumerate(rows)
        if isinstance(r.get("alpha_needed"), (int, float)) and r.get("verdict") in (HOLDS, REFUTED)
    ]
    m = len(family)
    lose = set(family)
    for k, i in enumerate(sorted(family, key=lambda i: rows[i]["alpha_needed"])):
        if rows[i]["alpha_needed"] > alpha / (m - k):
            break
        lose.discard(i)
    out = []
    for i, r in enumerate(rows):
        r = dict(r)
        if i in lose:
            r["why"] = (
                f"{r.get('why', '')} — but not decisive in this run's family of {m} decisive rows across its "
                f"notebooks (Holm at α = {alpha:g}; this row decides only at α ≥ {r['alpha_needed']:.3g})"
            )
            r["verdict"] = INCONCLUSIVE
        out.append(r)
    return out


def family_level(specs: Iterable[ClaimSpec], alpha: float = FAMILY_ALPHA) -> float:
    """Bonferroni's level over a notebook's noisy rows: the strictest level Holm ever judges one at."""
    return 1 - alpha / max(1, sum(1 for s in specs if s.noisy))


def decided(
    specs: Sequence[ClaimSpec],
    slug: str,
    metrics: Any,
    results: Mapping[str, Any],
    sizes: Mapping[str, Replicates],
    config: Any,
    alpha: float = FAMILY_ALPHA,
) -> bool:
    """Whether experiment ``slug``'s replicate loop may stop: with its ``metrics`` so far (and the other
    experiments' ``results``), every sequential row it feeds whose design decides at this budget has
    reached a verdict at the family's Bonferroni level — the strictest level the judge will use, so a row
    decided here stays decided. A row its design cannot decide at this budget, or this run cannot measure
    (it needs a GPU, a trained draft), does not hold the loop: when no row does, the loop stops once it has
    the units its figure needs (its first look, ``Replicates.least``). An experiment no noisy row reads runs
    its budget."""
    from types import SimpleNamespace

    level = family_level(specs, alpha)
    here = {**results, slug: SimpleNamespace(metrics=metrics, config=config)}
    feeds, waiting, units = False, False, 0
    for spec in specs:
        found = replicates_of(spec, sizes)
        if not spec.noisy or found is None or found[0] != slug or not all(s in here for s in spec.reads):
            continue
        feeds = True
        reading = spec.read(*(here[s].metrics for s in spec.reads))
        units = max(units, spec.units(reading))
        if _unmeasured(reading):
            continue
        sized = size(spec, reading, here, sizes, level)
        if not (sized.sequential and sized.oc.decided):
            continue
        waiting = True
        if decide_at(spec, reading, sized, level).verdict.verdict not in (HOLDS, REFUTED):
            return False
    if waiting or not feeds:
        return waiting
    return units >= sizes[slug].least


def judge(
    specs: Iterable[ClaimSpec],
    results: Mapping[str, Any],
    sizes: Mapping[str, Replicates] | None = None,
    *,
    profile: str = DEFAULT,
    smoke: bool = False,
    alpha: float = FAMILY_ALPHA,
) -> Ledger:
    """One row per spec from ``results`` (slug → ``Result``, what a context ran); ``sizes`` the
    experiments' :class:`Replicates` (slug → sizing). See the module docstring."""
    specs = list(specs)
    sizes = sizes or {}
    readings: dict[str, Reading] = {}
    for spec in specs:
        if all(slug in results for slug in spec.reads):
            readings[spec.key] = spec.read(*(results[slug].metrics for slug in spec.reads))
    rows = Ledger()
    if smoke:
        for spec in specs:
            r = readings.get(spec.key)
            rows.append(
                _row(spec, r, Verdict(NOT_JUDGED, "smoke size: not judged"), missing=_missing(spec, r))
            )
        return rows
    measurable = [s for s in specs if s.key in readings and not _unmeasured(readings[s.key])]
    noisy = [s for s in measurable if s.noisy]
    level = family_level(noisy, alpha)
    sized = {s.key: size(s, readings[s.key], results, sizes, level) for s in noisy}
    family = [s for s in noisy if sized[s.key].oc.decided]
    judged = holm(family, readings, sized, alpha)
    for spec in specs:
        r = readings.get(spec.key)
        if r is None or _unmeasured(r):
            rows.append(_row(spec, r, _unmeasured_verdict(spec, r, results), missing=_missing(spec, r)))
        elif spec.key in judged:
            row = _row(spec, r, judged[spec.key].verdict, sized.get(spec.key), judged[spec.key])
            if row.verdict in (HOLDS, REFUTED):
                row = dataclasses.replace(row, alpha_needed=alpha_needed(spec, r, sized[spec.key], alpha))
            rows.append(row)
        elif spec.key in sized:
            j = decide_at(spec, r, sized[spec.key], level)
            rows.append(_row(spec, r, _undecided(spec, sized[spec.key], j, profile), sized[spec.key], j))
        else:
            rows.append(_row(spec, r, spec.decide(r.sample, 1 - alpha)))
    return rows


def _unmeasured(reading: Reading) -> bool:
    return bool(reading.missing or reading.needs_gpu)


def _missing(spec: ClaimSpec, reading: Reading | None) -> bool:
    return reading is None or bool(reading.missing)


def _unmeasured_verdict(spec: ClaimSpec, reading: Reading | None, results: Mapping[str, Any]) -> Verdict:
    if reading is None:
        absent = [slug for slug in spec.reads if slug not in results]
        return Verdict(INCONCLUSIVE, f"not measured: run {', '.join(absent)} to test this claim")
    if reading.needs_gpu:
        return Verdict(NEEDS_GPU, f"{reading.needs_gpu} is measured only on a CUDA device; this run had none")
    return Verdict(INCONCLUSIVE, f"not measured: {reading.missing}")


def _undecided(spec: ClaimSpec, sized: Sized, judged: Judged, profile: str) -> Verdict:
    """Inconclusive: the design cannot decide at the budget that ran; names the full profile's budget and its
    cost where that one decides, or says that no profile does and why."""
    oc, rep, unit = sized.oc, sized.replicates, spec.rule.unit
    where = "defaults" if profile == DEFAULT else "the full profile"
    runs = f"up to {sized.budget} {plural(unit, sized.budget)}"
    if spec.bounded_by:
        tail = f"; no profile decides it: {spec.bounded_by}"
    elif rep is not None and profile == DEFAULT and rep.full > sized.budget:
        tail = (
            f"; the full profile runs up to {rep.full} {plural(unit, rep.full)} "
            f"(≈ {rep.minutes(rep.full):.0f} CPU-minutes)"
        )
    else:
        tail = "; no profile runs more"
    return Verdict(
        INCONCLUSIVE,
        f"not decided at {where}: {runs}, the rule holds a true claim with P = {oc.p_holds_if_true:.2f} and "
        f"refutes a false one with P = {oc.p_refuted_if_false:.2f}{tail}; here: {judged.verdict.why}",
    )


def _row(
    spec: ClaimSpec,
    reading: Reading | None,
    verdict: Verdict,
    sized: Sized | None = None,
    judged: Judged | None = None,
    missing: bool = False,
) -> Claim:
    rule = spec.rule
    units = spec.units(reading) if reading is not None and not missing else 0
    n = (reading.n if reading is not None else "") or (
        f"{units} {plural(rule.unit, units)}" if rule.unit else ("exact" if not missing else "0")
    )
    interval, level = "", None
    if judged is not None and judged.interval is not None:
        interval, level = fmt_interval(judged.interval, level=judged.level), judged.level
    fields: dict[str, Any] = {}
    if sized is not None:
        oc = sized.oc
        fields = {
            "exact": False,
            "units": judged.units if judged is not None else sized.units,
            "budget": sized.budget,
            "p_holds_if_true": oc.p_holds_if_true,
            "p_refuted_if_false": oc.p_refuted_if_false,
            "true_value": rule.fmt(oc.true_value),
            "false_value": " or ".join(rule.fmt(x) for x in oc.false_values),
            "decided": oc.decided,
            "design": design_line(spec, sized),
            "estimate": judged.estimate if judged is not None else None,
        }
    elif spec.noisy:
        fields = {"exact": False, "units": units or None, "decided": False}
    elif missing:  # an exact row this run did not measure decides nothing
        fields = {"decided": False}
    return Claim(
        claim=spec.claim,
        field_note=spec.field_note,
        measured=NOT_MEASURED if reading is None else reading.measured,
        verdict=verdict.verdict,
        rule=rule.text + (f" [{spec.bespoke}]" if spec.bespoke else ""),
        n=n,
        why=verdict.why,
        interval=interval,
        key=spec.key,
        source=spec.source,
        kind=spec.kind,
        level=level,
        **fields,
    )


def design_line(spec: ClaimSpec, sized: Sized) -> str:
    """The design in one line: how it looks, its operating characteristics with the expected units under
    each value, and the spread it was planned with."""
    oc, unit, rule = sized.oc, spec.rule.unit, spec.rule
    how = (
        f"sequential, up to {sized.budget} {plural(unit, sized.budget)} (looks at "
        f"{', '.join(map(str, oc.looks))})"
        if sized.sequential
        else f"{sized.budget} {plural(unit, sized.budget)}"
    )
    false = " or ".join(rule.fmt(x) for x in oc.false_values)
    assert spec.plan is not None
    return (
        f"{how}; at family level {oc.level:.2%}: P(holds | {rule.fmt(oc.true_value)}) = "
        f"{oc.p_holds_if_true:.2f} after {oc.mean_units_true:.1f} {plural(unit)} on average, "
        f"P(refuted | {false}) = {oc.p_refuted_if_false:.2f} after {oc.mean_units_false:.1f}; "
        f"{spec.plan.words(unit)}"
    )
