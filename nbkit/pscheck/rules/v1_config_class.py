"""PSC014 ``v1-config-class``: A Pydantic v1 `class Config:` inside a v2 model.

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext


class V1ConfigClass(BaseRule):
    code = "PSC014"
    name = "v1-config-class"
    severity = "warning"
    also_in = ("migration",)
    summary = "A Pydantic v1 `class Config:` inside a v2 model."
    bad = """
from pydantic import BaseModel

class Item(BaseModel):
    name: str

    class Config:
        frozen = True
"""
    good = """
from pydantic import BaseModel, ConfigDict

class Item(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
"""
    rationale = """Class-based config is deprecated in v2 ("Support for class-based `config` is
deprecated, use ConfigDict instead ... to be removed in V3") and mixes badly with `model_config`
in subclasses. Warning: it still works today. Renamed/removed keys inside it are PSC015."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        if model.config_class is not None:
            extra = " (model_config is also set)" if model.config_node is not None else ""
            yield self.diag(
                model,
                model.config_class,
                f"class-based Config in {model.name} is deprecated in Pydantic v2{extra}; "
                f"use model_config = ConfigDict(...)",
            )
