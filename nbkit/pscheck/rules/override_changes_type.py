"""PSC012 ``override-changes-type``: A subclass redeclares a parent's field with a type that is not a
subtype of the parent's.

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo, ModuleInfo
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.rules.fields import is_literal_type
from nbkit.pscheck.types import NON_NULL_OPAQUE, TypeRef, accepts, fmt


class OverrideChangesType(BaseRule):
    code = "PSC012"
    name = "override-changes-type"
    severity = "warning"
    summary = "A subclass redeclares a parent's field with a type that is not a subtype of the parent's."
    bad = """
from pydantic import BaseModel

class Base(BaseModel):
    seed: int = 0

class Child(Base):
    seed: str = "0"
"""
    good = """
from typing import Literal
from pydantic import BaseModel

class Animal(BaseModel):
    kind: str

class Cat(Animal):
    kind: Literal["cat"] = "cat"     # narrowing to a Literal: the discriminated-union idiom
"""
    rationale = """Pydantic lets a subclass replace a field's annotation wholesale, so a `Child` is no
longer a valid `Base` (Liskov): code typed against `Base` reads a `str` where it expects an `int`,
and a validator on the parent sees values of another type. Narrowing (a `Literal` of the parent's
type, `bool` for `int`, dropping `None` from an `Optional`, a subclass model) is the documented
discriminated-union pattern and is not flagged, and so is a subclass replacing a `Literal` tag with
its own `Literal` (`type: Literal["ai"]` -> `Literal["ai_chunk"]`: each class of a tagged hierarchy
carries its own tag). Only parents in the same run are compared."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for name, spec in model.fields.items():
            found = model.inherited_field(name)
            if found is None:
                continue
            parent, pspec = found
            if is_literal_type(spec.type) and is_literal_type(pspec.type):
                continue  # a subclass re-tagging its discriminator (``type: Literal["chunk"]``)
            if _subtype(spec.type, pspec.type, ctx, model.module, parent.module) is False:
                yield self.diag(
                    model,
                    spec.node,
                    f"'{name}: {spec.type}' changes the type of {parent.name}.{name} "
                    f"({pspec.type}); {model.name} instances are no longer "
                    f"valid {parent.name} instances",
                )


def _subtype(
    child: TypeRef, parent: TypeRef, ctx: RuleContext, cmod: ModuleInfo, pmod: ModuleInfo
) -> bool | None:
    c, p = child.strip_annotated(), parent.strip_annotated()
    if fmt(c) == fmt(p) or p.name in ("Any", "object") or c.name == "Any":
        return True
    if "?" in (c.name, p.name) or c.mentions(lambda t: t.name == "?") or p.mentions(lambda t: t.name == "?"):
        return None
    if c.name == "Union":
        rs = [_subtype(m, p, ctx, cmod, pmod) for m in c.members()]
        return False if any(r is False for r in rs) else (True if all(rs) else None)
    if p.name == "Union":
        rs = [_subtype(c, m, ctx, cmod, pmod) for m in p.members()]
        return True if any(r is True for r in rs) else (False if all(r is False for r in rs) else None)
    if c.name == "Literal":
        rs = [accepts(p, v, lambda q: ctx.model_for(q, pmod) is not None) for v in c.values]
        return False if any(r is False for r in rs) else (True if all(rs) else None)
    if p.name == "Literal":
        return False
    tower = ["bool", "int", "float", "complex"]
    if c.name in tower and p.name in tower:
        return tower.index(c.name) <= tower.index(p.name)
    if c.name.startswith("cls:") or p.name.startswith("cls:"):
        if c.name.startswith("cls:") and p.name.startswith("cls:"):
            cm, pm = ctx.model_for(c.name[4:], cmod), ctx.model_for(p.name[4:], pmod)
            if cm is not None and pm is not None:
                return pm in cm.mro()
        return None
    if c.name == p.name:
        if not c.args or not p.args or len(c.args) != len(p.args):
            return True
        rs = [_subtype(a, b, ctx, cmod, pmod) for a, b in zip(c.args, p.args, strict=True)]
        return False if any(r is False for r in rs) else (True if all(rs) else None)
    known = {
        "str",
        "int",
        "float",
        "bool",
        "bytes",
        "list",
        "dict",
        "set",
        "tuple",
        "frozenset",
        "None",
        *NON_NULL_OPAQUE,
    }
    if c.name in known and p.name in known:
        return False
    return None
