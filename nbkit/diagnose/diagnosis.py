"""One diagnosis of a training setup: coupling, fit and the audit's checks, as data (``diagnose(...) ->
Diagnosis``).

The same object backs the command's three formats and the notebook: :meth:`Diagnosis.to_dict` is the one
document (JSON) that :mod:`nbkit.diagnose.report` renders as text or HTML, answer first — will it start
(the coupling errors that stop the job), will it fit (the predicted peak against the GPU, the cheapest
change that fits) — then one row per coupled setting (error / warning / ok / not checked), the fit (fits /
does not fit / may not fit / not judged) and each audit check that ran (its own pass / warn / fail).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.audit.context import AuditContext
from nbkit.audit.formats import read_any
from nbkit.audit.registry import REGISTRY, run_audit
from nbkit.claims import HOLDS, INCONCLUSIVE, REFUTED
from nbkit.device import pick_device
from nbkit.diagnose import fit as F
from nbkit.diagnose.coupling import (
    ABSENT,
    AGREE,
    AUTO,
    ERROR,
    UNCHECKED,
    WARNING,
    Coupling,
    couplings,
    resolved_ds,
    resolved_flag,
)
from nbkit.diagnose.fit import accuracy, gib_text
from nbkit.diagnose.report import html_fragment, render
from nbkit.diagnose.setup import Setup, read_setup
from nbkit.errors import UsageError
from nbkit.findings import Finding
from nbkit.zero.dsconfig import memory_plan

# What a coupling row says: the job stops (error), it runs but trains otherwise (warning), or it is
# consistent (agree, "auto" filled, absent on both sides).
COUPLING_ANSWER = {
    AGREE: "ok",
    AUTO: "ok",
    ABSENT: "ok",
    ERROR: "error",
    WARNING: "warning",
    UNCHECKED: "not checked",
}
# What the fit row says: the fit verdict in words (inconclusive: the GPU lies inside the model's error).
FIT_ANSWER = {HOLDS: "fits", REFUTED: "does not fit", INCONCLUSIVE: "may not fit"}
AUDIT_ANSWER = {"pass": "pass", "fail": "fail", "error": "fail", "warn": "warn", "needs_gpu": "needs GPU"}


@dataclass
class Fit:
    """The per-rank peak of the setup's plan, its verdict against the GPU, and the changes that make it
    fit."""

    plan: str
    parts: dict[str, Any]
    peak_gib: float
    gpu_gib: float | None
    verdict: str
    why: str
    ratio: tuple[float, float]
    fixes: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    adapter_tolerance: float | None = (
        None  # LoRA / QLoRA: the stated widening of the measured band (not measured)
    )
    trainable_params: int | None = None

    def to_dict(self) -> dict[str, Any]:

        acc = accuracy()
        return {
            "plan": self.plan,
            "predicted_peak_gib": self.peak_gib,
            "gpu_memory_gib": self.gpu_gib,
            "verdict": self.verdict,
            "why": self.why,
            "parts_bytes": {
                k: v for k, v in self.parts.items() if isinstance(v, (int, float)) and k != "trainable_params"
            },
            "trainable_params": self.trainable_params,
            "phase": self.parts.get("phase"),
            "fixes": self.fixes,
            "notes": self.notes,
            "accuracy": {
                "pred_over_meas": list(self.ratio),
                "adapter_tolerance": self.adapter_tolerance,
                "scale": acc["scale"],
                "command": acc["command"],
                "measured_in": acc["measured_in"],
                "not_measured": acc["not_measured"],
                "gpu": "a prediction: no GPU run measured this setup",
            },
        }


@dataclass
class Diagnosis:
    setup: Setup
    couplings: list[Coupling]
    fit: Fit | None
    fit_skipped: str
    findings: list[Finding]
    audit_note: str

    @property
    def problems(self) -> dict[str, int]:
        return {
            "coupling errors": sum(c.status == ERROR for c in self.couplings),
            "coupling warnings": sum(c.status == WARNING for c in self.couplings),
            "fit": int(self.fit is not None and self.fit.verdict in (REFUTED, INCONCLUSIVE)),
            "audit failures": sum(f.failed for f in self.findings)
            + int(bool(self.audit_note and self.audit_note.startswith("not run: the audit refused"))),
        }

    @property
    def exit_code(self) -> int:
        """0 clean, 1 findings (as ``nbkit audit``); bad input never gets here (exit 2 before)."""
        return 1 if any(self.problems.values()) else 0

    @property
    def fit_answer(self) -> str:
        """fits / does not fit / may not fit, "not judged" without a GPU's memory, "not predicted" without a
        model."""
        if self.fit is None:
            return "not predicted"
        if self.fit.gpu_gib is None:
            return "not judged"
        return FIT_ANSWER[self.fit.verdict]

    def answer(self) -> dict[str, Any]:
        """What the user came for: the coupling errors that stop the job at start and the warnings (one
        line each), the fit in words with the predicted peak against the GPU, and the cheapest change that
        fits (the first of the fixes, which come cheapest first)."""
        f = self.fit
        if f is None:
            line = self.fit_skipped
        elif f.gpu_gib is None:
            line = f"predicted {gib_text(f.peak_gib)} GiB per rank (give --gpu-memory to judge it)"
        else:
            line = f"predicted {gib_text(f.peak_gib)} GiB per rank against the GPU's {f.gpu_gib:g} GiB"
        return {
            "starts": not any(c.status == ERROR for c in self.couplings),
            "stops": [_one_line(c) for c in self.couplings if c.status == ERROR],
            "warnings": [f"{c.setting}: {c.why}" for c in self.couplings if c.status == WARNING],
            "fit": self.fit_answer,
            "fit_line": line,
            "fix": None
            if f is None or not f.fixes
            else {"change": f.fixes[0]["change"], "predicted_peak_gib": f.fixes[0]["predicted_peak_gib"]},
        }

    def rows(self) -> list[dict[str, Any]]:
        """The table: each coupled setting, the fit and each audit check that ran; ``verdict`` says error /
        warning / ok / not checked, fits / does not fit / may not fit / not judged, or the check's own
        pass / warn / fail."""
        rows = [
            {
                "source": "coupling",
                "key": f"coupling:{c.setting}",
                "claim": f"{c.setting}: the trainer config and the ds_config agree",
                "measured": f"{c.trainer} | {c.deepspeed} → {c.resolved}",
                "verdict": COUPLING_ANSWER[c.status],
                "rule": c.rule,
                "n": "exact (the files' values)",
                "why": f"{c.status}: {c.why}",
            }
            for c in self.couplings
        ]
        if self.fit is not None:
            f = self.fit
            rows.append(
                {
                    "source": "fit",
                    "key": "fit",
                    "claim": f"each rank's peak fits in {f.gpu_gib:g} GiB"
                    if f.gpu_gib
                    else "each rank's peak (no --gpu-memory given)",
                    "measured": f"predicted {gib_text(f.peak_gib)} GiB ({f.plan})",
                    "verdict": self.fit_answer,
                    "rule": f"fits when predicted ÷ {f.ratio[0]} ≤ GPU memory; does not when predicted ÷ "
                    f"{f.ratio[1]} > it "
                    + (
                        "(the memory model's measured predicted ÷ measured range at this stage, CPU scale)"
                        if f.adapter_tolerance is None
                        else "(the stage's measured full-fine-tuning range widened by a stated "
                        f"{f.adapter_tolerance:.0%} each way: adapters not measured)"
                    ),
                    "n": "1 prediction (GPU scale: not measured)",
                    "why": f.why,
                }
            )
        rows += [
            {
                "source": "audit",
                "key": f"audit:{fd.check}",
                "claim": f"audit check {fd.check}: {fd.title}",
                "measured": fd.summary,
                "verdict": AUDIT_ANSWER[fd.status],
                "rule": "the audit check's own rule (nbkit audit)",
                "n": "the check's own n",
                "why": fd.fix or fd.summary or fd.status,
            }
            for fd in self.findings
            if fd.status != "skipped"
        ]
        return rows

    def to_dict(self) -> dict[str, Any]:
        """The one document the three formats render: the setup, the answer, each coupling, the fit, the
        audit, the table's rows, the problem counts and the exit code."""
        s = self.setup
        fit: dict[str, Any] = {"skipped": self.fit_skipped}
        if self.fit is not None:
            fit = self.fit.to_dict()
            fit["verdict"] = self.fit_answer
            fit["fixes"] = [{**x, "verdict": FIT_ANSWER[x["verdict"]]} for x in fit["fixes"]]
        return {
            "config": str(s.config_path),
            "format": s.fmt,
            "deepspeed": s.ds_source or None,
            "model": s.model_spec or None,
            "model_note": s.model_note,
            "world": {
                "nodes": s.nodes,
                "gpus_per_node": s.gpus_per_node,
                "world_size": s.world_size,
                "note": s.world_note,
            },
            "gpu_memory_gib": s.gpu_memory_gib,
            "answer": self.answer(),
            "couplings": [{**c.to_dict(), "verdict": COUPLING_ANSWER[c.status]} for c in self.couplings],
            "fit": fit,
            "audit": {
                "note": self.audit_note,
                "findings": [f.to_dict(with_table=False) for f in self.findings],
                "lines": [f.to_text() for f in self.findings],
            },
            "rows": self.rows(),
            "problems": self.problems,
            "exit_code": self.exit_code,
        }

    def render(self, fmt: str) -> str:
        """The report as ``text``, ``json`` or ``html`` (:mod:`nbkit.diagnose.report`)."""
        return render(self.to_dict(), fmt)

    def summary(self) -> dict[str, Any]:
        """What a notebook records: the problem counts, each coupling's status, the fit's verdict and peak,
        the changes that fit."""
        return {
            "problems": self.problems,
            "exit_code": self.exit_code,
            "couplings": {c.setting: c.status for c in self.couplings},
            "fit": None
            if self.fit is None
            else {
                "verdict": self.fit_answer,
                "predicted_peak_gib": self.fit.peak_gib,
                "fixes": [x["change"] for x in self.fit.fixes],
            },
        }

    def _repr_html_(self) -> str:
        return html_fragment(self.to_dict())


def _one_line(c: Coupling) -> str:
    """A coupling error in one line: the setting, why, and what it resolves to when that says more than
    that the job stops."""
    return f"{c.setting}: {c.why}" + ("" if c.resolved == "(the job stops)" else f" ({c.resolved})")


def fit_of(setup: Setup) -> tuple[Fit | None, str]:
    """The setup's fit (or why it cannot be predicted)."""

    if setup.model_config is None:
        return None, f"not predicted: {setup.model_note}"
    ds = resolved_ds(setup)
    mp = memory_plan(ds) if setup.ds is not None else None
    t = setup.trainer
    if mp is None:
        precision = (
            "bf16"
            if resolved_flag(t["bf16"]) is True
            else "fp16"
            if resolved_flag(t["fp16"]) is True
            else "fp32"
        )
        mp = {"stage": 0, "precision": precision, "offload_optimizer": False, "offload_param": False}
    plan = F.Plan(
        stage=mp["stage"],
        precision=mp["precision"],
        micro_batch=t["per_device_train_batch_size"].value,
        grad_accum=t["gradient_accumulation_steps"].value,
        seq_len=setup.seq_len.value,
        checkpointing=t["gradient_checkpointing"].value is True,
        offload_optimizer=mp["offload_optimizer"],
        offload_param=mp["offload_param"],
        world_size=setup.world_size,
        attention="eager" if setup.attention.value == "eager" else "fused",
        adapter=setup.lora,
    )
    shape = F.model_shape(setup.model_config)
    zero = ds.get("zero_optimization") or {}
    try:
        pred = F.predict(shape, plan, zero)
    except ValueError as exc:  # LoRA targets that match no layer of this model
        return None, f"not predicted: {exc}"
    ratio = F.plan_ratio(plan)
    notes = list(setup.lora_notes)
    if plan.adapter is not None:
        notes.append(
            f"{plan.adapter.describe()}: {pred.parts['trainable_params']:,} trainable parameters (gradients "
            "and optimizer states), "
            "the base frozen"
            + (
                " in 4-bit NF4 (decoder-block linear weights; embeddings, lm_head, norms 16-bit)"
                if plan.adapter.kind == "qlora"
                else ""
            )
        )
        notes.append(
            "accuracy: the memory model is measured on full fine-tuning only; an adapter's predicted ÷ "
            "measured peak is not measured, "
            f"so the verdict's band is the stage's range widened by {F.ADAPTER_TOLERANCE:.0%} each way "
            f"({ratio[0]}–{ratio[1]}), a stated tolerance"
        )
        if plan.adapter.kind == "qlora":
            notes.append(
                "QLoRA's activations are counted as LoRA's on 16-bit weights; bitsandbytes' per-layer "
                "dequantised weight during the matmul is not counted"
            )
    if not setup.seq_len.set:
        notes.append(f"sequence length: {setup.seq_len.where} not set; assumed {setup.seq_len.value} tokens")
    notes.append(
        f"attention: {setup.attention.text()} → counted as "
        + (
            "the S×S scores kept"
            if plan.attention == "eager"
            else "a fused kernel (q, k, v, output, log-sum-exp saved)"
        )
    )
    if plan.checkpointing:
        notes.append(
            "activation checkpointing: its activation count is not in the measured accuracy (the bench runs "
            "without it)"
        )
    notes.append(f"world: {setup.nodes} node(s) × {setup.gpus_per_node} GPU(s) ({setup.world_note})")
    extra = (
        {"adapter_tolerance": F.ADAPTER_TOLERANCE, "trainable_params": pred.parts["trainable_params"]}
        if plan.adapter
        else {}
    )
    if setup.gpu_memory_gib is None:
        return Fit(
            plan.describe(),
            pred.parts,
            pred.peak_gib,
            None,
            INCONCLUSIVE,
            "no --gpu-memory given: the peak is predicted, not judged",
            ratio,
            [],
            notes,
            **extra,
        ), ""
    v = F.verdict_fits(pred.peak_gib, setup.gpu_memory_gib, ratio, F.band_name(plan))
    fixes = F.fixes(shape, plan, zero, setup.gpu_memory_gib) if v.verdict != HOLDS else []
    if v.verdict != HOLDS and not fixes:
        notes.append(
            "no combination of the changes tried fits this GPU: more GPUs (a larger world) or a smaller model"
        )
    return Fit(
        plan.describe(),
        pred.parts,
        pred.peak_gib,
        setup.gpu_memory_gib,
        v.verdict,
        v.why,
        ratio,
        fixes,
        notes,
        **extra,
    ), ""


def audit_of(
    setup: Setup, model: str | None, checks: str | None, device: str = "auto", progress: bool = False
) -> tuple[list[Finding], str]:
    """The audit's checks on the same trainer config (as ``nbkit audit CONFIG``); a config the audit refuses
    is one note."""

    selected = (
        REGISTRY.select(checks) if checks is not None else None
    )  # a bad selection is bad input (exit 2)
    try:
        mapped = read_any(setup.config_path, None, model)
    except UsageError as exc:
        return [], f"not run: the audit refused the config ({exc})"
    context = AuditContext(
        pick_device(device),  # resolved before any check runs: a device this machine lacks stops here
        config=mapped.config,
        progress=progress,
        model_unavailable=mapped.model_unavailable,
    )
    findings = run_audit(context, selected).data
    return (
        findings,
        f"{mapped.fmt} config mapped onto the audit ({sum(r['status'] == 'audited' for r in mapped.keys)} "
        "keys audited)",
    )


def diagnose(
    config: str | Path,
    *,
    model: str | None = None,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    gpu_memory_gib: float | None = None,
    checks: str | None = None,
    audit: bool = True,
    device: str = "auto",
    progress: bool = False,
) -> Diagnosis:
    """Read the setup ``config`` names and diagnose it (bad input:
    :class:`nbkit.diagnose.setup.DiagnoseError`)."""
    setup = read_setup(
        config, model=model, nodes=nodes, gpus_per_node=gpus_per_node, gpu_memory_gib=gpu_memory_gib
    )
    rows = couplings(setup)
    fit, skipped = fit_of(setup)
    findings, note = (
        audit_of(setup, model, checks, device, progress) if audit else ([], "not run (--no-audit)")
    )
    return Diagnosis(setup, rows, fit, skipped, findings, note)
