"""PSC016 ``unknown-config-key``: A `model_config` key that is not a Pydantic v2 setting (typo or
invented).

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.rules.messages import suggest
from nbkit.pscheck.rules.pydantic_api import (
    CONFIG_KEYS,
    V1_REMOVED_KEYS,
    V1_RENAMED_KEYS,
)


class UnknownConfigKey(BaseRule):
    code = "PSC016"
    name = "unknown-config-key"
    severity = "error"
    summary = "A `model_config` key that is not a Pydantic v2 setting (typo or invented)."
    bad = """
from pydantic import BaseModel, ConfigDict

class Sample(BaseModel):
    model_config = ConfigDict(coerce_numbers=True)
    age: int
"""
    good = """
from pydantic import BaseModel, ConfigDict

class Sample(BaseModel):
    model_config = ConfigDict(coerce_numbers_to_str=True)
    age: str
"""
    rationale = """Unknown keys are silently ignored (measured on 2.13: no error, no warning), so the
intended behaviour never happens. The field notes themselves recommend `coerce_numbers=True`, which is not a
Pydantic setting (the real key is `coerce_numbers_to_str`, and it does the opposite of what the
field notes want). Only `ConfigDict(...)` and dict literals are checked, and not on `pydantic-settings`
models, whose `SettingsConfigDict` has keys of its own."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        if model.is_settings or model.config_source not in ("ConfigDict", "dict"):
            return  # SettingsConfigDict(...) and other config builders have keys of their own
        for key, node in model.config.items():
            if key not in CONFIG_KEYS and key not in V1_RENAMED_KEYS and key not in V1_REMOVED_KEYS:
                yield self.diag(
                    model,
                    node,
                    f"model_config key '{key}' is not a Pydantic v2 setting and is "
                    f"silently ignored{suggest(key, CONFIG_KEYS)}",
                )
