"""PSP001: every ``created_at`` field is a ``datetime`` filled per instance by a ``default_factory``.

The house rule from the field notes' chapter 5, shipped as a plugin to show the extension API. It is a
policy, not a Pydantic semantic, so it is opt-in: it runs with ``--strict``, with
``--select PSP001``, or when the plugin is named explicitly (``--plugin
nbkit.pscheck.plugins.created_at``). It is registered through the ``nbkit.pscheck.rules`` entry
point, so it shows in ``pscheck --list-rules`` once nbkit is installed.

The field notes suggest ``default_factory=utcnow``; ``datetime.utcnow`` returns a *naive* datetime and is
deprecated since Python 3.12, so the rule flags it and suggests ``lambda: datetime.now(timezone.utc)``.
Field names the rule applies to can be changed by subclassing and setting ``field_names``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.rule import BaseRule, RuleContext

if TYPE_CHECKING:
    from nbkit.pscheck.model import ModelInfo


class CreatedAtDatetimeFactory(BaseRule):
    code = "PSP001"
    name = "created-at-datetime-factory"
    severity = "error"
    strict_only = True
    field_names: ClassVar[tuple[str, ...]] = ("created_at",)
    summary = (
        "`created_at` must be a `datetime` with a `default_factory` "
        "(plugin: nbkit.pscheck.plugins.created_at)."
    )
    bad = """
from datetime import datetime
from pydantic import BaseModel

class Doc(BaseModel):
    created_at: str = ""
"""
    good = """
from datetime import datetime, timezone
from pydantic import BaseModel, Field

class Doc(BaseModel):
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
"""
    rationale = """A project policy (the field notes' example), not a Pydantic rule: timestamps stored as
strings or computed once at import make records impossible to order or audit. `default_factory` gives each
instance its own time; `datetime.utcnow` is flagged because it is naive and deprecated (3.12)."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            if spec.name not in self.field_names:
                continue
            problems = []
            if spec.type.strip_annotated().name != "datetime":
                problems.append(f"is annotated {spec.type}, not datetime")
            if spec.factory is None:
                problems.append("has no default_factory")
            elif (model.module.resolver.canonical(spec.factory) or "").endswith("datetime.utcnow") or (
                isinstance(spec.factory, ast.Attribute) and spec.factory.attr == "utcnow"
            ):
                problems.append("uses datetime.utcnow (naive, deprecated since Python 3.12)")
            if problems:
                yield self.diag(
                    model,
                    spec.node,
                    f"'{spec.name}' {' and '.join(problems)}; write "
                    f"'{spec.name}: datetime = Field(default_factory=lambda: "
                    f"datetime.now(timezone.utc))'",
                )


PSCHECK_RULES = [CreatedAtDatetimeFactory]
