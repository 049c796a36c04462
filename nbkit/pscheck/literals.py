"""The value of a literal expression, read from ``ast`` without evaluating any code.

Defaults, constraint arguments and config values are compared only when they are literals
(``1``, ``"a"``, ``[1, 2]``, ``list()``); anything else is "cannot tell statically", never guessed.
"""

from __future__ import annotations

import ast
from typing import Any

NOT_LITERAL = object()


def literal(node: ast.expr | None) -> Any:
    """The value of a literal expression, or ``NOT_LITERAL``. Never evaluates code."""
    if node is None:
        return NOT_LITERAL
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args and not node.keywords:
        empty = {
            "list": [],
            "dict": {},
            "set": set(),
            "tuple": (),
            "frozenset": frozenset(),
            "str": "",
            "bytes": b"",
            "int": 0,
            "float": 0.0,
            "bool": False,
        }
        if node.func.id in empty:
            return empty[node.func.id]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_LITERAL


def literal_value(node: ast.expr | None) -> tuple[bool, Any]:
    """``(True, value)`` for a literal default, ``(False, None)`` otherwise."""
    v = literal(node)
    return (v is not NOT_LITERAL), (None if v is NOT_LITERAL else v)
