"""PSC002 ``optional-without-default``: `Optional[T]` (or `Any`) with no default is *required* in Pydantic v2;
v1 defaulted it to None.

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext

# Annotations besides Optional that v1 read as "may be None, so defaults to None" (its ModelField
# made them not required); v2 gives them no default.
NONE_ADMITTING = frozenset({"Any", "object"})


class OptionalWithoutDefault(BaseRule):
    code = "PSC002"
    name = "optional-without-default"
    severity = "warning"
    group = "migration"
    summary = (
        "`Optional[T]` (or `Any`, `object`) with no default is *required* in Pydantic v2; "
        "v1 defaulted it to None."
    )
    bad = """
from typing import Optional
from pydantic import BaseModel

class Job(BaseModel):
    note: Optional[str]
"""
    good = """
from typing import Any, Optional
from pydantic import BaseModel, Field

class Job(BaseModel):
    note: Optional[str] = None                 # optional, defaults to None
    payload: Any = None
    owner: Optional[str] = Field(...)          # required but nullable, said explicitly
"""
    rationale = """Pydantic v2 changed the meaning: its migration guide lists `f3: Optional[str]` as
required and nullable (in v1 it defaulted to None). `Job()` raises `Field required` although
the annotation reads "optional". Warning, not error, because required-nullable is legitimate;
writing `= Field(...)` (or `= ...`) states that intent and silences the rule. `Field(...)` on an
Optional is therefore *not* flagged: it is the explicit spelling of required-nullable, not a
contradiction (the field notes call it one; the documented semantics say otherwise). v1 did the same
for `Any` and `object` (any type that admits None: `f4: Any` in the guide's table), so those are
reported too; v2 requires them like any other field without a default."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            if spec.has_default or spec.explicitly_required:
                continue
            if spec.type.is_optional:
                yield self.diag(
                    model,
                    spec.node,
                    f"'{spec.name}: {spec.type}' has no default, so Pydantic v2 makes it required "
                    f"(None allowed but must be passed); add '= None' or state it with '= Field(...)'",
                )
            elif spec.type.strip_annotated().name in NONE_ADMITTING:
                yield self.diag(
                    model,
                    spec.node,
                    f"'{spec.name}: {spec.type}' has no default: Pydantic v1 gave it None, v2 makes it "
                    f"required; add '= None' or state it with '= Field(...)'",
                )
