"""PSC021 ``field-name-shadows-type``: An annotation uses a name the class body has already rebound (`date:
date | None = None`).

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo, ModuleInfo
from nbkit.pscheck.rule import BaseRule, RuleContext


class FieldNameShadowsType(BaseRule):
    code = "PSC021"
    name = "field-name-shadows-type"
    severity = "error"
    summary = "An annotation uses a name the class body has already rebound (`date: date | None = None`)."
    bad = """
from datetime import date
from typing import Optional
from pydantic import BaseModel

class Visit(BaseModel):
    date: Optional[date] = None
"""
    good = """
import datetime
from typing import Optional
from pydantic import BaseModel, Field

class Visit(BaseModel):
    date: Optional[datetime.date] = None
"""
    rationale = """Annotations in a class body are resolved in the class namespace, where `date` is now
the default `None`: measured on 2.13, `Visit.model_fields['date'].annotation` is `NoneType`, so
`Visit(date="2024-01-01")` is rejected. With a `Field(...)` value, or a later field annotated with an
earlier field's name (`int: int = 0; y: int`), Pydantic raises "field name clashing with a type
annotation"."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        bound: dict[str, int] = {}
        for stmt in model.node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                name = stmt.target.id
                if stmt.value is not None:
                    bound_now = dict(bound)
                    bound_now[name] = stmt.lineno
                else:
                    bound_now = bound
                for ident in _annotation_names(stmt.annotation, model.module, 0):
                    if ident in bound_now:
                        where = (
                            "its own default"
                            if ident == name
                            else f"the attribute on line {bound_now[ident]}"
                        )
                        yield self.diag(
                            model,
                            stmt,
                            f"annotation of '{name}' uses '{ident}', which the class body "
                            f"has rebound ({where}); Pydantic resolves it to that value",
                        )
                        break
                if stmt.value is not None:
                    bound[name] = stmt.lineno
            elif isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        bound[t.id] = stmt.lineno


def _annotation_names(node: ast.AST, module: ModuleInfo, depth: int, in_call: bool = False) -> Iterator[str]:
    """Names an annotation looks up (forward-reference strings included, ``Literal`` values not).

    A string is a forward reference only in a type position: inside a call's arguments
    (``Field(alias="type")``, ``AfterValidator(check("x"))`` in ``Annotated`` metadata) it is a value."""
    if depth > 20:
        return
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        if in_call:
            return
        try:
            inner = ast.parse(node.value.strip(), mode="eval").body
        except (SyntaxError, ValueError):
            return
        yield from _annotation_names(inner, module, depth + 1)
    elif isinstance(node, ast.Subscript) and module.resolver.canonical(node.value) == "Literal":
        yield from _annotation_names(node.value, module, depth + 1, in_call)
    elif isinstance(node, ast.Call):
        yield from _annotation_names(node.func, module, depth + 1, in_call)
        for child in [*node.args, *(kw.value for kw in node.keywords)]:
            yield from _annotation_names(child, module, depth + 1, True)
    else:
        for child in ast.iter_child_nodes(node):
            yield from _annotation_names(child, module, depth + 1, in_call)
