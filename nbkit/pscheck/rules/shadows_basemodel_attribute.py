"""PSC010 ``shadows-basemodel-attribute``: A field is named like a `BaseModel` method/attribute (`json`,
`dict`, `copy`, `schema`, ...).

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.rules.pydantic_api import (
    BASEMODEL_ATTRS,
)


class ShadowsBaseModelAttribute(BaseRule):
    code = "PSC010"
    name = "shadows-basemodel-attribute"
    severity = "warning"
    summary = "A field is named like a `BaseModel` method/attribute (`json`, `dict`, `copy`, `schema`, ...)."
    bad = """
from pydantic import BaseModel

class Payload(BaseModel):
    json: str
"""
    good = """
from pydantic import BaseModel, Field

class Payload(BaseModel):
    json_: str = Field(alias="json")
"""
    rationale = """Pydantic warns `Field name "json" shadows an attribute in parent "BaseModel"` and the
instance attribute hides the (deprecated) method. Warning: works, but any code calling
`payload.json()` breaks. Names under the protected namespaces are PSC011."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            if spec.name in BASEMODEL_ATTRS and not spec.name.startswith("model_"):
                yield self.diag(
                    model,
                    spec.node,
                    f"field '{spec.name}' shadows BaseModel.{spec.name}; "
                    f"rename it and use alias={spec.name!r}",
                )
