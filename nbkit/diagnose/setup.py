"""Read a whole training setup: the trainer config, the DeepSpeed config it names, the base model, the
cluster.

The trainer config is an axolotl YAML or a TRL ``SFTConfig`` / transformers ``TrainingArguments`` JSON,
read with the audit's readers (:mod:`nbkit.audit.formats`: duplicate YAML keys, bad JSON and bad types
are refused with file:line and key). Its ``deepspeed`` value is followed: a path (relative paths from
the config's folder, as axolotl and the Trainer resolve them from where the job is launched — the
config's folder is the usual launch folder and the only one known here) or an inline mapping. The base
model is resolved as the audit resolves it (a local directory, a ``config.json``, SmolLM2's Hub ids to
the bundled copy; another Hub id only online) and only its architecture is read.

Every value is kept with where it was set (``file:line key``), so a coupling row can name both sides.
Values the file does not set carry the trainer's default and say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbkit.audit.formats import AXOLOTL_ATTENTION, detect
from nbkit.audit.formats import MappingBuilder as _Builder
from nbkit.audit.formats import map_base_model as _base_model
from nbkit.audit.safe_yaml import ConfigError, yaml_document
from nbkit.diagnose.fit import Adapter
from nbkit.errors import UsageError, read_json_object, read_text
from nbkit.model_files import resolve_model
from nbkit.zero.dsconfig import DSConfigError
from nbkit.zero.dsconfig import check_scalars as _check_scalars


class DiagnoseError(UsageError):
    """Bad input to ``nbkit diagnose``: one line naming the file and key (exit 2)."""


@dataclass(frozen=True)
class Value:
    """One setting as a file states it: the value, where (``file:line key``), and whether the file set it."""

    value: Any
    where: str
    set: bool = True

    def text(self) -> str:
        return (
            f"{self.where} = {self.value!r}"
            if self.set
            else f"{self.where} (not set; default {self.value!r})"
        )


# TrainingArguments defaults the HF DeepSpeed integration compares against when a file does not set the key
# (transformers' TrainingArguments field defaults).
TRAINING_ARGS_DEFAULTS: dict[str, Any] = {
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "learning_rate": 5e-5,
    "max_grad_norm": 1.0,
    "adam_beta1": 0.9,
    "adam_beta2": 0.999,
    "adam_epsilon": 1e-8,
    "weight_decay": 0.0,
    "bf16": False,
    "fp16": False,
    "optim": "adamw_torch",
    "lr_scheduler_type": "linear",
    "warmup_steps": 0,
    "warmup_ratio": 0.0,
    "max_steps": -1,
    "gradient_checkpointing": False,
}

# axolotl key → the TrainingArguments field axolotl passes it as (axolotl's trainer builder).
AXOLOTL_TO_TRAINING_ARGS = {
    "micro_batch_size": "per_device_train_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "learning_rate": "learning_rate",
    "max_grad_norm": "max_grad_norm",
    "adam_beta1": "adam_beta1",
    "adam_beta2": "adam_beta2",
    "adam_epsilon": "adam_epsilon",
    "weight_decay": "weight_decay",
    "bf16": "bf16",
    "fp16": "fp16",
    "optimizer": "optim",
    "lr_scheduler": "lr_scheduler_type",
    "warmup_steps": "warmup_steps",
    "warmup_ratio": "warmup_ratio",
    "max_steps": "max_steps",
    "gradient_checkpointing": "gradient_checkpointing",
}
# axolotl's own defaults where they differ from TrainingArguments' (axolotl's config schema).
AXOLOTL_DEFAULTS = {"per_device_train_batch_size": 1, "lr_scheduler_type": "cosine"}

SEQ_LEN_DEFAULT = 2048
EXAMPLES_DIR = Path(__file__).with_name("examples")


def config_file(name: str | Path) -> Path:
    """``name`` as a path when it is a file, else the bundled example of that name
    (nbkit/diagnose/examples)."""
    p = Path(name)
    if p.is_file() or not (EXAMPLES_DIR / p).is_file():
        return p
    return EXAMPLES_DIR / p


@dataclass
class Setup:
    """Everything ``nbkit diagnose`` reads: trainer settings (TrainingArguments names), the ds_config, the
    model, the cluster."""

    config_path: Path
    fmt: str  # "axolotl" | "trl"
    trainer: dict[str, Value]
    seq_len: Value
    attention: Value  # the attention implementation the trainer selects (transformers' default: sdpa)
    adapter: str | None
    ds: dict[str, Any] | None
    ds_source: str  # the ds_config's file, or "CONFIG:line deepspeed" for an inline mapping
    model_spec: str  # what resolve_model got ("" when the file names none)
    model_config: Any  # a transformers config, or None
    model_note: str  # why no model (or what kind it is)
    nodes: int
    gpus_per_node: int
    world_note: str
    gpu_memory_gib: float | None
    lora: Any = None  # nbkit.diagnose.fit.Adapter when the config trains an adapter the memory model counts
    lora_notes: tuple[str, ...] = ()

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    def ds_where(self, key: str) -> str:
        return f"{self.ds_source}: {key}"

    def ds_get(self, dotted: str) -> tuple[bool, Any]:
        """(present, value) of a dotted ds_config key."""
        node: Any = self.ds or {}
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return False, None
            node = node[part]
        return True, node


def _read_trainer(path: Path) -> tuple[dict[str, Any], dict[tuple, int]]:
    """The trainer config's top-level mapping and (YAML) the line of each key."""

    if path.is_dir():
        raise DiagnoseError(
            f"{path}: is a directory; expected a trainer config (axolotl YAML or TrainingArguments JSON)"
        )
    if not path.is_file():
        raise DiagnoseError(
            f"{path}: no such file; expected a trainer config (axolotl YAML or TrainingArguments JSON)"
        )
    if path.suffix == ".json":
        return read_json_object(
            path, what="a TRL SFTConfig / TrainingArguments JSON", error=DiagnoseError
        ), {}
    text = read_text(path, what="an axolotl YAML config", error=DiagnoseError)
    data, lines = yaml_document(text, str(path))
    if not isinstance(data, dict):
        raise DiagnoseError(f"{path}: expected a YAML mapping of axolotl keys, got {type(data).__name__}")
    return data, lines


def _detect(path: Path, data: dict[str, Any]) -> str:

    fmt = detect(path, data)
    if fmt == "nbkit" and path.suffix != ".json":
        # an axolotl file with none of the audit's marker keys is still the only YAML diagnose reads
        fmt = "axolotl"
    if fmt not in ("axolotl", "trl"):
        raise DiagnoseError(
            f"{path}: looks like a {fmt} config; nbkit diagnose reads the trainer config "
            "(an axolotl YAML or a TRL SFTConfig / TrainingArguments JSON) and follows its 'deepspeed' key"
        )
    return fmt


def _where(path: Path, lines: dict[tuple, int], key: str) -> str:
    line = lines.get((key,))
    return f"{path.name}:{line} {key}" if line else f"{path.name} {key}"


def _number(path: Path, lines, key: str, value: Any, kind: type | tuple, what: str) -> Any:
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        raise DiagnoseError(f"{_where(path, lines, key)}: expected {what}, got {value!r}")
    return value


# The TrainingArguments fields diagnose reads, with their expected type.
_KINDS: dict[str, tuple[type | tuple, str]] = {
    "per_device_train_batch_size": (int, "a whole number ≥ 1"),
    "gradient_accumulation_steps": (int, "a whole number ≥ 1"),
    "learning_rate": ((int, float), "a number"),
    "max_grad_norm": ((int, float), "a number ≥ 0"),
    "adam_beta1": ((int, float), "a number"),
    "adam_beta2": ((int, float), "a number"),
    "adam_epsilon": ((int, float), "a number"),
    "weight_decay": ((int, float), "a number"),
    "optim": (str, "an optimizer name"),
    "lr_scheduler_type": (str, "a scheduler name"),
    "warmup_steps": ((int, float), "a number of steps"),
    "warmup_ratio": ((int, float), "a ratio in [0, 1)"),
    "max_steps": (int, "a whole number"),
    "gradient_checkpointing": (bool, "true or false"),
}


def trainer_values(path: Path, fmt: str, data: dict[str, Any], lines: dict[tuple, int]) -> dict[str, Value]:
    """The trainer's settings under their TrainingArguments names, each with where it was set (or its
    default)."""
    out: dict[str, Value] = {}
    names = AXOLOTL_TO_TRAINING_ARGS if fmt == "axolotl" else {k: k for k in TRAINING_ARGS_DEFAULTS}
    defaults = {**TRAINING_ARGS_DEFAULTS, **(AXOLOTL_DEFAULTS if fmt == "axolotl" else {})}
    who = "axolotl's default" if fmt == "axolotl" else "TrainingArguments' default"
    for key, arg in names.items():
        value = data.get(key)
        if value is None:
            out[arg] = Value(defaults[arg], f"{path.name} {key} ({who})", set=False)
            continue
        if arg in ("bf16", "fp16"):
            if value not in (True, False, "auto"):
                raise DiagnoseError(
                    f"{_where(path, lines, key)}: expected true, false or auto, got {value!r}"
                )
        else:
            kind, what = _KINDS[arg]
            _number(path, lines, key, value, kind, what)
            if arg in ("per_device_train_batch_size", "gradient_accumulation_steps") and value < 1:
                raise DiagnoseError(f"{_where(path, lines, key)}: expected {what}, got {value!r}")
        out[arg] = Value(value, _where(path, lines, key))
    return out


def _seq_len(path: Path, fmt: str, data: dict[str, Any], lines) -> Value:
    keys = ("sequence_len",) if fmt == "axolotl" else ("max_length", "max_seq_length")
    for key in keys:
        if data.get(key) is not None:
            value = _number(path, lines, key, data[key], int, "a whole number of tokens")
            if value < 1:
                raise DiagnoseError(
                    f"{_where(path, lines, key)}: expected a whole number of tokens ≥ 1, got {value!r}"
                )
            return Value(value, _where(path, lines, key))
    return Value(SEQ_LEN_DEFAULT, f"{path.name} {keys[0]}", set=False)


def _attention(path: Path, fmt: str, data: dict[str, Any], lines) -> Value:

    impl = data.get("attn_implementation")
    if impl is None and fmt == "trl" and isinstance(data.get("model_init_kwargs"), dict):
        impl = data["model_init_kwargs"].get("attn_implementation")
    if impl is not None:
        if not isinstance(impl, str):
            raise DiagnoseError(
                f"{_where(path, lines, 'attn_implementation')}: expected an attention implementation name, "
                f"got {impl!r}"
            )
        return Value(impl, _where(path, lines, "attn_implementation"))
    if fmt == "axolotl":
        flag = next((k for k in AXOLOTL_ATTENTION if data.get(k) is True), None)
        if flag:
            return Value(AXOLOTL_ATTENTION[flag], _where(path, lines, flag))
    return Value("sdpa", f"{path.name} attn_implementation (transformers' default)", set=False)


def _deepspeed(path: Path, data: dict[str, Any], lines) -> tuple[dict[str, Any] | None, str]:
    """The ds_config the trainer config names (a path from the config's folder, or inline), and where it came
    from."""
    ref = data.get("deepspeed")
    if ref is None or ref == "":
        return None, ""
    where = _where(path, lines, "deepspeed")
    if isinstance(ref, dict):
        return ref, f"{path.name} deepspeed (inline)"
    if not isinstance(ref, str):
        raise DiagnoseError(f"{where}: expected a path to a DeepSpeed JSON or an inline mapping, got {ref!r}")
    ds_path = Path(ref).expanduser()
    if not ds_path.is_absolute():
        ds_path = path.parent / ds_path
    if not ds_path.is_file():
        raise DiagnoseError(
            f"{where}: DeepSpeed config {ref!r} not found (looked for {ds_path}; relative paths are read "
            "from the config's folder)"
        )
    return read_json_object(ds_path, what="a DeepSpeed ds_config JSON", error=DiagnoseError), ds_path.name


def _model(path: Path, fmt: str, data: dict[str, Any], lines, override: str | None) -> tuple[str, Any, str]:
    """(spec, transformers config or None, note) of the base model, resolved as the audit resolves it."""

    key = "base_model" if fmt == "axolotl" else "model_name_or_path"
    b = _Builder(str(path), data, lines, path.parent, override)
    try:
        why = _base_model(b, key, path.parent, override)
    except ConfigError as exc:
        raise DiagnoseError(str(exc)) from None
    if why:
        return "", None, f"no base model: {why}"
    spec = b.cfg["model"]["name"]
    try:
        source = resolve_model(spec, need_weights=False)
    except UsageError as exc:
        raise DiagnoseError(f"{'--model' if override else _where(path, lines, key)}: {exc}") from None
    return spec, source.config, f"{spec} ({source.kind})"


def read_setup(
    config: str | Path,
    *,
    model: str | None = None,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    gpu_memory_gib: float | None = None,
) -> Setup:
    """Read ``config`` and everything it names; bad input is a :class:`DiagnoseError` naming file and key."""
    for name, value in (("--nodes", nodes), ("--gpus-per-node", gpus_per_node)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise DiagnoseError(f"{name}: expected a whole number ≥ 1, got {value!r}")
    if gpu_memory_gib is not None and (
        isinstance(gpu_memory_gib, bool)
        or not isinstance(gpu_memory_gib, (int, float))
        or not gpu_memory_gib > 0
        or gpu_memory_gib != gpu_memory_gib
        or gpu_memory_gib == float("inf")
    ):
        raise DiagnoseError(
            "--gpu-memory: expected the memory of one GPU in GiB (a number > 0, e.g. 80), got "
            f"{gpu_memory_gib!r}"
        )
    path = config_file(config)
    data, lines = _read_trainer(path)
    fmt = _detect(path, data)
    trainer = trainer_values(path, fmt, data, lines)
    seq = _seq_len(path, fmt, data, lines)
    attention = _attention(path, fmt, data, lines)
    ds, ds_source = _deepspeed(path, data, lines)
    if ds is not None:
        try:
            _check_scalars({k: v for k, v in ds.items() if not _has_auto(v)}, ds_source)
        except DSConfigError as exc:
            raise DiagnoseError(str(exc)) from None
        zero = ds.get("zero_optimization", {})
        if not isinstance(zero, dict):
            raise DiagnoseError(f"{ds_source}: zero_optimization: expected a mapping, got {zero!r}")
    adapter = (
        data.get("adapter")
        if fmt == "axolotl"
        else ("lora" if data.get("peft_config") or data.get("use_peft") else None)
    )
    if fmt == "trl" and adapter and data.get("load_in_4bit") is True:
        adapter = "qlora"
    lora, lora_notes = _lora(path, fmt, data, lines, adapter if isinstance(adapter, str) else None)
    spec, model_cfg, note = _model(path, fmt, data, lines, model)
    world_note = "given"
    if nodes is None and gpus_per_node is None:
        nodes, gpus_per_node, world_note = 1, 1, "assumed: 1 node × 1 GPU (pass --nodes and --gpus-per-node)"
    nodes, gpus_per_node = nodes or 1, gpus_per_node or 1
    return Setup(
        config_path=path,
        fmt=fmt,
        trainer=trainer,
        seq_len=seq,
        attention=attention,
        adapter=adapter if isinstance(adapter, str) else None,
        ds=ds,
        ds_source=ds_source,
        model_spec=spec,
        model_config=model_cfg,
        model_note=note,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        world_note=world_note,
        gpu_memory_gib=None if gpu_memory_gib is None else float(gpu_memory_gib),
        lora=lora,
        lora_notes=lora_notes,
    )


# PEFT's default targets for Llama-family models (peft.utils.constants'
# TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING)
PEFT_DEFAULT_TARGETS = ("q_proj", "v_proj")


def _lora(
    path: Path, fmt: str, data: dict[str, Any], lines, adapter: str | None
) -> tuple[Any, tuple[str, ...]]:
    """The LoRA / QLoRA adapter the config trains (axolotl's lora_* keys; TRL's ModelConfig lora_* /
    load_in_4bit), with notes
    on what was assumed; (None, ()) for full fine-tuning."""

    if adapter is None:
        return None, ()
    if adapter not in ("lora", "qlora"):
        raise DiagnoseError(f"{_where(path, lines, 'adapter')}: expected lora or qlora, got {adapter!r}")
    notes = []
    r = data.get("lora_r")
    if r is None:
        r = 8 if fmt == "axolotl" else 16  # peft's LoraConfig default / TRL ModelConfig's
        notes.append(f"{path.name} lora_r not set; assumed {r}")
    elif isinstance(r, bool) or not isinstance(r, int) or r < 1:
        raise DiagnoseError(f"{_where(path, lines, 'lora_r')}: expected a whole number ≥ 1, got {r!r}")
    dropout = data.get("lora_dropout", 0.0 if fmt == "axolotl" else 0.05)
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise DiagnoseError(
            f"{_where(path, lines, 'lora_dropout')}: expected a number in [0, 1), got {dropout!r}"
        )
    linear = data.get("lora_target_linear")
    if linear is not None and not isinstance(linear, bool):
        raise DiagnoseError(
            f"{_where(path, lines, 'lora_target_linear')}: expected true or false, got {linear!r}"
        )
    mods = data.get("lora_target_modules")
    if linear:
        targets: Any = "all-linear"
    elif mods is not None:
        if isinstance(mods, str):
            mods = "all-linear" if mods == "all-linear" else [mods]
        if mods != "all-linear" and (
            not isinstance(mods, list) or not mods or not all(isinstance(m, str) and m for m in mods)
        ):
            raise DiagnoseError(
                f"{_where(path, lines, 'lora_target_modules')}: expected a list of module names (e.g. "
                f"[q_proj, v_proj]), got {mods!r}"
            )
        targets = mods if mods == "all-linear" else tuple(mods)
    else:
        targets = PEFT_DEFAULT_TARGETS
        notes.append(
            f"{path.name} lora_target_modules / lora_target_linear not set; assumed PEFT's default for "
            f"Llama-family models {list(targets)}"
        )
    kind = "qlora" if adapter == "qlora" or data.get("load_in_4bit") is True else "lora"
    if fmt == "axolotl":
        kwargs = data.get("bnb_config_kwargs") if isinstance(data.get("bnb_config_kwargs"), dict) else {}
        double = kwargs.get(
            "bnb_4bit_use_double_quant", True
        )  # axolotl's loader turns it on unless bnb_config_kwargs says otherwise
        storage = kwargs.get("bnb_4bit_quant_storage")
    else:
        double = data.get("use_bnb_nested_quant", False)  # TRL ModelConfig's default
        storage = data.get("bnb_4bit_quant_storage")
    if not isinstance(double, bool):
        raise DiagnoseError(f"{path.name} bnb_4bit_use_double_quant: expected true or false, got {double!r}")
    return Adapter(
        kind=kind,
        r=r,
        targets=targets,
        dropout=float(dropout),
        double_quant=double,
        quant_storage=storage if isinstance(storage, str) else None,
    ), tuple(notes)


def _has_auto(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_auto(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_auto(v) for v in value)
    return value == "auto"
