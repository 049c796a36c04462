"""What one statement of a model's class body declares, as written: a field (:class:`FieldSpec`,
with its default, factory, aliases and constraints merged from ``= Field(...)`` and ``Annotated``
metadata) or a validator/serializer decorator (:class:`ValidatorSpec`). Built from ``ast`` only.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from nbkit.pscheck.literals import literal_value
from nbkit.pscheck.types import TypeRef


@dataclass
class FieldSpec:
    """One annotated field of a model as written in the class body."""

    name: str
    node: ast.AnnAssign
    type: TypeRef
    annotation: ast.expr
    value: ast.expr | None  # right-hand side as written (``None`` when there is none)
    field_call: ast.Call | None = None  # ``= Field(...)``
    annotated_fields: list[ast.Call] = field(default_factory=list)  # ``Annotated[T, Field(...)]``
    kwargs: dict[str, ast.expr] = field(default_factory=dict)  # merged Field(...) keyword arguments
    default: ast.expr | None = None  # the default expression (not for factories)
    default_positional: bool = False
    factory: ast.expr | None = None
    constraints: dict[str, Any] = field(default_factory=dict)  # name -> literal value (or node)
    constraint_nodes: dict[str, ast.AST] = field(default_factory=dict)

    @property
    def line(self) -> int:
        return self.node.lineno

    @property
    def col(self) -> int:
        return self.node.col_offset

    @property
    def has_default(self) -> bool:
        """A default (other than the ``...`` "required" marker) or a default factory."""
        if self.factory is not None:
            return True
        return self.default is not None and not is_ellipsis(self.default)

    @property
    def explicitly_required(self) -> bool:
        """``= ...``, ``= Field(...)`` or ``Field(default=...)``: "required" said in so many words.

        ``Field(description="x")`` without a default is required too, but does not *say* so."""
        return self.default is not None and is_ellipsis(self.default)

    def literal_default(self) -> tuple[bool, Any]:
        if self.default is None or is_ellipsis(self.default):
            return False, None
        return literal_value(self.default)

    def kwarg_literal(self, name: str) -> tuple[bool, Any]:
        node = self.kwargs.get(name)
        return literal_value(node) if node is not None else (False, None)

    def keys(self, direction: str) -> tuple[tuple[str, ast.AST], ...]:
        """The names this field is read by (``"input"``) or written as (``"output"``), with the node
        that sets each: its aliases for that direction, else its own name. Computed once per field."""
        cache = self.__dict__.get("_keys")
        if cache is None:
            cache = self.__dict__["_keys"] = {}
        if direction not in cache:
            aliases = self.aliases()
            if direction == "input":
                keys = [(a, node) for kind, a, node in aliases if kind in ("alias", "validation_alias")]
            else:  # serialization_alias wins over alias
                keys = [(a, n) for k, a, n in aliases if k == "serialization_alias"] or [
                    (a, n) for k, a, n in aliases if k == "alias"
                ][:1]
            cache[direction] = tuple(keys) or ((self.name, self.node),)
        return cache[direction]

    def aliases(self) -> list[tuple[str, str, ast.AST]]:
        """``(kind, alias string, node)`` for every literal alias of this field."""
        out = []
        for kind in ("alias", "validation_alias", "serialization_alias"):
            node = self.kwargs.get(kind)
            if node is None:
                continue
            ok, v = literal_value(node)
            if ok and isinstance(v, str):
                out.append((kind, v, node))
            elif isinstance(node, ast.Call):  # AliasChoices("a", "b") / AliasPath("a", 0)
                fname = (
                    node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                )
                if fname == "AliasChoices":
                    for a in node.args:
                        ok, v = literal_value(a)
                        if ok and isinstance(v, str):
                            out.append((kind, v, a))
        return out


@dataclass
class ValidatorSpec:
    kind: str  # field_validator, validator, field_serializer, root_validator, model_validator
    func: ast.FunctionDef | ast.AsyncFunctionDef
    decorator: ast.expr
    fields: list[tuple[str, ast.AST]]
    check_fields: bool = True


def is_ellipsis(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is Ellipsis
