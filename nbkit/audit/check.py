"""What every audit check is: a :class:`Check` (an :class:`~nbkit.experiment.Experiment` with its number
and the audit-config section it reads), its frozen metrics dataclass and its registry.

A check module holds what the check is about (its measurements), its config dataclass and its
metrics dataclass, and ends with::

    CHECK = Check.of(SLUG, TITLE, XConfig, XMetrics, finding, number=N, needs="section")

``finding(cfg, ctx, live=None) -> Finding`` decides the check (status, summary, figures, evidence,
fix); :meth:`Check.of` wraps it into the experiment's ``run(cfg, ctx, live) -> Result[XMetrics]``.
``XMetrics`` derives from :class:`CheckMetrics`: the finding's status, summary and fix, the model
it was measured on, and the typed figures claims read (a field named like the figure, or carrying
the figure's key in its ``key`` metadata when that key is not a Python name).

Slugs are the keys everywhere (``--checks``, findings, claims, panels); ``number`` is the check's
place in the field notes' list of thirteen (14–18: the trainer-config checks), so ``--checks 2,7-11``
still selects by it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from nbkit.audit.sections import TrainerSection
from nbkit.errors import UsageError
from nbkit.experiment import Experiment, Registry
from nbkit.findings import Finding
from nbkit.result import Result

if TYPE_CHECKING:
    from nbkit.audit.config import AuditConfig

M = TypeVar("M", bound="CheckMetrics")


class NotRunnable(Exception):
    """A check lacks an input it needs (``str()`` says which): reported as "not run: needs …", never a
    pass."""


@dataclass(frozen=True)
class CheckMetrics:
    """What every check's result carries: its verdict (status, summary, fix) and the model it ran on."""

    status: str = "skipped"
    summary: str = ""
    fix: str = ""
    model: str = ""

    @classmethod
    def of(cls: type[M], finding: Finding, model: str = "") -> M:
        """The typed metrics of ``finding``: each field from the figure of its name (or its ``key``
        metadata); a figure the check did not write stays ``None``."""
        figs = finding.figures
        values: dict[str, Any] = {"status": finding.status, "summary": finding.summary, "fix": finding.fix}
        values["model"] = str(figs.get("model") or model)
        for f in dataclasses.fields(cls):
            if f.name not in values:
                values[f.name] = figs.get(f.metadata.get("key", f.name))
        return cls(**values)

    @property
    def failed(self) -> bool:
        return self.status in ("fail", "error")


def figure(key: str) -> Any:
    """A metrics field read from the figure ``key`` (a key that is not a Python name)."""
    return dataclasses.field(default=None, metadata={"key": key})


def finding_result(finding: Finding, Metrics: type[M], model: str = "") -> Result[M]:
    """``Result`` of a finding: typed metrics, the evidence table, the figure; ``data`` the finding."""
    import pandas as pd

    table = pd.DataFrame(finding.table) if finding.table else None
    return Result(metrics=Metrics.of(finding, model), table=table, figure=finding.figure, data=finding)


@dataclass(frozen=True)
class Check(Experiment):
    """One audit check: an experiment with its ``number`` and the audit-config section it ``needs``.

    ``needs`` names the section the check reads; when a YAML config lacks it the check is reported as
    skipped (and says which section would run it). ``config_from(audit, smoke)`` is the check's config
    taken from an :class:`~nbkit.audit.config.AuditConfig` (``values_from(audit)``, by default
    ``Config.audit_values``).
    """

    number: int = 0
    needs: str = ""
    finding: Callable[..., Finding] | None = None
    values_from: Callable[..., dict[str, Any]] | None = None

    @classmethod
    def of(
        cls,
        slug: str,
        title: str,
        Config: type,
        Metrics: type[CheckMetrics],
        finding: Callable[..., Finding],
        *,
        number: int,
        needs: str = "",
        values_from: Callable[..., dict[str, Any]] | None = None,
    ) -> Check:
        """The check whose ``run(cfg, ctx, live)`` times ``finding`` and returns its typed result; a
        :class:`NotRunnable` input becomes a skipped finding that names what is missing."""

        def run(cfg: Any, ctx: Any, live: Any = None) -> Result[Any]:
            t0 = time.perf_counter()
            try:
                f = finding(cfg, ctx, live)
            except NotRunnable as exc:
                f = Finding(slug, title, "skipped", f"not run: needs {exc}")
            f.seconds = time.perf_counter() - t0
            return finding_result(f, Metrics, ctx.config.model.name if ctx is not None else "")

        run.__doc__ = finding.__doc__
        return cls(
            slug,
            title,
            Config,
            Metrics,
            run,
            (finding.__doc__ or "").strip().split("\n")[0],
            number=number,
            needs=needs,
            finding=finding,
            values_from=values_from,
        )

    def lacks_section(self, audit: AuditConfig) -> bool:
        return bool(self.needs) and getattr(audit, self.needs) is None

    def audit_values(self, audit: AuditConfig) -> dict[str, Any]:
        """The config values this check takes from the audit config (``values_from``, else
        ``Config.audit_values``)."""
        return self.values_from(audit) if self.values_from is not None else self.Config.audit_values(audit)

    def config_from(self, audit: AuditConfig, smoke: bool = False, **overrides: Any) -> Any:
        """This check's config from the audit config, with ``overrides``; under ``smoke`` the smoke
        preset's sizes win. ``None`` when the audit config lacks the section the check needs."""
        if self.lacks_section(audit):
            return None
        return from_audit_values(self.Config, {**self.audit_values(audit), **overrides}, smoke)


class CheckRegistry(Registry):
    """Checks by slug (or number), iterated in the field notes' order."""

    def register(self, experiment: Experiment) -> Experiment:
        check = experiment
        if not isinstance(check, Check):
            raise TypeError(f"audit: {check.slug!r} is not a Check")
        if any(c.number == check.number for c in self):
            raise ValueError(f"audit check number {check.number} used twice")
        return super().register(check)

    def __iter__(self) -> Iterator[Check]:
        return iter(sorted(self._experiments.values(), key=lambda c: c.number))  # type: ignore[attr-defined]

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True

    @property
    def slugs(self) -> list[str]:
        return [c.slug for c in self]

    def __getitem__(self, key: str | int) -> Check:  # type: ignore[override]
        """A check by slug, or by its number (an int or a string of digits); ``KeyError`` otherwise."""
        if isinstance(key, bool):
            raise KeyError(key)
        if isinstance(key, int) or (isinstance(key, str) and key.strip().isdigit()):
            for c in self:
                if c.number == int(key):
                    return c
            raise KeyError(key)
        if isinstance(key, str) and key.strip() in self._experiments:
            return self._experiments[key.strip()]  # type: ignore[return-value]
        raise KeyError(key)

    def known(self) -> str:
        return ", ".join(f"{c.number} {c.slug}" for c in self)

    def select(self, spec: str) -> list[str]:
        """Slugs selected by a ``--checks`` value: slugs, numbers and number ranges, comma separated.

        An empty selection, a reversed range (``5-2``) or an unknown name is a :class:`UsageError`.
        """
        parts = [p.strip() for p in str(spec).split(",")]
        if not any(parts):
            raise UsageError(
                f"--checks {spec!r} selects no check; give slugs or numbers, e.g. lora-binding,7-11 (known: "
                f"{self.known()})"
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
                    slug = self[key].slug
                except KeyError:
                    raise UsageError(
                        f"--checks {spec!r}: unknown check {key!r} (known: {self.known()})"
                    ) from None
                if slug not in out:
                    out.append(slug)
        return out


def smoke_values(Config: type) -> dict[str, Any]:
    """The fields ``Config.smoke()`` changes from ``Config()``: its work sizes."""
    smoke, default = Config.smoke(), Config()
    return {
        f.name: getattr(smoke, f.name)
        for f in dataclasses.fields(Config)
        if getattr(smoke, f.name) != getattr(default, f.name)
    }


def from_audit_values(Config: type, values: dict[str, Any], smoke: bool = False) -> Any:
    """``Config()`` with the audit config's ``values``; with ``smoke`` the smoke preset's sizes win."""
    if smoke:
        values = {**values, **smoke_values(Config)}
    return dataclasses.replace(Config(), **values)


class CheckConfig:
    """What every check's config dataclass shares: ``smoke()`` (the fast preset; override it to change
    the work sizes) and ``from_audit(audit, smoke)``, the check's values taken from the audit config
    (``audit_values``), with the smoke preset's sizes winning under ``smoke``."""

    @classmethod
    def smoke(cls):
        return cls()

    @classmethod
    def audit_values(cls, audit: AuditConfig) -> dict[str, Any]:
        return {}

    @classmethod
    def from_audit(cls, audit: AuditConfig, smoke: bool = False):
        return from_audit_values(cls, cls.audit_values(audit), smoke)


class TrainerCheckConfig(CheckConfig):
    """A check config filled from the audit's ``trainer`` section: each field of the same name (lists
    joined by commas)."""

    @classmethod
    def audit_values(cls, audit: AuditConfig) -> dict[str, Any]:
        t = audit.trainer
        # type: ignore[arg-type]
        names = {f.name for f in dataclasses.fields(cls)} & set(TrainerSection.model_fields)
        return {
            n: ",".join(getattr(t, n)) if isinstance(getattr(t, n), list) else getattr(t, n) for n in names
        }
