"""DeepSpeed config: a builder for the ladder's rungs, a validator, and a key-by-key explanation.

Validation leans on DeepSpeed's own pydantic models (``DeepSpeedZeroConfig``, ``DeepSpeedFP16Config``
… all ``extra="forbid"``), so a misspelt nested key is rejected with DeepSpeed's message; the
checks DeepSpeed only makes once ranks are running (the batch identity
``train_batch_size = micro_batch × grad_accum × world_size``, keys that do nothing at the chosen
stage, unknown top-level keys) are done here, before any rank starts.
"""

from __future__ import annotations

import copy
import difflib
import json
from pathlib import Path
from typing import Any

from nbkit.errors import UsageError, read_json_object

# The field notes' ds_config (field notes §3.2), verbatim in content. Its CLI runs 8 GPUs with
# --per_device_train_batch_size 2 --gradient_accumulation_steps 4, i.e. 2 × 4 × 8 = 64, not 128.
FIELD_NOTES_DS_CONFIG: dict[str, Any] = {
    "train_batch_size": 128,
    "gradient_accumulation_steps": 4,
    "steps_per_print": 10,
    "wall_clock_breakdown": False,
    "zero_optimization": {
        "stage": 3,
        "offload_optimizer": {"device": "cpu", "pin_memory": True},
        "offload_param": {"device": "cpu", "pin_memory": True},
        "overlap_comm": True,
        "contiguous_gradients": True,
        "sub_group_size": 1e9,
        "reduce_bucket_size": "auto",
        "stage3_prefetch_bucket_size": 5e8,
        "stage3_param_persistence_threshold": 1e4,
        "stage3_max_live_parameters": 1e9,
        "stage3_max_reuse_distance": 1e9,
        "stage3_gather_16bit_weights_on_model_save": True,
    },
    "fp16": {
        "enabled": True,
        "loss_scale": 0,
        "loss_scale_window": 1000,
        "hysteresis": 2,
        "min_loss_scale": 1,
    },
    "gradient_clipping": 1.0,
    "flops_profiler": {
        "enabled": False,
        "profile_step": 20,
        "module_depth": -1,
        "top_modules": 1,
        "detailed": True,
    },
}
FIELD_NOTES_CLI = {"world_size": 8, "micro_batch": 2, "grad_accum": 4}

# What each key of the field notes' config does (DeepSpeed docs, config-json), and the stages it acts at.
KEY_DOCS: dict[str, tuple[str, tuple[int, ...] | None]] = {
    "train_batch_size": ("global batch per optimizer step = micro_batch × grad_accum × world_size", None),
    "train_micro_batch_size_per_gpu": ("samples per rank per forward/backward", None),
    "gradient_accumulation_steps": ("micro-batches accumulated before each optimizer step", None),
    "steps_per_print": ("log every N steps", None),
    "wall_clock_breakdown": ("time forward/backward/step separately (adds syncs)", None),
    "zero_optimization.stage": (
        "0 = plain DP, 1 = partition optimizer states, 2 = + gradients, 3 = + parameters",
        None,
    ),
    "zero_optimization.offload_optimizer": ("keep optimizer states (and the step) on CPU/NVMe", (1, 2, 3)),
    "zero_optimization.offload_optimizer.device": ("'cpu' or 'nvme'", (1, 2, 3)),
    "zero_optimization.offload_optimizer.pin_memory": (
        "page-locked host buffers for faster H2D/D2H copies",
        (1, 2, 3),
    ),
    "zero_optimization.offload_param": ("keep partitioned parameters on CPU/NVMe between uses", (3,)),
    "zero_optimization.offload_param.device": ("'cpu' or 'nvme'", (3,)),
    "zero_optimization.offload_param.pin_memory": ("page-locked host buffers for parameters", (3,)),
    "zero_optimization.overlap_comm": ("overlap gradient reduction with backward compute", (1, 2, 3)),
    "zero_optimization.contiguous_gradients": (
        "copy gradients into one contiguous buffer as produced (less fragmentation)",
        (2, 3),
    ),
    "zero_optimization.sub_group_size": (
        "parameter elements per optimizer sub-group (the step runs group by group); NOT a shard size",
        (3,),
    ),
    "zero_optimization.reduce_bucket_size": (
        "elements per gradient reduce bucket ('auto' is filled by the HF integration only)",
        (1, 2, 3),
    ),
    "zero_optimization.stage3_prefetch_bucket_size": (
        "elements (not bytes) of parameters prefetched ahead of use",
        (3,),
    ),
    "zero_optimization.stage3_param_persistence_threshold": (
        "parameters with fewer elements stay unpartitioned on every rank",
        (3,),
    ),
    "zero_optimization.stage3_max_live_parameters": (
        "upper bound of gathered parameter elements kept alive",
        (3,),
    ),
    "zero_optimization.stage3_max_reuse_distance": (
        "do not release a gathered parameter reused within this many elements",
        (3,),
    ),
    "zero_optimization.stage3_gather_16bit_weights_on_model_save": (
        "consolidate the full 16-bit state_dict on save (memory spike on rank 0)",
        (3,),
    ),
    "fp16": ("fp16 mixed precision with dynamic loss scaling", None),
    "fp16.enabled": ("turn fp16 mixed precision on", None),
    "fp16.loss_scale": ("0 = dynamic loss scaling; >0 = a fixed scale", None),
    "fp16.loss_scale_window": ("steps without overflow before the scale is raised", None),
    "fp16.hysteresis": ("overflows tolerated before the scale is lowered", None),
    "fp16.min_loss_scale": ("floor of the dynamic scale", None),
    "gradient_clipping": ("clip the global gradient norm to this value", None),
    "flops_profiler": ("DeepSpeed's FLOPs profiler (off here, so its sub-keys do nothing)", None),
    "flops_profiler.enabled": ("run the profiler at profile_step", None),
    "flops_profiler.profile_step": ("the step that is profiled", None),
    "flops_profiler.module_depth": ("-1 = profile every module depth", None),
    "flops_profiler.top_modules": ("modules listed in the report", None),
    "flops_profiler.detailed": ("per-module breakdown", None),
    "optimizer": ("optimizer DeepSpeed builds (else the client's)", None),
    "zero_force_ds_cpu_optimizer": ("false lets ZeRO-Offload accept a client (torch) optimizer", None),
    "bf16": ("bf16 mixed precision", None),
    "bf16.enabled": ("turn bf16 mixed precision on", None),
}


class DSConfigError(UsageError):
    """A ds_config problem found before any rank starts; the message names the key."""


def _positive_int(value: Any, where: str, *, minimum: int = 1) -> int:
    """DeepSpeed's pydantic models coerce "4", 4.0 and true to 4; a config that says so is a mistake."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise DSConfigError(
            f"{where}: expected an integer ≥ {minimum}, got {value!r} ({type(value).__name__})"
        )
    if value < minimum:
        raise DSConfigError(f"{where}: expected an integer ≥ {minimum}, got {value}")
    return value


def offload_on(section: Any) -> bool:
    """``offload_*: {device: none}`` (or null) is DeepSpeed's way of saying "no offload"."""
    return (
        isinstance(section, dict)
        and str(section.get("device", "cpu")).lower() not in ("none", "null")
        and section.get("device", "cpu") is not None
    )


def build_ds_config(
    *,
    stage: int,
    micro_batch: int = 2,
    grad_accum: int = 1,
    world_size: int = 1,
    precision: str = "fp32",
    offload_optimizer: bool = False,
    offload_param: bool = False,
    param_persistence_threshold: float | None = 0,
    bucket_elements: int | None = 200_000,
    sub_group_size: int | None = None,
    extra: dict | None = None,
) -> dict[str, Any]:
    """The ds_config one ladder rung runs with (validated)."""
    _positive_int(micro_batch, "micro_batch (train_micro_batch_size_per_gpu)")
    _positive_int(grad_accum, "grad_accum (gradient_accumulation_steps)")
    _positive_int(world_size, "world_size")
    if isinstance(stage, bool) or stage not in (0, 1, 2, 3):
        raise DSConfigError(f"zero_optimization.stage must be 0, 1, 2 or 3, got {stage!r}")
    if precision not in ("fp32", "bf16", "fp16"):
        raise DSConfigError(f"precision must be 'fp32', 'bf16' or 'fp16', got {precision!r}")
    zero: dict[str, Any] = {"stage": stage}
    if bucket_elements is not None and stage > 0:
        # DeepSpeed's default buckets (5e8 elements = 1 GB in bf16) would dwarf a small model's
        # states in the measurement; the bucket is reported separately as "buffers" either way.
        zero["reduce_bucket_size"] = int(bucket_elements)
        zero["allgather_bucket_size"] = int(bucket_elements)
    if offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": False}
    if offload_param:
        zero["offload_param"] = {"device": "cpu", "pin_memory": False}
    if stage == 3 and param_persistence_threshold is not None:
        zero["stage3_param_persistence_threshold"] = param_persistence_threshold
    if stage == 3 and sub_group_size:
        zero["sub_group_size"] = int(sub_group_size)
    cfg: dict[str, Any] = {
        "train_batch_size": micro_batch * grad_accum * world_size,
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": grad_accum,
        "zero_optimization": zero,
        "steps_per_print": 10**9,
        # A client torch optimizer under offload: no JIT-compiled DeepSpeedCPUAdam needed.
        "zero_force_ds_cpu_optimizer": False,
    }
    if precision == "bf16":
        cfg["bf16"] = {"enabled": True}
    elif precision == "fp16":
        cfg["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    if extra:
        cfg = _deep_merge(cfg, extra)
    validate_ds_config(cfg, world_size=world_size)
    return cfg


def _deep_merge(a: dict, b: dict) -> dict:
    out = copy.deepcopy(a)
    for k, v in b.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _known_top_level_keys() -> set[str]:
    import deepspeed.runtime.constants as C

    keys = {v for k, v in vars(C).items() if k.isupper() and isinstance(v, str)}
    # Sections DeepSpeed reads through their own config modules rather than runtime.constants.
    keys |= {
        "zero_optimization",
        "fp16",
        "bf16",
        "bfloat16",
        "amp",
        "optimizer",
        "scheduler",
        "flops_profiler",
        "activation_checkpointing",
        "comms_logger",
        "monitor",
        "tensorboard",
        "wandb",
        "csv_monitor",
        "comet",
        "aio",
        "nvme",
        "autotuning",
        "compression_training",
        "data_efficiency",
        "elasticity",
        "checkpoint",
        "pipeline",
        "curriculum_learning",
        "hybrid_engine",
        "weight_quantization",
        "torch_autocast",
        "zero_allow_untested_optimizer",
        "zero_force_ds_cpu_optimizer",
        "tensor_parallel",
        "compile",
        "sequence_parallel_size",
        "data_types",
        "timers",
        "eigenvalue",
        "progressive_layer_drop",
        "gradient_predivide_factor",
        "prescale_gradients",
        "sparse_gradients",
        "communication_data_type",
        "seq_parallel_communication_data_type",
        "dump_state",
        "memory_breakdown",
        "graph_harvesting",
        "use_data_before_expert_parallelism",
        "disable_allgather",
        "quantize_training",
        "dataloader_drop_last",
    }
    return keys


def validate_ds_config(
    cfg: dict | str | Path, *, world_size: int | None = None, source: str = "ds_config"
) -> dict[str, Any]:
    """Validate ``cfg`` (dict, JSON path); return it parsed. Raises ``DSConfigError`` naming the key.

    Checks: JSON parse (file:line), unknown top-level keys, DeepSpeed's own nested-section models,
    and — with ``world_size`` — the batch identity.
    """
    if isinstance(cfg, (str, Path)):
        path = Path(cfg)
        source = str(path)
        cfg = read_json_object(path, what="a ds_config JSON file", error=DSConfigError)
    if not isinstance(cfg, dict):
        raise DSConfigError(f"{source}: expected a JSON object at the top level, got {type(cfg).__name__}")
    known = _known_top_level_keys()
    for key in cfg:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise DSConfigError(f"{source}: unknown top-level key {key!r}{hint}")
    _validate_sections(cfg, source)
    if world_size is not None:
        check_batch_identity(cfg, world_size, source=source)
    return cfg


# Optimizer / scheduler "type" names DeepSpeed builds itself (runtime/config.py, lr_schedules.py);
# any other name must be a torch.optim (lr_scheduler) class, which DeepSpeed looks up by name.
DS_OPTIMIZERS = {
    "adam",
    "adamw",
    "lamb",
    "onebitadam",
    "zerooneadam",
    "onebitlamb",
    "adagrad",
    "lion",
    "muadam",
    "muadamw",
    "musgd",
    "muon",
    "sgd",
    "adam_w",
}
DS_SCHEDULERS = {"LRRangeTest", "OneCycle", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR"}


def check_scalars(cfg: dict, source: str) -> None:
    """Types and ranges DeepSpeed's own parsing coerces or lets through (they fail later, in a rank)."""
    for key in (
        "train_batch_size",
        "train_micro_batch_size_per_gpu",
        "gradient_accumulation_steps",
        "steps_per_print",
    ):
        if key in cfg:
            _positive_int(cfg[key], f"{source}: {key}")
    if "gradient_clipping" in cfg:
        v = cfg["gradient_clipping"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != v:
            raise DSConfigError(f"{source}: gradient_clipping: expected a number ≥ 0 (0 = off), got {v!r}")
    zero = cfg.get("zero_optimization")
    if isinstance(zero, dict) and "stage" in zero:
        st = zero["stage"]
        if isinstance(st, bool) or not isinstance(st, int) or st not in (0, 1, 2, 3):
            raise DSConfigError(
                f"{source}: zero_optimization.stage: expected 0, 1, 2 or 3 (an integer), got {st!r}"
            )
    for section, known, lookup in (
        ("optimizer", DS_OPTIMIZERS, "torch.optim"),
        ("scheduler", DS_SCHEDULERS, "torch.optim.lr_scheduler"),
    ):
        if section not in cfg:
            continue
        value = cfg[section]
        if not isinstance(value, dict):
            raise DSConfigError(
                f"{source}: {section}: expected an object with 'type' and 'params', got {value!r}"
            )
        extra_keys = set(value) - {"type", "params"}
        if extra_keys:
            raise DSConfigError(
                f"{source}: {section}: unknown key(s) {sorted(extra_keys)}; expected 'type' and 'params'"
            )
        typ = value.get("type")
        if not isinstance(typ, str) or not typ:
            raise DSConfigError(f"{source}: {section}.type: expected a name, got {typ!r}")
        if not isinstance(value.get("params", {}), dict):
            raise DSConfigError(f"{source}: {section}.params: expected an object, got {value['params']!r}")
        import importlib

        names = {k.lower() for k in known} if section == "optimizer" else known
        probe = typ.lower() if section == "optimizer" else typ
        if probe not in names and not isinstance(getattr(importlib.import_module(lookup), typ, None), type):
            raise DSConfigError(
                f"{source}: {section}.type: unknown {section} {typ!r}; expected one of DeepSpeed's "
                f"{sorted(known)} or a {lookup} class name"
            )


def _validate_sections(cfg: dict, source: str) -> None:
    from deepspeed.runtime.precision_config import DeepSpeedBF16Config, DeepSpeedFP16Config
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    from pydantic import ValidationError

    check_scalars(cfg, source)
    models = {
        "zero_optimization": DeepSpeedZeroConfig,
        "fp16": DeepSpeedFP16Config,
        "bf16": DeepSpeedBF16Config,
    }
    for section, model in models.items():
        if section not in cfg:
            continue
        value = cfg[section]
        if not isinstance(value, dict):
            raise DSConfigError(f"{source}: {section!r} must be an object, got {type(value).__name__}")
        try:
            model(**value)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise DSConfigError(
                f"{source}: {section}.{loc}: {err['msg']} (got {err.get('input')!r})"
            ) from None
    if cfg.get("fp16", {}).get("enabled") and cfg.get("bf16", {}).get("enabled"):
        raise DSConfigError(f"{source}: fp16.enabled and bf16.enabled are both true; pick one")
    zero = cfg.get("zero_optimization", {})
    if offload_on(zero.get("offload_param")) and zero.get("stage", 0) != 3:
        raise DSConfigError(
            f"{source}: zero_optimization.offload_param needs stage 3 (got stage {zero.get('stage', 0)}); "
            f"DeepSpeed rejects it"
        )
    if offload_on(zero.get("offload_optimizer")) and zero.get("stage", 0) == 0:
        raise DSConfigError(
            f"{source}: zero_optimization.offload_optimizer needs stage 1, 2 or 3 (got stage 0)"
        )


def check_batch_identity(cfg: dict, world_size: int, *, source: str = "ds_config") -> dict[str, Any]:
    """``train_batch_size == micro × accum × world``; fills a missing one like DeepSpeed, else raises."""
    _positive_int(world_size, "world_size")
    tb, mb, ga = (
        cfg.get(k)
        for k in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
    )
    for key, value in (
        ("train_batch_size", tb),
        ("train_micro_batch_size_per_gpu", mb),
        ("gradient_accumulation_steps", ga),
    ):
        if value is not None:
            _positive_int(value, f"{source}: {key}")
    if tb is not None and mb is not None and ga is not None:
        if tb != mb * ga * world_size:
            raise DSConfigError(
                f"{source}: train_batch_size={tb} but train_micro_batch_size_per_gpu × "
                f"gradient_accumulation_steps × "
                f"world_size = {mb} × {ga} × {world_size} = {mb * ga * world_size}"
            )
        return {"train_batch_size": tb, "micro_batch": mb, "grad_accum": ga}
    if tb is not None and ga is not None:
        if tb % (ga * world_size):
            raise DSConfigError(
                f"{source}: train_batch_size={tb} is not divisible by gradient_accumulation_steps × "
                f"world_size = {ga * world_size}"
            )
        return {"train_batch_size": tb, "micro_batch": tb // (ga * world_size), "grad_accum": ga}
    if tb is not None and mb is not None:
        if tb % (mb * world_size):
            raise DSConfigError(
                f"{source}: train_batch_size={tb} is not divisible by micro_batch × world_size = "
                f"{mb * world_size}"
            )
        return {"train_batch_size": tb, "micro_batch": mb, "grad_accum": tb // (mb * world_size)}
    if mb is not None:
        return {"train_batch_size": mb * (ga or 1) * world_size, "micro_batch": mb, "grad_accum": ga or 1}
    if tb is not None:  # DeepSpeed: micro = train_batch_size / world_size, accumulation 1
        if tb % world_size:
            raise DSConfigError(
                f"{source}: train_batch_size={tb} is not divisible by world_size = {world_size}"
            )
        return {"train_batch_size": tb, "micro_batch": tb // world_size, "grad_accum": 1}
    raise DSConfigError(f"{source}: needs train_batch_size or train_micro_batch_size_per_gpu")


def memory_plan(cfg: dict) -> dict[str, Any]:
    """What a (validated) ds_config fixes for the memory model: ZeRO stage, offload targets, precision."""
    zero = cfg.get("zero_optimization") or {}
    precision = (
        "bf16"
        if (cfg.get("bf16") or cfg.get("bfloat16") or {}).get("enabled")
        else "fp16"
        if (cfg.get("fp16") or {}).get("enabled")
        else "fp32"
    )
    stage = int(zero.get("stage", 0))
    return {
        "stage": stage,
        "precision": precision,
        "offload_optimizer": stage >= 1 and offload_on(zero.get("offload_optimizer")),
        "offload_param": stage == 3 and offload_on(zero.get("offload_param")),
    }


def _flatten(d: dict, prefix: str = "") -> list[tuple[str, Any]]:
    rows = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        rows.append((key, v))
        if isinstance(v, dict):
            rows += _flatten(v, key + ".")
    return rows


def explain_ds_config(
    cfg: dict, *, world_size: int, micro_batch: int | None = None, grad_accum: int | None = None
):
    """A table (pandas) of every key: value, meaning, and whether it acts at the configured stage.

    ``micro_batch``/``grad_accum`` are what the launch command passes (they override the file's).
    Returns ``(table, findings)``: findings are the problems found (batch identity, inert keys).
    """
    import pandas as pd

    stage = int(cfg.get("zero_optimization", {}).get("stage", 0))
    fp16_on = bool(cfg.get("fp16", {}).get("enabled"))
    prof_on = bool(cfg.get("flops_profiler", {}).get("enabled"))
    rows, findings = [], []
    for key, value in _flatten(cfg):
        meaning, stages = KEY_DOCS.get(key, ("(not in nbkit's key table)", None))
        active = True
        why = ""
        if stages is not None and stage not in stages:
            active, why = (
                False,
                f"only acts at stage(s) {', '.join(map(str, stages))}; this config is stage {stage}",
            )
        if key.startswith("flops_profiler.") and key != "flops_profiler.enabled" and not prof_on:
            active, why = False, "flops_profiler.enabled is false"
        if key.startswith("fp16.") and key != "fp16.enabled" and not fp16_on:
            active, why = False, "fp16.enabled is false"
        if key == "zero_optimization.reduce_bucket_size" and value == "auto":
            why = (
                "'auto' is resolved only by the Hugging Face Trainer integration; "
                "plain DeepSpeed drops it and uses its default"
            )
        if key == "zero_optimization.sub_group_size":
            why = why or "not a per-rank shard size (the field notes read it as '1.75 GB per card')"
        rows.append(
            {
                "key": key,
                "value": json.dumps(value) if isinstance(value, (dict, list)) else value,
                "meaning": meaning,
                "acts": active,
                "note": why,
            }
        )
        if not active:
            findings.append(f"{key}: does nothing here ({why})")
    mb = micro_batch if micro_batch is not None else cfg.get("train_micro_batch_size_per_gpu")
    ga = grad_accum if grad_accum is not None else cfg.get("gradient_accumulation_steps")
    tb = cfg.get("train_batch_size")
    if tb is not None and mb is not None and ga is not None and tb != mb * ga * world_size:
        findings.insert(
            0,
            f"batch identity broken: train_batch_size={tb} but micro_batch × grad_accum × world_size = "
            f"{mb} × {ga} × {world_size} = {mb * ga * world_size}",
        )
    return pd.DataFrame(rows), findings


def explain(
    path: str | Path = "",
    *,
    world_size: int | None = None,
    micro_batch: int | None = None,
    grad_accum: int | None = None,
):
    """Explain the user's ds_config (``path``) or, with no path, the field notes' one with its launch line.

    Returns ``(table, findings, identity)``; ``identity`` holds ``train_batch_size``, ``micro_batch``,
    ``grad_accum`` and ``world_size`` as the batch-identity check reads them. The file is validated
    first (DeepSpeed's own section models plus the checks above), so a config DeepSpeed would reject
    fails here with its file and key.
    """
    if path:
        cfg = validate_ds_config(path)
        world = world_size or 1
    else:
        cfg = FIELD_NOTES_DS_CONFIG
        world, micro_batch, grad_accum = (
            FIELD_NOTES_CLI["world_size"],
            FIELD_NOTES_CLI["micro_batch"],
            FIELD_NOTES_CLI["grad_accum"],
        )
    table, findings = explain_ds_config(cfg, world_size=world, micro_batch=micro_batch, grad_accum=grad_accum)
    mb = micro_batch if micro_batch is not None else cfg.get("train_micro_batch_size_per_gpu")
    ga = grad_accum if grad_accum is not None else cfg.get("gradient_accumulation_steps", 1)
    identity = {
        "train_batch_size": cfg.get("train_batch_size"),
        "micro_batch": mb,
        "grad_accum": ga,
        "world_size": world,
    }
    return table, findings, identity


def build_config(rung: dict, spec: dict, world: int) -> dict:
    """The ds_config of one ladder rung (``rung``: stage, offload, persistence, sub-group) under a ladder
    ``spec`` (batch, precision, bucket) at ``world`` ranks — what each rank initializes DeepSpeed with."""
    return build_ds_config(
        stage=rung["stage"],
        micro_batch=spec["micro_batch"],
        grad_accum=spec.get("grad_accum", 1),
        world_size=world,
        precision=spec.get("precision", "fp32"),
        offload_optimizer=rung.get("offload_optimizer", False),
        offload_param=rung.get("offload_param", False),
        param_persistence_threshold=rung.get(
            "param_persistence_threshold", spec.get("param_persistence_threshold", 0)
        ),
        sub_group_size=rung.get("sub_group_size"),
        bucket_elements=spec.get("bucket_elements", 200_000),
        extra=spec.get("ds_config_extra"),
    )
