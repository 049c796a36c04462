"""Read the configs people already write: axolotl YAML, PEFT ``adapter_config.json``, TRL ``SFTConfig``
/ transformers ``TrainingArguments`` JSON and DeepSpeed ``ds_config.json``.

:func:`read_any` detects the format (or takes ``fmt``), maps each key it knows onto the audit's own
config and returns the :class:`~nbkit.audit.config.AuditConfig` with a key table: every key of the
file is listed as **audited** (mapped onto a check's input), **not covered** (the audit has no check
that reads it — never silently ignored), and the audit inputs the file did not set are listed as
**defaulted** with the default used. The base model is resolved by :func:`nbkit.model_files.resolve_model`
(a local model directory, a config.json, a Hub id; bad ones stop here with one line naming the key);
a file that names none leaves the model-reading checks "not run: needs …" rather than passing.
axolotl's and TRL's trainer keys (datasets' types, train_on_eos, modules_to_save, packing, attention,
eval batch) fill the audit's ``trainer`` section, which checks 14–18 read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.audit.config import AuditConfig, load_config, parse_config
from nbkit.audit.safe_yaml import ConfigError, yaml_document
from nbkit.errors import read_json_object
from nbkit.model_files import resolve_model

FORMATS = ("nbkit", "axolotl", "peft", "trl", "deepspeed")
ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class Mapped:
    """A foreign config mapped onto the audit: the config, the key table, and what the checks lack."""

    config: AuditConfig
    fmt: str
    keys: list[dict[str, str]] = field(default_factory=list)
    model_unavailable: str = ""

    def table_text(self) -> str:
        width = max((len(r["key"]) for r in self.keys), default=10)
        lines = [
            f"{self.fmt} config: {sum(r['status'] == 'audited' for r in self.keys)} key(s) audited, "
            f"{sum(r['status'] == 'not covered' for r in self.keys)} not covered, "
            f"{sum(r['status'] == 'defaulted' for r in self.keys)} defaulted"
        ]
        for r in self.keys:
            lines.append(f"  {r['status']:<11} {r['key']:<{width}}  {r['note']}")
        return "\n".join(lines)


class MappingBuilder:
    """Collects the audit config dict and the key table while a mapper walks a file."""

    def __init__(
        self,
        source: str,
        data: dict[str, Any],
        lines: dict[tuple, int] | None = None,
        base: Path | None = None,
        model: str | None = None,
    ):
        self.source, self.data, self.lines = source, data, lines or {}
        self.base, self.model = base, model  # the config's folder (relative model paths), --model
        self.cfg: dict[str, dict[str, Any]] = {}
        self.keys: list[dict[str, str]] = []
        self.seen: set[str] = set()

    def where(self, key: str) -> str:
        line = self.lines.get((key,))
        return f"{self.source}:{line}" if line else self.source

    def typed(self, key: str, kind: type | tuple, what: str):
        value = self.data[key]
        ok = isinstance(value, kind) and not (isinstance(value, bool) and kind in (int, float, (int, float)))
        if not ok:
            raise ConfigError(f"{self.where(key)}: key '{key}': expected {what}, got {value!r}")
        return value

    def put(self, key: str, section: str, name: str, value: Any, note: str = ""):
        self.cfg.setdefault(section, {})[name] = value
        if key not in self.seen:
            self.seen.add(key)
            self.keys.append(
                {
                    "key": key,
                    "status": "audited",
                    "note": f"→ {section}.{name}" + (f" ({note})" if note else ""),
                }
            )

    def note(self, key: str, status: str, note: str):
        if key not in self.seen:
            self.seen.add(key)
            self.keys.append({"key": key, "status": status, "note": note})

    def default(self, what: str, value: Any, why: str = ""):
        self.keys.append(
            {"key": what, "status": "defaulted", "note": f"= {value!r}" + (f" ({why})" if why else "")}
        )

    def rest_not_covered(self, reasons: dict[str, str] | None = None):
        for key in self.data:
            self.note(key, "not covered", (reasons or {}).get(key, "no audit check reads it"))


def map_base_model(b: MappingBuilder, key: str, base: Path | None = None, override: str | None = None) -> str:
    """Map the file's base-model key onto ``model.name``; returns why no model can be loaded ("" when one
    can).

    SmolLM2-135M's Hub ids map onto the bundled copy (offline). Anything else goes through
    :func:`nbkit.model_files.resolve_model`: a local model directory (tried relative to the config
    file too), a config.json (architecture only), or a Hub id (online; offline: one line, exit 2).
    ``override`` (``--model``) replaces the file's value.
    """

    ref = override if override is not None else b.data.get(key)
    if ref is None or (isinstance(ref, str) and not ref.strip()):
        return "the base model (the file names none; pass --model PATH)"
    if not isinstance(ref, str):
        raise ConfigError(f"{b.where(key)}: key '{key}': expected a model name or path, got {ref!r}")
    where = "--model" if override is not None else f"{b.where(key)}: key '{key}'"
    text = ref.strip()
    if text.lower() in ("tiny", "smollm2") or (
        "smollm2" in text.lower() and "135m" in text.lower() and not Path(text).exists()
    ):
        name = "smollm2" if "smollm2" in text.lower() else "tiny"
        spec, note = (
            name,
            ("the bundled SmolLM2-135M-Instruct" if name == "smollm2" and text.lower() != "smollm2" else ""),
        )
    else:
        local = (base / text) if base is not None and not Path(text).is_absolute() else None
        spec = str(local) if local is not None and local.exists() else text
        try:
            source = resolve_model(spec)
        except ConfigError:
            raise
        except Exception as exc:  # UsageError from resolve_model: name the file and key it came from
            raise ConfigError(f"{where}: {exc}") from None
        note = {
            "directory": "a local model directory",
            "config": "a config.json: architecture only (checks needing weights: not run)",
            "hub": "a Hugging Face Hub model",
        }.get(source.kind, "")
    if override is not None:
        b.cfg.setdefault("model", {})["name"] = spec
        b.keys.append({"key": "--model", "status": "audited", "note": f"→ model.name ({note or spec})"})
        if key in b.data:
            b.note(key, "not covered", "replaced by --model")
    else:
        b.put(key, "model", "name", spec, note)
    return ""


def _scheduler(
    b: MappingBuilder, lr_key: str, kind_key: str, warm_steps_key: str, warm_ratio_key: str, total_key: str
):
    """A warmup + decay scheduler section from the common trainer keys."""
    kinds = {
        "cosine": "cosine",
        "linear": "linear_decay",
        "constant": "constant",
        "constant_with_warmup": "constant",
    }
    kind = b.data.get(kind_key, "linear")
    if kind_key in b.data:
        if kind not in kinds:
            b.note(
                kind_key, "not covered", f"scheduler {kind!r} has no audit model (known: {', '.join(kinds)})"
            )
            return
    total = b.data.get(total_key)
    if isinstance(total, int) and not isinstance(total, bool) and total > 0:
        b.note(total_key, "audited", "→ the scheduler's length in steps")
    else:
        total = 100
        b.default(f"{total_key} (scheduler length)", total, "the file sets no positive step count")
    warm = 0
    ws = b.data.get(warm_steps_key)
    if (
        isinstance(ws, float) and 0 < ws < 1
    ):  # transformers ≥ 5: a float in [0, 1) is a ratio of the total steps
        warm = int(round(ws * total))
        b.put(
            warm_steps_key,
            "scheduler",
            "warmup_steps",
            warm,
            f"{ws} × {total} steps (a ratio, as transformers ≥ 5 reads it)",
        )
    elif ws:
        warm = (
            int(ws)
            if isinstance(ws, float) and ws.is_integer()
            else b.typed(warm_steps_key, int, "a whole number of steps or a ratio in (0, 1)")
        )
        b.put(warm_steps_key, "scheduler", "warmup_steps", warm)
    elif warm_ratio_key in b.data and b.data[warm_ratio_key]:
        ratio = b.typed(warm_ratio_key, (int, float), "a number in [0, 1)")
        warm = int(round(ratio * total))
        b.put(warm_ratio_key, "scheduler", "warmup_steps", warm, f"{ratio} × {total} steps")
    stages = ([{"kind": "linear_warmup", "steps": warm, "start_factor": 0.01}] if warm else []) + [
        {"kind": kinds[kind], "steps": max(1, total - warm)}
    ]
    if kind_key in b.data:
        b.put(kind_key, "scheduler", "stages", stages, f"{'warmup + ' if warm else ''}{kinds[kind]}")
    else:
        b.cfg.setdefault("scheduler", {})["stages"] = stages
        b.default(kind_key, kind, "the trainer's default")
    if lr_key in b.data:
        b.put(lr_key, "scheduler", "base_lr", float(b.typed(lr_key, (int, float), "a positive number")))


def _deepspeed(b: MappingBuilder, ds: dict[str, Any], prefix: str = ""):
    """The deepspeed section (and train batch keys) from a ds_config dict."""
    zero = ds.get("zero_optimization") or {}
    if not isinstance(zero, dict):
        raise ConfigError(f"{b.source}: key '{prefix}zero_optimization': expected a mapping, got {zero!r}")
    if "stage" in zero:
        b.put(f"{prefix}zero_optimization.stage", "deepspeed", "zero_stage", zero["stage"])
    else:
        b.default("deepspeed.zero_stage", 0, "DeepSpeed's default")
        b.cfg.setdefault("deepspeed", {})["zero_stage"] = 0
    if "stage3_param_persistence_threshold" in zero:
        b.put(
            f"{prefix}zero_optimization.stage3_param_persistence_threshold",
            "deepspeed",
            "stage3_param_persistence_threshold",
            float(zero["stage3_param_persistence_threshold"]),
        )
    else:
        b.default("deepspeed.stage3_param_persistence_threshold", 1e5, "DeepSpeed's default")
    for k in zero:
        if k not in ("stage", "stage3_param_persistence_threshold"):
            b.note(f"{prefix}zero_optimization.{k}", "not covered", "no audit check reads it")
    micro, ga, tbs = (
        ds.get("train_micro_batch_size_per_gpu"),
        ds.get("gradient_accumulation_steps"),
        ds.get("train_batch_size"),
    )
    if isinstance(micro, int) and micro > 0:
        b.put(f"{prefix}train_micro_batch_size_per_gpu", "train", "micro_batch_size", micro)
    if isinstance(ga, int) and ga > 0:
        b.put(f"{prefix}gradient_accumulation_steps", "train", "grad_accumulation", ga)
    if all(isinstance(x, int) and x > 0 for x in (micro, ga, tbs)):
        if tbs % (micro * ga):
            raise ConfigError(
                f"{b.source}: key '{prefix}train_batch_size': {tbs} is not micro ({micro}) × accumulation "
                f"({ga}) × world size"
            )
        b.put(
            f"{prefix}train_batch_size",
            "deepspeed",
            "world_size",
            tbs // (micro * ga),
            "world size from the batch identity",
        )
    for flag, dtype in (("bf16", "bfloat16"), ("fp16", "float16")):
        if isinstance(ds.get(flag), dict) and ds[flag].get("enabled"):
            b.put(f"{prefix}{flag}", "train", "autocast_dtype", dtype)
    for k in ds:
        if k not in (
            "zero_optimization",
            "train_micro_batch_size_per_gpu",
            "gradient_accumulation_steps",
            "train_batch_size",
            "bf16",
            "fp16",
        ):
            b.note(f"{prefix}{k}", "not covered", "no audit check reads it")


def _read_json(path: Path) -> dict[str, Any]:
    return read_json_object(
        path, what="a JSON config (PEFT, TRL/TrainingArguments or DeepSpeed)", error=ConfigError
    )


def detect(path: Path, data: dict[str, Any]) -> str:
    """The format of a parsed config file, from its keys."""
    keys = set(data)
    if path.suffix != ".json":  # YAML: axolotl or nbkit's own
        return (
            "axolotl"
            if keys & {"base_model", "adapter", "lora_r", "datasets", "micro_batch_size", "sequence_len"}
            else "nbkit"
        )
    if "peft_type" in keys or {"r", "lora_alpha", "target_modules"} <= keys:
        return "peft"
    if keys & {"zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size"}:
        return "deepspeed"
    if keys & {"per_device_train_batch_size", "output_dir", "lr_scheduler_type"}:
        return "trl"
    return "nbkit"


def map_peft(b: MappingBuilder) -> str:
    d = b.data
    if str(d.get("peft_type", "LORA")).upper() != "LORA":
        raise ConfigError(
            f"{b.where('peft_type')}: key 'peft_type': the audit checks LoRA adapters, got {d['peft_type']!r}"
        )
    for key, name, kind, what in (
        ("r", "r", int, "a positive integer"),
        ("lora_alpha", "alpha", (int, float), "a positive number"),
        ("lora_dropout", "dropout", (int, float), "a number in [0, 1)"),
        ("use_rslora", "use_rslora", bool, "true or false"),
    ):
        if key in d:
            b.put(key, "lora", name, b.typed(key, kind, what))
    if "target_modules" in d:
        tm = d["target_modules"]
        tm = [tm] if isinstance(tm, str) else tm
        if not isinstance(tm, list) or not all(isinstance(t, str) for t in tm) or not tm:
            raise ConfigError(
                f"{b.source}: key 'target_modules': expected a module name or a list of them, got "
                f"{d['target_modules']!r}"
            )
        b.put("target_modules", "lora", "target_modules", ALL_LINEAR if tm == ["all-linear"] else tm)
        b.cfg.setdefault("trainer", {"tool": "peft"})["target_linear"] = tm == ["all-linear"]
    if d.get("modules_to_save") is not None:
        b.put("modules_to_save", "trainer", "modules_to_save", _names(b, "modules_to_save"))
    if d.get("ensure_weight_tying") is not None:
        b.put(
            "ensure_weight_tying",
            "trainer",
            "ensure_weight_tying",
            b.typed("ensure_weight_tying", bool, "true or false"),
        )
    b.cfg.setdefault("trainer", {}).setdefault("tool", "peft")
    why = map_base_model(b, "base_model_name_or_path", b.base, b.model)
    b.rest_not_covered(
        {"peft_type": "LORA is the adapter the audit checks", "task_type": "the audit trains causal LMs"}
    )
    return why


# TrainingArguments keys of transformers versions whose JSON the audit does not read: key → (what replaced it,
# since)
RETIRED_TRAINING_ARGS = {
    "evaluation_strategy": ("eval_strategy", "4.41"),
    "per_gpu_train_batch_size": ("per_device_train_batch_size", "2.9"),
    "per_gpu_eval_batch_size": ("per_device_eval_batch_size", "2.9"),
}


def map_trl(b: MappingBuilder) -> str:
    d = b.data
    for key, (new, since) in RETIRED_TRAINING_ARGS.items():
        if d.get(key) is not None and new not in d:
            raise ConfigError(
                f"{b.where(key)}: key '{key}': written by transformers older than {since} (renamed '{new}' "
                f"in {since}); "
                "the audit reads TrainingArguments / SFTConfig JSON of transformers ≥ 4.41 — re-save it "
                "with a newer "
                f"transformers or rename the key"
            )
    trainer = b.cfg.setdefault("trainer", {"tool": "trl"})
    if d.get("per_device_eval_batch_size") is not None:
        b.put(
            "per_device_eval_batch_size",
            "trainer",
            "eval_batch_size",
            b.typed("per_device_eval_batch_size", int, "a whole number"),
        )
    for key in ("packing", "padding_free"):
        if d.get(key) is not None:
            if b.typed(key, bool, "true or false"):
                b.put(key, "trainer", "packing", True)
            else:
                b.note(key, "audited", "→ trainer.packing (false)")
    init = d.get("model_init_kwargs") if isinstance(d.get("model_init_kwargs"), dict) else {}
    attn = d.get("attn_implementation") or init.get("attn_implementation")
    if attn is not None:
        if not isinstance(attn, str):
            raise ConfigError(
                f"{b.source}: key 'attn_implementation': expected a name such as 'flash_attention_2', got "
                f"{attn!r}"
            )
        b.put(
            "attn_implementation" if "attn_implementation" in d else "model_init_kwargs",
            "trainer",
            "attn_implementation",
            attn,
        )
    else:
        b.default("trainer.attn_implementation", "sdpa", "transformers' default when the file names none")
    if isinstance(d.get("eos_token"), str):
        b.put("eos_token", "trainer", "eot_tokens", [d["eos_token"]])
    trainer.setdefault("tool", "trl")
    for key, section, name in (
        ("per_device_train_batch_size", "train", "micro_batch_size"),
        ("gradient_accumulation_steps", "train", "grad_accumulation"),
        ("seed", "model", "seed"),
    ):
        if key in d:
            b.put(key, section, name, b.typed(key, int, "a whole number"))
    for key in ("max_seq_length", "max_length"):
        if isinstance(d.get(key), int) and not isinstance(d[key], bool):
            b.put(key, "train", "seq_len", d[key])
            b.cfg.setdefault("template", {})["max_length"] = d[key]
    for flag, dtype in (("bf16", "bfloat16"), ("fp16", "float16")):
        if d.get(flag) is True:
            b.put(flag, "train", "autocast_dtype", dtype)
    _scheduler(b, "learning_rate", "lr_scheduler_type", "warmup_steps", "warmup_ratio", "max_steps")
    if isinstance(d.get("save_steps"), (int, float)) and d["save_steps"] >= 1:
        b.put("save_steps", "checkpoint", "interval", int(d["save_steps"]))
    if isinstance(d.get("eval_steps"), (int, float)) and d["eval_steps"] and d["eval_steps"] >= 1:
        b.put("eval_steps", "eval", "interval", int(d["eval_steps"]))
        b.cfg["eval"].update(no_grad=True)
        if "ddp_find_unused_parameters" in d and d["ddp_find_unused_parameters"] is not None:
            b.put(
                "ddp_find_unused_parameters",
                "eval",
                "find_unused_parameters",
                bool(d["ddp_find_unused_parameters"]),
            )
    if isinstance(d.get("deepspeed"), dict):
        _deepspeed(b, d["deepspeed"], "deepspeed.")
        b.seen.add("deepspeed")
    why = map_base_model(b, "model_name_or_path", b.base, b.model)
    b.rest_not_covered(
        {
            "assistant_only_loss": "the loss-mask checks read axolotl's masking keys; TRL's generation-block "
            "mask is not modelled",
            "completion_only_loss": "the loss-mask checks read axolotl's masking keys; TRL's completion mask "
            "is not modelled",
        }
    )
    return why


def map_deepspeed(b: MappingBuilder) -> str:
    _deepspeed(b, b.data)
    return map_base_model(b, "", None, b.model)


def map_axolotl(b: MappingBuilder, base: Path) -> str:
    d = b.data
    adapter = d.get("adapter")
    if adapter is not None and adapter not in ("lora", "qlora"):
        raise ConfigError(
            f"{b.where('adapter')}: key 'adapter': the audit checks LoRA adapters ('lora' or 'qlora'), got "
            f"{adapter!r}"
        )
    for key, name, kind, what in (
        ("lora_r", "r", int, "a positive integer"),
        ("lora_alpha", "alpha", (int, float), "a positive number"),
        ("lora_dropout", "dropout", (int, float), "a number in [0, 1)"),
    ):
        if key in d:
            b.put(key, "lora", name, b.typed(key, kind, what))
    if adapter is not None:
        b.note("adapter", "audited", f"{adapter} → the lora section")
    if d.get("lora_target_linear"):
        b.put("lora_target_linear", "lora", "target_modules", ALL_LINEAR, "every linear projection")
    elif "lora_target_modules" in d:
        tm = d["lora_target_modules"]
        if not isinstance(tm, list) or not all(isinstance(t, str) for t in tm) or not tm:
            raise ConfigError(
                f"{b.where('lora_target_modules')}: key 'lora_target_modules': expected a list of module "
                f"names, got {tm!r}"
            )
        b.put("lora_target_modules", "lora", "target_modules", tm)
    if "sequence_len" in d:
        seq = b.typed("sequence_len", int, "a whole number of tokens")
        b.put("sequence_len", "train", "seq_len", seq)
        b.cfg.setdefault("template", {})["max_length"] = seq
    for key, name in (
        ("micro_batch_size", "micro_batch_size"),
        ("gradient_accumulation_steps", "grad_accumulation"),
    ):
        if key in d:
            b.put(key, "train", name, b.typed(key, int, "a whole number"))
    if "seed" in d:
        b.put("seed", "model", "seed", b.typed("seed", int, "a whole number"))
    for flag, dtype in (("bf16", "bfloat16"), ("fp16", "float16")):
        if d.get(flag) is True or d.get(flag) == "auto":
            b.put(flag, "train", "autocast_dtype", dtype)
    _scheduler(b, "learning_rate", "lr_scheduler", "warmup_steps", "warmup_ratio", "max_steps")
    if isinstance(d.get("save_steps"), int) and d["save_steps"] >= 1:
        b.put("save_steps", "checkpoint", "interval", d["save_steps"])
    if "chat_template" in d:
        b.put(
            "chat_template",
            "template",
            "kind",
            "chat",
            f"{d['chat_template']!r}: the tokenizer's own template is what the loss-mask check renders",
        )
    if isinstance(d.get("deepspeed"), str):
        ds_path = (base / d["deepspeed"]) if not Path(d["deepspeed"]).is_absolute() else Path(d["deepspeed"])
        if not ds_path.is_file():
            raise ConfigError(f"{b.where('deepspeed')}: key 'deepspeed': {ds_path} is not a file")
        sub = MappingBuilder(str(ds_path), _read_json(ds_path))
        _deepspeed(sub, sub.data, "deepspeed:")
        for section, values in sub.cfg.items():
            b.cfg.setdefault(section, {}).update(values)
        b.keys += sub.keys
        b.note("deepspeed", "audited", f"{ds_path.name} read (its keys are listed as deepspeed:…)")
    _axolotl_trainer(b)
    why = map_base_model(b, "base_model", base, b.model)
    b.rest_not_covered({"roles_to_train": "the chat-template-eot check reads train_on_eos and eot_tokens"})
    return why


# axolotl's attention flags → the attn_implementation they select (the first one set wins, as in axolotl)
AXOLOTL_ATTENTION = {
    "flash_attention": "flash_attention_2",
    "flex_attention": "flex_attention",
    "xformers_attention": "xformers",
    "sdp_attention": "sdpa",
    "eager_attention": "eager",
}


def _names(b: MappingBuilder, key: str) -> list[str]:
    value = b.data[key]
    value = [value] if isinstance(value, str) else value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{b.where(key)}: key '{key}': expected a list of names, got {b.data[key]!r}")
    return value


def _axolotl_trainer(b: MappingBuilder) -> None:
    """The trainer section from axolotl's keys: datasets' types and masking, modules_to_save, packing,
    attention, eval batch."""
    d = b.data
    t = b.cfg.setdefault("trainer", {"tool": "axolotl"})
    if d.get("train_on_inputs") is not None:
        b.put(
            "train_on_inputs", "trainer", "train_on_inputs", b.typed("train_on_inputs", bool, "true or false")
        )
    else:
        b.default("trainer.train_on_inputs", False, "axolotl's default")
    datasets = d.get("datasets")
    if datasets is not None:
        if not isinstance(datasets, list) or not all(isinstance(x, dict) for x in datasets):
            raise ConfigError(
                f"{b.where('datasets')}: key 'datasets': expected a list of mappings (path, type, …), got "
                f"{datasets!r:.80}"
            )
        types, eos = [], None
        for i, ds in enumerate(datasets):
            kind = ds.get("type")
            if isinstance(kind, dict):  # a custom prompt format: field_instruction, format, …
                kind = "custom"
            if kind is None:
                kind = "chat_template" if "field_messages" in ds or "chat_template" in ds else "unknown"
            if not isinstance(kind, str):
                raise ConfigError(
                    f"{b.where('datasets')}: key 'datasets.{i}.type': expected a dataset type name, got "
                    f"{kind!r}"
                )
            types.append(kind)
            if eos is None and ds.get("train_on_eos") is not None:
                eos = ds["train_on_eos"]
                if eos not in ("turn", "all", "last", "none"):
                    raise ConfigError(
                        f"{b.where('datasets')}: key 'datasets.{i}.train_on_eos': expected turn, all, last "
                        f"or none, got {eos!r}"
                    )
        t["dataset_types"] = types
        if eos is not None:
            t["train_on_eos"] = eos
        b.note(
            "datasets",
            "audited",
            f"→ trainer.dataset_types ({', '.join(types)}){'' if eos is None else f', train_on_eos {eos}'}; "
            "paths: the data-schema check needs a Pydantic schema, which axolotl datasets do not carry",
        )
    if d.get("eot_tokens") is not None:
        b.put("eot_tokens", "trainer", "eot_tokens", _names(b, "eot_tokens"))
    if d.get("lora_modules_to_save") is not None:
        b.put("lora_modules_to_save", "trainer", "modules_to_save", _names(b, "lora_modules_to_save"))
    t["target_linear"] = bool(d.get("lora_target_linear"))
    if d.get("sample_packing") is not None:
        b.put("sample_packing", "trainer", "packing", b.typed("sample_packing", bool, "true or false"))
    attn = d.get("attn_implementation")
    if attn is not None:
        b.put(
            "attn_implementation",
            "trainer",
            "attn_implementation",
            b.typed("attn_implementation", str, "an attention implementation name"),
        )
    else:
        flag = next((k for k in AXOLOTL_ATTENTION if d.get(k) is True), None)
        if flag:
            b.put(flag, "trainer", "attn_implementation", AXOLOTL_ATTENTION[flag])
        else:
            b.default("trainer.attn_implementation", "sdpa", "no attention flag set: transformers' default")
    for flag in AXOLOTL_ATTENTION:
        if flag in d:
            b.note(flag, "audited", "→ trainer.attn_implementation")
    if d.get("eval_batch_size") is not None:
        b.put(
            "eval_batch_size", "trainer", "eval_batch_size", b.typed("eval_batch_size", int, "a whole number")
        )


def read_any(path: str | Path, fmt: str | None = None, model: str | None = None) -> Mapped:
    """The audit config of ``path`` in any supported format (``fmt`` None: detect it); ``model`` replaces its
    base model."""
    path = Path(path)
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"--from {fmt!r}: expected one of {', '.join(FORMATS)}")
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory; expected a config file")
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    lines: dict[tuple, int] = {}
    if path.suffix == ".json":
        data = _read_json(path)
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
        data, lines = yaml_document(text, str(path))
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the config must be a YAML mapping, got {type(data).__name__}")
    fmt = fmt or detect(path, data)
    if fmt == "nbkit":
        config = (
            parse_config(data, source=str(path), base=path.parent)
            if path.suffix == ".json"
            else load_config(path)
        )
        if model is not None:
            b = MappingBuilder(str(path), {}, None, None, model)
            map_base_model(b, "", None, model)
            config.model.name = b.cfg["model"]["name"]
        elif config.model.name not in ("tiny", "smollm2"):
            b = MappingBuilder(str(path), {"model.name": config.model.name}, None, path.parent)
            map_base_model(b, "model.name", path.parent)
            config.model.name = b.cfg["model"]["name"]
        return Mapped(config, "nbkit")
    b = MappingBuilder(str(path), data, lines, path.parent, model)
    why = (
        {"peft": map_peft, "trl": map_trl, "deepspeed": map_deepspeed}[fmt](b)
        if fmt != "axolotl"
        else map_axolotl(b, path.parent)
    )
    for section, name, value in (
        ("model", "name", "tiny"),
        ("lora", "r", 8),
        ("train", "micro_batch_size", 4),
        ("train", "grad_accumulation", 4),
    ):
        if name not in b.cfg.get(section, {}):
            b.default(f"{section}.{name}", value, "the audit's default")
    config = parse_config(b.cfg, source=f"{path} (mapped from {fmt})")
    return Mapped(config, fmt, b.keys, why)
