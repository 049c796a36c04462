"""PSC020 ``duplicate-field``: A field is declared twice in one class body.

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.field import FieldSpec
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext


class DuplicateField(BaseRule):
    code = "PSC020"
    name = "duplicate-field"
    severity = "error"
    summary = "A field is declared twice in one class body."
    bad = """
from pydantic import BaseModel

class M(BaseModel):
    x: int = 1
    x: str = "a"
"""
    good = """
from pydantic import BaseModel

class M(BaseModel):
    x: int = 1
    y: str = "a"
"""
    rationale = """The second declaration silently replaces the first (Python class bodies are dicts):
the model has one `x: str`. Almost always a copy-paste slip that loses a field."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        first: dict[str, FieldSpec] = {}
        for spec in model.all_field_specs:
            if spec.name in first:
                yield self.diag(
                    model,
                    spec.node,
                    f"field '{spec.name}' is declared again (first at line "
                    f"{first[spec.name].line}); the earlier declaration is lost",
                )
            else:
                first[spec.name] = spec
