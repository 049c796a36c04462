"""PSC009 ``duplicate-alias``: Two fields share one input or output name (alias, or an alias equal to
another field's name).

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.field import FieldSpec
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext


class DuplicateAlias(BaseRule):
    code = "PSC009"
    name = "duplicate-alias"
    severity = "error"
    summary = "Two fields share one input or output name (alias, or an alias equal to another field's name)."
    bad = """
from pydantic import BaseModel, Field

class Row(BaseModel):
    user_id: int = Field(alias="id")
    item_id: int = Field(alias="id")
"""
    good = """
from pydantic import BaseModel, Field

class Row(BaseModel):
    user_id: int = Field(alias="user")
    item_id: int = Field(alias="item")
"""
    rationale = """Pydantic accepts this silently: one input key fills *both* fields, and
`model_dump(by_alias=True)` emits the key once, dropping a value. Measured on 2.13:
`Row(id=1)` gives `user_id=1 item_id=1`; the dump is `{'id': 1}`. Skipped when an
`alias_generator` is configured (names are computed at runtime)."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        if model.nearest("config", "alias_generator") is not None:
            return
        fields = _fields_sharing_own_keys(model)
        own = set(model.fields)
        clashes: dict[tuple[str, str], list[tuple[str, str, ast.AST]]] = {}
        for direction in ("input", "output"):
            seen: dict[str, str] = {}
            for name, spec in fields.items():
                for key, node in spec.keys(direction):
                    other = seen.get(key)
                    if other is not None and other != name and (name in own or other in own):
                        where = node if name in own else model.fields[other].node
                        clashes.setdefault((name, other), []).append((direction, key, where))
                    seen.setdefault(key, name)
        for (name, other), hits in clashes.items():
            dirs = " and ".join(dict.fromkeys(d for d, _, _ in hits))
            yield self.diag(
                model,
                hits[0][2],
                f"{dirs} name {hits[0][1]!r} of field '{name}' is also used by field "
                f"'{other}'; one key fills/serialises both and a value is lost",
            )


def _fields_sharing_own_keys(model: ModelInfo) -> dict[str, FieldSpec]:
    """The model's own fields plus the inherited fields that share an input/output key with one of
    them, in the order of the full field list (inherited, nearest definition first; own fields
    overriding one keep its place; new own fields last).

    Only these can take part in a clash the model itself is responsible for; clashes between two
    inherited fields are reported on the parent. Restricting to them keeps a deep hierarchy from
    costing a walk over every inherited field per model.
    """
    mro = model.mro()
    index = model._owners
    inherited: dict[str, ModelInfo] = {}
    walked: dict[str, tuple[ModelInfo, FieldSpec]] | None = None
    for direction in ("input", "output"):
        own_keys = {k for spec in model.fields.values() for k, _ in spec.keys(direction)}
        holders = [index.key_owners(direction, k) for k in own_keys] if index is not None else None
        # Look the keys up in the run-wide index when few fields of the run share them (a deep
        # hierarchy); walk the ancestors' fields when many do (a shallow model whose field names
        # recur across a large run): whichever touches fewer fields.
        if holders is None or sum(map(len, holders)) > 8 * len(mro):
            walked = model.inherited_fields() if walked is None else walked
            for name, (owner, spec) in walked.items():
                if name not in model.fields and any(k in own_keys for k, _ in spec.keys(direction)):
                    inherited[name] = owner
            continue
        for owners in holders:
            for owner, name in owners:
                if owner is model or name in model.fields or name in inherited or owner not in mro:
                    continue
                if model.nearest("fields", name, inherited=True) is owner:  # not hidden by a nearer one
                    inherited[name] = owner

    def place(name: str) -> tuple[int, int]:
        owner = inherited.get(name)
        if owner is None:
            found = model.inherited_field(name)
            if found is None:
                return len(mro), list(model.fields).index(name)
            owner = found[0]
        return mro.index(owner), list(owner.fields).index(name)

    names = sorted([*inherited, *model.fields], key=place)
    return {n: model.fields[n] if n in model.fields else inherited[n].fields[n] for n in names}
