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
    HOLDS,
    INCONCLUSIVE,
    KINDS,
    MEASURED,
    OWN,
    REFUTED,
    ClaimSpec,
    HeadlineSpec,
    Plan,
    Reading,
    Replicates,
    Verdict,
    at_least,
    family_level,
    simulate,
)
from nbkit.claims.judge import replicates_of
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
    """Every row names registered experiments and its ``read`` takes exactly their metrics types in that
    order and returns a ``Reading``; a bespoke verdict returns a ``Verdict``, says why no generic rule
    says its claim, and states its rule in its docstring."""
    experiments, claims = _theme(theme)
    reg = experiments.REGISTRY
    assert reg.claims, f"{theme} registers no claim rows"
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
        if spec.verdict is not None:
            assert spec.bespoke.strip(), f"{spec.key}: a bespoke verdict says why"
            assert typing.get_type_hints(spec.verdict).get("return") is Verdict, f"{spec.key}: -> Verdict"
            assert (spec.verdict.__doc__ or "").strip(), f"{spec.key}: the verdict function states its rule"
        assert spec.key == spec.key.lower() and "-" not in spec.key, f"{spec.key}: keys are snake_case"
    for spec in reg.headline_specs:
        assert all(slug in reg for slug in spec.reads), spec.name
        assert spec.label.strip() and spec.label != spec.name, f"{spec.name}: a headline number in words"


@pytest.mark.parametrize("theme", THEMES)
def test_every_noisy_row_decides_at_defaults_or_in_the_full_profile(theme):
    """Every noisy measured row's design, simulated as the run judges it at its experiment's default budget,
    reaches P(holds | claimed) ≥ 0.8 and P(refuted | false) ≥ 0.8 with P(wrong decisive) ≤ 0.05 under each —
    or the full profile's budget gives it one that does — or the row says why no budget can (``bounded_by``:
    the data bounds its interval), and then indeed the full budget does not decide it."""
    experiments, _ = _theme(theme)
    reg = experiments.REGISTRY
    level = family_level(reg.claims)
    for spec in reg.claims:
        if not spec.noisy:
            assert spec.plan is None, spec.key
            continue
        found = replicates_of(spec, reg.sizes)
        if found is None:  # its units are whatever its experiments hold (cases of a file): judged at that n
            continue
        slug, rep = found
        for profile in ("default", "full"):
            budget = rep.budget(reg[slug].config(False, profile))
            oc = simulate(
                spec.key,
                spec.rule,
                spec.plan,
                budget=budget,
                least=min(rep.least, budget),
                level=level,
                sequential=rep.sequential and spec.rule.estimator.replicated,
                verdict=spec.verdict,
                head=spec.head,
            )
            if oc.decided:
                break
        assert oc.decided != bool(spec.bounded_by), f"{spec.key}: at the full profile's budget {budget}: {oc}"


def test_the_claims_tables_are_short():
    """The four themes' claims tables with their field notes stay under 2,000 lines together: a claim is a
    row of data, not a function per rule."""
    files = [ROOT / "nbkit" / t / f for t in THEMES for f in ("claims.py", "field_notes.py")]
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in files if p.is_file())
    assert lines < 2000, f"{lines} lines"
    assert not (ROOT / "nbkit" / "signatures" / "designs.py").exists()


@pytest.mark.parametrize("theme", THEMES)
def test_claims_module_judges_through_the_registry(theme):
    experiments, claims = _theme(theme)
    assert claims.judge == experiments.REGISTRY.judge and claims.headline == experiments.REGISTRY.headline


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


# -- adding one experiment and its claim: a config, a metrics class, a run, a row ----------------------


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


def read_toy(toy: ToyMetrics) -> Reading:
    return Reading(list(toy.gains), f"{sum(toy.gains) / len(toy.gains):.2f}")


TOY_ROW = ClaimSpec(
    "toy_gain",
    "the toy gains at least 0.3",
    OWN,
    "",
    MEASURED,
    ("toy",),
    read_toy,
    at_least(0.3, "per-seed gain", unit="seed", claimed=0.5, null=0.1),
    Plan(0.03, 0, "assumed: the toy's own gains"),
)
TOY_REPLICATES = Replicates("seed", "seeds", full=6, cost_s=60, cost_source="assumed")


def test_adding_an_experiment_and_its_claim_takes_four_declarations():
    reg = Registry("toy")
    reg.register(Experiment("toy", "A toy", ToyConfig, ToyMetrics, run_toy, replicates=TOY_REPLICATES))
    reg.claim(TOY_ROW)
    reg.headline_number(
        HeadlineSpec("toy_mean", "mean toy gain", ("toy",), lambda t: sum(t.gains) / len(t.gains))
    )
    with pytest.raises(ValueError, match="unregistered"):
        reg.claim(dataclasses.replace(reg.claims[0], key="other", reads=("missing",)))
    with Context() as ctx:
        (row,) = reg.judge(ctx)
        assert row.verdict == INCONCLUSIVE and row.measured == "not measured" and "run toy" in row.why
        assert reg.headline(ctx)["toy_mean"] != reg.headline(ctx)["toy_mean"]  # NaN: nothing ran
        reg.run("toy", ctx)
        (row,) = reg.judge(ctx)
        assert (row.key, row.verdict, row.kind, row.budget) == ("toy_gain", HOLDS, MEASURED, 3)
        assert row.decided and row.p_holds_if_true >= 0.8 and row.p_refuted_if_false >= 0.8
        assert reg.headline(ctx) == {"toy_mean": pytest.approx(0.51)}
        ctx.keep("toy", Result(metrics=ToyMetrics((0.1, 0.11, 0.12)), config=ToyConfig()))
        assert reg.judge(ctx)[0].verdict == REFUTED
        ctx.keep("toy", Result(metrics=ToyMetrics((0.1, 0.9, 0.5)), config=ToyConfig()))
        assert reg.judge(ctx)[0].verdict == INCONCLUSIVE
    with pytest.raises(TypeError, match="replicates over 'runs'"):
        Registry("bad").register(
            Experiment(
                "toy",
                "A toy",
                ToyConfig,
                ToyMetrics,
                run_toy,
                replicates=Replicates("seed", "runs", 6, 1, ""),
            )
        )


def test_a_row_its_budget_cannot_decide_names_the_full_profiles():
    reg = Registry("noisy")
    reg.register(Experiment("toy", "A toy", ToyConfig, ToyMetrics, run_toy, replicates=TOY_REPLICATES))
    reg.claim(dataclasses.replace(TOY_ROW, plan=Plan(0.5, 0, "assumed")))
    with Context() as ctx:
        reg.run("toy", ctx)
        (row,) = reg.judge(ctx)
        assert row.verdict == INCONCLUSIVE and not row.decided
        assert row.why.startswith("not decided at defaults: up to 3 seeds") and "up to 6 seeds" in row.why
    assert reg["toy"].config(False, "full").seeds == 6


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
