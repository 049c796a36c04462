"""``AuditConfig``: what ``nbkit audit CONFIG.yaml`` reads, itself a strict Pydantic model.

Unknown keys and wrong types are rejected with one ``ConfigError`` naming the file, the line, the
dotted key and the expected type. Relative paths are resolved against the config file's folder.
Every section except ``model`` is optional; a check whose section is missing is reported as skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSection(_Strict):
    name: Literal["tiny", "smollm2"] = "tiny"
    dtype: Literal["float32", "bfloat16"] = "float32"
    seed: int = 0


class LoraSection(_Strict):
    r: int = Field(8, ge=1)
    alpha: float = Field(16.0, gt=0)
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "v_proj"], min_length=1)
    dropout: float = Field(0.05, ge=0, lt=1)
    use_rslora: bool = False


class DataSection(_Strict):
    path: Path
    schema_ref: str = Field(alias="schema", description="'module.path:Class' or 'file.py:Class'")
    strict: bool = False
    max_lines: int | None = Field(None, ge=1)
    ner_path: Path | None = None


class TemplateSection(_Strict):
    kind: Literal["chat", "format"] = "chat"
    format: str | None = None
    prompt_field: str = "instruction"
    response_field: str = "response"
    system: str | None = None
    max_length: int = Field(256, ge=8)
    mask_pad_labels: bool = False

    @model_validator(mode="after")
    def _format_given(self):
        if self.kind == "format" and not self.format:
            raise ValueError("template.kind 'format' needs template.format (a str.format template)")
        return self


class TrainSection(_Strict):
    micro_batch_size: int = Field(4, ge=1)
    grad_accumulation: int = Field(4, ge=1)
    seq_len: int = Field(128, ge=8)
    loss_normalisation: Literal["token_count", "per_microbatch_mean"] = "token_count"
    autocast_dtype: Literal["bfloat16", "float16", "none"] = "bfloat16"


class StageSection(_Strict):
    kind: Literal["linear_warmup", "constant", "cosine", "linear_decay", "step", "onecycle", "exponential"]
    steps: int = Field(ge=1)
    start_factor: float = Field(0.01, gt=0, le=1)
    eta_min: float = Field(0.0, ge=0)
    gamma: float = Field(0.5, gt=0)
    step_size: int = Field(10, ge=1)
    pct_start: float = Field(0.1, gt=0, lt=1)


class SchedulerSection(_Strict):
    combine: Literal["sequential", "chained"] = "sequential"
    base_lr: float = Field(2e-4, gt=0)
    stages: list[StageSection] = Field(min_length=1)
    warmup_steps: int = Field(0, ge=0, description="the warmup the user intends (for the lost/repeated check)")
    resume_at_step: int | None = Field(None, ge=1)
    resume_restores_scheduler: bool = True


class DeepSpeedSection(_Strict):
    zero_stage: Literal[0, 1, 2, 3] = 3
    stage3_param_persistence_threshold: float = Field(1e5, ge=0)
    world_size: int = Field(8, ge=1)


class SamplingSection(_Strict):
    beta: float = 1.0
    gamma: float = 0.5
    kl_threshold: float = Field(0.18, gt=0)
    shrink_threshold: float = Field(0.42, gt=0, lt=1)


class EvalSection(_Strict):
    interval: int = Field(2, ge=1)
    no_grad: bool = True
    backward: bool = False
    no_sync: bool = False
    find_unused_parameters: bool = False
    value_head: bool = True


class CheckpointSection(_Strict):
    interval: int = Field(50, ge=1)


class KissSection(_Strict):
    budget_steps: int = Field(0, ge=0, description="training steps per LoRA variant; 0 skips check 1 in the CLI")
    val_loss_target: float | None = Field(None, gt=0)
    val_loss_target_ratio: float = Field(0.5, gt=0, lt=1, description="target = ratio × untrained val loss when no absolute target")
    lr: float = Field(1e-3, gt=0)


class AuditConfig(_Strict):
    model: ModelSection = Field(default_factory=ModelSection)
    lora: LoraSection = Field(default_factory=LoraSection)
    data: DataSection | None = None
    template: TemplateSection = Field(default_factory=TemplateSection)
    train: TrainSection = Field(default_factory=TrainSection)
    scheduler: SchedulerSection | None = None
    deepspeed: DeepSpeedSection | None = None
    sampling: SamplingSection | None = None
    eval: EvalSection | None = None
    checkpoint: CheckpointSection | None = None
    kiss: KissSection = Field(default_factory=KissSection)
    checks: list[int] | None = Field(None, description="run only these check ids")

    def resolve_paths(self, base: Path) -> AuditConfig:
        if self.data is not None:
            if not self.data.path.is_absolute():
                self.data.path = (base / self.data.path).resolve()
            if self.data.ner_path is not None and not self.data.ner_path.is_absolute():
                self.data.ner_path = (base / self.data.ner_path).resolve()
            ref = self.data.schema_ref
            file_part = ref.split(":", 1)[0]
            if file_part.endswith(".py") and not Path(file_part).is_absolute():
                self.data.schema_ref = str((base / file_part).resolve()) + (":" + ref.split(":", 1)[1] if ":" in ref else "")
        return self


class ConfigError(ValueError):
    """The config is invalid; ``str()`` names file, line, key and the expected type."""

    def __init__(self, message: str, problems: list[dict] | None = None):
        super().__init__(message)
        self.problems = problems or []


def _key_lines(text: str) -> dict[tuple, int]:
    """1-based line of every mapping key/sequence item in a YAML text, keyed by its path."""
    import yaml

    lines: dict[tuple, int] = {}

    def walk(node, path):
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                p = path + (key_node.value,)
                lines[p] = key_node.start_mark.line + 1
                walk(value_node, p)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                p = path + (i,)
                lines[p] = item.start_mark.line + 1
                walk(item, p)

    try:
        walk(yaml.compose(text), ())
    except yaml.YAMLError:
        pass
    return lines


def _describe(err: dict, known: list[str]) -> str:
    got = err.get("input")
    if err["type"] == "extra_forbidden":
        return "unknown key" + (f" (allowed: {', '.join(known)})" if known else "")
    if err["type"] == "missing":
        return "required key is missing"
    shown = repr(got)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{err['msg']} (got {shown}, a {type(got).__name__})"


def _allowed_keys() -> dict[tuple, list[str]]:
    """Allowed keys per section path, for the 'unknown key' message."""
    out: dict[tuple, list[str]] = {}

    def add(model: type[BaseModel], path: tuple):
        out[path] = [f.alias or name for name, f in model.model_fields.items()]
        for name, f in model.model_fields.items():
            ann = f.annotation
            for candidate in getattr(ann, "__args__", (ann,)):
                # Sections and lists of sections (list items share their list's key path).
                for inner in (candidate, *getattr(candidate, "__args__", ())):
                    if isinstance(inner, type) and issubclass(inner, BaseModel):
                        add(inner, path + (f.alias or name,))

    add(AuditConfig, ())
    return out


def parse_config(data: dict, *, source: str = "<config>", text: str | None = None, base: Path | None = None) -> AuditConfig:
    """Validate a dict into ``AuditConfig`` or raise ``ConfigError`` with every problem named."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the config must be a YAML mapping of sections, got {type(data).__name__}")
    try:
        config = AuditConfig.model_validate(data)
    except ValidationError as exc:
        lines = _key_lines(text) if text else {}
        allowed = _allowed_keys()
        problems, messages = [], []
        for err in exc.errors():
            loc = tuple(err["loc"])
            # Sequence items: allowed keys are registered under the list's own path.
            parent = tuple(p for p in loc[:-1] if not isinstance(p, int))
            key = ".".join(str(p) for p in loc)
            line = lines.get(loc) or lines.get(loc[:-1])
            where = f"{source}:{line}" if line else source
            msg = _describe(err, allowed.get(parent, []))
            problems.append({"key": key, "line": line, "type": err["type"], "message": msg})
            messages.append(f"{where}: key '{key}': {msg}")
        raise ConfigError("invalid audit config:\n  " + "\n  ".join(messages), problems) from None
    if base is not None:
        config.resolve_paths(base)
    return config


def load_config(path: str | Path) -> AuditConfig:
    """Read and validate a YAML audit config (``ConfigError`` on any problem, naming file/line/key)."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if data is None:
        data = {}
    return parse_config(data, source=str(path), text=text, base=path.parent)
