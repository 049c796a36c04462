"""The experiment contract, held for every theme: one registry, typed metrics, one context, claims
that read only what a registered experiment produces, verdict functions that return ``Verdict``."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import types
import typing
from pathlib import Path

import pytest

from nbkit.claims import (
    DEFAULT,
    FULL,
    HOLDS,
    INCONCLUSIVE,
    KINDS,
    MEASURED,
    REFUTED,
    ClaimSpec,
    Design,
    HeadlineSpec,
    Reading,
    Rule,
    Verdict,
    decide_at_least,
    mean_interval,
    normal_units,
    operating_characteristics,
    simulate,
)
from nbkit.errors import UsageError
from nbkit.experiment import Context, Experiment, Registry, Result, config_for, panel, param

THEMES = ["kg", "zero", "signatures", "audit"]
ROOT = Path(__file__).resolve().parents[2]


def _theme(name):
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
def test_theme_has_one_context_in_its_own_module(theme):
    """Each theme opens its context one way: ``nbkit.<theme>.context.XContext(device, **options)``."""
    module = importlib.import_module(f"nbkit.{theme}.context")
    experiments, _ = _theme(theme)
    for mod, want in ((module, 1), (experiments, 0)):
        found = [
            v
            for v in vars(mod).values()
            if isinstance(v, type)
            and issubclass(v, Context)
            and v is not Context
            and v.__module__ == mod.__name__
        ]
        assert len(found) == want, (mod.__name__, found)
    (ctx_class,) = [
        v
        for v in vars(module).values()
        if isinstance(v, type)
        and issubclass(v, Context)
        and v is not Context
        and v.__module__ == module.__name__
    ]
    assert list(inspect.signature(ctx_class).parameters)[:1] == ["device"], "XContext(device, **options)"


@pytest.mark.parametrize("theme", THEMES)
def test_claim_specs_read_what_registered_experiments_produce(theme):
    """Every spec names registered experiments, its ``read`` takes exactly their metrics types in that
    order and returns a ``Reading``, and its verdict function returns a ``Verdict``."""
    experiments, claims = _theme(theme)
    reg = experiments.REGISTRY
    assert reg.claims, f"{theme} registers no claim specs"
    for spec in reg.claims:
        assert isinstance(spec, ClaimSpec) and spec.kind in KINDS
        hints = typing.get_type_hints(spec.read)
        assert hints.pop("return", None) is Reading, f"{spec.key}: read(...) -> Reading"
        params = list(inspect.signature(spec.read).parameters)
        assert len(params) == len(spec.reads), f"{spec.key}: read takes one metrics per slug in reads"
        for slug, name in zip(spec.reads, params, strict=True):
            want = reg[slug].Metrics
            got = hints.get(name)
            assert got is want, f"{spec.key}: read({name}) is {got}; {slug!r} produces {want.__name__}"
        assert typing.get_type_hints(spec.verdict).get("return") is Verdict, f"{spec.key}: verdict -> Verdict"
        assert (spec.verdict.__doc__ or "").strip(), f"{spec.key}: the verdict function states its rule"
    for spec in reg.headline_specs:
        assert all(slug in reg for slug in spec.reads), spec.name


@pytest.mark.parametrize("theme", THEMES)
def test_every_measured_row_decides_at_defaults_or_in_the_full_profile(theme):
    """Every measured spec has a design whose n is what its experiment's default config runs; simulated
    at that n its own verdict function reaches P(holds | true) ≥ 0.8 and P(refuted | false) ≥ 0.8 with
    P(wrong decisive) ≤ 0.05 under each — or the full profile's config gives it an n that does, with the
    minutes that costs stated, or (``beyond_data``) the data holds fewer units than the n that would, which
    the row names."""
    experiments, _ = _theme(theme)
    reg = experiments.REGISTRY
    for spec in reg.claims:
        if spec.kind != MEASURED:
            assert spec.design is None, spec.key
            continue
        d = spec.design
        Config = reg[spec.reads[0]].Config
        assert d.units(Config()) == d.n, f"{spec.key}: the design's n is not what {Config.__name__}() runs"
        if operating_characteristics(spec, DEFAULT).decided:
            continue
        if d.beyond_data:  # the data holds fewer units than any profile would need: the needed n is real
            assert d.needed_n and d.needed_n > d.n and not d.full_n, spec.key
            level = operating_characteristics(spec, DEFAULT).level
            assert simulate(spec, d.needed_n, level).decided, f"{spec.key}: not decided at n = {d.needed_n}"
            continue
        assert d.full_n and d.full_minutes and d.full_minutes_source, f"{spec.key}: no full profile"
        assert d.units(Config.full()) == d.full_n, f"{spec.key}: {Config.__name__}.full() does not run full_n"
        oc = operating_characteristics(spec, FULL)
        assert oc.decided, f"{spec.key}: not decided even at the full profile's n = {d.full_n}: {oc}"


@pytest.mark.parametrize("theme", THEMES)
def test_claims_module_judges_through_the_registry(theme):
    experiments, claims = _theme(theme)
    assert claims.judge == experiments.REGISTRY.judge and claims.headline == experiments.REGISTRY.headline


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


def _claims_modules() -> list[Path]:
    return sorted(p for p in (ROOT / "nbkit").rglob("*.py") if "claim" in p.name and "pscheck" not in p.parts)


@pytest.mark.parametrize("path", _claims_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_claims_modules_read_typed_fields_in_short_functions(path):
    """No ``.get("…")`` read in a claims module (claims read typed fields) and no function longer
    than 60 lines (one spec, one small verdict function)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            assert not (
                node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
            ), f"{path.name}:{node.lineno}: .get({node.args[0].value!r}) reads a dict key"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            assert length <= 60, f"{path.name}:{node.lineno} {node.name} is {length} lines"


def test_audit_metrics_are_typed_fields():
    """At most a quarter of the audit's metrics fields may be optional (``X | None``), each a figure
    that can truly be absent."""
    from nbkit.audit.check import CheckMetrics

    experiments, _ = _theme("audit")
    total = optional = 0
    for exp in experiments.REGISTRY:
        if not issubclass(exp.Metrics, CheckMetrics):
            continue
        hints = typing.get_type_hints(exp.Metrics)
        for f in dataclasses.fields(exp.Metrics):
            if f.name in {g.name for g in dataclasses.fields(CheckMetrics)}:
                continue
            total += 1
            tp = hints[f.name]
            if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp):
                optional += 1
    assert total and optional <= total / 4, f"{optional} of {total} audit metrics fields are optional"


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
    assert exp.config(smoke=True, steps=None).steps == 1 and exp.config(steps=None).steps == 4  # the preset's
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


def test_a_context_gives_config_values_under_the_preset_and_the_overrides():
    """A context's values (a user's file) replace the defaults; the smoke preset's sizes win over them,
    and a notebook's overrides over both; a value the config lacks is a UsageError."""

    class FromFile(Context):
        def config_values(self, experiment):
            return {"steps": 7, "names": ["file"]}

    exp = Experiment("double", "Double", _Cfg, _M, _run)
    with FromFile() as ctx:
        assert panel(exp, ctx, widget=False).params.steps == 7
        assert panel(exp, ctx, smoke=True, widget=False).params.steps == 1  # the preset's size wins
        assert panel(exp, ctx, smoke=True, widget=False).params.names == ["file"]
        assert panel(exp, ctx, steps=3, widget=False).params.steps == 3
    with pytest.raises(UsageError, match="_Cfg has no field stpes"):
        config_for(_Cfg, values={"stpes": 1})


def test_unwrap_reads_result_optional_and_list():
    assert _unwrap(Result[_M]) == [_M]
    assert _unwrap(Result[_M] | None) == [_M]
    assert _unwrap(list[Result[_M]]) == [_M]
    assert _unwrap(int) == [int]


# -- adding one experiment and its claim: a config, a metrics class, a run, a spec ------------------


@dataclasses.dataclass
class ToyConfig:
    seeds: int = param(3, min=1, max=10)

    @classmethod
    def smoke(cls):
        return cls(seeds=2)


@dataclasses.dataclass(frozen=True)
class ToyMetrics:
    gains: tuple[float, ...]


def run_toy(cfg, ctx, live=None):
    return Result(metrics=ToyMetrics(tuple(0.5 + 0.01 * s for s in range(cfg.seeds))))


def verdict_toy(gains: list[float], level: float = 0.95) -> Verdict:
    """Holds when the t-interval of the per-seed gains lies at or above 0.3, refuted when it lies
    below, else inconclusive."""
    return decide_at_least(mean_interval(gains, level), 0.3, what="mean gain")


def read_toy(toy: ToyMetrics) -> Reading:
    return Reading(
        args=(list(toy.gains),),
        measured=f"{sum(toy.gains) / len(toy.gains):.2f}",
        n=f"{len(toy.gains)} seeds",
    )


def test_adding_an_experiment_and_its_claim_takes_four_declarations():
    reg = Registry("toy")
    reg.register(Experiment("toy", "A toy", ToyConfig, ToyMetrics, run_toy))
    reg.claim(
        ClaimSpec(
            key="toy_gain",
            claim="the toy gains at least 0.3",
            field_note="0.3",
            source="§0",
            kind=MEASURED,
            reads=("toy",),
            read=read_toy,
            verdict=verdict_toy,
            rule=Rule(
                "t-interval of the per-seed gain ≥ 0.3 holds, < 0.3 refutes",
                "t",
                "at least",
                0.3,
                unit="seed",
            ),
            design=Design(
                effect=0.5,
                null=0.1,
                unit="seed",
                spread=0.03,
                spread_source="assumed: the toy's own gains",
                draw=normal_units(0.03),
                n=3,
                units=lambda cfg: cfg.seeds,
                full_n=6,
            ),
        )
    )
    reg.headline_number(HeadlineSpec("toy_mean", ("toy",), lambda t: sum(t.gains) / len(t.gains)))
    with pytest.raises(ValueError, match="unregistered"):
        reg.claim(dataclasses.replace(reg.claims[0], key="other", reads=("missing",)))
    with Context() as ctx:
        (row,) = reg.judge(ctx)
        assert row.verdict == INCONCLUSIVE and row.measured == "not measured" and "run toy" in row.why
        assert reg.headline(ctx)["toy_mean"] != reg.headline(ctx)["toy_mean"]  # NaN: nothing ran
        reg.run("toy", ctx, smoke=True)
        (row,) = reg.judge(ctx)
        assert (row.key, row.verdict, row.n, row.kind) == ("toy_gain", HOLDS, "2 seeds", MEASURED)
        assert row.decided_at_defaults and row.p_holds_if_true >= 0.8 and row.p_refuted_if_false >= 0.8
        assert reg.headline(ctx) == {"toy_mean": pytest.approx(0.505)}
        ctx.keep("toy", Result(metrics=ToyMetrics((0.1, 0.11, 0.12))))
        assert reg.judge(ctx)[0].verdict == REFUTED
        ctx.keep("toy", Result(metrics=ToyMetrics((0.1, 0.9))))
        assert reg.judge(ctx)[0].verdict == INCONCLUSIVE
    noisy = Registry("noisy")
    noisy.register(Experiment("toy", "A toy", ToyConfig, ToyMetrics, run_toy))
    spec = reg.claims[0]
    wide = dataclasses.replace(spec.design, spread=0.5, draw=normal_units(0.5), full_minutes=4.0)
    noisy.claim(dataclasses.replace(spec, design=wide))
    with Context() as ctx:
        noisy.run("toy", ctx)
        (row,) = noisy.judge(ctx)
        assert row.verdict == INCONCLUSIVE and not row.decided_at_defaults
        assert row.why.startswith(
            "not decided at defaults: needs n ≥ 6 seeds (≈ 4 min on 2 cores) — run the full profile"
        )


def test_a_row_the_data_cannot_decide_names_the_n_it_needs():
    """A design whose needed n is more than the data holds (``beyond_data``) reads not decided in every
    profile, naming that n and why, never a verdict it cannot support."""
    reg = Registry("toy")
    reg.register(Experiment("toy", "A toy", ToyConfig, ToyMetrics, run_toy))
    wide = Design(
        effect=0.5,
        null=0.1,
        unit="case",
        spread=0.5,
        spread_source="assumed",
        draw=normal_units(0.5),
        n=3,
        units=lambda cfg: cfg.seeds,
        needed_n=40,
        beyond_data="the toy data holds 3 cases",
    )
    reg.claim(
        ClaimSpec(
            key="toy_gain",
            claim="the toy gains at least 0.3",
            field_note="0.3",
            source="§0",
            kind=MEASURED,
            reads=("toy",),
            read=read_toy,
            verdict=verdict_toy,
            rule=Rule("t-interval of the per-seed gain ≥ 0.3 holds, < 0.3 refutes", "t", "at least", 0.3),
            design=wide,
        )
    )
    for profile in (DEFAULT, FULL):
        with Context(profile=profile) as ctx:
            reg.run("toy", ctx)
            (row,) = reg.judge(ctx)
            assert row.verdict == INCONCLUSIVE and not row.decided_at_defaults
            assert "needs n ≥ 40 cases — the toy data holds 3 cases: no profile decides it" in row.why


def test_describe_prints_one_device_line_and_records_it(monkeypatch, capsys):
    """The device line every theme notebook prints, with a fabricated CUDA machine (the GPU path)."""
    from nbkit import experiment, record

    fake = {
        "torch": "2.13.0+cu128",
        "gpus": [{"index": 0, "name": "NVIDIA H200", "memory_gib": 139.8}],
        "cpu_cores_usable": 16,
        "cpu_cores_logical": 16,
        "torch_threads": 16,
        "ram_available_gib": 120.0,
        "ram_total_gib": 128.0,
    }
    monkeypatch.setattr(experiment, "device_report", lambda: dict(fake))
    ctx = Context("cpu")
    assert ctx.describe() is None
    line = capsys.readouterr().out.strip()
    assert line == (
        "device cpu · torch 2.13.0+cu128 · NVIDIA H200 (140 GiB) · 16 of 16 cores, 16 torch threads · "
        "120.0 of 128.0 GiB RAM free"
    )
    assert record.recorded()["device"]["gpus"][0]["name"] == "NVIDIA H200"
