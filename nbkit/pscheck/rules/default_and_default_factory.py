"""PSC003 ``default-and-default-factory``: `Field()` is given both `default` and `default_factory`.

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.field import is_ellipsis
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext


class DefaultAndFactory(BaseRule):
    code = "PSC003"
    name = "default-and-default-factory"
    severity = "error"
    summary = "`Field()` is given both `default` and `default_factory`."
    bad = """
from pydantic import BaseModel, Field

class Batch(BaseModel):
    ids: list[int] = Field(default=[], default_factory=list)
"""
    good = """
from pydantic import BaseModel, Field

class Batch(BaseModel):
    ids: list[int] = Field(default_factory=list)
"""
    rationale = """Pydantic raises `TypeError: cannot specify both default and default_factory` when the
class is created: the module cannot even be imported. (`Field(..., default_factory=f)` is accepted
— `...` means "no default" — and is not flagged.)"""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            if spec.factory is not None and spec.default is not None and not is_ellipsis(spec.default):
                yield self.diag(
                    model,
                    spec.field_call or spec.node,
                    f"'{spec.name}' has both a default and a default_factory; Pydantic raises "
                    f"TypeError when the class is created",
                )
