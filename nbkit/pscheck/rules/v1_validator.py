"""PSC017 ``v1-validator``: Pydantic v1 `@validator` / `@root_validator` in a v2 model.

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext


class V1Validator(BaseRule):
    code = "PSC017"
    name = "v1-validator"
    severity = "warning"
    also_in = ("migration",)
    summary = "Pydantic v1 `@validator` / `@root_validator` in a v2 model."
    bad = """
from pydantic import BaseModel, validator

class User(BaseModel):
    name: str

    @validator("name")
    def strip(cls, v):
        return v.strip()
"""
    good = """
from pydantic import BaseModel, field_validator

class User(BaseModel):
    name: str

    @field_validator("name")
    @classmethod
    def strip(cls, v: str) -> str:
        return v.strip()
"""
    rationale = """Deprecated in v2 (removed in v3) and semantically different: v1 `@validator` takes
`values`/`each_item`/`always`, which `@field_validator` replaces with `ValidationInfo`, and
`@root_validator` without `skip_on_failure=True` raises `PydanticUserError` in v2."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for v in model.validators:
            if v.kind in ("validator", "root_validator"):
                new = "field_validator" if v.kind == "validator" else "model_validator"
                yield self.diag(
                    model,
                    v.decorator,
                    f"@{v.kind} on {model.name}.{v.func.name} is Pydantic v1 API "
                    f"(deprecated in v2); use @{new}",
                )
