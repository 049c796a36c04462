"""PSC008 ``validator-unknown-field``: A field validator/serializer names a field the model does not have.

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.rules.messages import suggest


class ValidatorUnknownField(BaseRule):
    code = "PSC008"
    name = "validator-unknown-field"
    severity = "error"
    summary = "A field validator/serializer names a field the model does not have."
    bad = """
from pydantic import BaseModel, field_validator

class User(BaseModel):
    name: str

    @field_validator("nmae")
    @classmethod
    def strip(cls, v: str) -> str:
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
    rationale = """Pydantic raises `PydanticUserError: Decorators defined with incorrect fields` at class
creation unless `check_fields=False`. Inherited fields count when the parents are in the same run;
if an ancestor is outside the run, the rule stays silent rather than guess."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        if not model.hierarchy_complete:
            return
        for v in model.validators:
            if v.kind not in ("field_validator", "validator", "field_serializer") or not v.check_fields:
                continue
            for name, node in v.fields:
                if name == "root" and _is_root_model(model):
                    continue  # RootModel's one field is pydantic's own ``root``
                if name != "*" and model.nearest("fields", name) is None:
                    known = set(model.fields) | set(model.inherited_fields())  # only to suggest a name
                    yield self.diag(
                        model,
                        node,
                        f"{v.kind} '{v.func.name}' names field '{name}' which "
                        f"{model.name} does not have{suggest(name, known)}",
                    )


def _is_root_model(model: ModelInfo) -> bool:
    """Whether ``model`` or an in-run ancestor derives from pydantic's ``RootModel``."""
    for m in model.mro():
        for b in m.base_nodes:
            node = b.value if isinstance(b, ast.Subscript) else b
            if m.module.resolver.is_pydantic(node, "RootModel"):
                return True
    return False
