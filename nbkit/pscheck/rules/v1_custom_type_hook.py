"""PSC025 ``v1-custom-type-hook``: A custom type defines v1's `__get_validators__` / `__modify_schema__`.

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModuleInfo
from nbkit.pscheck.rule import BaseRule, RuleContext

# v1 hook -> (its v2 replacement, what v2 does with the old one, severity)
HOOKS = {
    "__get_validators__": (
        "__get_pydantic_core_schema__",
        "still called, with a deprecation warning (removed in v3)",
        "warning",
    ),
    "__modify_schema__": (
        "__get_pydantic_json_schema__",
        "refused: PydanticUserError when a model using the type is built",
        "error",
    ),
}


class V1CustomTypeHook(BaseRule):
    code = "PSC025"
    name = "v1-custom-type-hook"
    severity = "warning"
    group = "migration"
    summary = (
        "A custom type defines v1's `__get_validators__` / `__modify_schema__` "
        "(the latter is an error in v2)."
    )
    bad = """
class Slug(str):
    @classmethod
    def __get_validators__(cls):
        yield cls.validate

    @classmethod
    def validate(cls, v):
        return cls(v.lower())
"""
    good = """
from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

class Slug(str):
    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler: GetCoreSchemaHandler):
        return core_schema.no_info_after_validator_function(cls.validate, handler(str))

    @classmethod
    def validate(cls, v):
        return cls(v.lower())
"""
    rationale = """v1 built a custom type's validation from the validators `__get_validators__` yields
and let `__modify_schema__` edit its JSON schema. v2 builds both from `__get_pydantic_core_schema__`
and `__get_pydantic_json_schema__`: it still calls `__get_validators__`, with a deprecation warning,
but refuses `__modify_schema__` with `PydanticUserError` as soon as a model using the type is
defined. Any class defining them is reported (the hooks' names are Pydantic's own), at the method's
first decorator, where its definition starts — unless the class also defines the v2 hook, as a
library supporting both major versions does."""

    def check_module(self, module: ModuleInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        if "__get_validators__" not in module.source and "__modify_schema__" not in module.source:
            return
        for cls in module.classes:
            for name, (new, fate, severity) in HOOKS.items():
                fn = cls.methods.get(name)
                if fn is None or new in cls.methods:  # both: the class supports v1 and v2 on purpose
                    continue
                decorators = getattr(fn, "decorator_list", [])
                yield self.diag(
                    module,
                    decorators[0] if decorators else fn,
                    f"{cls.name}.{name} is Pydantic v1's custom-type hook; v2 has it {fate}: implement {new}",
                    severity=severity,
                )
