"""What DeepSpeed ZeRO-3 would partition or persist for this model, from real shapes.

The rules are DeepSpeed's own (``deepspeed/runtime/zero/parameter_offload.py``
``mark_persistent_parameters``: a parameter with ``numel <= stage3_param_persistence_threshold`` is
persisted — kept whole on every rank — while ``model_persistence_threshold`` caps the total; and
``partition_parameters.py``: a partitioned tensor is flattened, padded to a multiple of the world
size and cut into equal contiguous slices). Re-implemented here because applying them needs no
process group; the default threshold is read from the installed DeepSpeed when present.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, Checked, CheckMetrics
from nbkit.experiment import param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "zero3-layout", "ZeRO-3 ↔ GQA layout"


@dataclass
class Zero3LayoutConfig(CheckConfig):
    threshold: float = param(1e5, min=1.0, max=1e10, log=True, label="stage3_param_persistence_threshold")
    world_size: int = param(8, min=1, max=64)
    zero_stage: int = param(3, choices=[0, 1, 2, 3])

    @classmethod
    def audit_values(cls, audit):
        ds = audit.deepspeed
        return {
            "threshold": ds.stage3_param_persistence_threshold,
            "world_size": ds.world_size,
            "zero_stage": ds.zero_stage,
        }


@dataclass(frozen=True, kw_only=True)
class Zero3LayoutMetrics(CheckMetrics):
    """The layout at this threshold and world size: what is persisted, each rank's parameter bytes, and
    the k/v projection's shape it is computed on."""

    threshold: float
    world_size: int
    persisted_params: int
    persisted_share_pct: float
    param_bytes_per_rank: int
    memory_saving_vs_ddp_x: float
    kv_proj_shape: str
    kv_tensors_with_groups_cut: int


def deepspeed_default_threshold() -> float | None:
    """DeepSpeed's default stage3_param_persistence_threshold, read from its installed config source.

    Read as text rather than imported: importing DeepSpeed is slow and probes accelerators.
    """
    import importlib.util
    import re
    from pathlib import Path

    spec = importlib.util.find_spec("deepspeed")
    if spec is None or not spec.origin:
        return None
    src = Path(spec.origin).parent / "runtime" / "zero" / "config.py"
    try:
        text = src.read_text(encoding="utf-8")
    except OSError:
        return None
    m = re.search(r"param_persistence_threshold:\s*int\s*=\s*Field\(\s*(?:pp_int\()?([0-9.eE+]+)", text)
    return float(m.group(1)) if m else None


def zero3_layout(
    model, threshold: float, world_size: int, model_threshold: int = sys.maxsize
) -> list[dict[str, Any]]:
    cfg = model.config
    n_heads, n_kv = cfg.num_attention_heads, getattr(cfg, "num_key_value_heads", cfg.num_attention_heads)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    rows, persisted_total = [], 0
    for name, p in model.named_parameters():  # shared (tied) tensors appear once, as in DeepSpeed
        numel = p.numel()
        persist = False
        if numel + persisted_total <= model_threshold and numel <= threshold:
            persist = True
            persisted_total += numel
        pad = (world_size - numel % world_size) % world_size
        part = (numel + pad) // world_size
        groups_split = None
        kind = name.rsplit(".", 2)[-2] if name.endswith(".weight") else name
        if kind in ("k_proj", "v_proj", "q_proj") and not persist and p.dim() == 2:
            # Rows of k/v (and q) belong to heads; a KV group is head_dim rows (q: head_dim × heads per
            # group).
            rows_per_group = head_dim * (n_heads // n_kv if kind == "q_proj" else 1)
            group_elems = rows_per_group * p.shape[1]
            n_groups = p.shape[0] // rows_per_group
            bounds = [part * i for i in range(1, world_size)]
            groups_split = sum(
                1 for g in range(n_groups) if any(g * group_elems < b < (g + 1) * group_elems for b in bounds)
            )
        rows.append(
            {
                "name": name,
                "shape": str(tuple(p.shape)),
                "numel": numel,
                "bytes": numel * p.element_size(),
                "persisted": persist,
                "slice per rank": numel if persist else part,
                "padding": 0 if persist else pad,
                "kv groups cut by slices": groups_split,
            }
        )
    return rows


def check_zero3(
    model, *, threshold: float, world_size: int, zero_stage: int = 3
) -> Checked[Zero3LayoutMetrics]:
    import plotly.graph_objects as go

    if zero_stage != 3:
        return Checked(
            Finding(
                SLUG,
                TITLE,
                "skipped",
                f"zero_stage is {zero_stage}; parameter partitioning happens only at stage 3",
            )
        )
    rows = zero3_layout(model, threshold, world_size)
    total = sum(r["bytes"] for r in rows)
    pers = sum(r["bytes"] for r in rows if r["persisted"])
    per_rank = sum(r["slice per rank"] * (r["bytes"] // r["numel"]) for r in rows)
    cfg = model.config
    kv_rows = [r for r in rows if r["name"].endswith(("k_proj.weight", "v_proj.weight"))]
    split = [r for r in kv_rows if r["kv groups cut by slices"]]
    dflt = deepspeed_default_threshold()
    metrics = Zero3LayoutMetrics(
        threshold=threshold,
        world_size=world_size,
        persisted_params=sum(r["persisted"] for r in rows),
        persisted_share_pct=100.0 * pers / total,
        param_bytes_per_rank=per_rank,
        memory_saving_vs_ddp_x=total / per_rank,
        kv_proj_shape=kv_rows[0]["shape"] if kv_rows else "none",
        kv_tensors_with_groups_cut=len(split),
    )
    figures: dict[str, Any] = {
        **metrics.figures(),
        "deepspeed_default_threshold": dflt if dflt is not None else "deepspeed not installed",
        "params": len(rows),
        "param_bytes_unpartitioned": total,
        "kv_proj_numel": kv_rows[0]["numel"] if kv_rows else None,
        "kv_proj_persisted": bool(kv_rows and kv_rows[0]["persisted"]),
        "heads/kv_heads": f"{cfg.num_attention_heads}/"
        f"{getattr(cfg, 'num_key_value_heads', cfg.num_attention_heads)}",
    }
    if metrics.persisted_share_pct > 50:
        status = "fail"
        summary = (
            f"threshold {threshold:g} persists {metrics.persisted_share_pct:.1f}% of parameter bytes on "
            "every rank: "
            f"ZeRO-3 saves only {metrics.memory_saving_vs_ddp_x:.2f}× over DDP at world size {world_size}"
        )
    else:
        status = "pass"
        summary = (
            f"{metrics.persisted_params} small tensors persisted ({metrics.persisted_share_pct:.2f}% "
            "of bytes); "
            f"{metrics.memory_saving_vs_ddp_x:.2f}× less parameter memory per rank at world size "
            f"{world_size}"
        )
    if split:
        summary += (
            f"; slices cut through KV head groups in {len(split)} k/v tensors (DeepSpeed slices flat "
            "tensors, "
            "ignoring heads; harmless for correctness because the whole tensor is all-gathered before use)"
        )
    kinds: dict[str, list[int]] = {}
    for r in rows:
        k = r["name"].rsplit(".", 2)[-2] if "." in r["name"] else r["name"]
        kinds.setdefault(k, [0, 0])
        kinds[k][0 if r["persisted"] else 1] += r["bytes"]
    fig = go.Figure()
    fig.add_bar(x=list(kinds), y=[v[0] for v in kinds.values()], name="persisted (whole on every rank)")
    fig.add_bar(
        x=list(kinds), y=[v[1] for v in kinds.values()], name=f"partitioned (1/{world_size} per rank)"
    )
    fig.update_layout(
        title=f"ZeRO-3 layout at threshold {threshold:g}, world size {world_size}",
        barmode="stack",
        yaxis_title="bytes (fp32)",
    )
    finding = Finding(
        SLUG,
        TITLE,
        status,
        summary,
        figures,
        rows,
        fix=f"keep stage3_param_persistence_threshold near DeepSpeed's default ({dflt:g})"
        if dflt
        else "keep the threshold small (DeepSpeed default 1e5)",
        figure=fig,
    )
    return Checked(finding, metrics)


def measure(cfg: Zero3LayoutConfig, ctx: AuditContext, live=None) -> Checked[Zero3LayoutMetrics]:
    """DeepSpeed's persistence and partition rules applied to the model's real parameter shapes."""
    model, _ = ctx.model_and_tokenizer()
    return check_zero3(model, threshold=cfg.threshold, world_size=cfg.world_size, zero_stage=cfg.zero_stage)


CHECK = Check.of(SLUG, TITLE, Zero3LayoutConfig, Zero3LayoutMetrics, measure, number=10, needs="deepspeed")
