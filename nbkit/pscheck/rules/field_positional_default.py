"""PSC101 ``field-positional-default``: `Field(1)`: the default is passed positionally (strict).

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.field import is_ellipsis
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext


class FieldPositionalDefault(BaseRule):
    code = "PSC101"
    name = "field-positional-default"
    severity = "warning"
    strict_only = True
    summary = "`Field(1)`: the default is passed positionally (strict)."
    bad = """
from pydantic import BaseModel, Field

class M(BaseModel):
    n: int = Field(1, ge=0)
"""
    good = """
from pydantic import BaseModel, Field

class M(BaseModel):
    n: int = Field(default=1, ge=0)
"""
    rationale = """Allowed at runtime, but PEP 681 (`dataclass_transform`) only recognises `default=`
as a keyword: type checkers synthesise an `__init__` where `n` is required. `Field(...)` (the
required marker) is not flagged. Same intent as flake8-pydantic's PYD001; strict-only because it is
about tooling, not runtime behaviour."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            for call in ([spec.field_call] if spec.field_call else []) + spec.annotated_fields:
                if call.args and not is_ellipsis(call.args[0]):
                    yield self.diag(
                        model,
                        call.args[0],
                        f"default of '{spec.name}' is passed positionally to "
                        f"Field(); write Field(default=...)",
                    )
