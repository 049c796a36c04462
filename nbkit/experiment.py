"""The experiment contract the four themes share.

An :class:`Experiment` names its slug, title, config dataclass, metrics dataclass and its ``run``::

    run(cfg: XConfig, ctx: ThemeContext, live: LiveFigure | None) -> Result[XMetrics]

``XMetrics`` is a frozen dataclass of what the run measured. Claims read those typed fields (never
dict keys), so a claim cannot wait on a value nothing writes: a misspelt or unwritten field is an
``AttributeError`` in the unit tests and a mypy error before that.

Each theme keeps one :class:`Registry` (``nbkit.<theme>.experiments.REGISTRY``) and one
:class:`Context` subclass: what its experiments share inside one notebook or session (the resolved
device, loaded models, an LM server, cached splits), cached explicitly per context, never in module
globals. A notebook makes one context, runs experiments through it (directly or through
:func:`panel`) and closes it.

Configs: every config dataclass has ``smoke()`` (a classmethod returning the SMOKE preset) and its
fields carry widget metadata written with :func:`param`. :meth:`Experiment.config` is the one way to
build a config from ``SMOKE`` and overrides; an unknown override is a :class:`UsageError`.

Modelled on the audit's check registry and pscheck's rule registry (one entry per module, looked up
by slug), the way ruff keeps rules and peft keeps tuners.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from nbkit.device import pick_device
from nbkit.errors import UsageError
from nbkit.live import LiveFigure
from nbkit.panels import Panel
from nbkit.result import Result

__all__ = ["Context", "Experiment", "Registry", "Result", "config_for", "panel", "param"]

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
    default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
    **extra: Any,
) -> Any:
    """A config field with the metadata its panel control reads (the one widget-metadata helper).

    ``min``/``max``/``step`` bound a slider, ``log`` makes it logarithmic, ``choices`` makes a dropdown
    (a multi-select when the value is a tuple), ``hidden`` keeps the field off the panel, ``help`` is
    the field's one-line description. ``extra`` keys are kept as they are (a theme's own metadata).
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
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    if isinstance(default, (list, dict, set)):
        # A mutable default would be shared by every instance: dataclasses refuse it, so copy per instance.
        mutable = default
        return dataclasses.field(default_factory=lambda: type(mutable)(mutable), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def config_for(Config: type[C], smoke: bool = False, **overrides: Any) -> C:
    """``Config.smoke()`` when ``smoke`` else ``Config()``, with ``overrides`` applied.

    An override the config has no field for is a :class:`UsageError` naming the config and its fields
    (a notebook parameter spelt wrong must not be dropped silently).
    """
    base = Config.smoke() if smoke else Config()  # type: ignore[attr-defined]
    names = {f.name for f in dataclasses.fields(base)}  # type: ignore[arg-type]
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise UsageError(
            f"{Config.__name__} has no field {', '.join(unknown)}; its fields: {', '.join(sorted(names))}"
        )
    return dataclasses.replace(base, **overrides) if overrides else base  # type: ignore[type-var]


class Context:
    """What one theme's experiments share in one notebook or session.

    ``device`` is the requested device (``"auto"``, ``"cpu"``, ``"cuda:0"``); :attr:`torch_device` resolves
    it once. :meth:`cached` is the one cache: keyed explicitly, living as long as this context, so two
    contexts never see each other's state. :meth:`close` releases what the context holds (processes,
    servers); a context is also a context manager.
    """

    def __init__(self, device: str = "auto") -> None:
        self.device = device
        self._cache: dict[Hashable, Any] = {}
        self._resolved: Any = None
        self.closed = False

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

    def close(self) -> None:
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
    help: str = ""
    # The live figure its panel streams into: title (default: the experiment's) and axis labels.
    figure_title: str = ""
    xaxis: str = ""
    yaxis: str = ""

    def config(self, smoke: bool = False, **overrides: Any) -> C:
        """This experiment's config: its SMOKE preset or defaults, with ``overrides`` (see
        :func:`config_for`)."""
        return config_for(self.Config, smoke, **overrides)


class Registry:
    """A theme's experiments by slug, in registration order."""

    def __init__(self, theme: str) -> None:
        self.theme = theme
        self._experiments: dict[str, Experiment[Any, Any]] = {}

    def register(self, experiment: Experiment[C, M]) -> Experiment[C, M]:
        if experiment.slug in self._experiments:
            raise ValueError(f"{self.theme}: experiment {experiment.slug!r} registered twice")
        if not (dataclasses.is_dataclass(experiment.Config) and dataclasses.is_dataclass(experiment.Metrics)):
            raise TypeError(
                f"{self.theme}: experiment {experiment.slug!r} needs dataclasses for Config and Metrics"
            )
        self._experiments[experiment.slug] = experiment
        return experiment

    def experiment(
        self, slug: str, title: str, Config: type[C], Metrics: type[M], *, help: str = ""
    ) -> Callable[[Callable[[C, Any, Any], Result[M]]], Experiment[C, M]]:
        """Decorator form: ``@REGISTRY.experiment("ablation", "The ablation ladder", AblationConfig,
        AblationMetrics)``."""

        def register(run: Callable[[C, Any, Any], Result[M]]) -> Experiment[C, M]:
            return self.register(
                Experiment(
                    slug, title, Config, Metrics, run, help or (run.__doc__ or "").strip().split("\n")[0]
                )
            )

        return register

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
        self, slug: str, ctx: Any, *, smoke: bool = False, live: LiveFigure | None = None, **overrides: Any
    ) -> Result[Any]:
        """Run experiment ``slug`` headless in ``ctx``: its SMOKE preset or defaults with ``overrides`` (an
        unknown one is a :class:`UsageError`) — what its panel's Run button runs, without the panel."""
        experiment = self[slug]
        return experiment.run(experiment.config(smoke, **overrides), ctx, live)

    def metrics_types(self) -> set[type]:
        """Every metrics dataclass a registered experiment produces (what claims may read)."""
        return {e.Metrics for e in self}


def panel(
    experiment: Experiment[C, M],
    ctx: Any,
    *,
    smoke: bool = False,
    widget: bool | None = None,
    title: str | None = None,
    show_result: Callable[[Result[M]], Any] | None = None,
    **overrides: Any,
) -> Panel:
    """The one panel factory: widgets for ``experiment``'s config, its Run button running it in ``ctx``.

    ``smoke`` starts from ``Config.smoke()``; ``overrides`` set fields (an unknown one is a
    :class:`UsageError`). ``panel(...).run()`` runs exactly what the button runs, headless.
    """
    cfg = experiment.config(smoke, **overrides)

    def run(params: C, live: Any = None) -> Result[M]:
        return experiment.run(params, ctx, live)

    figure = None
    if experiment.figure_title or experiment.xaxis or experiment.yaxis:
        figure = LiveFigure(
            experiment.figure_title or experiment.title,
            xaxis=experiment.xaxis,
            yaxis=experiment.yaxis,
            widget=widget,
        )
    return Panel(
        cfg,
        run,
        title=experiment.title if title is None else title,
        figure=figure,
        widget=widget,
        show_result=show_result,
    )
