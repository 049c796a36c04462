"""PSC011 ``protected-namespace``: A field name collides with Pydantic's protected namespaces
(`model_validate*`, `model_dump*`).

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.rules.pydantic_api import (
    BASEMODEL_ATTRS,
    DEFAULT_PROTECTED_NAMESPACES,
)


class ProtectedNamespace(BaseRule):
    code = "PSC011"
    name = "protected-namespace"
    severity = "error"
    summary = "A field name collides with Pydantic's protected namespaces (`model_validate*`, `model_dump*`)."
    bad = """
from pydantic import BaseModel

class Run(BaseModel):
    model_dump_path: str
"""
    good = """
from pydantic import BaseModel

class Run(BaseModel):
    dump_path: str
    model_name: str      # fine since Pydantic 2.10: only model_validate*/model_dump* are protected
"""
    rationale = """Since 2.10 the default `protected_namespaces` is `('model_validate', 'model_dump')`:
a field equal to an existing member (`model_dump`) raises `ValueError` at class creation; any other
name in those namespaces triggers a UserWarning and may collide with a future Pydantic method.
`model_name` and similar are *not* flagged any more (they were warnings before 2.10). Honours a
literal `protected_namespaces` in `model_config`; other `model_*` members (e.g. `model_fields`)
are reported too because they shadow the API."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        ok, ns = model.config_literal("protected_namespaces")
        namespaces = tuple(ns) if ok and isinstance(ns, (tuple, list)) else DEFAULT_PROTECTED_NAMESPACES
        for spec in model.all_field_specs:
            hit = next((p for p in namespaces if isinstance(p, str) and spec.name.startswith(p)), None)
            if hit or (spec.name in BASEMODEL_ATTRS and spec.name.startswith("model_")):
                what = f"protected namespace {hit!r}" if hit else "a BaseModel member"
                yield self.diag(
                    model,
                    spec.node,
                    f"field '{spec.name}' collides with {what}; rename it "
                    f"(alias={spec.name!r} keeps the external name)",
                )
