"""PSC023 ``v1-moved-name``: An import of a name Pydantic v2 moved or removed (`BaseSettings`,
`pydantic.generics.GenericModel`, `ConstrainedStr`, ...), or a model subclassing `GenericModel`.

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo, ModuleInfo
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.rules.pydantic_api import (
    DEPRECATED_MOVED_IN_V2,
    MOVED_IN_V2,
    MOVED_TO_PYDANTIC_EXTRA_TYPES,
    MOVED_TO_PYDANTIC_SETTINGS,
    REDIRECT_TO_V1,
    REMOVED_IN_V2,
)

_ALL = {
    *MOVED_IN_V2,
    *DEPRECATED_MOVED_IN_V2,
    *REDIRECT_TO_V1,
    *REMOVED_IN_V2,
    *MOVED_TO_PYDANTIC_SETTINGS,
    *MOVED_TO_PYDANTIC_EXTRA_TYPES,
}
_NAMES = sorted({k.partition(":")[2] for k in _ALL})
# ``pydantic.BaseSettings`` written out after ``import pydantic``: a text test first, so the syntax
# tree is walked only in the few files that spell one.
_ATTRIBUTE_HINT = re.compile(r"\bpydantic(?:\.\w+)*\.(?:" + "|".join(_NAMES) + r")\b")
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def verdict(key: str) -> tuple[str, str] | None:
    """(message tail, severity) for ``module:name`` if Pydantic v2 moved or removed it."""
    if key in MOVED_TO_PYDANTIC_SETTINGS:
        tail = "moved to the pydantic-settings package (PydanticImportError in v2): import it from there"
        return tail, "error"
    if key in MOVED_TO_PYDANTIC_EXTRA_TYPES:
        if MOVED_TO_PYDANTIC_EXTRA_TYPES[key] == "refused":
            return (
                "moved to the pydantic-extra-types package (ImportError in v2): import it from there",
                "error",
            )
        return (
            "is deprecated in Pydantic v2 (a warning on use): import it from pydantic_extra_types",
            "warning",
        )
    if key in REMOVED_IN_V2:
        return "was removed in Pydantic v2 (PydanticImportError)", "error"
    if key in MOVED_IN_V2:
        return f"has moved in Pydantic v2 (imported with a warning): use {MOVED_IN_V2[key]}", "warning"
    if key in DEPRECATED_MOVED_IN_V2:
        new = DEPRECATED_MOVED_IN_V2[key]
        return f"is Pydantic v1 API, kept in v2 only as {new} (deprecated)", "warning"
    if key in REDIRECT_TO_V1:
        return f"was removed in Pydantic v2; it now imports the v1 copy {REDIRECT_TO_V1[key]}", "warning"
    return None


class V1MovedName(BaseRule):
    code = "PSC023"
    name = "v1-moved-name"
    severity = "error"
    group = "migration"
    summary = (
        "An import of a name Pydantic v2 moved or removed (`BaseSettings`, `GenericModel`, "
        "`ConstrainedStr`, ...), or a model subclassing `GenericModel`; "
        "the ones v2 still imports are warnings."
    )
    bad = """
from pydantic import BaseSettings

class Settings(BaseSettings):
    db_url: str = "sqlite://"
"""
    good = """
from pydantic_settings import BaseSettings

class Settings(BaseSettings):
    db_url: str = "sqlite://"
"""
    rationale = """Pydantic v2 keeps v1's import paths in a table (`pydantic._migration`), and this rule
reads the same table: a *removed* name (`ConstrainedStr`, `pydantic.utils.deep_update`, ...) and
`BaseSettings` (moved to the pydantic-settings package) raise `PydanticImportError` on import — an
error, as does `from pydantic import Color` (`Color` and the payment-card types moved to pydantic-extra-
types; `pydantic.color.Color` still imports, deprecated on use); a *moved* one
(`pydantic.generics.GenericModel`, `pydantic.error_wrappers.ValidationError`) is imported from its new
place with a deprecation warning, and a few `pydantic.utils` helpers now import pydantic's frozen v1
copy. `GenericModel` is also reported where a model subclasses it: v2 generic models are `BaseModel`
subclasses with `Generic[T]`. Imports guarded by `try: ... except ImportError:` are the compatibility
idiom and are not reported."""

    def check_module(self, module: ModuleInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        if "pydantic" not in module.source:
            return
        for node, guarded in _imports(module.tree.body, False):
            if guarded:
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level or not node.module:
                    continue
                for alias in node.names:
                    yield from self._report(module, node, f"{node.module}:{alias.name}")
        if _ATTRIBUTE_HINT.search(module.source):
            r = module.resolver
            for node in ast.walk(module.tree):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                    q = r.qualname(node)
                    if q and q.startswith("pydantic.") and not q.startswith("pydantic.v1."):
                        mod, _, name = q.rpartition(".")
                        yield from self._report(module, node, f"{mod}:{name}")

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        r = model.module.resolver
        for b in model.base_nodes:
            node = b.value if isinstance(b, ast.Subscript) else b
            if r.is_pydantic(node, "GenericModel"):
                yield self.diag(
                    model,
                    b,
                    f"{model.name} subclasses GenericModel, Pydantic v1 API (a deprecated alias of "
                    f"BaseModel in v2); subclass BaseModel and Generic[...]",
                )

    def _report(self, module: ModuleInfo, node: ast.AST, key: str) -> Iterator[Diagnostic]:
        found = verdict(key)
        if found is not None:
            tail, severity = found
            yield self.diag(module, node, f"{key.replace(':', '.')} {tail}", severity=severity)


def _imports(stmts: list[ast.stmt], guarded: bool) -> Iterator[tuple[ast.stmt, bool]]:
    """Every import statement in ``stmts`` (at any depth), with whether a ``try`` that catches
    ImportError encloses it."""
    for s in stmts:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            yield s, guarded
        elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            catches = any(_catches_import_error(h.type) for h in s.handlers)  # type: ignore[attr-defined]
            yield from _imports(s.body, guarded or catches)  # type: ignore[attr-defined]
            for h in s.handlers:  # type: ignore[attr-defined]
                yield from _imports(h.body, guarded)
            yield from _imports(s.orelse + s.finalbody, guarded)  # type: ignore[attr-defined]
        else:
            for name in ("body", "orelse", "finalbody"):
                inner = getattr(s, name, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    yield from _imports(inner, guarded)
            if isinstance(s, ast.Match):
                for case in s.cases:
                    yield from _imports(case.body, guarded)


def _catches_import_error(t: ast.expr | None) -> bool:
    if t is None:
        return True
    if isinstance(t, ast.Tuple):
        return any(_catches_import_error(e) for e in t.elts)
    name = t.attr if isinstance(t, ast.Attribute) else t.id if isinstance(t, ast.Name) else ""
    return name in _IMPORT_ERRORS
