"""The audit's experiments: its eighteen checks (:mod:`nbkit.audit.registry`) and the ones that run several.

Besides one check at a time (``show("lora-binding", ctx)``), an audit runs a whole config: ``audit``
maps a config file (the audit's YAML, an axolotl YAML, a TRL / TrainingArguments, PEFT or DeepSpeed
JSON) onto the audit and runs every check it allows in a context of its own that shares the notebook's
loaded models (a deliberately broken config, ``broken.yaml``, by default); ``trainer-config`` does the
same for a user's trainer config and its five trainer checks (14–18); ``diagnose`` is ``nbkit diagnose``
on a whole training setup (the trainer config, its DeepSpeed JSON, the model and the cluster) and
``finished-run`` is ``nbkit diagnose RUN_DIR`` on a finished run's logs and memory snapshots, and
``watched-run`` the same rules applied while a tiny HF Trainer run trains (:mod:`nbkit.callbacks`). Each
returns typed metrics like a check, so a claim can read a whole config's audit. ``run``, ``panel`` and
``show`` are the registry's own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from nbkit.audit.checks.data_schema import DataSchemaMetrics
from nbkit.audit.config import config_file
from nbkit.audit.context import AuditContext
from nbkit.audit.formats import read_any
from nbkit.audit.registry import REGISTRY, TRAINER_CHECKS, run_audit
from nbkit.audit.watched_run import WatchedRunConfig, WatchedRunMetrics, run_watched, show_watched
from nbkit.diagnose.diagnosis import diagnose
from nbkit.diagnose.finished import FinishedRun, finished_run
from nbkit.experiment import Experiment, param
from nbkit.findings import Finding
from nbkit.result import Result

__all__ = ["REGISTRY", "TRAINER_CHECKS", "panel", "run", "show"]


@dataclass
class ConfigAuditConfig:
    """The config file whose audit runs (a bundled example by bare name), its model replaced when given,
    and the checks run ('' = every check it allows)."""

    config: str = param(
        "broken.yaml",
        help="an audit YAML, an axolotl YAML, a TRL SFTConfig / TrainingArguments, PEFT or DeepSpeed JSON "
        "(a bundled example by bare name)",
    )
    model: str = param(
        "", help="replaces its base model: a Hugging Face dir, a config.json, a Hub id, a preset"
    )
    checks: str = param("", help="checks run: slugs or numbers, e.g. 14-18 ('' = every check it allows)")

    @classmethod
    def smoke(cls):
        return cls()


@dataclass
class TrainerConfigAuditConfig(ConfigAuditConfig):
    """A user's trainer config and the five checks of what trainer configs get wrong (14–18)."""

    config: str = param(
        "axolotl_smollm2.yml",
        help="an axolotl YAML, a TRL SFTConfig / TrainingArguments JSON, a PEFT or DeepSpeed JSON",
    )
    checks: str = param(",".join(TRAINER_CHECKS), help="checks run ('' = every check the config allows)")


@dataclass(frozen=True)
class CheckOutcome:
    """One check of a config's audit: its slug, status and summary."""

    check: str
    status: str
    summary: str


@dataclass(frozen=True)
class ConfigAuditMetrics:
    """The audit of one config file: its format and model, how its keys mapped onto the audit, each
    check's outcome, and the data-schema check's typed counts."""

    file: str
    format: str
    model: str
    keys_audited: int
    keys_defaulted: int
    keys_not_covered: int
    checks: tuple[CheckOutcome, ...]
    # None when the config has no data section, or its data-schema check was not run or measured nothing.
    data_schema: DataSchemaMetrics | None

    @property
    def failures(self) -> int:
        return sum(c.status in ("fail", "error") for c in self.checks)


def run_config_audit(cfg: ConfigAuditConfig, ctx: AuditContext, live=None) -> Result[ConfigAuditMetrics]:
    """Map ``cfg.config`` onto the audit and run its checks in a context of its own, on ``ctx``'s device
    and seed, sharing ``ctx``'s loaded models; the findings are the result's data."""
    mapped = read_any(config_file(cfg.config), model=cfg.model or None)
    sub = AuditContext(
        ctx.torch_device,
        smoke=ctx.smoke,
        profile=ctx.profile,
        config=mapped.config,
        seed=ctx.config.model.seed,
        progress=ctx.progress,
        model_unavailable=mapped.model_unavailable,
        share_models_with=ctx,
    )
    audit = run_audit(sub, REGISTRY.select(cfg.checks) if cfg.checks.strip() else None)
    schema = sub.results["data-schema"].metrics if "data-schema" in sub.results else None
    keys = [r["status"] for r in mapped.keys]
    metrics = ConfigAuditMetrics(
        file=cfg.config,
        format=mapped.fmt,
        model=sub.config.model.name,
        keys_audited=keys.count("audited"),
        keys_defaulted=keys.count("defaulted"),
        keys_not_covered=keys.count("not covered"),
        checks=tuple(CheckOutcome(f.check, f.status, f.summary) for f in audit.data),
        data_schema=schema if isinstance(schema, DataSchemaMetrics) else None,
    )
    return Result(metrics=metrics, table=audit.table, data={"mapped": mapped, "findings": audit.data})


def show_config_audit(result: Result[ConfigAuditMetrics]) -> Any:
    """The mapped keys (a foreign config's), then one row per check."""
    from IPython.display import HTML

    keys = result.data["mapped"].table_text() if result.data["mapped"].keys else ""
    table = result.table.to_html(index=False) if result.table is not None else ""
    return HTML((f"<pre>{keys}</pre>" if keys else "") + table)


@dataclass
class DiagnoseConfig:
    """``nbkit diagnose CONFIG --nodes N --gpus-per-node G --gpu-memory M``, the audit's checks left out
    (the notebook runs them in its own sections)."""

    config: str = param(
        "axolotl_fft.yaml",
        help="the setup: a bundled example, an axolotl YAML or a TRL / TrainingArguments JSON",
    )
    nodes: int = param(1, min=1, max=4096)
    gpus_per_node: int = param(8, min=1, max=64)
    gpu_memory_gib: float = param(80.0, min=1.0, max=1024.0, label="GiB of one GPU")

    @classmethod
    def smoke(cls):
        return cls()


@dataclass(frozen=True)
class CouplingStatus:
    """One setting both files state: ``ok``, ``warning`` (trains differently from what the trainer
    config says) or ``error`` (stops the job at start)."""

    setting: str
    status: str


@dataclass(frozen=True)
class DiagnoseMetrics:
    """The diagnosis of a setup: its exit code (0 clean, 1 findings), each coupled setting's status, the
    fit in words (fits / does not fit / may not fit / not judged / not predicted) with the predicted
    per-rank peak (NaN when nothing was predicted) and the changes that make it fit."""

    exit_code: int
    couplings: tuple[CouplingStatus, ...]
    fit_verdict: str
    predicted_peak_gib: float
    fit_fixes: tuple[str, ...]


def run_diagnose(cfg: DiagnoseConfig, ctx: AuditContext, live=None) -> Result[DiagnoseMetrics]:
    """Diagnose the setup ``cfg.config`` names: coupling of its files, the per-rank fit."""
    d = diagnose(
        cfg.config,
        nodes=cfg.nodes,
        gpus_per_node=cfg.gpus_per_node,
        gpu_memory_gib=cfg.gpu_memory_gib,
        audit=False,
        device=str(ctx.torch_device),
    )
    metrics = DiagnoseMetrics(
        exit_code=d.exit_code,
        couplings=tuple(CouplingStatus(c.setting, c.status) for c in d.couplings),
        fit_verdict=d.fit_answer,
        predicted_peak_gib=d.fit.peak_gib if d.fit is not None else math.nan,
        fit_fixes=tuple(str(x["change"]) for x in d.fit.fixes) if d.fit is not None else (),
    )
    return Result(metrics=metrics, data=d)


def show_diagnosis(result: Result[DiagnoseMetrics]) -> Any:
    """The diagnosis as ``nbkit diagnose --format html`` shows it."""
    return result.data


@dataclass
class FinishedRunConfig:
    """``nbkit diagnose RUN_DIR [--config CONFIG]``: a finished run's folder (the bundled example by bare
    name) and its trainer config ("" : one beside the run, else what its Trainer recorded)."""

    run_dir: str = param(
        "finished_run",
        help="a finished run's folder: the HF Trainer's trainer_state.json, TensorBoard events, a "
        "Lightning metrics.csv or other CSV/JSONL history with a step column, an MLflow mlruns/ store, "
        "CUDA memory snapshots (the bundled example by bare name)",
    )
    config: str = param(
        "", help="its trainer config ('' = one beside the run, else what the Trainer recorded)"
    )

    @classmethod
    def smoke(cls):
        return cls()


@dataclass(frozen=True)
class RunRowStatus:
    """One row of a finished run's diagnosis: its key and status (found / ok / not judged)."""

    key: str
    status: str


@dataclass(frozen=True)
class FinishedRunMetrics:
    """A finished run's diagnosis: its exit code (0 nothing found, 1 findings), each row's status and the
    keys of the rows that found something. These rows diagnose the user's run; they are not claims."""

    exit_code: int
    rows: tuple[RunRowStatus, ...]
    findings: tuple[str, ...]


def run_finished(cfg: FinishedRunConfig, ctx: AuditContext, live=None) -> Result[FinishedRunMetrics]:
    """Read and judge the finished run ``cfg.run_dir`` (bad input: a :class:`UsageError` naming the file)."""
    run = finished_run(cfg.run_dir, cfg.config or None)
    metrics = FinishedRunMetrics(
        exit_code=run.exit_code,
        rows=tuple(RunRowStatus(r.key, r.status) for r in run.rows),
        findings=tuple(r.key for r in run.findings),
    )
    return Result(metrics=metrics, data=run)


def show_finished(result: Result[FinishedRunMetrics]) -> FinishedRun:
    """The report and pictures as ``nbkit diagnose RUN_DIR --format html`` shows them."""
    return result.data


REGISTRY.register(
    Experiment(
        "audit",
        "The audit of a whole config",
        ConfigAuditConfig,
        ConfigAuditMetrics,
        run_config_audit,
        show_result=show_config_audit,
    )
)
REGISTRY.register(
    Experiment(
        "trainer-config",
        "Your own trainer config: axolotl, TRL, PEFT",
        TrainerConfigAuditConfig,
        ConfigAuditMetrics,
        run_config_audit,
        show_result=show_config_audit,
    )
)
REGISTRY.register(
    Experiment(
        "diagnose",
        "The whole setup before the GPUs: nbkit diagnose",
        DiagnoseConfig,
        DiagnoseMetrics,
        run_diagnose,
        show_result=show_diagnosis,
    )
)

REGISTRY.register(
    Experiment(
        "finished-run",
        "Your finished run: nbkit diagnose RUN_DIR",
        FinishedRunConfig,
        FinishedRunMetrics,
        run_finished,
        show_result=show_finished,
    )
)

REGISTRY.register(
    Experiment(
        "watched-run",
        "Your run while it trains: nbkit.callbacks",
        WatchedRunConfig,
        WatchedRunMetrics,
        run_watched,
        figure_title="a tiny HF Trainer run, watched (loss and eval loss)",
        xaxis="step",
        yaxis="loss",
        show_result=show_watched,
    )
)

run = REGISTRY.run
panel = REGISTRY.panel
show = REGISTRY.show


def findings(result: Result[Any]) -> list[Finding]:
    """The findings of a whole config's audit (``audit`` / ``trainer-config``)."""
    return list(result.data["findings"])
