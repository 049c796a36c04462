"""LoRA shape binding: A/B shapes against every adapted base weight, PEFT's scaling, the merge identity."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, Checked, CheckMetrics
from nbkit.experiment import param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "lora-binding", "LoRA shape binding"


LORA_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "gate"]


@dataclass
class LoraBindingConfig(CheckConfig):
    r: int = param(8, min=1, max=512)
    alpha: float = param(16.0, min=1.0, max=512.0)
    target_modules: tuple = param(("q_proj", "v_proj"), choices=LORA_MODULES)
    use_rslora: bool = False

    @classmethod
    def audit_values(cls, audit):
        lo = audit.lora
        return {
            "r": lo.r,
            "alpha": lo.alpha,
            "target_modules": tuple(lo.target_modules),
            "use_rslora": lo.use_rslora,
        }


@dataclass(frozen=True, kw_only=True)
class LoraBindingMetrics(CheckMetrics):
    """The adapted modules, the scale PEFT applied, and on how many modules the field notes' asserts hold."""

    r: int
    alpha: float
    scaling_applied: float
    alpha_over_r: float
    adapted_modules: int
    trainable_params: int
    total_params: int
    trainable_share_pct: float
    merge_max_abs_err: float
    field_note_asserts_hold_on: int


def _linear_modules(model) -> dict[str, Any]:
    import torch

    return {name: m for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}


def match_targets(model, target_modules: list[str]) -> dict[str, list[str]]:
    """Module names each target selects, with PEFT's rule (exact name or a '.target' suffix)."""
    names = list(_linear_modules(model))
    return {t: [n for n in names if n == t or n.endswith("." + t)] for t in target_modules}


def lora_config(r: int, alpha: float, targets: list[str], dropout: float = 0.0, use_rslora: bool = False):
    from peft import LoraConfig

    return LoraConfig(
        r=r,
        lora_alpha=alpha,
        target_modules=list(targets),
        lora_dropout=dropout,
        bias="none",
        use_rslora=use_rslora,
        task_type="CAUSAL_LM",
    )


def check_lora_binding(
    model, r: int, alpha: float, target_modules: list[str], use_rslora: bool = False, seed: int = 0
) -> Checked[LoraBindingMetrics]:
    """Shapes of A/B against every adapted base weight, the scaling PEFT applies, and the merge identity.

    The base ``model`` is deep-copied (PEFT mutates what it wraps). B is zero at init, so the merge
    check first fills A and B with seeded random values: W_merged must equal W0 + s·B·A.
    """
    import torch
    from peft import get_peft_model

    problems: list[str] = []
    matches = match_targets(model, target_modules)
    unmatched = [t for t, names in matches.items() if not names]
    if unmatched:
        problems.append(f"LoRA target(s) {unmatched} match no Linear module")
    linears = _linear_modules(model)
    over_rank = []
    for names in matches.values():
        for n in names:
            w = linears[n].weight
            cap = min(w.shape)
            if r > cap:
                over_rank.append({"module": n, "shape": tuple(w.shape), "rank_cap": cap})
    if over_rank:
        first = over_rank[0]
        problems.append(
            f"rank {r} exceeds min(d, k) of {len(over_rank)} module(s), e.g. {first['module']} "
            f"{first['shape']}: "
            f"ΔW = B·A has rank ≤ {first['rank_cap']}, the extra {r - first['rank_cap']} ranks only add "
            "parameters"
        )
    usable = [t for t in target_modules if matches[t]]
    if not usable or over_rank:
        # Decided from the shapes alone: building the adapter first would allocate r × (d + k)
        # parameters per module (r: 10000000 → gigabytes) only to fail on the same finding.
        # Nothing was adapted, so nothing the claims read was measured: the finding alone.
        return Checked(
            Finding(
                SLUG,
                TITLE,
                "fail",
                "; ".join(problems),
                {"targets_unmatched": unmatched, "modules_over_rank": len(over_rank), "r": r},
                [
                    {
                        "module": o["module"],
                        "base W0 (out, in)": str(o["shape"]),
                        "rank cap min(d,k)": o["rank_cap"],
                    }
                    for o in over_rank
                ],
                fix="name modules that exist (e.g. q_proj, k_proj, v_proj, o_proj); keep r ≤ min(d,k) of "
                "every target (GQA k/v are narrower)",
            )
        )
    peft_model = get_peft_model(copy.deepcopy(model), lora_config(r, alpha, usable, 0.0, use_rslora))
    trainable, total = peft_model.get_nb_trainable_parameters()
    expected_scale = alpha / math.sqrt(r) if use_rslora else alpha / r
    gen = torch.Generator().manual_seed(seed)
    rows, by_kind, w0 = [], {}, {}
    note_asserts_hold = 0
    shape_errors = 0
    scale_errors = 0
    for name, module in peft_model.named_modules():
        if not hasattr(module, "lora_A") or "default" not in getattr(module, "lora_A", {}):
            continue
        base_w = module.base_layer.weight
        a = module.lora_A["default"].weight
        b = module.lora_B["default"].weight
        d_out, d_in = base_w.shape
        ok = a.shape == (r, d_in) and b.shape == (d_out, r)
        shape_errors += not ok
        scale = float(module.scaling["default"])
        scale_errors += not math.isclose(scale, expected_scale, rel_tol=1e-9)
        # The field notes' two asserts, applied literally to the tensors PEFT stores.
        note_asserts_hold += int(a.shape[1] == b.shape[0] and tuple(base_w.shape) == (a.shape[0], b.shape[1]))
        with torch.no_grad():
            a.copy_(torch.randn(a.shape, generator=gen) * 0.02)
            b.copy_(torch.randn(b.shape, generator=gen) * 0.02)
        w0[name] = (base_w.detach().clone(), a.detach().clone(), b.detach().clone(), scale)
        kind = name.rsplit(".", 1)[-1]
        if kind not in by_kind:
            by_kind[kind] = {
                "module": kind,
                "base W0 (out, in)": str(tuple(base_w.shape)),
                "lora_A (r, in)": str(tuple(a.shape)),
                "lora_B (out, r)": str(tuple(b.shape)),
                "scaling applied": scale,
                "α/r expected": expected_scale,
                "rank cap min(d,k)": min(base_w.shape),
                "count": 0,
                "trainable per module": a.numel() + b.numel(),
            }
        by_kind[kind]["count"] += 1
    merged = peft_model.merge_and_unload()
    merged_modules = dict(merged.named_modules())
    max_err = 0.0
    for name, (w, a, b, s) in w0.items():
        plain = name.replace("base_model.model.", "", 1)
        got = merged_modules[plain].weight.detach()
        max_err = max(max_err, float((got - (w + s * (b @ a))).abs().max()))
    if shape_errors:
        problems.append(f"{shape_errors} module(s) with A/B shapes that do not bind to W0")
    if scale_errors:
        problems.append(f"{scale_errors} module(s) whose scaling differs from α/r")
    if max_err > 1e-5:
        problems.append(f"merged weights differ from W0 + (α/r)·B·A by {max_err:.2e}")
    rows = list(by_kind.values())
    metrics = LoraBindingMetrics(
        r=r,
        alpha=alpha,
        scaling_applied=rows[0]["scaling applied"] if rows else float("nan"),
        alpha_over_r=expected_scale,
        adapted_modules=len(w0),
        trainable_params=trainable,
        total_params=total,
        trainable_share_pct=100.0 * trainable / total,
        merge_max_abs_err=max_err,
        field_note_asserts_hold_on=note_asserts_hold,
    )
    figures = {**metrics.figures(), "targets_unmatched": unmatched, "modules_over_rank": len(over_rank)}
    status = "fail" if problems else "pass"
    summary = (
        "; ".join(problems)
        if problems
        else (
            f"{len(w0)} adapted modules bind: A (r,in), B (out,r); scaling α/r = {expected_scale:g} applied; "
            f"merge identity holds (max err {max_err:.1e})"
        )
    )
    import plotly.graph_objects as go

    fig = go.Figure(
        go.Bar(
            x=[r_["module"] for r_ in rows],
            y=[r_["trainable per module"] * r_["count"] for r_ in rows],
            text=[r_["base W0 (out, in)"] for r_ in rows],
        )
    )
    fig.update_layout(
        title="LoRA trainable parameters by module type (text: base W0 shape)", yaxis_title="parameters"
    )
    finding = Finding(
        SLUG,
        TITLE,
        status,
        summary,
        figures,
        rows,
        fix="drop unmatched targets; keep r ≤ min(d,k) of every target (GQA k/v are narrower)"
        if problems
        else "",
        figure=fig,
    )
    return Checked(finding, metrics)


def measure(cfg: LoraBindingConfig, ctx: AuditContext, live=None) -> Checked[LoraBindingMetrics]:
    """Shapes of A/B against every adapted base weight, PEFT's scaling and the merge identity."""
    model, _ = ctx.model_and_tokenizer()
    return check_lora_binding(
        model, cfg.r, cfg.alpha, list(cfg.target_modules), cfg.use_rslora, seed=ctx.config.model.seed
    )


CHECK = Check.of(SLUG, TITLE, LoraBindingConfig, LoraBindingMetrics, measure, number=2)
