"""PSC002 ``optional-without-default``: `Optional[T]` with no default is *required* in Pydantic v2 (None is
allowed but must be passed).

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext


class OptionalWithoutDefault(BaseRule):
    code = "PSC002"
    name = "optional-without-default"
    severity = "warning"
    group = "migration"
    summary = (
        "`Optional[T]` with no default is *required* in Pydantic v2 (None is allowed but must be passed)."
    )
    bad = """
from typing import Optional
from pydantic import BaseModel

class Job(BaseModel):
    note: Optional[str]
"""
    good = """
from typing import Optional
from pydantic import BaseModel, Field

class Job(BaseModel):
    note: Optional[str] = None                 # optional, defaults to None
    owner: Optional[str] = Field(...)          # required but nullable, said explicitly
"""
    rationale = """Pydantic v2 changed the meaning: its migration guide lists `f3: Optional[str]` as
required and nullable (in v1 it defaulted to None). `Job()` raises `Field required` although
the annotation reads "optional". Warning, not error, because required-nullable is legitimate;
writing `= Field(...)` (or `= ...`) states that intent and silences the rule. `Field(...)` on an
Optional is therefore *not* flagged: it is the explicit spelling of required-nullable, not a
contradiction (the field notes call it one; the documented semantics say otherwise)."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            if spec.type.is_optional and not spec.has_default and not spec.explicitly_required:
                yield self.diag(
                    model,
                    spec.node,
                    f"'{spec.name}: {spec.type}' has no default, so Pydantic v2 makes it required "
                    f"(None allowed but must be passed); add '= None' or state it with '= Field(...)'",
                )
