"""Resolving names in one module, and reading its annotations into :class:`~nbkit.pscheck.types.TypeRef`.

pscheck never imports the checked code, so it cannot ask ``typing.get_type_hints``. A
:class:`Resolver` knows one module's imports, the classes it defines and its module-level type
aliases; it says what a name refers to (``typing.Optional`` for ``t.Optional`` after ``import
typing as t``, whether a base is pydantic's ``BaseModel``) and normalises the spellings a Pydantic
model can use (``Optional[T]``, ``T | None``, ``Union``, ``typing``/``typing_extensions``/
``collections.abc`` names, ``Annotated``, string forward references, aliases, ``conint(...)``) into
one :class:`~nbkit.pscheck.types.TypeRef` tree.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from nbkit.pscheck.literals import NOT_LITERAL, literal
from nbkit.pscheck.types import BUILTIN_TYPES, NON_NULL_OPAQUE, UNKNOWN, TypeRef

# The abstract collection types a field may be annotated with: canonicalised under this short name from
# typing, typing_extensions and collections.abc, and understood by the parser as they are.
ABSTRACT_COLLECTIONS = (
    "Sequence",
    "MutableSequence",
    "Mapping",
    "MutableMapping",
    "Iterable",
    "Collection",
    "AbstractSet",
    "MutableSet",
    "Callable",
    "Iterator",
    "Hashable",
)
# Names the parser keeps as written (besides the builtins and the opaque non-null types).
KNOWN_TYPE_NAMES = frozenset(
    (
        "Any",
        "None",
        *ABSTRACT_COLLECTIONS,
        "Optional",
        "Union",
        "Literal",
        "Annotated",
        "ClassVar",
        "Final",
        "Enum",
    )
)

# Canonical names for qualified spellings. Everything a rule reasons about is in here; any other
# name stays an opaque class reference ("cls:<qualname>").
_CANONICAL = {
    **{
        f"{mod}.{name}": name
        for mod in ("typing", "typing_extensions")
        for name in (
            "Optional",
            "Union",
            "Literal",
            "Annotated",
            "Any",
            "ClassVar",
            "Final",
            "Required",
            "NotRequired",
            "TypeAlias",
        )
    },
    **{
        f"{mod}.{old}": new
        for mod in ("typing", "typing_extensions")
        for old, new in (
            ("List", "list"),
            ("Dict", "dict"),
            ("Set", "set"),
            ("FrozenSet", "frozenset"),
            ("Tuple", "tuple"),
            ("Type", "type"),
            ("DefaultDict", "dict"),
            ("OrderedDict", "dict"),
            ("Deque", "deque"),
        )
    },
    **{
        f"{mod}.{name}": name
        for mod in ("typing", "typing_extensions", "collections.abc")
        for name in ABSTRACT_COLLECTIONS
    },
    "collections.abc.Set": "AbstractSet",
    "collections.deque": "deque",
    "collections.OrderedDict": "dict",
    "collections.defaultdict": "dict",
    "datetime.datetime": "datetime",
    "datetime.date": "date",
    "datetime.time": "time",
    "datetime.timedelta": "timedelta",
    "decimal.Decimal": "Decimal",
    "uuid.UUID": "UUID",
    "pathlib.Path": "Path",
    "pathlib.PurePath": "Path",
    "enum.Enum": "Enum",
    "types.NoneType": "None",
    "builtins.NoneType": "None",
}
# pydantic's constrained-type functions: name -> underlying type.
CON_FUNCS = {
    "conint": "int",
    "confloat": "float",
    "condecimal": "Decimal",
    "constr": "str",
    "conbytes": "bytes",
    "conlist": "list",
    "conset": "set",
    "confrozenset": "frozenset",
    "condate": "date",
}
# pydantic's ready-made constrained aliases: name -> (type, constraints).
PYDANTIC_ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    "StrictStr": ("str", {}),
    "StrictInt": ("int", {}),
    "StrictFloat": ("float", {}),
    "StrictBool": ("bool", {}),
    "StrictBytes": ("bytes", {}),
    "PositiveInt": ("int", {"gt": 0}),
    "NegativeInt": ("int", {"lt": 0}),
    "NonNegativeInt": ("int", {"ge": 0}),
    "NonPositiveInt": ("int", {"le": 0}),
    "PositiveFloat": ("float", {"gt": 0}),
    "NegativeFloat": ("float", {"lt": 0}),
    "NonNegativeFloat": ("float", {"ge": 0}),
    "NonPositiveFloat": ("float", {"le": 0}),
    "FiniteFloat": ("float", {}),
}


@dataclass
class Resolver:
    """Resolves names in one module: imports, classes defined there, module-level type aliases."""

    imports: dict[str, str] = field(default_factory=dict)  # local name -> qualified name
    aliases: dict[str, ast.expr] = field(default_factory=dict)  # module-level ``X = Optional[int]``
    local_classes: set[str] = field(default_factory=set)
    module: str = ""

    def qualname(self, node: ast.expr) -> str | None:
        """``typing.Optional`` for ``t.Optional`` after ``import typing as t``; ``None`` if not a name."""
        if isinstance(node, ast.Name):
            return self.imports.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def canonical(self, node: ast.expr) -> str | None:
        q = self.qualname(node)
        if q is None:
            return None
        if q in _CANONICAL:
            return _CANONICAL[q]
        if q.startswith("builtins."):
            q = q[9:]
        return q

    def is_pydantic(self, node: ast.expr, *names: str) -> bool:
        """Whether ``node`` names ``pydantic.<one of names>`` (any submodule spelling)."""
        q = self.qualname(node)
        if not q:
            return False
        head, _, tail = q.rpartition(".")
        if not head:  # bare, never-imported name (snippets): trust the spelling unless defined here
            return (
                tail in names
                and isinstance(node, ast.Name)
                and node.id not in self.imports
                and node.id not in self.local_classes
            )
        return tail in names and (
            head == "pydantic" or head.startswith("pydantic.") and not head.startswith("pydantic.v1")
        )

    def parse(self, node: ast.expr | None, _depth: int = 0) -> TypeRef:
        try:
            return self._parse(node, _depth)
        except RecursionError:
            return UNKNOWN

    def _parse(self, node: ast.expr | None, depth: int) -> TypeRef:
        if node is None or depth > 40:
            return UNKNOWN
        if isinstance(node, ast.Constant):
            if node.value is None:
                return TypeRef("None", src="None")
            if isinstance(node.value, str):  # forward reference / quoted annotation
                try:
                    inner = ast.parse(node.value.strip(), mode="eval").body
                except (SyntaxError, ValueError):
                    return TypeRef("?", node=node)
                return self._parse(inner, depth + 1)
            if node.value is Ellipsis:
                return TypeRef("...", src="...")
            return TypeRef("?", node=node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return TypeRef(
                "Union", (self._parse(node.left, depth + 1), self._parse(node.right, depth + 1)), node=node
            )
        if isinstance(node, ast.Call):
            func = self.canonical(node.func) or ""
            short = func.rpartition(".")[2]
            if short in CON_FUNCS and (func.startswith("pydantic") or func == short):
                cons = tuple((kw.arg, literal(kw.value)) for kw in node.keywords if kw.arg)
                args = (
                    tuple(self._parse(a, depth + 1) for a in node.args[:1])
                    if short in ("conlist", "conset", "confrozenset")
                    else ()
                )
                return TypeRef(CON_FUNCS[short], args, constraints=cons, node=node)
            return TypeRef("?", node=node)
        if isinstance(node, (ast.Name, ast.Attribute)):
            if isinstance(node, ast.Name) and node.id in self.aliases and node.id not in self.imports:
                alias = self.aliases.pop(node.id)  # pop: guards against self-referential aliases
                try:
                    t = self._parse(alias, depth + 1)
                finally:
                    self.aliases[node.id] = alias
                return t
            name = self.canonical(node)
            if name is None:
                return TypeRef("?", node=node)
            short = name.rpartition(".")[2]
            if name in BUILTIN_TYPES or name in NON_NULL_OPAQUE or name in KNOWN_TYPE_NAMES:
                return TypeRef(name, node=node)
            if name.startswith("pydantic") and short in PYDANTIC_ALIASES:
                base, cons = PYDANTIC_ALIASES[short]
                return TypeRef(base, constraints=tuple(cons.items()), node=node)
            if name == "NoneType":
                return TypeRef("None", node=node)
            return TypeRef(f"cls:{name}", node=node)
        if isinstance(node, ast.Subscript):
            head = self._parse(node.value, depth + 1)
            sl = node.slice
            items = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
            if head.name == "Literal":
                values: list[Any] = []
                for it in items:
                    v = literal(it)
                    if v is NOT_LITERAL:  # e.g. Literal[Color.RED]: cannot compare statically
                        return TypeRef("?", node=node)
                    values.append(v)
                return TypeRef("Literal", values=tuple(values), node=node)
            if head.name == "Optional":
                return TypeRef("Union", (self._parse(items[0], depth + 1), TypeRef("None")), node=node)
            if head.name == "Annotated":
                return TypeRef("Annotated", (self._parse(items[0], depth + 1),), node=node)
            if head.name in ("ClassVar", "Final", "Required", "NotRequired"):
                inner = self._parse(items[0], depth + 1) if items else TypeRef("Any")
                return TypeRef(head.name, (inner,), node=node)
            args = tuple(self._parse(it, depth + 1) for it in items)
            return TypeRef(head.name, args, node=node)
        return TypeRef("?", node=node)
