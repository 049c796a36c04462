"""Widget panels for notebook 04: one per check, each a parameters dataclass + a run function.

A panel's run applies its controls to a copy of the audit config, runs the check through the
shared ``AuditContext`` (model loaded once) and returns the ``Finding`` (``.figure`` is the plot).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from nbkit.audit.findings import Finding
from nbkit.audit.runner import AuditContext, run_check


@dataclass
class KissParams:
    budget_steps: int = field(default=12, metadata={"min": 2, "max": 400, "label": "steps per variant (budget)"})
    lr: float = field(default=1e-3, metadata={"min": 1e-5, "max": 1e-1, "log": True})
    val_loss_target: float = field(default=0.0, metadata={"min": 0.0, "max": 10.0, "step": 0.05, "label": "val-loss target (0 = ratio × start)"})
    target_ratio: float = field(default=0.5, metadata={"min": 0.05, "max": 0.95, "step": 0.05, "label": "target ratio of the untrained val loss"})


@dataclass
class LoraParams:
    r: int = field(default=8, metadata={"min": 1, "max": 512})
    alpha: float = field(default=16.0, metadata={"min": 1.0, "max": 512.0})
    target_modules: tuple = field(default=("q_proj", "v_proj"), metadata={"choices": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "gate"]})


@dataclass
class TokensParams:
    language: str = field(default="all", metadata={"choices": ["all", "en", "zh"]})


@dataclass
class AttentionParams:
    seq_len: int = field(default=128, metadata={"min": 16, "max": 32768})
    max_length: int = field(default=1024, metadata={"choices": [256, 512, 1024, 2048, 4096]})


@dataclass
class AccumParams:
    micro_batch_size: int = field(default=4, metadata={"min": 1, "max": 16})
    grad_accumulation: int = field(default=4, metadata={"min": 2, "max": 16})
    loss_normalisation: str = field(default="token_count", metadata={"choices": ["token_count", "per_microbatch_mean"]})


@dataclass
class DtypeParams:
    autocast_dtype: str = field(default="bfloat16", metadata={"choices": ["bfloat16", "float16", "none"]})


@dataclass
class DataParams:
    data_file: str = field(default="sft.jsonl", metadata={"choices": ["sft.jsonl", "sft_broken.jsonl"]})
    schema: str = field(default="sft_schema.py:SFTExample", metadata={"choices": ["sft_schema.py:SFTExample", "broken_schema.py:SFTExample"]})
    strict: bool = False


@dataclass
class TemplateParams:
    kind: str = field(default="chat", metadata={"choices": ["chat", "format"]})
    max_length: int = field(default=256, metadata={"min": 16, "max": 1024})
    mask_pad_labels: bool = False


@dataclass
class SamplingParams:
    beta: float = field(default=0.5, metadata={"min": 0.0, "max": 20.0, "step": 0.25})
    gamma: float = field(default=0.0, metadata={"min": 0.0, "max": 2.0, "step": 0.1})


@dataclass
class ZeroParams:
    threshold: float = field(default=1e5, metadata={"min": 1.0, "max": 1e10, "log": True, "label": "stage3_param_persistence_threshold"})
    world_size: int = field(default=8, metadata={"min": 1, "max": 64})


@dataclass
class SchedulerParams:
    preset: str = field(default="warmup+cosine", metadata={"choices": ["warmup+cosine", "onecycle+warmup+step", "chained warmup+cosine"]})
    resume_at_step: int = field(default=40, metadata={"min": 1, "max": 199})
    resume_restores_scheduler: bool = True


@dataclass
class FragParams:
    interval: int = field(default=50, metadata={"min": 1, "max": 500})


@dataclass
class DdpParams:
    no_grad: bool = True
    backward: bool = False
    no_sync: bool = False
    find_unused_parameters: bool = False


PRESETS = {
    "warmup+cosine": ("sequential", [{"kind": "linear_warmup", "steps": 10, "start_factor": 0.01}, {"kind": "cosine", "steps": 90}]),
    "onecycle+warmup+step": ("sequential", [{"kind": "onecycle", "steps": 100, "pct_start": 0.1}, {"kind": "linear_warmup", "steps": 10, "start_factor": 0.01}, {"kind": "step", "steps": 90, "step_size": 30}]),
    "chained warmup+cosine": ("chained", [{"kind": "linear_warmup", "steps": 10, "start_factor": 0.01}, {"kind": "cosine", "steps": 90}]),
}


def _runner(ctx: AuditContext, check_id: int, params):
    """(config updates, sizes updates) for one check's params."""
    from nbkit.audit.config import SchedulerSection
    from nbkit.audit.sft import EXAMPLES_DIR

    p = dataclasses.asdict(params)
    if check_id == 1:
        return {"kiss": {"budget_steps": p["budget_steps"], "lr": p["lr"], "val_loss_target": p["val_loss_target"] or None,
                         "val_loss_target_ratio": p["target_ratio"]}}, {}
    if check_id == 2:
        return {"lora": {"r": p["r"], "alpha": p["alpha"], "target_modules": list(p["target_modules"])}}, {}
    if check_id == 4:
        lens = tuple(L for L in (64, 128, 256, 512, 1024, 2048, 4096) if L <= p["max_length"])
        return {"train": {"seq_len": p["seq_len"]}}, {"attention_lengths": lens}
    if check_id == 5:
        return {"train": {k: p[k] for k in ("micro_batch_size", "grad_accumulation", "loss_normalisation")}}, {}
    if check_id == 6:
        return {"train": {"autocast_dtype": p["autocast_dtype"]}}, {}
    if check_id == 7:
        ref = str(EXAMPLES_DIR / p["schema"].split(":")[0]) + ":" + p["schema"].split(":")[1]
        from nbkit.audit.config import DataSection

        return {"data": DataSection(path=EXAMPLES_DIR / p["data_file"], schema=ref, strict=p["strict"], ner_path=EXAMPLES_DIR / "ner.jsonl")}, {}
    if check_id == 8:
        upd = {"kind": p["kind"], "max_length": p["max_length"], "mask_pad_labels": p["mask_pad_labels"]}
        if p["kind"] == "format":
            upd["format"] = "### Instruction:\n{instruction}\n### Response: {response}"
        return {"template": upd}, {}
    if check_id == 9:
        return {"sampling": {"beta": p["beta"], "gamma": p["gamma"]}}, {}
    if check_id == 10:
        return {"deepspeed": {"stage3_param_persistence_threshold": p["threshold"], "world_size": p["world_size"], "zero_stage": 3}}, {}
    if check_id == 11:
        combine, stages = PRESETS[p["preset"]]
        total = sum(s["steps"] for s in stages)
        return {"scheduler": SchedulerSection(combine=combine, base_lr=2e-4, stages=stages, warmup_steps=10,
                                              resume_at_step=min(p["resume_at_step"], total - 1), resume_restores_scheduler=p["resume_restores_scheduler"])}, {}
    if check_id == 12:
        return {"checkpoint": {"interval": p["interval"]}}, {}
    if check_id == 13:
        return {"eval": {**p, "interval": 2}}, {}
    return {}, {}


def run_with(ctx: AuditContext, check_id: int, params, live=None) -> Finding:
    """Run one check with a panel's params applied; the finding keeps the params it ran with."""
    cfg_updates, size_updates = _runner(ctx, check_id, params)
    sub = ctx
    if cfg_updates:
        cfg = ctx.config.model_copy(deep=True)
        for name, upd in cfg_updates.items():
            cur = getattr(cfg, name)
            if isinstance(upd, dict):
                if cur is None:
                    from nbkit.audit import config as C

                    section_type = {"sampling": C.SamplingSection, "deepspeed": C.DeepSpeedSection, "eval": C.EvalSection, "checkpoint": C.CheckpointSection}[name]
                    upd = section_type(**upd)
                else:
                    upd = cur.model_copy(update=upd)
            setattr(cfg, name, upd)
        sub = dataclasses.replace(ctx, config=cfg)
        if "data" in cfg_updates:
            sub._data, sub._data_finding = None, None
    if size_updates:
        sub = dataclasses.replace(sub, sizes=dataclasses.replace(ctx.sizes, **size_updates))
    if check_id == 3 and getattr(params, "language", "all") != "all":
        from nbkit.audit.sft import EXAMPLES_DIR, read_jsonl_plain
        from nbkit.audit.tokens import check_label_alignment

        _, tok = sub.model_and_tokenizer()
        return check_label_alignment(tok, [r for r in read_jsonl_plain(EXAMPLES_DIR / "ner.jsonl") if r["lang"] == params.language])
    f = run_check(sub, check_id, live=live)
    if f.status == "error":
        raise RuntimeError(f.summary)
    return f


PARAMS = {1: KissParams, 2: LoraParams, 3: TokensParams, 4: AttentionParams, 5: AccumParams, 6: DtypeParams, 7: DataParams,
          8: TemplateParams, 9: SamplingParams, 10: ZeroParams, 11: SchedulerParams, 12: FragParams, 13: DdpParams}


def show_finding(f: Finding):
    """Card + evidence table (first rows) for a panel's output area."""
    import pandas as pd
    from IPython.display import HTML

    table = pd.DataFrame(f.table[:12]).to_html(index=False) if f.table else ""
    more = f"<div><i>{len(f.table) - 12} more evidence rows in finding.table</i></div>" if len(f.table) > 12 else ""
    return HTML(f.card_html() + table + more)


def check_panel(ctx: AuditContext, check_id: int, widget: bool | None = None, **defaults):
    """The Panel for one check, with the given default parameter values."""
    from nbkit.audit.runner import CHECK_NAMES
    from nbkit.panels import Panel

    params = PARAMS[check_id](**defaults)

    def run(p, live):
        return run_with(ctx, check_id, p, live=live if check_id == 1 else None)

    return Panel(params, run, title=f"Check {check_id}: {CHECK_NAMES[check_id]}", widget=widget, show_result=show_finding)
