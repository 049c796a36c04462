"""What every audit check is: a :class:`Check` (an :class:`~nbkit.experiment.Experiment` with its number
and the audit-config section it reads), its frozen metrics dataclass and its registry.

A check module holds what the check is about (its measurements), its config dataclass and its
metrics dataclass, and ends with::

    CHECK = Check.of(SLUG, TITLE, XConfig, XMetrics, measure, number=N, needs="section")

``measure(cfg, ctx, live=None) -> Checked[XMetrics]`` decides the check: the :class:`Finding` a reader
sees (status, summary, evidence, fix) and the typed metrics it measured, each field set by the check
itself (``XMetrics(field=value, ...)``) — a field the check forgets is a ``TypeError`` where it builds
them, never a silent gap. A check that measured nothing (skipped, or failed before measuring) returns
no metrics. :meth:`Check.of` wraps ``measure`` into the experiment's ``run(cfg, ctx, live) ->
Result[XMetrics]``, adding the finding's status, summary and fix and the model to the metrics.

Slugs are the keys everywhere (``--checks``, findings, claims, panels); ``number`` is the check's
place in the field notes' list of thirteen (14–18: the trainer-config checks,
:data:`nbkit.audit.check_names.CHECK_NAMES`), so ``--checks 2,7-11`` still selects by it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from nbkit.audit.check_names import CHECK_NAMES, check_slug, known
from nbkit.audit.sections import TrainerSection
from nbkit.errors import UsageError
from nbkit.experiment import Experiment, Registry, Replicates
from nbkit.findings import Finding
from nbkit.result import Result

if TYPE_CHECKING:
    import pandas as pd

    from nbkit.audit.config import AuditConfig

M = TypeVar("M", bound="CheckMetrics")


class NotRunnable(Exception):
    """A check lacks an input it needs (``str()`` says which): reported as "not run: needs …", never a
    pass."""


@dataclass(frozen=True, kw_only=True)
class CheckMetrics:
    """What every check's metrics carry besides its own measured fields: the finding's status,
    summary and fix, and the model it was measured on (filled by :meth:`Check.of`'s run)."""

    status: str = "pass"
    summary: str = ""
    fix: str = ""
    model: str = ""

    @property
    def failed(self) -> bool:
        return self.status in ("fail", "error")

    def figures(self) -> dict[str, Any]:
        """The check's own measured fields by name (what its finding shows among its figures)."""
        base = {f.name for f in dataclasses.fields(CheckMetrics)}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in base}


@dataclass(frozen=True)
class Checked(Generic[M]):
    """What a check's measurement returns: the ``finding`` a reader sees and the typed ``metrics`` the
    claims read (``None`` when the check measured nothing)."""

    finding: Finding
    metrics: M | None = None


def finding_result(finding: Finding, metrics: CheckMetrics | None, model: str = "") -> Result[Any]:
    """``Result`` of a check: its metrics with the finding's status, summary and fix (``None`` when it
    measured nothing), the evidence table, the figure; ``data`` the finding."""
    import pandas as pd

    if metrics is not None:
        metrics = dataclasses.replace(
            metrics,
            status=finding.status,
            summary=finding.summary,
            fix=finding.fix,
            model=metrics.model or model,
        )
    table = pd.DataFrame(finding.table) if finding.table else None
    return Result(metrics=metrics, table=table, figure=finding.figure, data=finding)


def evidence_table(finding: Finding, rows: int = 12) -> pd.DataFrame | None:
    """The first ``rows`` rows of a finding's evidence (what a panel shows under its card)."""
    import pandas as pd

    return pd.DataFrame(finding.table[:rows]) if finding.table else None


def show_finding(result: Result[Any]) -> Any:
    """A check's panel output: the finding's card and the first rows of its evidence."""
    from IPython.display import HTML

    f = result.data
    table = evidence_table(f)
    more = (
        f"<div><i>{len(f.table) - 12} more evidence rows in result.data.table</i></div>"
        if len(f.table) > 12
        else ""
    )
    return HTML(f.card_html() + (table.to_html(index=False) if table is not None else "") + more)


@dataclass(frozen=True)
class Check(Experiment):
    """One audit check: an experiment with its ``number`` and the audit-config section it ``needs``.

    ``needs`` names the section the check reads; when a YAML config lacks it the check's run is a
    skipped finding naming the section, whichever way it is run (a notebook's panel, ``nbkit audit``).
    A section that switches the check off (``kiss`` with no training budget) leaves it out of
    :func:`nbkit.audit.registry.run_audit`. ``values_from(audit)`` gives the check's config
    values from an :class:`~nbkit.audit.config.AuditConfig` (default ``Config.audit_values``); the
    audit's context hands them to the one config builder (:func:`nbkit.experiment.config_for`).

    A check whose claims rest on replicates declares them (``replicates``, as any experiment); when its
    loop stops once those claims are decided, its ``measure`` takes ``stop`` (``stop(metrics so far)``
    after each unit), which the registry it is registered in hands it (:class:`CheckRegistry`): run
    outside a registry it spends its whole budget.
    """

    number: int = 0
    needs: str = ""
    values_from: Callable[..., dict[str, Any]] | None = None

    @classmethod
    def of(
        cls,
        slug: str,
        title: str,
        Config: type,
        Metrics: type[CheckMetrics],
        measure: Callable[..., Checked[Any]],
        *,
        number: int,
        needs: str = "",
        values_from: Callable[..., dict[str, Any]] | None = None,
        replicates: Replicates | None = None,
    ) -> Check:
        """The check whose ``run(cfg, ctx, live)`` times ``measure`` and returns its typed result; a
        :class:`NotRunnable` input becomes a skipped finding that names what is missing."""

        def run(
            cfg: Any, ctx: Any, live: Any = None, stop: Callable[[Any], bool] | None = None
        ) -> Result[Any]:
            t0 = time.perf_counter()
            try:
                # The config's own verdict on running first: every path (a notebook's panel, nbkit audit)
                # reaches this run, so a config without the check's section is skipped on each alike.
                section_values(ctx.config, needs, values_from or Config.audit_values)
                checked = measure(cfg, ctx, live) if stop is None else measure(cfg, ctx, live, stop=stop)
            except NotRunnable as exc:
                checked = Checked(skipped(slug, title, str(exc)))
            if checked.metrics is not None and not isinstance(checked.metrics, Metrics):
                raise TypeError(
                    f"check {slug!r} measured {type(checked.metrics).__name__}, not {Metrics.__name__}"
                )
            checked.finding.seconds = time.perf_counter() - t0
            return finding_result(checked.finding, checked.metrics, ctx.config.model.name)

        run.__doc__ = measure.__doc__
        return cls(
            slug,
            title,
            Config,
            Metrics,
            run,
            show_result=show_finding,
            replicates=replicates,
            number=number,
            needs=needs,
            values_from=values_from,
        )

    def switched_off(self, audit: AuditConfig) -> bool:
        """The check's section is there but switches it off (``kiss`` without a training budget):
        :func:`nbkit.audit.registry.run_audit` leaves such a check out, a notebook's panel runs it with
        its own defaults."""
        section = getattr(audit, self.needs) if self.needs else None
        return section is not None and not getattr(section, "enabled", True)

    def audit_values(self, audit: AuditConfig) -> dict[str, Any]:
        """The config values this check takes from the audit config (``values_from``, else
        ``Config.audit_values``); none when the check cannot run on it (its run says why) or the
        section switches it off (the check's own defaults)."""
        try:
            return section_values(audit, self.needs, self.values_from or self.Config.audit_values)
        except NotRunnable:
            return {}


def skipped(slug: str, title: str, needs: str) -> Finding:
    """The one "skipped" finding: check ``slug`` did not run, and ``needs`` says what it lacks."""
    return Finding(slug, title, "skipped", f"not run: needs {needs}")


def section_values(
    audit: AuditConfig, needs: str, values: Callable[[AuditConfig], dict[str, Any]]
) -> dict[str, Any]:
    """A check's config values from its section of ``audit`` (``values(audit)``); :class:`NotRunnable`
    naming the section when the config lacks it (or naming the value, from ``values``, when the section
    holds one the check does not run); none when the section switches the check off."""
    section = getattr(audit, needs) if needs else None
    if needs and section is None:
        raise NotRunnable(f"the config's '{needs}' section")
    if section is not None and not getattr(section, "enabled", True):
        return {}
    return values(audit)


class CheckRegistry(Registry):
    """The audit's experiments by slug: its checks (also by number, iterated in the field notes' order,
    :meth:`checks`) and the experiments that run several of them (a whole config's audit)."""

    def register(self, experiment: Experiment) -> Experiment:
        """Register an experiment; a check whose replicate loop stops once its claims are decided is
        registered with a run that hands its ``measure`` this registry's stop hook
        (:meth:`~nbkit.experiment.Registry.stopper`)."""
        if isinstance(experiment, Check):
            if CHECK_NAMES.get(experiment.number) != experiment.slug:
                raise ValueError(
                    f"audit check {experiment.slug!r} has number {experiment.number}; "
                    f"nbkit.audit.check_names lists {CHECK_NAMES.get(experiment.number)!r} there"
                )
            if any(c.number == experiment.number for c in self.checks()):
                raise ValueError(f"audit check number {experiment.number} used twice")
            if experiment.replicates is not None and experiment.replicates.sequential:
                experiment = dataclasses.replace(experiment, run=self._stopping(experiment))
        return super().register(experiment)

    def _stopping(self, check: Check) -> Callable[..., Result[Any]]:
        inner: Callable[..., Result[Any]] = check.run  # Check.of's run, which takes the stop hook

        def run(cfg: Any, ctx: Any, live: Any = None) -> Result[Any]:
            return inner(cfg, ctx, live, stop=self.stopper(check.slug, ctx, cfg))

        return run

    def checks(self) -> Iterator[Check]:
        """The registered checks in the field notes' order."""
        found = [e for e in self._experiments.values() if isinstance(e, Check)]
        return iter(sorted(found, key=lambda c: c.number))

    @property
    def check_slugs(self) -> list[str]:
        return [c.slug for c in self.checks()]

    def check(self, key: str | int) -> Check:
        """A check by slug or number; ``KeyError`` otherwise."""
        slug = check_slug(key)
        found = self._experiments.get(slug)
        if not isinstance(found, Check):
            raise KeyError(key)
        return found

    def select(self, spec: str) -> list[str]:
        """Slugs selected by a ``--checks`` value: slugs, numbers and number ranges, comma separated.

        An empty selection, a reversed range (``5-2``) or an unknown name is a :class:`UsageError`.
        """
        parts = [p.strip() for p in str(spec).split(",")]
        if not any(parts):
            raise UsageError(
                f"--checks {spec!r} selects no check; give slugs or numbers, e.g. lora-binding,7-11 (known: "
                f"{known()})"
            )
        out: list[str] = []
        for part in parts:
            if not part:
                raise UsageError(f"--checks {spec!r}: empty item between commas")
            lo, sep, hi = part.partition("-")
            if sep and lo.strip().isdigit() and hi.strip().isdigit():
                a, b = int(lo), int(hi)
                if a > b:
                    raise UsageError(f"--checks {spec!r}: range {part!r} is reversed (write {b}-{a})")
                keys: list[str | int] = list(range(a, b + 1))
            else:
                keys = [part]
            for key in keys:
                try:
                    slug = self.check(key).slug
                except KeyError:
                    raise UsageError(f"--checks {spec!r}: unknown check {key!r} (known: {known()})") from None
                if slug not in out:
                    out.append(slug)
        return out


class CheckConfig:
    """What every check's config dataclass shares: ``smoke()`` (the fast preset; override it to change
    the work sizes) and ``audit_values(audit)``, the check's values taken from the audit config."""

    @classmethod
    def smoke(cls):
        return cls()

    @classmethod
    def audit_values(cls, audit: AuditConfig) -> dict[str, Any]:
        return {}


class TrainerCheckConfig(CheckConfig):
    """A check config filled from the audit's ``trainer`` section: each field of the same name (lists
    joined by commas)."""

    @classmethod
    def audit_values(cls, audit: AuditConfig) -> dict[str, Any]:
        t = audit.trainer
        names = {f.name for f in dataclasses.fields(cls)} & set(TrainerSection.model_fields)  # type: ignore[arg-type]
        return {
            n: ",".join(getattr(t, n)) if isinstance(getattr(t, n), list) else getattr(t, n) for n in names
        }
