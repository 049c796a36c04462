"""PSC013 ``import-time-default``: A default is computed once at import (`datetime.now()`, `uuid4()`,
`random()`...).

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.rules.calls import (
    VOLATILE_CALLS,
    VOLATILE_PREFIXES,
    call_qualname,
)


class ImportTimeDefault(BaseRule):
    code = "PSC013"
    name = "import-time-default"
    severity = "error"
    summary = "A default is computed once at import (`datetime.now()`, `uuid4()`, `random()`...)."
    bad = """
from datetime import datetime
from pydantic import BaseModel

class Record(BaseModel):
    created_at: datetime = datetime.now()
"""
    good = """
from datetime import datetime
from pydantic import BaseModel, Field

class Record(BaseModel):
    created_at: datetime = Field(default_factory=datetime.now)
"""
    rationale = """The class body runs once, so every `Record()` shares the import-time timestamp (or
UUID, random number): the value looks fresh in tests and is wrong in a long-running service.
`default_factory` is Pydantic's documented way to compute a default per instance."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            if spec.default is None:
                continue
            for node in _walk_no_lambda(spec.default):
                if isinstance(node, ast.Call):
                    q = call_qualname(node, model.module)
                    if q in VOLATILE_CALLS or q.startswith(VOLATILE_PREFIXES):
                        yield self.diag(
                            model,
                            node,
                            f"default of '{spec.name}' is computed once at import by "
                            f"{ast.unparse(node)}; all instances share it — use "
                            f"default_factory={ast.unparse(node.func)}",
                        )
                        break


def _walk_no_lambda(node: ast.AST) -> Iterator[ast.AST]:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Lambda):
            continue
        yield n
        stack.extend(ast.iter_child_nodes(n))
