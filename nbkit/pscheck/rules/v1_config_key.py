"""PSC015 ``v1-config-key``: A config key renamed or removed in v2 (`orm_mode`,
`allow_population_by_field_name`, ...).

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.rules.pydantic_api import (
    V1_REMOVED_KEYS,
    V1_RENAMED_KEYS,
)


class V1ConfigKey(BaseRule):
    code = "PSC015"
    name = "v1-config-key"
    severity = "error"
    also_in = ("migration",)
    summary = "A config key renamed or removed in v2 (`orm_mode`, `allow_population_by_field_name`, ...)."
    bad = """
from pydantic import BaseModel, ConfigDict

class Row(BaseModel):
    model_config = ConfigDict(orm_mode=True)
    id: int
"""
    good = """
from pydantic import BaseModel, ConfigDict

class Row(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
"""
    rationale = """Pydantic only *warns* ("Valid config keys have changed in V2") and ignores the old key:
measured on 2.13, `orm_mode=True` leaves `from_attributes` off, so `Row.model_validate(orm_obj)`
fails. An ignored setting is a behaviour change hidden behind a warning — error."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        items: list[tuple[str, ast.AST]] = [(k, v) for k, v in model.config.items()]
        if model.config_class is not None:
            for stmt in model.config_class.body:
                targets = (
                    stmt.targets
                    if isinstance(stmt, ast.Assign)
                    else ([stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
                )
                items += [(t.id, stmt) for t in targets if isinstance(t, ast.Name)]
        for key, node in items:
            if key in V1_RENAMED_KEYS:
                yield self.diag(
                    model,
                    node,
                    f"config key '{key}' was renamed to '{V1_RENAMED_KEYS[key]}' in "
                    f"Pydantic v2; the old key is ignored",
                )
            elif key in V1_REMOVED_KEYS:
                yield self.diag(model, node, f"config key '{key}' was removed in Pydantic v2 and is ignored")
