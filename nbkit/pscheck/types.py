"""A small static model of type annotations, built from ``ast`` only.

pscheck never imports the checked code, so it cannot ask ``typing.get_type_hints``. Instead it
normalises the spellings a Pydantic model can use (``Optional[T]``, ``T | None``, ``Union``,
``typing``/``typing_extensions``/``collections.abc`` names, ``Annotated``, string forward
references, module-level aliases) into a :class:`TypeRef` tree, and answers the few questions the
rules need ("does this literal default belong to this type?") with ``True``/``False``/``None`` —
``None`` meaning *cannot tell statically*, which rules treat as "no finding" (no guessing).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
        for name in (
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
BUILTIN_TYPES = {
    "str",
    "int",
    "float",
    "bool",
    "bytes",
    "bytearray",
    "complex",
    "list",
    "dict",
    "set",
    "frozenset",
    "tuple",
    "type",
    "object",
}
# Types whose values can never be ``None`` and are known well enough to say so.
NON_NULL_OPAQUE = {"datetime", "date", "time", "timedelta", "Decimal", "UUID", "Path", "deque"}
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


@dataclass(frozen=True)
class TypeRef:
    """One node of a normalised annotation.

    ``name`` is canonical: a builtin (``"str"``), a typing construct (``"Union"``, ``"Literal"``,
    ``"Annotated"``), ``"None"``, ``"Any"``, one of the known stdlib types, ``"cls:<name>"`` for any
    other class, or ``"?"`` when the annotation could not be understood. ``values`` holds the
    options of a ``Literal``; ``constraints`` those carried by ``conint(...)``-style types and
    ``Annotated`` metadata that pscheck understands.
    """

    name: str
    args: tuple[TypeRef, ...] = ()
    values: tuple[Any, ...] = ()
    constraints: tuple[tuple[str, Any], ...] = ()
    src: str = ""
    # The annotation as written; its text is made only when a message needs it (unparsing every
    # annotation and each of its parts up front was a tenth of a run's time).
    node: ast.AST | None = field(default=None, compare=False, repr=False)

    def source(self) -> str:
        """The annotation as written (``""`` if unknown)."""
        return self.src or (_unparse(self.node) if self.node is not None else "")

    def __str__(self) -> str:
        return self.source() or fmt(self)

    @property
    def is_union(self) -> bool:
        return self.name == "Union"

    def strip_annotated(self) -> TypeRef:
        t = self
        while t.name == "Annotated" and t.args:
            t = t.args[0]
        return t

    def members(self) -> tuple[TypeRef, ...]:
        """Union members (with ``Annotated`` stripped); a non-union is its own single member."""
        t = self.strip_annotated()
        if t.name == "Union":
            out: list[TypeRef] = []
            for a in t.args:
                out.extend(a.members())
            return tuple(out)
        return (t,)

    @property
    def is_optional(self) -> bool:
        """``True`` for ``Optional[T]``, ``T | None``, ``Union[..., None]`` (not for bare None)."""
        ms = self.members()
        return len(ms) > 1 and any(m.name == "None" for m in ms)

    def without_none(self) -> TypeRef:
        ms = [m for m in self.members() if m.name != "None"]
        if len(ms) == 1:
            return ms[0]
        return TypeRef("Union", tuple(ms))

    def mentions(self, pred: Callable[[TypeRef], bool]) -> bool:
        return pred(self) or any(a.mentions(pred) for a in self.args)


def fmt(t: TypeRef) -> str:
    if t.name == "Literal":
        return "Literal[" + ", ".join(repr(v) for v in t.values) + "]"
    if t.name == "Union":
        return " | ".join(fmt(a) for a in t.args)
    base = t.name[4:] if t.name.startswith("cls:") else t.name
    if t.args:
        return f"{base}[{', '.join(fmt(a) for a in t.args)}]"
    return base


UNKNOWN = TypeRef("?")


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
                cons = tuple((kw.arg, _literal(kw.value)) for kw in node.keywords if kw.arg)
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
            if (
                name in BUILTIN_TYPES
                or name in NON_NULL_OPAQUE
                or name
                in (
                    "Any",
                    "None",
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
                    "Optional",
                    "Union",
                    "Literal",
                    "Annotated",
                    "ClassVar",
                    "Final",
                    "Enum",
                )
            ):
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
                    v = _literal(it)
                    if v is _NOT_LITERAL:  # e.g. Literal[Color.RED]: cannot compare statically
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


_NOT_LITERAL = object()


def _literal(node: ast.expr | None) -> Any:
    """The value of a literal expression, or ``_NOT_LITERAL``. Never evaluates code."""
    if node is None:
        return _NOT_LITERAL
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args and not node.keywords:
        empty = {
            "list": [],
            "dict": {},
            "set": set(),
            "tuple": (),
            "frozenset": frozenset(),
            "str": "",
            "bytes": b"",
            "int": 0,
            "float": 0.0,
            "bool": False,
        }
        if node.func.id in empty:
            return empty[node.func.id]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL


def literal_value(node: ast.expr | None) -> tuple[bool, Any]:
    """``(True, value)`` for a literal default, ``(False, None)`` otherwise."""
    v = _literal(node)
    return (v is not _NOT_LITERAL), (None if v is _NOT_LITERAL else v)


def _unparse(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # unparse of exotic trees should never break linting
        return "?"


def _no_model(name: str) -> bool:
    return False


def accepts(t: TypeRef, value: Any, is_model: Callable[[str], bool] = _no_model) -> bool | None:
    """Whether the literal ``value`` is an instance of ``t`` (what an unvalidated default must be).

    Returns ``None`` when static analysis cannot tell. Numeric tower as typing defines it: an
    ``int`` is acceptable where ``float``/``complex`` is annotated, a ``bool`` where ``int`` is.
    """
    n = t.name
    if n == "Annotated":
        return accepts(t.args[0], value, is_model) if t.args else None
    if n == "Union":
        rs = [accepts(a, value, is_model) for a in t.args]
        if any(r is True for r in rs):
            return True
        if rs and all(r is False for r in rs):
            return False
        return None
    if n in ("Any", "object", "?", "...", "ClassVar", "Final", "type", "Callable", "Hashable", "Enum"):
        return None if n not in ("Any", "object") else True
    if n == "None":
        return value is None
    if n == "Literal":
        return any(type(v) is type(value) and v == value for v in t.values)
    if n.startswith("cls:"):
        if value is None:
            return False if is_model(n[4:]) else None  # a model of the run is never None
        return None
    if n in NON_NULL_OPAQUE:
        return False if value is None else None
    scalar = {
        "str": (str,),
        "bytes": (bytes,),
        "bytearray": (bytearray, bytes),
        "bool": (bool,),
        "int": (int,),
        "float": (int, float),
        "complex": (int, float, complex),
    }
    if n in scalar:
        if n == "int" and isinstance(value, float):
            return False
        return isinstance(value, scalar[n]) and not (n == "bool" and not isinstance(value, bool))
    containers: dict[str, tuple[type, ...]] = {
        "list": (list,),
        "set": (set,),
        "frozenset": (frozenset, set),
        "tuple": (tuple,),
        "dict": (dict,),
        "deque": (list,),
        "Sequence": (list, tuple),
        "MutableSequence": (list,),
        "Mapping": (dict,),
        "MutableMapping": (dict,),
        "Iterable": (list, tuple, set, frozenset, dict, str, bytes),
        "Collection": (list, tuple, set, frozenset, dict, str, bytes),
        "AbstractSet": (set, frozenset),
        "MutableSet": (set,),
        "Iterator": (),
    }
    if n in containers:
        if not containers[n]:
            return None
        if not isinstance(value, containers[n]):
            return False
        return _elements_ok(t, value, is_model)
    return None


def _elements_ok(t: TypeRef, value: Any, is_model: Callable[[str], bool]) -> bool | None:
    if not t.args:
        return True
    if isinstance(value, dict):
        if len(t.args) != 2:
            return None
        checks = [accepts(t.args[0], k, is_model) for k in value] + [
            accepts(t.args[1], v, is_model) for v in value.values()
        ]
    elif t.name == "tuple":
        if len(t.args) == 2 and t.args[1].name == "...":
            checks = [accepts(t.args[0], v, is_model) for v in value]
        elif len(t.args) == 1 and t.args[0].name == "?" and t.args[0].source() == "()":
            checks = [len(value) == 0]
        else:
            if len(t.args) != len(value):
                return False
            checks = [accepts(a, v, is_model) for a, v in zip(t.args, value, strict=True)]
    else:
        checks = [accepts(t.args[0], v, is_model) for v in value]
    if any(c is False for c in checks):
        return False
    if all(c is True for c in checks):
        return True
    return None
