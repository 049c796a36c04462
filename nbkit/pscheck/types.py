"""A small static model of type annotations: :class:`TypeRef`, built from ``ast`` only.

:class:`~nbkit.pscheck.resolver.Resolver` reads annotations into :class:`TypeRef` trees; this
module answers the few questions the rules ask of them ("does this literal default belong to this
type?", :func:`accepts`) with ``True``/``False``/``None`` — ``None`` meaning *cannot tell
statically*, which rules treat as "no finding" (no guessing).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
