"""PSC007 ``literal-default-not-allowed``: The default of a `Literal[...]` field is not one of its options.

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.rules.fields import is_literal_type, validate_default_on
from nbkit.pscheck.rules.messages import short


class LiteralDefaultNotInOptions(BaseRule):
    code = "PSC007"
    name = "literal-default-not-allowed"
    severity = "error"
    summary = "The default of a `Literal[...]` field is not one of its options."
    bad = """
from typing import Literal
from pydantic import BaseModel

class Opt(BaseModel):
    mode: Literal["train", "eval"] = "test"
"""
    good = """
from typing import Literal
from pydantic import BaseModel

class Opt(BaseModel):
    mode: Literal["train", "eval"] = "eval"
"""
    rationale = """The unvalidated default escapes the closed set the `Literal` documents: `Opt().mode ==
"test"`, while `Opt(mode="test")` is rejected and the JSON Schema `enum` omits it. Comparison is by
type and value, as Pydantic's literal validator does (`Literal[1]` does not admit `True`)."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            if not is_literal_type(spec.type) or validate_default_on(model, spec):
                continue
            ok, value = spec.literal_default()
            if not ok:
                continue
            if value is None and spec.type.is_optional:
                continue
            options = [v for m in spec.type.members() if m.name == "Literal" for v in m.values]
            if not any(type(o) is type(value) and o == value for o in options):
                yield self.diag(
                    model,
                    spec.default or spec.node,
                    f"default {short(value)} of '{spec.name}' is not one of {short(options, 80)}",
                )
