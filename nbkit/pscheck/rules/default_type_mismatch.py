"""PSC001 ``default-type-mismatch``: A literal default is not a value of the field's own type.

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.rules.fields import is_literal_type, validate_default_on
from nbkit.pscheck.rules.messages import short
from nbkit.pscheck.types import accepts, fmt


class DefaultTypeMismatch(BaseRule):
    code = "PSC001"
    name = "default-type-mismatch"
    severity = "error"
    summary = "A literal default is not a value of the field's own type."
    bad = """
from pydantic import BaseModel, Field

class User(BaseModel):
    email: str = Field(default=None)
"""
    good = """
from typing import Optional
from pydantic import BaseModel

class User(BaseModel):
    email: Optional[str] = None
"""
    rationale = """Pydantic v2 does not validate defaults (`validate_default=False` is the documented
default), so `User().email` is `None` although the annotation promises `str`: downstream code,
`model_dump()` consumers and JSON Schema users all see a type the model says cannot exist. This is
the field notes' own example (`email: str = Field(default=None)`). Literal defaults are compared with the
annotation (`Optional`/`Union`/`X | None`, containers and their items, the numeric tower of PEP 484:
`int` is fine for `float`). Non-literal defaults are left to `--import`. Not flagged when
`validate_default=True`, where Pydantic coerces or rejects the default itself."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        def is_model(q: str) -> bool:
            return ctx.model_for(q, model.module) is not None

        for spec in model.all_field_specs:
            if is_literal_type(spec.type) or validate_default_on(model, spec):
                continue
            ok, value = spec.literal_default()
            if not ok:
                continue
            if accepts(spec.type, value, is_model) is False:
                yield self.diag(
                    model,
                    spec.default or spec.node,
                    f"default {short(value)} of '{spec.name}' is not of its type "
                    f"{fmt(spec.type.strip_annotated())}; Pydantic does not validate defaults, so "
                    f"instances silently hold it",
                )
