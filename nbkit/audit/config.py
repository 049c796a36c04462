"""The audit's configuration: the YAML ``AuditConfig`` and one dataclass per check.

``AuditConfig`` is what ``nbkit audit CONFIG.yaml`` reads, a strict Pydantic model: unknown keys,
wrong types and coercions (``seed: true``, ``"4"`` or ``4.0`` for an integer) are rejected with one
``ConfigError`` naming the file, the line, the dotted key and the expected type. The YAML itself is
read defensively: duplicate keys are an error and alias expansion is capped (a "billion laughs"
file is refused in milliseconds). Relative paths are resolved against the config file's folder.
Every section except ``model`` is optional; a check whose section is missing is reported as skipped.

Each check also has a plain dataclass (``KissConfig``, ``LoraBindingConfig``, …) whose fields carry
the panel's widget metadata: ``XConfig.from_audit(audit_config, smoke=False)`` takes the YAML's
values for the check, ``XConfig.smoke()`` is the fast preset (its work sizes replace the default ones).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from nbkit.errors import UsageError, read_text

# A config of this audit has well under a thousand YAML nodes; past this many *expanded* nodes the
# file is an alias bomb ("billion laughs"), refused before anything walks the expansion.
MAX_EXPANDED_NODES = 20_000


class _Strict(BaseModel):
    # strict: the documented types only (no bool/float/str → int coercion); ints still pass as floats.
    model_config = ConfigDict(extra="forbid", strict=True)


class ModelSection(_Strict):
    name: str = Field("tiny", min_length=1, description="tiny | smollm2 | a Hugging Face model directory | a config.json | a Hub id")
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

    @field_validator("path", "ner_path", mode="before")
    @classmethod
    def _path_from_str(cls, v):
        # YAML gives strings; strict mode would refuse them for Path.
        return Path(v) if isinstance(v, str) else v


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
    budget_steps: int = Field(0, ge=0, description="training steps per LoRA variant; 0 skips kiss-lora in the CLI")
    val_loss_target: float | None = Field(None, gt=0)
    val_loss_target_ratio: float = Field(0.5, gt=0, lt=1, description="target = ratio × untrained val loss when no absolute target")
    lr: float = Field(1e-3, gt=0)


class TrainerSection(_Strict):
    """What the user's trainer config says beyond the audit's own sections (axolotl / TRL keys).

    The checks that read it (train-on-inputs, chat-template-eot, tied-embeddings-lora,
    packing-attention, eval-batch) are skipped when a config has no ``trainer`` section.
    """

    tool: Literal["axolotl", "trl", "peft", "nbkit"] = "nbkit"
    train_on_inputs: bool = False
    dataset_types: list[str] = Field(default_factory=list, description="datasets[].type (axolotl); empty = not known")
    train_on_eos: Literal["turn", "all", "last", "none"] = "turn"
    eot_tokens: list[str] = Field(default_factory=list, description="end-of-turn tokens trained on (empty: the tokenizer's eos)")
    target_linear: bool = False
    modules_to_save: list[str] = Field(default_factory=list)
    ensure_weight_tying: bool = Field(False, description="PEFT's LoraConfig.ensure_weight_tying (keeps tied copies one tensor)")
    packing: bool = False
    attn_implementation: str = "sdpa"
    eval_batch_size: int | None = Field(None, ge=1, description="None: the same as train.micro_batch_size")


def _check_slug(item: str | int) -> str:
    """A check named by slug or number → its slug (each list item, so errors carry its line)."""
    from nbkit.audit.checks import REGISTRY

    try:
        return REGISTRY[item].slug
    except KeyError:
        raise ValueError(f"unknown check {item!r} (known: {REGISTRY.known()})") from None


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
    trainer: TrainerSection | None = None
    checks: list[Annotated[str | int, AfterValidator(_check_slug)]] | None = Field(
        None, description="run only these checks (slugs, or the field notes' numbers 1-13)")

    @field_validator("checks")
    @classmethod
    def _some_checks(cls, v):
        if v is not None and not v:
            raise ValueError("an empty list selects no check (omit 'checks' to run all)")
        return v if v is None else list(dict.fromkeys(v))

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


class ConfigError(UsageError):
    """The config is invalid; ``str()`` names file, line, key and the expected type."""

    def __init__(self, message: str, problems: list[dict] | None = None):
        super().__init__(message)
        self.problems = problems or []


def _compose(text: str, source: str):
    """The YAML node graph, refusing duplicate keys and alias bombs (``ConfigError`` with the line)."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        raise ConfigError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    # Aliases make the graph a DAG that shares nodes; count the expanded size with a memo so an
    # alias bomb costs as little to refuse as its text is long.
    sizes: dict[int, int] = {}

    def size(node) -> int:
        key = id(node)
        if key not in sizes:
            sizes[key] = 1  # a (malformed) cycle counts once
            if isinstance(node, yaml.MappingNode):
                sizes[key] = 1 + sum(size(k) + size(v) for k, v in node.value)
            elif isinstance(node, yaml.SequenceNode):
                sizes[key] = 1 + sum(size(x) for x in node.value)
        return sizes[key]

    if root is not None and size(root) > MAX_EXPANDED_NODES:
        raise ConfigError(f"{source}: YAML aliases expand to {size(root):,} nodes (limit {MAX_EXPANDED_NODES:,}); "
                          "an audit config needs no nested aliases — write the values out")
    seen: set[int] = set()

    def duplicates(node):
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: dict[str, int] = {}
            for k, v in node.value:
                name = str(k.value)
                if name in keys:
                    raise ConfigError(f"{source}:{k.start_mark.line + 1}: duplicate key {name!r} (first at line {keys[name]}); "
                                      "YAML would silently keep the last one")
                keys[name] = k.start_mark.line + 1
                duplicates(v)
        elif isinstance(node, yaml.SequenceNode):
            for x in node.value:
                duplicates(x)

    if root is not None:
        duplicates(root)
    return root


def yaml_document(text: str, source: str) -> tuple[Any, dict[tuple, int]]:
    """A YAML document read safely (duplicate keys and alias bombs refused, ``ConfigError`` with the
    line) and the 1-based line of each key, keyed by its path: what every nbkit reader of a user's
    YAML needs to name the line of a bad value."""
    import yaml

    root = _compose(text, source)
    loader = yaml.SafeLoader(text)
    try:
        data = loader.construct_document(root) if root is not None else {}
    finally:
        loader.dispose()
    return data, _key_lines(root)


def _key_lines(root) -> dict[tuple, int]:
    """1-based line of every mapping key/sequence item of a composed YAML graph, keyed by its path."""
    import yaml

    lines: dict[tuple, int] = {}

    def walk(node, path):
        if len(path) > 16:  # deeper than any audit section; only aliases get here
            return
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

    if root is not None:
        walk(root, ())
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


def parse_config(data: dict, *, source: str = "<config>", lines: dict[tuple, int] | None = None, base: Path | None = None) -> AuditConfig:
    """Validate a dict into ``AuditConfig`` or raise ``ConfigError`` with every problem named."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the config must be a YAML mapping of sections, got {type(data).__name__}")
    try:
        config = AuditConfig.model_validate(data)
    except ValidationError as exc:
        lines = lines or {}
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
    if config.data is not None:
        for key in ("path", "ner_path"):
            p = getattr(config.data, key)
            if p is not None and p.is_dir():
                line = (lines or {}).get(("data", key))
                where = f"{source}:{line}" if line else source
                raise ConfigError(f"{where}: key 'data.{key}': {p} is a directory; expected a JSONL file")
    return config


def load_config(path: str | Path) -> AuditConfig:
    """Read and validate a YAML audit config (``ConfigError`` on any problem, naming file/line/key)."""
    import yaml

    path = Path(path)
    text = read_text(path, what="a YAML audit config file", error=ConfigError)
    root = _compose(text, str(path))
    data: Any = {}
    if root is not None:
        loader = yaml.SafeLoader(text)  # constructs the checked graph; aliases stay shared objects
        try:
            data = loader.construct_document(root)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark else str(path)
            raise ConfigError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
        finally:
            loader.dispose()
    return parse_config(data if data is not None else {}, source=str(path), lines=_key_lines(root), base=path.parent)



# -- one dataclass per check (panel controls from the field metadata) ------------------------------


class _CheckConfig:
    """What every per-check dataclass shares: the smoke preset and the mapping from ``AuditConfig``.

    ``SIZES`` names the work-size fields: ``smoke()`` changes only those, and ``from_audit(...,
    smoke=True)`` takes the YAML's values and then the smoke preset's sizes.
    """

    SIZES: ClassVar[dict[str, Any]] = {}

    @classmethod
    def smoke(cls):
        return cls(**cls.SIZES)

    @classmethod
    def _from_audit(cls, audit: AuditConfig) -> dict[str, Any]:
        return {}

    @classmethod
    def from_audit(cls, audit: AuditConfig, smoke: bool = False):
        values = cls._from_audit(audit)
        if smoke:
            values.update(cls.SIZES)
        return dataclasses.replace(cls(), **values)


LORA_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "gate"]
TEMPLATE_FORMAT = "### Instruction:\n{instruction}\n### Response: {response}"


@dataclass
class KissConfig(_CheckConfig):
    """KISS (q/v rank 8) against an over-parameterised LoRA (q/v/o rank 64), trained with one budget."""

    budget_steps: int = field(default=30, metadata={"min": 2, "max": 400, "label": "steps per variant (budget)"})
    lr: float = field(default=1e-3, metadata={"min": 1e-5, "max": 1e-1, "log": True})
    val_loss_target: float = field(default=0.0, metadata={"min": 0.0, "max": 10.0, "step": 0.05, "label": "val-loss target (0 = ratio × start)"})
    target_ratio: float = field(default=0.5, metadata={"min": 0.05, "max": 0.95, "step": 0.05, "label": "target ratio of the untrained val loss"})
    batch_size: int = field(default=8, metadata={"min": 1, "max": 64})
    # eval_every 5 and val_size 16 (two batches of 8) were set in an earlier session while watching the verdict
    # of seed 0 on the unshuffled split flip with val_size. The verdict no longer rests on that data: every seed
    # draws its own validation split and the rule counts, over `seeds` repeats, which variant got there first.
    eval_every: int = field(default=5, metadata={"min": 1, "max": 100})
    val_size: int = field(default=16, metadata={"min": 4, "max": 256, "label": "validation examples"})
    model: str = field(default="", metadata={"choices": ["", "tiny", "smollm2"], "label": "model ('' = the audit's)"})
    # 4: the fewest repeats for which a unanimous result decides the Wilson 95 % rule on 0.5 (4 of 4: [0.51, 1];
    # 3 of 3: [0.44, 1] straddles it). Each seed is a full comparison, so this is the cost of a verdict.
    seeds: int = field(default=4, metadata={"min": 1, "max": 20, "help": "repeats, each with its own split, initialisation and batch order"})
    stop_when_decided: bool = field(default=True, metadata={"help": "stop at the first evaluation where a variant reached the target"})
    SIZES: ClassVar[dict[str, Any]] = {"budget_steps": 12, "lr": 0.01, "target_ratio": 0.9, "batch_size": 4, "eval_every": 4, "val_size": 8, "model": "tiny",
                                       "seeds": 2}

    @classmethod
    def _from_audit(cls, audit):
        k = audit.kiss
        return {"budget_steps": k.budget_steps, "lr": k.lr, "val_loss_target": k.val_loss_target or 0.0, "target_ratio": k.val_loss_target_ratio}


@dataclass
class LoraBindingConfig(_CheckConfig):
    r: int = field(default=8, metadata={"min": 1, "max": 512})
    alpha: float = field(default=16.0, metadata={"min": 1.0, "max": 512.0})
    target_modules: tuple = field(default=("q_proj", "v_proj"), metadata={"choices": LORA_MODULES})
    use_rslora: bool = False

    @classmethod
    def _from_audit(cls, audit):
        lo = audit.lora
        return {"r": lo.r, "alpha": lo.alpha, "target_modules": tuple(lo.target_modules), "use_rslora": lo.use_rslora}


@dataclass
class LabelAlignmentConfig(_CheckConfig):
    language: str = field(default="all", metadata={"choices": ["all", "en", "zh"]})
    ner_path: str = field(default="", metadata={"hidden": True, "help": "labelled JSONL ('' = the bundled ner.jsonl)"})

    @classmethod
    def _from_audit(cls, audit):
        return {"ner_path": str(audit.data.ner_path)} if audit.data is not None and audit.data.ner_path else {}


@dataclass
class AttentionConfig(_CheckConfig):
    seq_len: int = field(default=128, metadata={"min": 16, "max": 32768, "label": "train.seq_len"})
    max_length: int = field(default=2048, metadata={"choices": [256, 512, 1024, 2048, 4096], "label": "longest timed length"})
    reps: int = field(default=3, metadata={"min": 1, "max": 20})
    SIZES: ClassVar[dict[str, Any]] = {"max_length": 256, "reps": 2}

    @property
    def lengths(self) -> tuple[int, ...]:
        """The four lengths timed, ending at ``max_length``."""
        return tuple(L for L in (64, 128, 256, 512, 1024, 2048, 4096) if L <= self.max_length)[-4:]

    @classmethod
    def _from_audit(cls, audit):
        return {"seq_len": audit.train.seq_len}


@dataclass
class GradAccumulationConfig(_CheckConfig):
    micro_batch_size: int = field(default=4, metadata={"min": 1, "max": 16})
    grad_accumulation: int = field(default=4, metadata={"min": 2, "max": 16})
    loss_normalisation: str = field(default="token_count", metadata={"choices": ["token_count", "per_microbatch_mean"]})
    noise_lengths: tuple = field(default=(16, 32, 64, 128), metadata={"choices": [16, 32, 64, 128, 256], "label": "lengths of the noise fit"})
    # 8 samples = 4 independent pairs per length (the interval resamples pairs, and needs ≥ 3 of them):
    # 4 samples gave only 2 pairs, too few for any interval. Set by what the interval needs, not by its verdict.
    noise_samples: int = field(default=8, metadata={"min": 6, "max": 64, "label": "gradient samples per length (pairs: half)"})
    noise_params: str = field(default="last_layer", metadata={"choices": ["last_layer", "all"], "label": "gradients of"})
    SIZES: ClassVar[dict[str, Any]] = {"micro_batch_size": 2, "grad_accumulation": 2, "noise_lengths": (16, 32, 64), "noise_samples": 6}

    @classmethod
    def _from_audit(cls, audit):
        t = audit.train
        return {"micro_batch_size": t.micro_batch_size, "grad_accumulation": max(2, t.grad_accumulation), "loss_normalisation": t.loss_normalisation}


@dataclass
class DtypesConfig(_CheckConfig):
    autocast_dtype: str = field(default="bfloat16", metadata={"choices": ["bfloat16", "float16", "none"]})

    @classmethod
    def _from_audit(cls, audit):
        return {"autocast_dtype": audit.train.autocast_dtype}


@dataclass
class DataSchemaConfig(_CheckConfig):
    path: str = field(default="sft.jsonl", metadata={"help": "JSONL file (a bare name is looked up in nbkit/audit/examples)"})
    schema: str = field(default="sft_schema.py:SFTExample", metadata={"help": "'module:Class' or 'file.py:Class'"})
    strict: bool = False
    max_lines: int = field(default=0, metadata={"min": 0, "max": 10_000_000, "label": "max lines (0 = all)"})

    @classmethod
    def _from_audit(cls, audit):
        d = audit.data
        return {"path": str(d.path), "schema": d.schema_ref, "strict": d.strict, "max_lines": d.max_lines or 0}


@dataclass
class LossMaskConfig(_CheckConfig):
    kind: str = field(default="chat", metadata={"choices": ["chat", "format"]})
    format: str = field(default=TEMPLATE_FORMAT, metadata={"help": "str.format template for kind 'format'"})
    max_length: int = field(default=256, metadata={"min": 16, "max": 4096})
    mask_pad_labels: bool = False
    max_examples: int = field(default=0, metadata={"min": 0, "max": 100_000, "label": "examples (0 = all)"})
    SIZES: ClassVar[dict[str, Any]] = {"max_examples": 48}

    @classmethod
    def _from_audit(cls, audit):
        t = audit.template
        return {"kind": t.kind, "format": t.format or TEMPLATE_FORMAT, "max_length": t.max_length, "mask_pad_labels": t.mask_pad_labels}


@dataclass
class RewardWeightsConfig(_CheckConfig):
    beta: float = field(default=1.0, metadata={"min": 0.0, "max": 20.0, "step": 0.25})
    gamma: float = field(default=0.5, metadata={"min": 0.0, "max": 2.0, "step": 0.1})
    kl_threshold: float = field(default=0.18, metadata={"min": 0.01, "max": 2.0})
    shrink_threshold: float = field(default=0.42, metadata={"min": 0.01, "max": 0.99})
    examples: int = field(default=48, metadata={"min": 8, "max": 1024, "label": "scored examples"})
    # The sampler the claims compare with this one on the same responses: broken.yaml's β = 8, γ = 0.
    concentrated_beta: float = field(default=8.0, metadata={"min": 0.0, "max": 20.0, "step": 0.25, "label": "β of the concentrated sampler"})
    concentrated_gamma: float = field(default=0.0, metadata={"min": 0.0, "max": 2.0, "step": 0.1, "label": "γ of the concentrated sampler"})
    SIZES: ClassVar[dict[str, Any]] = {"examples": 12}

    @classmethod
    def _from_audit(cls, audit):
        s = audit.sampling
        return {"beta": s.beta, "gamma": s.gamma, "kl_threshold": s.kl_threshold, "shrink_threshold": s.shrink_threshold}


@dataclass
class Zero3LayoutConfig(_CheckConfig):
    threshold: float = field(default=1e5, metadata={"min": 1.0, "max": 1e10, "log": True, "label": "stage3_param_persistence_threshold"})
    world_size: int = field(default=8, metadata={"min": 1, "max": 64})
    zero_stage: int = field(default=3, metadata={"choices": [0, 1, 2, 3]})

    @classmethod
    def _from_audit(cls, audit):
        ds = audit.deepspeed
        return {"threshold": ds.stage3_param_persistence_threshold, "world_size": ds.world_size, "zero_stage": ds.zero_stage}


SCHEDULER_PRESETS = {
    "warmup+cosine": ("sequential", ({"kind": "linear_warmup", "steps": 10, "start_factor": 0.01}, {"kind": "cosine", "steps": 90})),
    "onecycle+warmup+step": ("sequential", ({"kind": "onecycle", "steps": 100, "pct_start": 0.1}, {"kind": "linear_warmup", "steps": 10, "start_factor": 0.01},
                                            {"kind": "step", "steps": 90, "step_size": 30})),
    "chained warmup+cosine": ("chained", ({"kind": "linear_warmup", "steps": 10, "start_factor": 0.01}, {"kind": "cosine", "steps": 90})),
}


@dataclass
class SchedulersConfig(_CheckConfig):
    """A preset, or (``preset='config'``) the stages of the YAML's scheduler section."""

    preset: str = field(default="warmup+cosine", metadata={"choices": [*SCHEDULER_PRESETS, "config"]})
    resume_at_step: int = field(default=40, metadata={"min": 1, "max": 199})
    resume_restores_scheduler: bool = True
    section: dict = field(default_factory=dict, metadata={"hidden": True})

    def scheduler_section(self) -> SchedulerSection:
        if self.preset == "config":
            if not self.section:
                raise UsageError("scheduler preset 'config' needs the config's scheduler section")
            return SchedulerSection.model_validate(self.section, strict=False)
        combine, stages = SCHEDULER_PRESETS[self.preset]
        total = sum(s["steps"] for s in stages)
        return SchedulerSection.model_validate({"combine": combine, "base_lr": 2e-4, "stages": list(stages), "warmup_steps": 10,
                                                "resume_at_step": min(self.resume_at_step, total - 1),
                                                "resume_restores_scheduler": self.resume_restores_scheduler}, strict=False)

    @classmethod
    def _from_audit(cls, audit):
        s = audit.scheduler
        return {"preset": "config", "section": s.model_dump(), "resume_at_step": s.resume_at_step or 40, "resume_restores_scheduler": s.resume_restores_scheduler}


@dataclass
class FragmentationConfig(_CheckConfig):
    """Checkpoint every ``interval`` steps against every ``reference_interval`` steps (field notes: 50 vs 200).

    ``steps`` 0 runs 2 × the larger interval, so both runs checkpoint at least twice.
    """

    interval: int = field(default=50, metadata={"min": 1, "max": 1000})
    reference_interval: int = field(default=200, metadata={"min": 1, "max": 1000})
    steps: int = field(default=0, metadata={"min": 0, "max": 5000, "label": "steps (0 = 2 × the larger interval)"})
    batch_size: int = field(default=4, metadata={"min": 1, "max": 64})
    # The claim is decided across repeats (a run's per-step ratios are not independent): 3 is the fewest that give a t interval with 2 df.
    repeats: int = field(default=3, metadata={"min": 1, "max": 20, "help": "independent run pairs (own seed, fresh model copy)"})
    SIZES: ClassVar[dict[str, Any]] = {"interval": 5, "reference_interval": 20, "steps": 40, "repeats": 2}

    @property
    def run_steps(self) -> int:
        return self.steps or 2 * max(self.interval, self.reference_interval)

    @classmethod
    def _from_audit(cls, audit):
        return {"interval": audit.checkpoint.interval} if audit.checkpoint is not None else {}


@dataclass
class DdpEvalConfig(_CheckConfig):
    no_grad: bool = True
    backward: bool = False
    no_sync: bool = False
    find_unused_parameters: bool = False
    value_head: bool = True
    interval: int = field(default=2, metadata={"min": 1, "max": 10, "label": "evaluate every"})
    steps: int = field(default=6, metadata={"min": 2, "max": 50})
    SIZES: ClassVar[dict[str, Any]] = {"steps": 4}

    @classmethod
    def _from_audit(cls, audit):
        e = audit.eval
        return {"no_grad": e.no_grad, "backward": e.backward, "no_sync": e.no_sync, "find_unused_parameters": e.find_unused_parameters,
                "value_head": e.value_head, "interval": e.interval}


# -- the trainer-config checks (axolotl / TRL keys; read from the config's ``trainer`` section) -------

ATTENTION_IMPLEMENTATIONS = ["flash_attention_2", "flash_attention_3", "flex_attention", "sdpa", "eager", "xformers"]


class _TrainerCheckConfig(_CheckConfig):
    """A check config filled from the audit's ``trainer`` section: each field of the same name (lists joined by commas)."""

    @classmethod
    def _from_audit(cls, audit):
        t = audit.trainer
        names = {f.name for f in dataclasses.fields(cls)} & set(TrainerSection.model_fields)
        return {n: ",".join(getattr(t, n)) if isinstance(getattr(t, n), list) else getattr(t, n) for n in names}


@dataclass
class TrainOnInputsConfig(_TrainerCheckConfig):
    train_on_inputs: bool = field(default=False, metadata={"help": "axolotl train_on_inputs: the loss also covers the prompt"})
    dataset_types: str = field(default="chat_template", metadata={"help": "datasets[].type, comma separated ('' = not known)"})
    examples: int = field(default=48, metadata={"min": 1, "max": 1024, "label": "examples rendered"})
    SIZES: ClassVar[dict[str, Any]] = {"examples": 8}


@dataclass
class ChatTemplateEotConfig(_TrainerCheckConfig):
    train_on_eos: str = field(default="turn", metadata={"choices": ["turn", "all", "last", "none"], "help": "axolotl datasets[].train_on_eos"})
    eot_tokens: str = field(default="", metadata={"help": "end-of-turn tokens trained on, comma separated ('' = the tokenizer's eos)"})
    chat_dataset: bool = field(default=True, metadata={"help": "the data is rendered with the chat template"})

    @classmethod
    def _from_audit(cls, audit):
        t = audit.trainer
        chat = any(_is_chat_type(x) for x in t.dataset_types) if t.dataset_types else t.tool != "axolotl"
        return {**super()._from_audit(audit), "chat_dataset": chat}


@dataclass
class TiedEmbeddingsConfig(_TrainerCheckConfig):
    target_linear: bool = field(default=False, metadata={"help": "axolotl lora_target_linear / PEFT target_modules 'all-linear'"})
    modules_to_save: str = field(default="embed_tokens,lm_head", metadata={"help": "lora_modules_to_save, comma separated"})
    ensure_weight_tying: bool = field(default=False, metadata={"help": "PEFT LoraConfig(ensure_weight_tying=True)"})


@dataclass
class PackingAttentionConfig(_TrainerCheckConfig):
    packing: bool = field(default=True, metadata={"help": "axolotl sample_packing / TRL packing"})
    attn_implementation: str = field(default="sdpa", metadata={"choices": ATTENTION_IMPLEMENTATIONS})


@dataclass
class EvalBatchConfig(_CheckConfig):
    micro_batch_size: int = field(default=2, metadata={"min": 1, "max": 64})
    eval_batch_size: int = field(default=8, metadata={"min": 0, "max": 256, "label": "eval batch size (0 = micro batch size)"})
    grad_accumulation: int = field(default=4, metadata={"min": 1, "max": 64})
    examples: int = field(default=8, metadata={"min": 2, "max": 1024, "label": "examples scored"})
    SIZES: ClassVar[dict[str, Any]] = {"examples": 4}

    @classmethod
    def _from_audit(cls, audit):
        t, tr = audit.trainer, audit.train
        return {"micro_batch_size": tr.micro_batch_size, "grad_accumulation": tr.grad_accumulation, "eval_batch_size": t.eval_batch_size or 0}


CHAT_DATASET_TYPES = ("chat_template", "sharegpt", "messages", "conversation")


def _is_chat_type(kind: str) -> bool:
    """An axolotl dataset type rendered as a conversation (``chat_template``, ``chat_template.default``, ``sharegpt`` …)."""
    return str(kind).split(".")[0].split(":")[0] in CHAT_DATASET_TYPES


def config_file(name: str | Path) -> Path:
    """``name`` as a path when it is a file, else the bundled example of that name (nbkit/audit/examples)."""
    from nbkit.audit.sft import EXAMPLES_DIR

    p = Path(name)
    if p.is_file() or not (EXAMPLES_DIR / p).is_file():
        return p
    return EXAMPLES_DIR / p
