"""PSC024 ``v1-custom-root``: A v1 custom root type (`__root__: T`) in a model.

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext


class V1CustomRoot(BaseRule):
    code = "PSC024"
    name = "v1-custom-root"
    severity = "error"
    group = "migration"
    summary = "A v1 custom root type (`__root__: T`) in a model."
    bad = """
from typing import List
from pydantic import BaseModel

class Tags(BaseModel):
    __root__: List[str]
"""
    good = """
from typing import List
from pydantic import RootModel

class Tags(RootModel[List[str]]):
    pass
"""
    rationale = """v1 validated a model with a `__root__` field as that one value; v2 raises
`PydanticUserError` at class creation ("To define root models, use `pydantic.RootModel` rather than
a field called '__root__'"). `RootModel[T]` is the v2 form; its value is `.root`."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        node = model.private_attrs.get("__root__")
        if node is not None:
            yield self.diag(
                model,
                node,
                f"'__root__' in {model.name} is a Pydantic v1 custom root type; v2 refuses it at class "
                f"creation: subclass RootModel[T] and read .root",
            )
