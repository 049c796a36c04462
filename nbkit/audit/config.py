"""The audit's YAML configuration: ``AuditConfig``, what ``nbkit audit CONFIG.yaml`` reads.

A strict Pydantic model of the sections in :mod:`nbkit.audit.sections`: unknown keys, wrong types and
coercions (``seed: true``, ``"4"`` or ``4.0`` for an integer) are rejected with one ``ConfigError``
naming the file, the line, the dotted key and the expected type. The YAML is read by
:mod:`nbkit.audit.safe_yaml` (duplicate keys and alias bombs refused). Relative paths are resolved
against the config file's folder. Every section except ``model`` is optional; a check whose section
is missing is reported as skipped. Each check's own config dataclass lives beside the check
(``nbkit.audit.checks.<check>``) and takes its values from this one (``XConfig.audit_values``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field, ValidationError, field_validator

from nbkit.audit.check_names import check_slug, known
from nbkit.audit.safe_yaml import ConfigError, yaml_document
from nbkit.audit.sections import (
    CheckpointSection,
    DataSection,
    DeepSpeedSection,
    EvalSection,
    KissSection,
    LoraSection,
    ModelSection,
    SamplingSection,
    SchedulerSection,
    StageSection,
    Strict,
    TemplateSection,
    TrainerSection,
    TrainSection,
)
from nbkit.audit.sft import EXAMPLES_DIR
from nbkit.errors import read_text

__all__ = [
    "AuditConfig",
    "CheckpointSection",
    "ConfigError",
    "DataSection",
    "DeepSpeedSection",
    "EvalSection",
    "KissSection",
    "LoraSection",
    "ModelSection",
    "SamplingSection",
    "SchedulerSection",
    "StageSection",
    "TemplateSection",
    "TrainSection",
    "TrainerSection",
    "config_file",
    "load_config",
    "parse_config",
]


def _check_slug(item: str | int) -> str:
    """A check named by slug or number → its slug (each list item, so errors carry its line)."""
    try:
        return check_slug(item)
    except KeyError:
        raise ValueError(f"unknown check {item!r} (known: {known()})") from None


class AuditConfig(Strict):
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
        None, description="run only these checks (slugs, or the field notes' numbers 1-13)"
    )

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
                self.data.schema_ref = str((base / file_part).resolve()) + (
                    ":" + ref.split(":", 1)[1] if ":" in ref else ""
                )
        return self


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


def parse_config(
    data: dict, *, source: str = "<config>", lines: dict[tuple, int] | None = None, base: Path | None = None
) -> AuditConfig:
    """Validate a dict into ``AuditConfig`` or raise ``ConfigError`` with every problem named."""
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: the config must be a YAML mapping of sections, got {type(data).__name__}"
        )
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
    path = Path(path)
    text = read_text(path, what="a YAML audit config file", error=ConfigError)
    data, lines = yaml_document(text, str(path))
    return parse_config(data if data is not None else {}, source=str(path), lines=lines, base=path.parent)


def config_file(name: str | Path) -> Path:
    """``name`` as a path when it is a file, else the bundled example of that name (nbkit/audit/examples)."""
    p = Path(name)
    if p.is_file() or not (EXAMPLES_DIR / p).is_file():
        return p
    return EXAMPLES_DIR / p
