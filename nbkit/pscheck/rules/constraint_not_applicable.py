"""PSC006 ``constraint-not-applicable``: A constraint is used on a type it does not apply to (e.g.
`max_length` on `int`).

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

from collections.abc import Iterator

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModelInfo
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.types import fmt

_NUMERIC_ORDERED = {"int", "float", "bool", "Decimal", "date", "datetime", "time", "timedelta"}
_LENGTH_TYPES = {
    "str",
    "bytes",
    "bytearray",
    "list",
    "tuple",
    "set",
    "frozenset",
    "dict",
    "deque",
    "Sequence",
    "MutableSequence",
    "Mapping",
    "MutableMapping",
    "AbstractSet",
    "MutableSet",
    "Collection",
}
# constraint -> (types it applies to, types known to reject it). Other types: cannot tell, no finding.
CONSTRAINT_TYPES: dict[str, tuple[set[str], set[str]]] = {
    "gt": (_NUMERIC_ORDERED, _LENGTH_TYPES | {"None", "UUID", "Path"}),
    "ge": (_NUMERIC_ORDERED, _LENGTH_TYPES | {"None", "UUID", "Path"}),
    "lt": (_NUMERIC_ORDERED, _LENGTH_TYPES | {"None", "UUID", "Path"}),
    "le": (_NUMERIC_ORDERED, _LENGTH_TYPES | {"None", "UUID", "Path"}),
    "multiple_of": ({"int", "float", "Decimal"}, _LENGTH_TYPES | {"date", "datetime", "time"}),
    "min_length": (
        _LENGTH_TYPES,
        {"int", "float", "bool", "Decimal", "date", "datetime", "time", "timedelta"},
    ),
    "max_length": (
        _LENGTH_TYPES,
        {"int", "float", "bool", "Decimal", "date", "datetime", "time", "timedelta"},
    ),
    "pattern": (
        {"str", "bytes"},
        {
            "int",
            "float",
            "bool",
            "Decimal",
            "list",
            "tuple",
            "set",
            "frozenset",
            "dict",
            "date",
            "datetime",
            "time",
            "timedelta",
        },
    ),
    "max_digits": ({"Decimal"}, {"int", "float", "str", "bytes", "list", "tuple", "set", "dict"}),
    "decimal_places": ({"Decimal"}, {"int", "float", "str", "bytes", "list", "tuple", "set", "dict"}),
    "allow_inf_nan": ({"float", "Decimal", "int"}, {"str", "bytes", "list", "tuple", "set", "dict"}),
}


class ConstraintNotApplicable(BaseRule):
    code = "PSC006"
    name = "constraint-not-applicable"
    severity = "error"
    summary = "A constraint is used on a type it does not apply to (e.g. `max_length` on `int`)."
    bad = """
from pydantic import BaseModel, Field

class Item(BaseModel):
    qty: int = Field(max_length=3)
"""
    good = """
from pydantic import BaseModel, Field

class Item(BaseModel):
    qty: int = Field(le=999)
"""
    rationale = """Pydantic v2 creates the class without complaint and raises `TypeError: Unable to apply
constraint 'max_length' to supplied value ...` the first time a value is validated — in production,
not at import. Applies to `Optional[T]` through `T`, and to every member of a `Union` (Pydantic
applies the constraint to each). Types pscheck does not know are not judged."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            base = spec.type.strip_annotated()
            members = (
                [m for m in base.members() if m.name != "None"] if base.is_optional else list(base.members())
            )
            for key, node in spec.constraint_nodes.items():
                if key not in CONSTRAINT_TYPES:
                    continue
                _, rejects = CONSTRAINT_TYPES[key]
                bad = [m for m in members if m.name in rejects]
                if bad:
                    yield self.diag(
                        model,
                        node,
                        f"'{key}' does not apply to {fmt(bad[0])} (field '{spec.name}'); "
                        f"Pydantic raises TypeError when a value is first validated",
                    )
