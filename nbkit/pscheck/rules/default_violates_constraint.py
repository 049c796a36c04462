"""PSC005 ``default-violates-constraint``: A literal default breaks the field's own constraints
(gt/ge/lt/le/multiple_of/length/pattern).

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.rules.fields import validate_default_on
from nbkit.pscheck.rules.messages import short


class DefaultViolatesConstraint(BaseRule):
    code = "PSC005"
    name = "default-violates-constraint"
    severity = "error"
    summary = "A literal default breaks the field's own constraints (gt/ge/lt/le/multiple_of/length/pattern)."
    bad = """
from pydantic import BaseModel, Field

class Train(BaseModel):
    lr: float = Field(default=0.0, gt=0)
"""
    good = """
from pydantic import BaseModel, Field

class Train(BaseModel):
    lr: float = Field(default=1e-3, gt=0)
"""
    rationale = """Defaults are not validated (`validate_default=False`), so `Train().lr == 0.0` passes
silently although `gt=0` forbids it — the constraint is bypassed exactly when the caller relies on
the default. With `validate_default=True` the same default makes every `Train()` raise a
`ValidationError`; either way the default is wrong. Checks `Field(...)` constraints, `Annotated`
metadata (`Gt`, `MaxLen`, `StringConstraints`, ...) and `conint(...)`-style types."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            ok, value = spec.literal_default()
            if not ok or value is None:
                continue
            for key, limit in spec.constraints.items():
                bad = _violates(key, limit, value)
                if bad:
                    tail = (
                        "every instance created without it raises ValidationError"
                        if validate_default_on(model, spec)
                        else "defaults are not validated, so the constraint is silently bypassed"
                    )
                    yield self.diag(
                        model,
                        spec.default or spec.node,
                        f"default {short(value)} of '{spec.name}' violates {key}={short(limit)}; {tail}",
                    )


def _violates(key: str, limit: Any, value: Any) -> bool:
    if isinstance(limit, ast.AST):
        return False
    try:
        num = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and isinstance(limit, (int, float))
        )
        if key == "gt" and num:
            return not value > limit
        if key == "ge" and num:
            return not value >= limit
        if key == "lt" and num:
            return not value < limit
        if key == "le" and num:
            return not value <= limit
        if key == "multiple_of" and num and limit:
            q = value / limit
            return abs(q - round(q)) > 1e-9
        if (
            key in ("min_length", "max_length")
            and isinstance(value, (str, bytes, list, tuple, dict, set, frozenset))
            and isinstance(limit, int)
        ):
            return len(value) < limit if key == "min_length" else len(value) > limit
        if key == "pattern" and isinstance(value, str) and isinstance(limit, str):
            try:
                return re.search(limit, value) is None
            except re.error:
                return False  # a pattern Python's re cannot compile: Pydantic's engine may; no guess
    except (TypeError, ValueError, OverflowError, ZeroDivisionError):
        return False
    return False
