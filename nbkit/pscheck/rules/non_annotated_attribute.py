"""PSC019 ``non-annotated-attribute``: A plain class attribute (`x = 1`, `x = Field(...)`) in a model body.

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.literals import literal_value
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext


class NonAnnotatedAttribute(BaseRule):
    code = "PSC019"
    name = "non-annotated-attribute"
    severity = "error"
    also_in = ("migration",)
    summary = "A plain class attribute (`x = 1`, `x = Field(...)`) in a model body."
    bad = """
from pydantic import BaseModel

class Cfg(BaseModel):
    retries = 3
"""
    good = """
from typing import ClassVar
from pydantic import BaseModel

class Cfg(BaseModel):
    retries: int = 3
    VERSION: ClassVar[str] = "1"
"""
    rationale = """Pydantic raises `PydanticUserError: A non-annotated attribute was detected` at class
creation (and "Field 'x' defined on a base class was overridden by a non-annotated attribute" for
an un-annotated override). Flagged for literal values, `Field(...)` and any override of an inherited
field; other values (functions, descriptors, types) are allowed by Pydantic and not flagged."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        ignored = "ignored_types" in model.config
        for name, stmt in model.non_annotated:
            parent = model.inherited_field(name)
            value = stmt.value
            is_lit = literal_value(value)[0] or isinstance(value, ast.JoinedStr)
            is_field = isinstance(value, ast.Call) and (
                model.module.resolver.is_pydantic(value.func, "Field")
            )
            if parent is not None:
                yield self.diag(
                    model,
                    stmt,
                    f"'{name} = ...' overrides inherited field {parent[0].name}."
                    f"{name} without an annotation; Pydantic raises at class creation",
                )
            elif (is_lit and not ignored) or is_field:
                yield self.diag(
                    model,
                    stmt,
                    f"'{name}' has no type annotation; Pydantic raises at class creation "
                    f"— annotate it, or use ClassVar[...] if it is not a field",
                )
