"""Cross-file coupling: every setting the trainer config and its ds_config both state, compared by the rule
the job itself applies.

Under axolotl and the TRL / transformers ``Trainer`` the DeepSpeed config passes through transformers'
``HfTrainerDeepSpeedConfig`` (``transformers/integrations/deepspeed.py``): ``trainer_config_process``
and ``trainer_config_finalize`` call ``fill_match(ds_key, trainer_value)`` for each coupled key — a
value of ``"auto"`` takes the trainer's value; any other value that differs is collected, and
``deepspeed_init`` raises one ``ValueError`` listing them, after the model is loaded and before the
first step. ``fill_match`` does nothing for a key (or section) the ds_config does not have; accelerate
(which the Trainer builds its engine through) then adds a missing precision section from the trainer's
precision, sets a missing ``gradient_accumulation_steps`` to 1 and uses it over the trainer's, and
refuses a ds_config without ``zero_optimization``. DeepSpeed applies its own rules at
``deepspeed.initialize``: the batch identity ``train_batch_size = micro × accumulation × world size``,
fp16 and bf16 not both on, an ``"auto"`` nothing filled refused by its config models, a client (torch)
optimizer refused under optimizer offload unless ``zero_force_ds_cpu_optimizer`` is false, its own
``gradient_clipping`` (with its default) whatever the trainer's ``max_grad_norm``. What stops the job
at start is an **error**; what lets it run but train otherwise than the trainer config says (the
ds_config's optimizer or scheduler replacing the trainer's, a different clipping, accumulation 1) is a
**warning**. The rules were read in transformers 5.25, accelerate 1.16 and DeepSpeed 0.19.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from nbkit.diagnose.setup import Setup, Value
from nbkit.zero.dsconfig import offload_on as _offload_on

AGREE, AUTO, ABSENT, ERROR, WARNING, UNCHECKED = "agree", "auto", "absent", "error", "warning", "not checked"
STATUSES = (AGREE, AUTO, ABSENT, ERROR, WARNING, UNCHECKED)

HF_RULE = (
    "transformers HfTrainerDeepSpeedConfig.fill_match: 'auto' takes the trainer's value; another value must "
    "equal it, "
    "else deepspeed_init raises ValueError (after the model is loaded, before the first step)"
)
DS_BATCH_RULE = (
    "DeepSpeed (DeepSpeedConfig._batch_assertion): train_batch_size == micro × accumulation × "
    "world size, asserted at deepspeed.initialize"
)

# ds_config keys transformers fills from "auto" (trainer_config_process / trainer_config_finalize); any other
# "auto" reaches DeepSpeed as the string "auto".
HF_FILLED = {
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
    "train_batch_size",
    "gradient_clipping",
    "optimizer.params.lr",
    "optimizer.params.betas",
    "optimizer.params.eps",
    "optimizer.params.weight_decay",
    "scheduler.params.warmup_min_lr",
    "scheduler.params.warmup_max_lr",
    "scheduler.params.total_num_steps",
    "scheduler.params.warmup_num_steps",
    "fp16.enabled",
    "bf16.enabled",
    "zero_optimization.reduce_bucket_size",
    "zero_optimization.stage3_prefetch_bucket_size",
    "zero_optimization.stage3_param_persistence_threshold",
    # accelerate's Accelerator._prepare_deepspeed fills this one (with False)
    "zero_optimization.stage3_gather_16bit_weights_on_model_save",
}
HIDDEN_SIZE_AUTO = (
    "zero_optimization.reduce_bucket_size",
    "zero_optimization.stage3_prefetch_bucket_size",
    "zero_optimization.stage3_param_persistence_threshold",
)

# DeepSpeed's scheduler types → the trainer lr_scheduler_type of the same shape.
DS_SCHEDULER_SHAPE = {
    "WarmupLR": "constant_with_warmup",
    "WarmupDecayLR": "linear",
    "WarmupCosineLR": "cosine",
    "OneCycle": "one cycle",
    "LRRangeTest": "LR range test",
}


@dataclass(frozen=True)
class Coupling:
    """One setting stated in both files: each side (``file:line key = value``), what the job resolves it to,
    the verdict and rule."""

    setting: str
    trainer: str
    deepspeed: str
    resolved: str
    status: str
    rule: str
    why: str

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"coupling status must be one of {STATUSES}, got {self.status!r}")

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (a == b and type(a) is type(b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)
    return a == b


def resolved_flag(v: Value) -> Any:
    """axolotl's ``bf16: auto`` is true on a GPU with bf16 support (Ampere or newer), which diagnose
    assumes."""
    return True if v.value == "auto" else v.value


def fill_match(
    setup: Setup, setting: str, ds_key: str, trainer: Value, trainer_value: Any = None
) -> Coupling:
    """One HF ``fill_match``: the ds_config's ``ds_key`` against the trainer's value."""
    value = trainer.value if trainer_value is None else trainer_value
    present, ds_val = setup.ds_get(ds_key)
    left = trainer.text()
    if not present:
        return Coupling(
            setting,
            left,
            f"{setup.ds_where(ds_key)} (not set)",
            repr(value),
            ABSENT,
            HF_RULE,
            "the ds_config does not set it: fill_match leaves it alone",
        )
    right = f"{setup.ds_where(ds_key)} = {ds_val!r}"
    if ds_val == "auto":
        return Coupling(
            setting, left, right, f"auto → {value!r}", AUTO, HF_RULE, "'auto' takes the trainer's value"
        )
    if _same(ds_val, value):
        return Coupling(setting, left, right, repr(value), AGREE, HF_RULE, "both files say the same")
    return Coupling(
        setting,
        left,
        right,
        "(the job stops)",
        ERROR,
        HF_RULE,
        f"ds {ds_key}={ds_val!r} vs trainer {value!r}: the Trainer raises ValueError at start; set the ds "
        'value to "auto"',
    )


ACCELERATE_GA_RULE = (
    "accelerate DeepSpeedPlugin: a ds_config without gradient_accumulation_steps gets 1, and "
    "Accelerator._prepare_deepspeed "
    "uses DeepSpeed's value over the trainer's"
)


def deepspeed_batch(tb: int | None, mb: int | None, ga: int, world: int) -> tuple[int, int, int] | None:
    """DeepSpeed's ``DeepSpeedConfig._set_batch_related_parameters``: the missing batch values from the given
    ones
    (None when neither train_batch_size nor the micro batch is given). Re-stated here because DeepSpeedConfig
    can only be built inside a distributed job."""
    if tb is not None and mb is not None:
        return tb, mb, ga
    if tb is not None:
        return tb, tb // world // ga, ga
    if mb is not None:
        return mb * ga * world, mb, ga
    return None


def batch_couplings(setup: Setup) -> list[Coupling]:
    t = setup.trainer
    micro, accum = t["per_device_train_batch_size"], t["gradient_accumulation_steps"]
    world = setup.world_size
    rows = [
        fill_match(setup, "micro batch per GPU", "train_micro_batch_size_per_gpu", micro),
        fill_match(setup, "gradient accumulation", "gradient_accumulation_steps", accum),
    ]
    if rows[1].status == ABSENT and accum.value != 1:
        rows[1] = Coupling(
            rows[1].setting,
            rows[1].trainer,
            rows[1].deepspeed,
            "1 (accelerate's fill)",
            WARNING,
            ACCELERATE_GA_RULE,
            f"the run accumulates 1 micro-batch per step, not {accum.value}: add "
            '"gradient_accumulation_steps": "auto"',
        )
    calc = world * micro.value * accum.value
    calc_value = Value(
        calc,
        f"{micro.where} × {accum.where} × world size = {micro.value} × {accum.value} × {world} "
        f"({setup.world_note})",
    )
    rows.append(fill_match(setup, "global batch (train_batch_size)", "train_batch_size", calc_value))
    # What reaches DeepSpeed: "auto" filled by the trainer, an absent accumulation set to 1 by accelerate, the
    # rest as written.
    got = {}
    for key, filled in (
        ("train_batch_size", calc),
        ("train_micro_batch_size_per_gpu", micro.value),
        ("gradient_accumulation_steps", accum.value),
    ):
        present, v = setup.ds_get(key)
        got[key] = (
            filled if v == "auto" else v if present else (1 if key == "gradient_accumulation_steps" else None)
        )
    final = deepspeed_batch(
        got["train_batch_size"],
        got["train_micro_batch_size_per_gpu"],
        got["gradient_accumulation_steps"],
        world,
    )
    side = (
        f"{setup.ds_source}: train_batch_size {got['train_batch_size']}, micro "
        f"{got['train_micro_batch_size_per_gpu']}, "
        f"accumulation {got['gradient_accumulation_steps']} (after the trainer's and accelerate's fill)"
    )
    if final is None:
        rows.append(
            Coupling(
                "batch at deepspeed.initialize",
                f"world size {world} ({setup.world_note})",
                side,
                "(the job stops)",
                ERROR,
                "DeepSpeed (DeepSpeedConfig._set_batch_related_parameters): train_batch_size or "
                "train_micro_batch_size_per_gpu must be given",
                'the ds_config gives neither: add "train_micro_batch_size_per_gpu": "auto"',
            )
        )
        return rows
    tb, mb, ga = final
    ok = tb == mb * ga * world
    rows.append(
        Coupling(
            "batch identity at deepspeed.initialize",
            f"world size {world} ({setup.world_note})",
            side,
            f"{tb} {'=' if ok else '≠'} {mb} × {ga} × {world} = {mb * ga * world}",
            AGREE if ok else ERROR,
            DS_BATCH_RULE,
            "the identity holds"
            if ok
            else "DeepSpeed asserts at deepspeed.initialize: the job stops at start",
        )
    )
    return rows


MIXED_PRECISION_RULE = (
    "accelerate DeepSpeedPlugin.set_mixed_precision: a missing bf16/fp16 section is added from the trainer's "
    "precision; "
    "the other precision enabled in the ds_config is a ValueError"
)


def precision_couplings(setup: Setup) -> list[Coupling]:
    t = setup.trainer
    bf16, fp16 = t["bf16"], t["fp16"]
    note = " (axolotl's 'auto': true on a bf16-capable GPU, assumed)" if bf16.value == "auto" else ""
    rows = []
    for name, flag, label in (("bf16", bf16, "bf16" + note), ("fp16", fp16, "fp16")):
        row = fill_match(setup, label, f"{name}.enabled", flag, resolved_flag(flag))
        if row.status == ABSENT:
            row = Coupling(
                row.setting,
                row.trainer,
                row.deepspeed,
                repr(resolved_flag(flag)),
                ABSENT,
                MIXED_PRECISION_RULE,
                f'accelerate adds "{name}": {{"enabled": {str(bool(resolved_flag(flag))).lower()}}}',
            )
        rows.append(row)
    on = {name: _enabled(setup, name, resolved_flag(flag)) for name, flag in (("bf16", bf16), ("fp16", fp16))}
    if on["bf16"] and on["fp16"]:
        rows.append(
            Coupling(
                "precision at deepspeed.initialize",
                f"{bf16.text()}; {fp16.text()}",
                f"{setup.ds_source}: bf16, fp16",
                "(the job stops)",
                ERROR,
                "accelerate DeepSpeedPlugin.set_mixed_precision refuses the other precision enabled in the "
                "ds_config "
                "(ValueError); DeepSpeed (DeepSpeedConfig): bfloat16 and fp16 modes cannot be simultaneously "
                "enabled",
                "both end up enabled; DeepSpeed refuses the config",
            )
        )
    return rows


def _enabled(setup: Setup, name: str, trainer_flag: Any) -> bool:
    present, v = setup.ds_get(f"{name}.enabled")
    if not present:
        return bool(trainer_flag)  # accelerate adds the section from the trainer's precision
    return bool(trainer_flag) if v == "auto" else bool(v)


def deepspeed_clipping_default() -> float:
    """DeepSpeed's ``GRADIENT_CLIPPING_DEFAULT``, read from the installed package's ``runtime/constants.py``
    without
    importing it: importing deepspeed probes the accelerators and logs to the console, which would break a
    one-line error."""
    import ast
    from importlib.util import find_spec

    spec = find_spec("deepspeed")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("deepspeed is not installed (pip install -e '.[zero]')")
    path = Path(next(iter(spec.submodule_search_locations))) / "runtime" / "constants.py"
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "GRADIENT_CLIPPING_DEFAULT" for t in node.targets
        ):
            return float(ast.literal_eval(node.value))
    raise ImportError(f"{path}: no GRADIENT_CLIPPING_DEFAULT (an unknown DeepSpeed version)")


def clipping_coupling(setup: Setup) -> Coupling:
    ds_default = deepspeed_clipping_default()
    clip = setup.trainer["max_grad_norm"]
    row = fill_match(setup, "gradient clipping", "gradient_clipping", clip)
    if row.status != ABSENT:
        return row
    rule = (
        "fill_match leaves an absent key alone; under DeepSpeed the Trainer leaves clipping to the engine "
        "(accelerate's "
        "clip_grad_norm_ only reads the norm), which clips at its own gradient_clipping, default "
        f"{ds_default}"
    )
    if _same(float(clip.value or 0), ds_default):
        return Coupling(
            row.setting,
            row.trainer,
            row.deepspeed,
            f"{ds_default} (DeepSpeed's default)",
            ABSENT,
            rule,
            "DeepSpeed's default equals the trainer's max_grad_norm",
        )
    return Coupling(
        row.setting,
        row.trainer,
        row.deepspeed,
        f"{ds_default} (DeepSpeed's default)",
        WARNING,
        rule,
        f"the trainer's max_grad_norm {clip.value} is not applied; DeepSpeed clips at {ds_default}: "
        'add "gradient_clipping": "auto"',
    )


def zero_section_coupling(setup: Setup) -> list[Coupling]:
    present, _ = setup.ds_get("zero_optimization")
    if present:
        return []
    return [
        Coupling(
            "zero_optimization",
            "—",
            f"{setup.ds_where('zero_optimization')} (not set)",
            "(the job stops)",
            ERROR,
            "accelerate DeepSpeedPlugin: 'Please specify the ZeRO optimization config in the DeepSpeed "
            "config.' (ValueError)",
            'a ds_config without a zero_optimization section stops the Trainer at start: add {"stage": 0} or '
            "the stage you mean",
        )
    ]


def optimizer_couplings(setup: Setup) -> list[Coupling]:
    t = setup.trainer
    rows: list[Coupling] = []
    has_opt, opt = setup.ds_get("optimizer")
    if has_opt:
        rows += [
            fill_match(setup, "learning rate", "optimizer.params.lr", t["learning_rate"]),
            fill_match(
                setup,
                "Adam betas",
                "optimizer.params.betas",
                Value(
                    [t["adam_beta1"].value, t["adam_beta2"].value],
                    f"{t['adam_beta1'].where} / {t['adam_beta2'].where}",
                    t["adam_beta1"].set or t["adam_beta2"].set,
                ),
            ),
            fill_match(setup, "Adam epsilon", "optimizer.params.eps", t["adam_epsilon"]),
            fill_match(setup, "weight decay", "optimizer.params.weight_decay", t["weight_decay"]),
        ]
        ds_type = str(opt.get("type", "")) if isinstance(opt, dict) else ""
        optim = t["optim"]
        same_family = (
            ds_type.lower().replace("_", "") in ("adam", "adamw")
            and str(optim.value).startswith("adamw")
            and not any(
                s in str(optim.value)
                for s in ("8bit", "bnb", "paged", "anyprecision", "apollo", "galore", "lomo")
            )
        )
        status, why = (
            (AGREE, "both are AdamW")
            if same_family
            else (
                (
                    WARNING,
                    f"the Trainer builds DeepSpeed's {ds_type!r} (a DummyOptim) and ignores optim "
                    f"{optim.value!r}",
                )
                if optim.set
                else (AGREE, f"the trainer names no optimizer; DeepSpeed's {ds_type!r} is used")
            )
        )
        rows.append(
            Coupling(
                "optimizer",
                optim.text(),
                f"{setup.ds_where('optimizer.type')} = {ds_type!r}",
                f"DeepSpeed's {ds_type}",
                status,
                "transformers deepspeed_optim_sched: an 'optimizer' section in the ds_config replaces the "
                "trainer's optimizer",
                why,
            )
        )
    else:
        rows.append(
            Coupling(
                "learning rate",
                t["learning_rate"].text(),
                f"{setup.ds_where('optimizer')} (no section)",
                repr(t["learning_rate"].value),
                ABSENT,
                HF_RULE,
                "the trainer's optimizer is used with the trainer's learning rate",
            )
        )
        off = _offload_optimizer(setup)
        if off:
            present, force = setup.ds_get("zero_force_ds_cpu_optimizer")
            forced = not present or force is not False
            rows.append(
                Coupling(
                    "optimizer under offload",
                    t["optim"].text(),
                    f"{setup.ds_where('zero_optimization.offload_optimizer')} = {off!r}; no 'optimizer' "
                    "section",
                    "(the job stops)" if forced else f"the trainer's {t['optim'].value} stepping on the CPU",
                    ERROR if forced else WARNING,
                    "DeepSpeed (DeepSpeedEngine._configure_basic_optimizer): a client optimizer under "
                    "ZeRO-Offload raises "
                    "ZeRORuntimeException unless zero_force_ds_cpu_optimizer is false",
                    "the Trainer hands DeepSpeed its torch optimizer; DeepSpeed refuses it under offload: "
                    "add an 'optimizer' "
                    "section (type AdamW, params 'auto')"
                    if forced
                    else "allowed by zero_force_ds_cpu_optimizer false: a torch optimizer steps on the CPU "
                    "(slow)",
                )
            )
    return rows


def _offload_optimizer(setup: Setup) -> Any:

    present, off = setup.ds_get("zero_optimization.offload_optimizer")
    return off if present and _offload_on(off) and _stage(setup) >= 1 else None


def _stage(setup: Setup) -> int:
    present, st = setup.ds_get("zero_optimization.stage")
    return int(st) if present and isinstance(st, int) and not isinstance(st, bool) else 0


def scheduler_couplings(setup: Setup) -> list[Coupling]:
    t = setup.trainer
    has, sched = setup.ds_get("scheduler")
    if not has:
        return []
    ds_type = str(sched.get("type", "")) if isinstance(sched, dict) else ""
    kind = t["lr_scheduler_type"]
    shape = DS_SCHEDULER_SHAPE.get(ds_type, ds_type)
    rows = [fill_match(setup, "peak learning rate", "scheduler.params.warmup_max_lr", t["learning_rate"])]
    same = str(kind.value).replace("_with_min_lr", "") == shape
    rows.append(
        Coupling(
            "LR schedule",
            kind.text(),
            f"{setup.ds_where('scheduler.type')} = {ds_type!r}",
            f"DeepSpeed's {ds_type} ({shape})",
            AGREE if same else WARNING,
            "transformers deepspeed_optim_sched: a 'scheduler' section in the ds_config replaces the "
            "trainer's lr_scheduler_type",
            "the same shape"
            if same
            else f"the run follows {ds_type} ({shape}), not the trainer's {kind.value!r}",
        )
    )
    warm = t["warmup_steps"]
    if warm.set and warm.value and warm.value >= 1:
        rows.append(
            fill_match(setup, "warmup steps", "scheduler.params.warmup_num_steps", warm, int(warm.value))
        )
    elif setup.ds_get("scheduler.params.warmup_num_steps")[1] not in (None, "auto"):
        rows.append(
            Coupling(
                "warmup steps",
                f"{warm.text()}; {t['warmup_ratio'].text()}",
                setup.ds_where("scheduler.params.warmup_num_steps"),
                "",
                UNCHECKED,
                HF_RULE,
                "the trainer's warmup is a ratio of the total steps, which depend on the dataset size",
            )
        )
    total = setup.ds_get("scheduler.params.total_num_steps")[1]
    steps = t["max_steps"]
    if total not in (None, "auto"):
        if steps.set and steps.value > 0:
            rows.append(fill_match(setup, "total steps", "scheduler.params.total_num_steps", steps))
        else:
            rows.append(
                Coupling(
                    "total steps",
                    steps.text(),
                    f"{setup.ds_where('scheduler.params.total_num_steps')} = {total!r}",
                    "",
                    UNCHECKED,
                    HF_RULE,
                    'the Trainer\'s step count depends on the dataset size; set max_steps or use "auto"',
                )
            )
    return rows


def auto_couplings(setup: Setup) -> list[Coupling]:
    """Every ``"auto"`` in the ds_config: filled by the trainer (with what), or left for DeepSpeed to
    refuse."""
    rows = []
    hidden = getattr(setup.model_config, "hidden_size", None) if setup.model_config is not None else None
    stage = _stage(setup)
    for key in _auto_keys(setup.ds or {}):
        if key in HIDDEN_SIZE_AUTO:
            if key != "zero_optimization.reduce_bucket_size" and stage != 3:
                rows.append(
                    Coupling(
                        key,
                        "—",
                        f"{setup.ds_where(key)} = 'auto'",
                        "(the job stops)",
                        ERROR,
                        "transformers trainer_config_finalize fills this 'auto' at ZeRO-3 only",
                        f"at stage {stage} the 'auto' reaches DeepSpeed's config model as a string: remove "
                        "the key",
                    )
                )
            elif hidden is None:
                rows.append(
                    Coupling(
                        key,
                        "the model's hidden_size (no model)",
                        f"{setup.ds_where(key)} = 'auto'",
                        "",
                        UNCHECKED,
                        "transformers trainer_config_finalize: filled from the model's hidden_size",
                        "no model to read hidden_size from",
                    )
                )
            else:
                value = resolve_hidden_auto(key, hidden)
                rows.append(
                    Coupling(
                        key,
                        f"{setup.model_spec} hidden_size = {hidden}",
                        f"{setup.ds_where(key)} = 'auto'",
                        f"auto → {value:,}",
                        AUTO,
                        "transformers trainer_config_finalize: filled from the model's hidden_size",
                        "filled at start",
                    )
                )
        elif key not in HF_FILLED:
            rows.append(
                Coupling(
                    key,
                    "—",
                    f"{setup.ds_where(key)} = 'auto'",
                    "(the job stops)",
                    ERROR,
                    "only the keys transformers' integration knows are filled; DeepSpeed's config models "
                    "refuse the string 'auto'",
                    "no trainer value fills this key: write a number",
                )
            )
    return rows


def resolve_hidden_auto(key: str, hidden: int) -> int:
    """What transformers writes for a hidden-size ``"auto"`` (trainer_config_finalize)."""
    return {
        "zero_optimization.reduce_bucket_size": hidden * hidden,
        "zero_optimization.stage3_prefetch_bucket_size": int(0.9 * hidden * hidden),
        "zero_optimization.stage3_param_persistence_threshold": 10 * hidden,
    }[key]


def _auto_keys(node: Any, prefix: str = "") -> list[str]:
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _auto_keys(v, f"{prefix}{k}.")
    elif node == "auto":
        out.append(prefix[:-1])
    return out


def checkpointing_coupling(setup: Setup) -> list[Coupling]:
    present, section = setup.ds_get("activation_checkpointing")
    gc = setup.trainer["gradient_checkpointing"]
    if not present or gc.value is True:
        return []
    return [
        Coupling(
            "activation checkpointing",
            gc.text(),
            f"{setup.ds_where('activation_checkpointing')} = {section!r}",
            "no checkpointing",
            WARNING,
            "DeepSpeed's activation_checkpointing section configures deepspeed.checkpointing, which "
            "transformers models do not call; "
            "they checkpoint through gradient_checkpointing",
            "the ds section suggests checkpointing, but gradient_checkpointing is off: activations are kept "
            "whole",
        )
    ]


def qlora_zero3_coupling(setup: Setup) -> list[Coupling]:
    """QLoRA under ZeRO-3: DeepSpeed partitions parameters by their storage dtype, so bitsandbytes' packed
    4-bit weights
    shard only when ``bnb_4bit_quant_storage`` is the training dtype (PEFT's "QLoRA and DeepSpeed with ZeRO3"
    guide)."""
    lora = setup.lora
    present, stage = setup.ds_get("zero_optimization.stage")
    if lora is None or lora.kind != "qlora" or not present or stage != 3:
        return []
    dtype = (
        "bfloat16"
        if resolved_flag(setup.trainer["bf16"]) is True
        else "float16"
        if resolved_flag(setup.trainer["fp16"]) is True
        else "float32"
    )
    ok = lora.quant_storage in (dtype, f"torch.{dtype}")
    return [
        Coupling(
            "QLoRA under ZeRO-3",
            f"{setup.config_path.name} bnb_4bit_quant_storage = {lora.quant_storage!r}",
            f"{setup.ds_where('zero_optimization.stage')} = 3",
            f"4-bit storage {lora.quant_storage or 'uint8 (default)'}, training {dtype}",
            AGREE if ok else WARNING,
            "ZeRO-3 shards bitsandbytes' 4-bit weights only when bnb_4bit_quant_storage equals the training "
            "dtype "
            "(PEFT's DeepSpeed guide; older bitsandbytes / transformers do not support ZeRO-3 with 4-bit "
            "weights at all)",
            "storage matches the training dtype"
            if ok
            else f"bnb_4bit_quant_storage is not {dtype}: ZeRO-3 cannot partition the 4-bit weights (set it "
            f"to {dtype}, "
            "or use ZeRO-2, which keeps the 4-bit base whole on each GPU)",
        )
    ]


def couplings(setup: Setup) -> list[Coupling]:
    """Every coupled setting of ``setup`` (empty when the trainer config names no ds_config)."""
    if setup.ds is None:
        return []
    return (
        zero_section_coupling(setup)
        + batch_couplings(setup)
        + precision_couplings(setup)
        + [clipping_coupling(setup)]
        + optimizer_couplings(setup)
        + scheduler_couplings(setup)
        + auto_couplings(setup)
        + checkpointing_coupling(setup)
        + qlora_zero3_coupling(setup)
    )


def resolved_ds(setup: Setup) -> dict[str, Any]:
    """The ds_config as the job would run it: trainer "auto"s filled (hidden-size ones from the model when it
    is known)."""
    import copy

    ds = copy.deepcopy(setup.ds or {})
    t = setup.trainer
    fills = {
        "train_micro_batch_size_per_gpu": t["per_device_train_batch_size"].value,
        "gradient_accumulation_steps": t["gradient_accumulation_steps"].value,
        "train_batch_size": setup.world_size
        * t["per_device_train_batch_size"].value
        * t["gradient_accumulation_steps"].value,
        "gradient_clipping": t["max_grad_norm"].value,
        "bf16.enabled": resolved_flag(t["bf16"]),
        "fp16.enabled": resolved_flag(t["fp16"]),
    }
    hidden = getattr(setup.model_config, "hidden_size", None)
    if hidden:
        fills.update({k: resolve_hidden_auto(k, hidden) for k in HIDDEN_SIZE_AUTO})
    for key, value in fills.items():
        node = ds
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.get(p) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(parts[-1]) == "auto":
            node[parts[-1]] = value
    return ds
