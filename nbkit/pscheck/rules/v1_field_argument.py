"""PSC022 ``v1-field-argument``: A `Field()` keyword Pydantic v2 no longer takes (`regex`, `min_items`,
`const`, `example`, ...).

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.rules.pydantic_api import FIELD_PARAMS, V1_FIELD_REMOVED, V1_FIELD_RENAMED

# Extra keywords v1 read from Field() and v2 only passes on to the JSON schema, with their v2 spelling.
_V1_EXTRA = {
    "example": "examples=[...]",
    "env": "validation_alias= (pydantic-settings reads the field's alias)",
}


class V1FieldArgument(BaseRule):
    code = "PSC022"
    name = "v1-field-argument"
    severity = "error"
    group = "migration"
    summary = (
        "A `Field()` keyword Pydantic v2 no longer takes (`regex`, `const`, `min_items`, `example`, ...); "
        "the ones it only deprecates are warnings."
    )
    bad = """
from pydantic import BaseModel, Field

class Query(BaseModel):
    text: str = Field(..., regex=r"^\\w+$")
"""
    good = """
from pydantic import BaseModel, Field

class Query(BaseModel):
    text: str = Field(..., pattern=r"^\\w+$")
"""
    rationale = """v2's `Field` refuses `const`, `regex` and `unique_items` (`PydanticUserError` at class
creation: use a `Literal` type, `pattern=`, a set type); it still maps `min_items`, `max_items` and
`allow_mutation` to `min_length`, `max_length` and `frozen`, with a deprecation warning; and any other
keyword it does not know (`example=`, settings' `env=`) is no longer a setting at all — it is copied
into the JSON schema with a deprecation warning, so `env="DB_URL"` silently stops reading that
variable. Only calls of pydantic's own `Field` are checked (sqlmodel's `Field` takes `regex`)."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            calls = ([spec.field_call] if spec.field_call is not None else []) + spec.annotated_fields
            for call in calls:
                for kw in call.keywords:
                    if kw.arg is None or kw.arg in FIELD_PARAMS:
                        continue
                    where = f"Field({kw.arg}=...) on {model.name}.{spec.name}"
                    if kw.arg in V1_FIELD_REMOVED:
                        yield self.diag(
                            model,
                            kw.value,
                            f"{where} was removed in Pydantic v2 (PydanticUserError at class creation); "
                            f"use {V1_FIELD_REMOVED[kw.arg]}",
                        )
                    elif kw.arg in V1_FIELD_RENAMED:
                        yield self.diag(
                            model,
                            kw.value,
                            f"{where} is Pydantic v1 API (deprecated in v2); use {V1_FIELD_RENAMED[kw.arg]}=",
                            severity="warning",
                        )
                    else:
                        hint = _V1_EXTRA.get(kw.arg, "json_schema_extra={...} if it is schema data")
                        yield self.diag(
                            model,
                            kw.value,
                            f"{where}: Pydantic v2's Field has no '{kw.arg}' parameter; it only copies it "
                            f"into the JSON schema (deprecated); use {hint}",
                            severity="warning",
                        )
