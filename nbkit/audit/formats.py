"""Read the configs people already write: axolotl YAML, PEFT ``adapter_config.json``, TRL ``SFTConfig``
/ transformers ``TrainingArguments`` JSON and DeepSpeed ``ds_config.json``.

:func:`read_any` detects the format (or takes ``fmt``), maps each key it knows onto the audit's own
config and returns the :class:`~nbkit.audit.config.AuditConfig` with a key table: every key of the
file is listed as **audited** (mapped onto a check's input), **not covered** (the audit has no check
that reads it — never silently ignored), and the audit inputs the file did not set are listed as
**defaulted** with the default used. A model the audit cannot load offline (anything but the
bundled ``tiny``/``smollm2``) leaves the model-reading checks "not run: needs …" rather than passing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.audit.config import AuditConfig, ConfigError, _compose, _key_lines, load_config, parse_config
from nbkit.errors import read_json_object

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
        lines = [f"{self.fmt} config: {sum(r['status'] == 'audited' for r in self.keys)} key(s) audited, "
                 f"{sum(r['status'] == 'not covered' for r in self.keys)} not covered, {sum(r['status'] == 'defaulted' for r in self.keys)} defaulted"]
        for r in self.keys:
            lines.append(f"  {r['status']:<11} {r['key']:<{width}}  {r['note']}")
        return "\n".join(lines)


class _Builder:
    """Collects the audit config dict and the key table while a mapper walks a file."""

    def __init__(self, source: str, data: dict[str, Any], lines: dict[tuple, int] | None = None):
        self.source, self.data, self.lines = source, data, lines or {}
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
            self.keys.append({"key": key, "status": "audited", "note": f"→ {section}.{name}" + (f" ({note})" if note else "")})

    def note(self, key: str, status: str, note: str):
        if key not in self.seen:
            self.seen.add(key)
            self.keys.append({"key": key, "status": status, "note": note})

    def default(self, what: str, value: Any, why: str = ""):
        self.keys.append({"key": what, "status": "defaulted", "note": f"= {value!r}" + (f" ({why})" if why else "")})

    def rest_not_covered(self, reasons: dict[str, str] | None = None):
        for key in self.data:
            self.note(key, "not covered", (reasons or {}).get(key, "no audit check reads it"))


def _model_name(ref: Any) -> tuple[str, str]:
    """(audit model name, why unavailable) for a base-model reference."""
    text = str(ref or "")
    if "smollm2" in text.lower() and "135m" in text.lower():
        return "smollm2", ""
    if text in ("tiny", "smollm2"):
        return text, ""
    return "tiny", f"a model nbkit loads offline (base model {text!r} is not one; bundled: tiny, smollm2)"


def _scheduler(b: _Builder, lr_key: str, kind_key: str, warm_steps_key: str, warm_ratio_key: str, total_key: str):
    """A warmup + decay scheduler section from the common trainer keys."""
    kinds = {"cosine": "cosine", "linear": "linear_decay", "constant": "constant", "constant_with_warmup": "constant"}
    kind = b.data.get(kind_key, "linear")
    if kind_key in b.data:
        if kind not in kinds:
            b.note(kind_key, "not covered", f"scheduler {kind!r} has no audit model (known: {', '.join(kinds)})")
            return
    total = b.data.get(total_key)
    if isinstance(total, int) and not isinstance(total, bool) and total > 0:
        b.note(total_key, "audited", "→ the scheduler's length in steps")
    else:
        total = 100
        b.default(f"{total_key} (scheduler length)", total, "the file sets no positive step count")
    warm = 0
    if warm_steps_key in b.data and b.data[warm_steps_key]:
        warm = b.typed(warm_steps_key, int, "a whole number of steps")
        b.put(warm_steps_key, "scheduler", "warmup_steps", warm)
    elif warm_ratio_key in b.data and b.data[warm_ratio_key]:
        ratio = b.typed(warm_ratio_key, (int, float), "a number in [0, 1)")
        warm = int(round(ratio * total))
        b.put(warm_ratio_key, "scheduler", "warmup_steps", warm, f"{ratio} × {total} steps")
    stages = ([{"kind": "linear_warmup", "steps": warm, "start_factor": 0.01}] if warm else []) + [{"kind": kinds[kind], "steps": max(1, total - warm)}]
    if kind_key in b.data:
        b.put(kind_key, "scheduler", "stages", stages, f"{'warmup + ' if warm else ''}{kinds[kind]}")
    else:
        b.cfg.setdefault("scheduler", {})["stages"] = stages
        b.default(kind_key, kind, "the trainer's default")
    if lr_key in b.data:
        b.put(lr_key, "scheduler", "base_lr", float(b.typed(lr_key, (int, float), "a positive number")))


def _deepspeed(b: _Builder, ds: dict[str, Any], prefix: str = ""):
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
        b.put(f"{prefix}zero_optimization.stage3_param_persistence_threshold", "deepspeed", "stage3_param_persistence_threshold",
              float(zero["stage3_param_persistence_threshold"]))
    else:
        b.default("deepspeed.stage3_param_persistence_threshold", 1e5, "DeepSpeed's default")
    for k in zero:
        if k not in ("stage", "stage3_param_persistence_threshold"):
            b.note(f"{prefix}zero_optimization.{k}", "not covered", "no audit check reads it")
    micro, ga, tbs = ds.get("train_micro_batch_size_per_gpu"), ds.get("gradient_accumulation_steps"), ds.get("train_batch_size")
    if isinstance(micro, int) and micro > 0:
        b.put(f"{prefix}train_micro_batch_size_per_gpu", "train", "micro_batch_size", micro)
    if isinstance(ga, int) and ga > 0:
        b.put(f"{prefix}gradient_accumulation_steps", "train", "grad_accumulation", ga)
    if all(isinstance(x, int) and x > 0 for x in (micro, ga, tbs)):
        if tbs % (micro * ga):
            raise ConfigError(f"{b.source}: key '{prefix}train_batch_size': {tbs} is not micro ({micro}) × accumulation ({ga}) × world size")
        b.put(f"{prefix}train_batch_size", "deepspeed", "world_size", tbs // (micro * ga), "world size from the batch identity")
    for flag, dtype in (("bf16", "bfloat16"), ("fp16", "float16")):
        if isinstance(ds.get(flag), dict) and ds[flag].get("enabled"):
            b.put(f"{prefix}{flag}", "train", "autocast_dtype", dtype)
    for k in ds:
        if k not in ("zero_optimization", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size", "bf16", "fp16"):
            b.note(f"{prefix}{k}", "not covered", "no audit check reads it")


def _read_json(path: Path) -> dict[str, Any]:
    return read_json_object(path, what="a JSON config (PEFT, TRL/TrainingArguments or DeepSpeed)", error=ConfigError)


def detect(path: Path, data: dict[str, Any]) -> str:
    """The format of a parsed config file, from its keys."""
    keys = set(data)
    if path.suffix != ".json":  # YAML: axolotl or nbkit's own
        return "axolotl" if keys & {"base_model", "adapter", "lora_r", "datasets", "micro_batch_size", "sequence_len"} else "nbkit"
    if "peft_type" in keys or {"r", "lora_alpha", "target_modules"} <= keys:
        return "peft"
    if keys & {"zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size"}:
        return "deepspeed"
    if keys & {"per_device_train_batch_size", "output_dir", "lr_scheduler_type"}:
        return "trl"
    return "nbkit"


def map_peft(b: _Builder) -> str:
    d = b.data
    if str(d.get("peft_type", "LORA")).upper() != "LORA":
        raise ConfigError(f"{b.where('peft_type')}: key 'peft_type': the audit checks LoRA adapters, got {d['peft_type']!r}")
    for key, name, kind, what in (("r", "r", int, "a positive integer"), ("lora_alpha", "alpha", (int, float), "a positive number"),
                                  ("lora_dropout", "dropout", (int, float), "a number in [0, 1)"), ("use_rslora", "use_rslora", bool, "true or false")):
        if key in d:
            b.put(key, "lora", name, b.typed(key, kind, what))
    if "target_modules" in d:
        tm = d["target_modules"]
        tm = [tm] if isinstance(tm, str) else tm
        if not isinstance(tm, list) or not all(isinstance(t, str) for t in tm) or not tm:
            raise ConfigError(f"{b.source}: key 'target_modules': expected a module name or a list of them, got {d['target_modules']!r}")
        b.put("target_modules", "lora", "target_modules", ALL_LINEAR if tm == ["all-linear"] else tm)
    name, why = _model_name(d.get("base_model_name_or_path"))
    if why:
        b.note("base_model_name_or_path", "not covered", f"needs {why}")
    else:
        b.put("base_model_name_or_path", "model", "name", name)
    b.rest_not_covered({"peft_type": "LORA is the adapter the audit checks", "task_type": "the audit trains causal LMs"})
    return why


def map_trl(b: _Builder) -> str:
    d = b.data
    for key, section, name in (("per_device_train_batch_size", "train", "micro_batch_size"), ("gradient_accumulation_steps", "train", "grad_accumulation"),
                               ("seed", "model", "seed")):
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
            b.put("ddp_find_unused_parameters", "eval", "find_unused_parameters", bool(d["ddp_find_unused_parameters"]))
    if isinstance(d.get("deepspeed"), dict):
        _deepspeed(b, d["deepspeed"], "deepspeed.")
        b.seen.add("deepspeed")
    why = _model_name(None)[1]
    if "model_name_or_path" in d:
        name, why = _model_name(d["model_name_or_path"])
        if why:
            b.note("model_name_or_path", "not covered", f"needs {why}")
        else:
            b.put("model_name_or_path", "model", "name", name)
    b.rest_not_covered()
    return why


def map_deepspeed(b: _Builder) -> str:
    _deepspeed(b, b.data)
    return _model_name(None)[1]


def map_axolotl(b: _Builder, base: Path) -> str:
    d = b.data
    adapter = d.get("adapter")
    if adapter is not None and adapter not in ("lora", "qlora"):
        raise ConfigError(f"{b.where('adapter')}: key 'adapter': the audit checks LoRA adapters ('lora' or 'qlora'), got {adapter!r}")
    for key, name, kind, what in (("lora_r", "r", int, "a positive integer"), ("lora_alpha", "alpha", (int, float), "a positive number"),
                                  ("lora_dropout", "dropout", (int, float), "a number in [0, 1)")):
        if key in d:
            b.put(key, "lora", name, b.typed(key, kind, what))
    if adapter is not None:
        b.note("adapter", "audited", f"{adapter} → the lora section")
    if d.get("lora_target_linear"):
        b.put("lora_target_linear", "lora", "target_modules", ALL_LINEAR, "every linear projection")
    elif "lora_target_modules" in d:
        tm = d["lora_target_modules"]
        if not isinstance(tm, list) or not all(isinstance(t, str) for t in tm) or not tm:
            raise ConfigError(f"{b.where('lora_target_modules')}: key 'lora_target_modules': expected a list of module names, got {tm!r}")
        b.put("lora_target_modules", "lora", "target_modules", tm)
    if "sequence_len" in d:
        seq = b.typed("sequence_len", int, "a whole number of tokens")
        b.put("sequence_len", "train", "seq_len", seq)
        b.cfg.setdefault("template", {})["max_length"] = seq
    for key, name in (("micro_batch_size", "micro_batch_size"), ("gradient_accumulation_steps", "grad_accumulation")):
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
        b.put("chat_template", "template", "kind", "chat", f"{d['chat_template']!r}: the tokenizer's own template is what the loss-mask check renders")
    if isinstance(d.get("deepspeed"), str):
        ds_path = (base / d["deepspeed"]) if not Path(d["deepspeed"]).is_absolute() else Path(d["deepspeed"])
        if not ds_path.is_file():
            raise ConfigError(f"{b.where('deepspeed')}: key 'deepspeed': {ds_path} is not a file")
        sub = _Builder(str(ds_path), _read_json(ds_path))
        _deepspeed(sub, sub.data, "deepspeed:")
        for section, values in sub.cfg.items():
            b.cfg.setdefault(section, {}).update(values)
        b.keys += sub.keys
        b.note("deepspeed", "audited", f"{ds_path.name} read (its keys are listed as deepspeed:…)")
    reasons = {"datasets": "the data-schema check needs a Pydantic schema, which axolotl datasets do not carry",
               "train_on_inputs": "the loss-mask check renders the template; it does not model axolotl's prompt masking"}
    name, why = _model_name(d.get("base_model"))
    if why:
        b.note("base_model", "not covered", f"needs {why}")
    else:
        b.put("base_model", "model", "name", name)
    b.rest_not_covered(reasons)
    return why


def read_any(path: str | Path, fmt: str | None = None) -> Mapped:
    """The audit config of ``path`` in any supported format (``fmt`` None: detect it)."""
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
        if fmt == "nbkit":
            return Mapped(load_config(path), "nbkit")
        import yaml

        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
        root = _compose(text, str(path))
        loader = yaml.SafeLoader(text)
        try:
            data = loader.construct_document(root) if root is not None else {}
        finally:
            loader.dispose()
        lines = _key_lines(root)
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the config must be a YAML mapping, got {type(data).__name__}")
    fmt = fmt or detect(path, data)
    if fmt == "nbkit":
        if path.suffix == ".json":
            return Mapped(parse_config(data, source=str(path), base=path.parent), "nbkit")
        return Mapped(load_config(path), "nbkit")
    b = _Builder(str(path), data, lines)
    why = {"peft": map_peft, "trl": map_trl, "deepspeed": map_deepspeed}[fmt](b) if fmt != "axolotl" else map_axolotl(b, path.parent)
    for section, name, value in (("model", "name", "tiny"), ("lora", "r", 8), ("train", "micro_batch_size", 4), ("train", "grad_accumulation", 4)):
        if name not in b.cfg.get(section, {}):
            b.default(f"{section}.{name}", value, "the audit's default")
    config = parse_config(b.cfg, source=f"{path} (mapped from {fmt})")
    return Mapped(config, fmt, b.keys, why)
