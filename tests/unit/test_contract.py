"""The experiment contract, held for every theme: one registry, typed metrics, one context, claims
that read only what a registered experiment produces, verdict functions that return ``Verdict``."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import types
import typing

import pytest

from nbkit.claims import Verdict
from nbkit.errors import UsageError
from nbkit.experiment import Context, Experiment, Registry, Result, config_for, panel, param

THEMES = ["kg", "zero", "signatures", "audit"]
# Themes still being moved onto the contract (emptied as each lands).
PENDING: set[str] = set()


def _theme(name):
    if name in PENDING:
        pytest.skip(f"{name} not yet on the experiment contract")
    return importlib.import_module(f"nbkit.{name}.experiments"), importlib.import_module(
        f"nbkit.{name}.claims"
    )


def _unwrap(tp) -> list[type]:
    """The classes an annotation names: ``Result[M]`` → M, ``X | None`` → X,
    ``list[X]``/``Sequence[X]`` → X."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return [t for a in typing.get_args(tp) if a is not type(None) for t in _unwrap(a)]
    if origin is Result:
        return _unwrap(typing.get_args(tp)[0])
    if origin is not None and typing.get_args(tp):
        return [t for a in typing.get_args(tp) if a is not Ellipsis for t in _unwrap(a)]
    return [tp] if isinstance(tp, type) else []


@pytest.mark.parametrize("theme", THEMES)
def test_registry_experiments_are_typed(theme):
    experiments, _ = _theme(theme)
    reg = experiments.REGISTRY
    assert isinstance(reg, Registry) and len(reg) > 0
    for exp in reg:
        assert isinstance(exp, Experiment)
        smoke = exp.Config.smoke()
        assert isinstance(smoke, exp.Config) and isinstance(exp.Config(), exp.Config), exp.slug
        assert dataclasses.is_dataclass(exp.Metrics) and exp.Metrics.__dataclass_params__.frozen, (
            f"{exp.slug}: Metrics must be a frozen dataclass"
        )
        assert list(inspect.signature(exp.run).parameters)[:3] == ["cfg", "ctx", "live"], exp.slug


@pytest.mark.parametrize("theme", THEMES)
def test_theme_has_one_context(theme):
    experiments, _ = _theme(theme)
    contexts = [
        v
        for v in vars(experiments).values()
        if isinstance(v, type)
        and issubclass(v, Context)
        and v is not Context
        and v.__module__ == experiments.__name__
    ]
    assert len(contexts) == 1, contexts


@pytest.mark.parametrize("theme", THEMES)
def test_claims_read_only_what_registered_experiments_produce(theme):
    experiments, claims = _theme(theme)
    produced = experiments.REGISTRY.metrics_types()
    hints = typing.get_type_hints(claims.claims)
    hints.pop("return", None)
    assert hints, "claims() takes the results it judges, annotated"
    for name, tp in hints.items():
        classes = _unwrap(tp)
        assert classes, f"claims({name}=...) has no type a registry produces: {tp}"
        for cls in classes:
            assert cls in produced, (
                f"claims({name}=...) reads {cls.__name__}, which no registered {theme} experiment returns"
            )


@pytest.mark.parametrize("theme", THEMES)
def test_verdict_functions_return_verdict(theme):
    _, claims = _theme(theme)
    fns = [
        f
        for n, f in vars(claims).items()
        if n.startswith("verdict_") and inspect.isfunction(f) and f.__module__ == claims.__name__
    ]
    assert fns
    for f in fns:
        assert typing.get_type_hints(f).get("return") is Verdict, f.__name__


# -- the contract's own behaviour ---------------------------------------------------------------


@dataclasses.dataclass
class _Cfg:
    steps: int = param(4, min=1, max=10, help="steps")
    names: list = param(["a"])

    @classmethod
    def smoke(cls):
        return cls(steps=1)


@dataclasses.dataclass(frozen=True)
class _M:
    total: int


def _run(cfg, ctx, live=None):
    return Result(metrics=_M(total=ctx.cached(("x", cfg.steps), lambda: cfg.steps * 2)))


def test_registry_config_and_panel():
    reg = Registry("demo")
    exp = reg.register(Experiment("double", "Double", _Cfg, _M, _run))
    with pytest.raises(ValueError):
        reg.register(exp)
    with pytest.raises(UsageError, match="no experiment 'nope'"):
        reg["nope"]
    assert reg.slugs == ["double"] and reg.metrics_types() == {_M}
    assert exp.config(smoke=True).steps == 1 and exp.config(steps=3).steps == 3
    with pytest.raises(UsageError, match="_Cfg has no field stpes"):
        config_for(_Cfg, stpes=3)
    a, b = _Cfg(), _Cfg()
    a.names.append("b")
    assert b.names == ["a"]  # a list default is copied per instance
    assert dataclasses.fields(_Cfg)[0].metadata["max"] == 10
    with Context() as ctx:
        p = panel(exp, ctx, smoke=True, widget=False)
        assert p.run().metrics == _M(2)
        assert p.run(steps=5).metrics.total == 10
        assert reg.run("double", ctx, smoke=True, steps=3).metrics == _M(6)
        with pytest.raises(UsageError):
            reg.run("double", ctx, stpes=3)
        assert ctx._cache
    assert ctx.closed and not ctx._cache


def test_unwrap_reads_result_optional_and_list():
    assert _unwrap(Result[_M]) == [_M]
    assert _unwrap(Result[_M] | None) == [_M]
    assert _unwrap(list[Result[_M]]) == [_M]
    assert _unwrap(int) == [int]
