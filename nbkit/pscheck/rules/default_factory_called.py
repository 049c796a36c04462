"""PSC004 ``default-factory-called``: `default_factory` receives a value (a call's result, a literal)
instead of a callable.

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.rules.calls import (
    FACTORY_BUILDERS,
    VALUE_BUILTINS,
    VOLATILE_CALLS,
    VOLATILE_PREFIXES,
    call_qualname,
)


class DefaultFactoryCalled(BaseRule):
    code = "PSC004"
    name = "default-factory-called"
    severity = "error"
    summary = "`default_factory` receives a value (a call's result, a literal) instead of a callable."
    bad = """
from datetime import datetime
from pydantic import BaseModel, Field

class Event(BaseModel):
    at: datetime = Field(default_factory=datetime.now())
"""
    good = """
from datetime import datetime
from pydantic import BaseModel, Field

class Event(BaseModel):
    at: datetime = Field(default_factory=datetime.now)
"""
    rationale = """`default_factory` must be a zero-argument callable (or, since 2.10, one taking the
validated data); Pydantic calls it for every instance. Passing `datetime.now()` or `list()` hands
it a value: the class is created fine, and every `Event()` then fails (`'datetime' object is not
callable`). Static rule: literals, displays, calls of builtins/known value functions and of classes
defined in the run; other calls (which might return a factory, e.g. `functools.partial(...)`) are
not guessed — `--import` checks `callable()` on them."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            f = spec.factory
            if f is None:
                continue
            why = None
            if isinstance(
                f,
                (
                    ast.Constant,
                    ast.List,
                    ast.Dict,
                    ast.Set,
                    ast.Tuple,
                    ast.ListComp,
                    ast.DictComp,
                    ast.SetComp,
                    ast.JoinedStr,
                    ast.BinOp,
                ),
            ):
                why = "a value"
            elif isinstance(f, ast.Call):
                q = call_qualname(f, model.module)
                if q in FACTORY_BUILDERS:
                    continue
                if (
                    q in VALUE_BUILTINS
                    or q in VOLATILE_CALLS
                    or q.startswith(VOLATILE_PREFIXES)
                    or ctx.model_at(f.func, model.module) is not None
                    or q in model.module.resolver.local_classes
                ):
                    why = f"the result of {ast.unparse(f)}"
            if why:
                fix = ast.unparse(f.func) if isinstance(f, ast.Call) else "a callable, e.g. lambda: ..."
                yield self.diag(
                    model,
                    f,
                    f"default_factory of '{spec.name}' is {why}, not a callable; "
                    f"every instantiation fails — pass {fix}",
                )
