"""Questions several rules ask about one field: is its default validated, is its type a ``Literal``."""

from __future__ import annotations

from nbkit.pscheck.field import FieldSpec
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.types import TypeRef


def validate_default_on(model: ModelInfo, spec: FieldSpec) -> bool:
    """Whether Pydantic validates this field's default: ``validate_default`` on the field, else in
    the model's (or an in-run parent's) config; off unless said."""
    ok, v = spec.kwarg_literal("validate_default")
    if ok:
        return bool(v)
    ok, v = model.config_literal("validate_default")
    return bool(v) if ok else False


def is_literal_type(t: TypeRef) -> bool:
    """Whether every non-``None`` member of ``t`` is a ``Literal`` (the closed-set fields PSC007 owns)."""
    ms = [m for m in t.members() if m.name != "None"]
    return bool(ms) and all(m.name == "Literal" for m in ms)
