"""The sections of the audit's YAML config (``model``, ``lora``, ``data``, ``template`` …): strict Pydantic
models.

Strict: the documented types only (no bool/float/str → int coercion; ints still pass as floats) and
no unknown keys, so a typo is an error naming its line rather than a silently ignored setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Strict(BaseModel):
    # strict: the documented types only (no bool/float/str → int coercion); ints still pass as floats.
    model_config = ConfigDict(extra="forbid", strict=True)


class ModelSection(Strict):
    name: str = Field(
        "tiny",
        min_length=1,
        description="tiny | smollm2 | a Hugging Face model directory | a config.json | a Hub id",
    )
    dtype: Literal["float32", "bfloat16"] = "float32"
    seed: int = 0


class LoraSection(Strict):
    r: int = Field(8, ge=1)
    alpha: float = Field(16.0, gt=0)
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "v_proj"], min_length=1)
    dropout: float = Field(0.05, ge=0, lt=1)
    use_rslora: bool = False


class DataSection(Strict):
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


class TemplateSection(Strict):
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


class TrainSection(Strict):
    micro_batch_size: int = Field(4, ge=1)
    grad_accumulation: int = Field(4, ge=1)
    seq_len: int = Field(128, ge=8)
    loss_normalisation: Literal["token_count", "per_microbatch_mean"] = "token_count"
    autocast_dtype: Literal["bfloat16", "float16", "none"] = "bfloat16"


class StageSection(Strict):
    kind: Literal["linear_warmup", "constant", "cosine", "linear_decay", "step", "onecycle", "exponential"]
    steps: int = Field(ge=1)
    start_factor: float = Field(0.01, gt=0, le=1)
    eta_min: float = Field(0.0, ge=0)
    gamma: float = Field(0.5, gt=0)
    step_size: int = Field(10, ge=1)
    pct_start: float = Field(0.1, gt=0, lt=1)


class SchedulerSection(Strict):
    combine: Literal["sequential", "chained"] = "sequential"
    base_lr: float = Field(2e-4, gt=0)
    stages: list[StageSection] = Field(min_length=1)
    warmup_steps: int = Field(
        0, ge=0, description="the warmup the user intends (for the lost/repeated check)"
    )
    resume_at_step: int | None = Field(None, ge=1)
    resume_restores_scheduler: bool = True


class DeepSpeedSection(Strict):
    zero_stage: Literal[0, 1, 2, 3] = 3
    stage3_param_persistence_threshold: float = Field(1e5, ge=0)
    world_size: int = Field(8, ge=1)


class SamplingSection(Strict):
    beta: float = 1.0
    gamma: float = 0.5
    kl_threshold: float = Field(0.18, gt=0)
    shrink_threshold: float = Field(0.42, gt=0, lt=1)


class EvalSection(Strict):
    interval: int = Field(2, ge=1)
    no_grad: bool = True
    backward: bool = False
    no_sync: bool = False
    find_unused_parameters: bool = False
    value_head: bool = True


class CheckpointSection(Strict):
    interval: int = Field(50, ge=1)


class KissSection(Strict):
    budget_steps: int | None = Field(
        None,
        ge=0,
        description="training steps per LoRA variant; unset or 0: kiss-lora is not trained (skipped) in the "
        "CLI",
    )
    val_loss_target: float | None = Field(None, gt=0)
    val_loss_target_ratio: float = Field(
        0.5, gt=0, lt=1, description="target = ratio × untrained val loss when no absolute target"
    )
    lr: float = Field(1e-3, gt=0)

    @property
    def enabled(self) -> bool:
        """Training costs minutes: a config opts in to kiss-lora with a budget (``nbkit audit`` skips
        it otherwise; a notebook's panel runs the check's own defaults)."""
        return bool(self.budget_steps)


class TrainerSection(Strict):
    """What the user's trainer config says beyond the audit's own sections (axolotl / TRL keys).

    The checks that read it (train-on-inputs, chat-template-eot, tied-embeddings-lora,
    packing-attention, eval-batch) are skipped when a config has no ``trainer`` section.
    """

    tool: Literal["axolotl", "trl", "peft", "nbkit"] = "nbkit"
    train_on_inputs: bool = False
    dataset_types: list[str] = Field(
        default_factory=list, description="datasets[].type (axolotl); empty = not known"
    )
    train_on_eos: Literal["turn", "all", "last", "none"] = "turn"
    eot_tokens: list[str] = Field(
        default_factory=list, description="end-of-turn tokens trained on (empty: the tokenizer's eos)"
    )
    target_linear: bool = False
    modules_to_save: list[str] = Field(default_factory=list)
    ensure_weight_tying: bool = Field(
        False, description="PEFT's LoraConfig.ensure_weight_tying (keeps tied copies one tensor)"
    )
    packing: bool = False
    attn_implementation: str = "sdpa"
    eval_batch_size: int | None = Field(None, ge=1, description="None: the same as train.micro_batch_size")


CHAT_DATASET_TYPES = ("chat_template", "sharegpt", "messages", "conversation")


def is_chat_type(kind: str) -> bool:
    """An axolotl dataset type rendered as a conversation (``chat_template``, ``chat_template.default``,
    ``sharegpt`` …)."""
    return str(kind).split(".")[0].split(":")[0] in CHAT_DATASET_TYPES
