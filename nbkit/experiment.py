"""The experiment contract the four themes share.

An :class:`Experiment` names its slug, title, config dataclass, metrics dataclass and its ``run``::

    run(cfg: XConfig, ctx: ThemeContext, live: LiveFigure | None) -> Result[XMetrics]

``XMetrics`` is a frozen dataclass of what the run measured. Claims read those typed fields (never
dict keys), so a claim cannot wait on a value nothing writes: a misspelt or unwritten field is an
``AttributeError`` in the unit tests and a mypy error before that.

Each theme keeps one :class:`Registry` (``nbkit.<theme>.experiments.REGISTRY``) and one
:class:`Context` subclass (``nbkit.<theme>.context``): what its experiments share inside one notebook
or session (the resolved device, loaded models, an LM server, cached splits), cached explicitly per
context, never in module globals, and every :class:`Result` it ran, by slug. A notebook opens one
context (``XContext(DEVICE, **options)``), runs each experiment with ``experiments.show(slug, ctx,
smoke=SMOKE, **overrides)`` (its panel, displayed and run once; headless: ``experiments.run``), and
ends with ``claims.headline(ctx)`` and ``claims.judge(ctx)``: the registry's claim specs
(:class:`nbkit.claims.ClaimSpec`) judged on what the context ran.

Configs: every config dataclass has ``smoke()`` (a classmethod returning the SMOKE preset) and its
fields carry widget metadata written with :func:`param`. :meth:`Experiment.config` is the one way to
build a config from ``SMOKE`` and overrides; an unknown override is a :class:`UsageError`.

Modelled on the audit's check registry and pscheck's rule registry (one entry per module, looked up
by slug), the way ruff keeps rules and peft keeps tuners.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from nbkit.claims import (
    DEFAULT,
    FULL,
    HEADLINE_SPEC,
    PROFILES,
    ClaimSpec,
    HeadlineSpec,
    Ledger,
    Replicates,
    decided,
    headline_specs,
    headline_values,
    judge,
)
from nbkit.device import device_report, pick_device
from nbkit.errors import UsageError
from nbkit.live import LiveFigure
from nbkit.panels import Panel
from nbkit.record import record, summary_line
from nbkit.result import Result

__all__ = ["Context", "Experiment", "Registry", "Replicates", "Result", "config_for", "panel", "param"]

C = TypeVar("C")
M = TypeVar("M")
T = TypeVar("T")


def param(
    default: Any = dataclasses.MISSING,
    *,
    help: str = "",
    min: float | None = None,
    max: float | None = None,
    step: float | None = None,
    choices: Any = None,
    log: bool = False,
    label: str | None = None,
    hidden: bool = False,
    advanced: bool | None = None,
    default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
    **extra: Any,
) -> Any:
    """A config field with the metadata its panel control reads (the one widget-metadata helper).

    ``min``/``max``/``step`` bound a slider, ``log`` makes it logarithmic, ``choices`` makes a dropdown
    (a multi-select when the value is a tuple), ``hidden`` keeps the field off the panel, ``help`` is
    the field's one-line description. ``advanced`` folds the control under the panel's one "advanced"
    section (a multi-select grid is folded unless ``advanced=False``; see :func:`nbkit.panels.is_advanced`),
    so the controls that change the lesson in view come first. ``extra`` keys are kept as they are (a
    theme's own metadata).
    """
    meta: dict[str, Any] = {k: v for k, v in extra.items()}
    if help:
        meta["help"] = help
    for key, value in (("min", min), ("max", max), ("step", step), ("label", label)):
        if value is not None:
            meta[key] = value
    if choices is not None:
        meta["choices"] = tuple(choices)
    if log:
        meta["log"] = True
    if hidden:
        meta["hidden"] = True
    if advanced is not None:
        meta["advanced"] = bool(advanced)
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    if isinstance(default, (list, dict, set)):
        # A mutable default would be shared by every instance: dataclasses refuse it, so copy per instance.
        mutable = default
        return dataclasses.field(default_factory=lambda: type(mutable)(mutable), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def config_for(
    Config: type[C],
    smoke: bool = False,
    profile: str = DEFAULT,
    *,
    values: dict[str, Any] | None = None,
    replicates: Replicates | None = None,
    **overrides: Any,
) -> C:
    """``Config.smoke()`` when ``smoke``, else in the full profile ``Config()`` at the budget its
    experiment's ``replicates`` declares for it (and the other fields it sets), else ``Config()``;
    ``overrides`` applied.

    ``values`` are what a context gives the config (a theme whose experiments read a user's own file,
    e.g. the audit's YAML): they replace ``Config()``'s defaults, the preset's own sizes (the fields
    ``smoke()``/``full()`` change) win over them, and ``overrides`` win over both. An override of
    ``None`` keeps the preset's value: a notebook parameter left at ``None`` means "the config's own
    value" (its SMOKE, default or full size), so a cell passes it without deciding by SMOKE or PROFILE
    itself. An override or value the config has no field for is a :class:`UsageError` naming the
    config and its fields (a notebook parameter spelt wrong must not be dropped silently).
    """
    if smoke:
        preset = Config.smoke()  # type: ignore[attr-defined]
    elif profile == FULL and replicates is not None:
        preset = dataclasses.replace(
            Config(),  # type: ignore[type-var]
            **{replicates.config_field: replicates.full, **replicates.full_also},
        )
    else:
        preset = Config()
    names = {f.name for f in dataclasses.fields(preset)}
    unknown = sorted((set(overrides) | set(values or {})) - names)
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if unknown:
        raise UsageError(
            f"{Config.__name__} has no field {', '.join(unknown)}; its fields: {', '.join(sorted(names))}"
        )
    base = preset
    if values:
        default = Config()
        sized = {n: getattr(preset, n) for n in names if getattr(preset, n) != getattr(default, n)}
        base = dataclasses.replace(default, **{**values, **sized})  # type: ignore[type-var]
    return dataclasses.replace(base, **overrides) if overrides else base


class Context:
    """What one theme's experiments share in one notebook or session.

    ``device`` is the requested device (``"auto"``, ``"cpu"``, ``"cuda:0"``); :attr:`torch_device` resolves
    it once. :meth:`cached` is the one cache: keyed explicitly, living as long as this context, so two
    contexts never see each other's state. :meth:`close` releases what the context holds (processes,
    servers); a context is also a context manager. :attr:`results` keeps the last :class:`Result` of
    each experiment run in it, by slug: what claims and the headline are judged on. ``smoke`` and
    ``profile`` pick every config it runs (``Config.smoke()``, ``Config.full()`` or ``Config()``) and
    the n its claims are judged at.
    """

    def __init__(
        self,
        device: str = "auto",
        *,
        smoke: bool = False,
        profile: str = DEFAULT,
        scheduler: str = "",
        parallel: bool = True,
    ) -> None:
        if profile not in PROFILES:
            raise UsageError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
        self.device = device
        self.smoke = smoke
        self.profile = profile
        # A Dask scheduler's address: independent replicates run as tasks there (nbkit.replicates); without
        # one, in worker processes where the context has several cores, unless ``parallel`` is off.
        self.scheduler = scheduler
        self.parallel = parallel
        self._cache: dict[Hashable, Any] = {}
        self._resolved: Any = None
        self._on_close: list[Callable[[], Any]] = []
        self.closed = False
        self.results: dict[str, Result[Any]] = {}
        # Per experiment: where its units ran besides this process and the CPU-seconds they took there,
        # and (ran) where it ran, its wall time and CPU-seconds in all.
        self.elsewhere: dict[str, tuple[str, float]] = {}
        self.ran: dict[str, dict[str, Any]] = {}

    def describe(self) -> None:
        """The notebook's device line, the same in every theme: the resolved device and what the
        machine offers, printed as one line and recorded as ``device``
        (:func:`nbkit.device.device_report`)."""
        report = {"device": str(self.torch_device), **device_report()}
        record("device", report)
        gpus = ", ".join(f"{g['name']} ({g['memory_gib']:.0f} GiB)" for g in report["gpus"]) or "no GPU"
        print(
            f"device {report['device']} · torch {report['torch']} · {gpus} · "
            f"{report['cpu_cores_usable']} of {report['cpu_cores_logical']} cores, "
            f"{report['torch_threads']} torch threads · {report['ram_available_gib']:.1f} of "
            f"{report['ram_total_gib']:.1f} GiB RAM free"
        )

    def config_values(self, experiment: Experiment[Any, Any]) -> dict[str, Any]:
        """Values this context gives ``experiment``'s config before a notebook's overrides (see
        :func:`config_for`): none here; a theme whose experiments read a user's file (the audit's YAML)
        returns that file's settings for the experiment."""
        return {}

    def keep(self, slug: str, result: Result[M]) -> Result[M]:
        """Keep ``result`` as experiment ``slug``'s latest in this context; returns it."""
        self.results[slug] = result
        return result

    @property
    def torch_device(self) -> Any:
        """The ``torch.device`` of :attr:`device`, resolved on first use (imports torch)."""
        if self._resolved is None:
            self._resolved = pick_device(self.device)
        return self._resolved

    def cached(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` once per ``key`` for the life of this context."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def forget(self, key: Hashable | None = None) -> None:
        """Drop one cached value (or all of them)."""
        if key is None:
            self._cache.clear()
        else:
            self._cache.pop(key, None)

    def on_close(self, release: Callable[[], Any]) -> None:
        """Call ``release()`` when this context closes (a worker pool, a server it started)."""
        self._on_close.append(release)

    def ran_elsewhere(self, slug: str, where: str, cpu_s: float) -> None:
        """Add ``cpu_s`` CPU-seconds that experiment ``slug``'s units took in ``where`` (worker processes,
        a Dask cluster) to its account."""
        _, before = self.elsewhere.get(slug, (where, 0.0))
        self.elsewhere[slug] = (where, before + cpu_s)

    def close(self) -> None:
        while self._on_close:
            self._on_close.pop()()
        self._cache.clear()
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Experiment(Generic[C, M]):
    """One registered experiment: ``run(cfg, ctx, live) -> Result[Metrics]``."""

    slug: str
    title: str
    Config: type[C]
    Metrics: type[M]
    run: Callable[[C, Any, Any], Result[M]]
    # The live figure its panel streams into: title (default: the experiment's) and axis labels.
    figure_title: str = ""
    xaxis: str = ""
    yaxis: str = ""
    # What its panel shows under the figure once a run ends (default: the result's table).
    show_result: Callable[[Result[M]], Any] | None = None
    # How it replicates (unit, budget per profile, cost), for an experiment whose claims are noisy.
    replicates: Replicates | None = None

    def config(
        self,
        smoke: bool = False,
        profile: str = DEFAULT,
        *,
        values: dict[str, Any] | None = None,
        **overrides: Any,
    ) -> C:
        """This experiment's config: its SMOKE preset, full profile or defaults, with a context's
        ``values`` and ``overrides`` (see :func:`config_for`)."""
        return config_for(self.Config, smoke, profile, values=values, replicates=self.replicates, **overrides)


class Registry:
    """A theme's experiments by slug, in registration order, and the claims and headline numbers
    judged on them. ``summary`` names the experiment whose figure sums the theme up: its panel's
    figure output is marked so (``metadata["nbkit"]["summary"]``), and a run's index page shows it."""

    def __init__(self, theme: str, *, summary: str = "") -> None:
        self.theme = theme
        self.summary = summary
        self._experiments: dict[str, Experiment[Any, Any]] = {}
        self._claims: dict[str, ClaimSpec] = {}
        self._headline: dict[str, HeadlineSpec] = {}

    def register(self, experiment: Experiment[C, M]) -> Experiment[C, M]:
        """Register an experiment (the one way: ``REGISTRY.register(Experiment(...))``)."""
        if experiment.slug in self._experiments:
            raise ValueError(f"{self.theme}: experiment {experiment.slug!r} registered twice")
        if not (dataclasses.is_dataclass(experiment.Config) and dataclasses.is_dataclass(experiment.Metrics)):
            raise TypeError(
                f"{self.theme}: experiment {experiment.slug!r} needs dataclasses for Config and Metrics"
            )
        rep = experiment.replicates
        if rep is not None and rep.config_field not in {
            f.name for f in dataclasses.fields(experiment.Config)
        }:
            raise TypeError(
                f"{self.theme}: experiment {experiment.slug!r} replicates over {rep.config_field!r}, which "
                f"{experiment.Config.__name__} has no field for"
            )
        self._experiments[experiment.slug] = experiment
        return experiment

    def claim(self, spec: ClaimSpec) -> ClaimSpec:
        """Register a claim spec; every experiment it reads must be registered already."""
        if spec.key in self._claims:
            raise ValueError(f"{self.theme}: claim {spec.key!r} registered twice")
        unknown = [slug for slug in spec.reads if slug not in self._experiments]
        if unknown:
            raise ValueError(f"{self.theme}: claim {spec.key!r} reads unregistered experiment(s) {unknown}")
        self._claims[spec.key] = spec
        return spec

    def headline_number(self, spec: HeadlineSpec) -> HeadlineSpec:
        """Register one headline number (see :class:`nbkit.claims.HeadlineSpec`)."""
        if spec.name in self._headline:
            raise ValueError(f"{self.theme}: headline number {spec.name!r} registered twice")
        unknown = [slug for slug in spec.reads if slug not in self._experiments]
        if unknown:
            raise ValueError(
                f"{self.theme}: headline {spec.name!r} reads unregistered experiment(s) {unknown}"
            )
        self._headline[spec.name] = spec
        return spec

    @property
    def claims(self) -> list[ClaimSpec]:
        return list(self._claims.values())

    @property
    def headline_specs(self) -> list[HeadlineSpec]:
        return list(self._headline.values())

    @property
    def sizes(self) -> dict[str, Replicates]:
        """Each replicating experiment's :class:`Replicates`, by slug (what a claim's design is sized by)."""
        return {e.slug: e.replicates for e in self._experiments.values() if e.replicates is not None}

    def __getitem__(self, slug: str) -> Experiment[Any, Any]:
        try:
            return self._experiments[slug]
        except KeyError:
            raise UsageError(
                f"{self.theme} has no experiment {slug!r}; known: {', '.join(self._experiments)}"
            ) from None

    def __iter__(self) -> Iterator[Experiment[Any, Any]]:
        return iter(self._experiments.values())

    def __len__(self) -> int:
        return len(self._experiments)

    def __contains__(self, slug: object) -> bool:
        return slug in self._experiments

    @property
    def slugs(self) -> list[str]:
        return list(self._experiments)

    def run(
        self,
        slug: str,
        ctx: Context,
        *,
        smoke: bool | None = None,
        live: LiveFigure | None = None,
        **overrides: Any,
    ) -> Result[Any]:
        """Run experiment ``slug`` headless in ``ctx`` and keep its result there: the config ``ctx``'s
        smoke and profile pick (``smoke`` overrides the context's), with ``overrides`` (an unknown one
        is a :class:`UsageError`) — what its panel's Run button runs, without the panel."""
        experiment = self[slug]
        cfg = experiment.config(
            ctx.smoke if smoke is None else smoke,
            ctx.profile,
            values=ctx.config_values(experiment),
            **overrides,
        )
        return run_kept(experiment, cfg, ctx, live)

    def panel(
        self,
        slug: str,
        ctx: Context,
        *,
        smoke: bool | None = None,
        widget: bool | None = None,
        **overrides: Any,
    ) -> Panel:
        """The panel of experiment ``slug`` in ``ctx`` (see :func:`panel`); its figure is marked as the
        theme's summary when ``slug`` is :attr:`summary`."""
        p = panel(self[slug], ctx, smoke=smoke, widget=widget, **overrides)
        p.live.mark(summary=slug == self.summary)
        return p

    def show(self, slug: str, ctx: Context, *, smoke: bool | None = None, **overrides: Any) -> Result[Any]:
        """The notebook cell's one call: display experiment ``slug``'s panel, run it once with the
        config ``ctx`` picks and ``overrides``, record its metrics under ``slug`` and return the
        result (kept in ``ctx``). Its Run button runs it again with the controls' values."""
        p = self.panel(slug, ctx, smoke=smoke, **overrides)
        p.display()
        result = p.run()
        record(slug, result.metrics)
        record("ran", ctx.ran)  # where each experiment ran and what it cost, for the run's index
        return result

    def judge(self, ctx: Context) -> Ledger:
        """The claims ledger of ``ctx``: every registered claim judged on the results it kept (a claim
        whose experiments did not run says "not measured"; a smoke context's rows are measured, not
        judged), recorded as ``claims``; prints one line naming every metric recorded so far."""
        rows = judge(self.claims, ctx.results, self.sizes, profile=ctx.profile, smoke=ctx.smoke)
        record("claims", rows)
        print(summary_line())  # the one line saying what the notebook recorded (record itself is quiet)
        return rows

    def stopper(self, slug: str, ctx: Context, cfg: Any) -> Callable[[Any], bool]:
        """For experiment ``slug``'s replicate loop in ``ctx`` at config ``cfg``: ``stop(metrics)`` says,
        after a replicate, whether every claim it feeds that its budget can decide has been decided
        (:func:`nbkit.claims.judge.decided`) — then the loop stops. Never in a smoke run (nothing is
        judged there)."""
        specs, sizes = self.claims, self.sizes

        def stop(metrics: Any) -> bool:
            return not ctx.smoke and decided(specs, slug, metrics, ctx.results, sizes, cfg)

        return stop

    def headline(self, ctx: Context) -> dict[str, Any]:
        """The headline numbers of ``ctx`` (NaN for an experiment that did not run), recorded as
        ``headline``, and beside them, as ``headline_spec``, each number's words, unit and how far it may
        move between two runs (``{name: {"label", "unit", "help", "tolerance", "relative"}}``, what the run
        page and ``nbkit compare`` read)."""
        values = headline_values(self.headline_specs, ctx.results)
        record("headline", values)
        record(HEADLINE_SPEC, headline_specs(self.headline_specs))
        return values

    def metrics_types(self) -> set[type]:
        """Every metrics dataclass a registered experiment produces (what claims may read)."""
        return {e.Metrics for e in self}


def run_kept(experiment: Experiment[C, M], cfg: C, ctx: Context, live: Any) -> Result[M]:
    """Run ``experiment`` at ``cfg`` in ``ctx`` and keep its result there with the config that ran, and, in
    ``ctx.ran``, where it ran, its wall time and its CPU-seconds (this process's and its units' elsewhere)."""
    ctx.elsewhere.pop(experiment.slug, None)
    wall, cpu = time.perf_counter(), time.process_time()
    result = experiment.run(cfg, ctx, live)
    result.config = cfg
    where, cpu_elsewhere = ctx.elsewhere.get(experiment.slug, ("", 0.0))
    ctx.ran[experiment.slug] = {
        "where": f"this process and {where}" if where else "this process",
        "wall_s": round(time.perf_counter() - wall, 1),
        "cpu_s": round(time.process_time() - cpu + cpu_elsewhere, 1),
    }
    return ctx.keep(experiment.slug, result)


def panel(
    experiment: Experiment[C, M],
    ctx: Context,
    *,
    smoke: bool | None = None,
    widget: bool | None = None,
    title: str | None = None,
    show_result: Callable[[Result[M]], Any] | None = None,
    **overrides: Any,
) -> Panel:
    """The one panel factory: widgets for ``experiment``'s config, its Run button running it in ``ctx``.

    ``smoke`` (default: ``ctx.smoke``) starts from ``Config.smoke()``, the context's full profile from
    ``Config.full()``; ``overrides`` set fields (an unknown one is a
    :class:`UsageError`). ``panel(...).run()`` runs exactly what the button runs, headless.
    """
    smoke = ctx.smoke if smoke is None else smoke
    cfg = experiment.config(smoke, ctx.profile, values=ctx.config_values(experiment), **overrides)

    def run(params: C, live: Any = None) -> Result[M]:
        return run_kept(experiment, params, ctx, live)

    figure = None
    if experiment.figure_title or experiment.xaxis or experiment.yaxis:
        figure = LiveFigure(
            experiment.figure_title or experiment.title,
            xaxis=experiment.xaxis,
            yaxis=experiment.yaxis,
            widget=widget,
        )
    built = Panel(
        cfg,
        run,
        title=experiment.title if title is None else title,
        figure=figure,
        widget=widget,
        show_result=show_result or experiment.show_result,
    )
    built.live.mark(experiment=experiment.slug)  # which experiment's figure the stored output is
    return built
