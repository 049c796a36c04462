"""PSC102 ``default-inside-annotated``: `Annotated[T, Field(default=...)]`: the default hides inside the
annotation (strict).

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.field import is_ellipsis
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext


class DefaultInsideAnnotated(BaseRule):
    code = "PSC102"
    name = "default-inside-annotated"
    severity = "warning"
    strict_only = True
    summary = "`Annotated[T, Field(default=...)]`: the default hides inside the annotation (strict)."
    bad = """
from typing import Annotated
from pydantic import BaseModel, Field

class M(BaseModel):
    n: Annotated[int, Field(default=1)]
"""
    good = """
from typing import Annotated
from pydantic import BaseModel, Field

class M(BaseModel):
    n: Annotated[int, Field(ge=0)] = 1
"""
    rationale = """Pydantic's fields documentation says defaults go outside `Annotated` (as the assigned
value, or `default_factory` inside). Pydantic 2.13 honours it at runtime, but type checkers treat
`n` as required, and a reused `Annotated` alias silently carries the default to every user.
flake8-pydantic's PYD004 covers the same; strict-only for the same reason as PSC101."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            for call in spec.annotated_fields:
                d = next((kw.value for kw in call.keywords if kw.arg == "default"), None)
                if d is None and call.args and not is_ellipsis(call.args[0]):
                    d = call.args[0]
                if d is not None:
                    yield self.diag(
                        model,
                        call,
                        f"default of '{spec.name}' is set inside Annotated[...]; assign it "
                        f"after the annotation instead",
                    )
