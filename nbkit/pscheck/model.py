"""Static descriptions of a run's classes and files, read from ``ast`` (no import, no execution).

:class:`ModelInfo` is one class: its fields, config and validators and, once
:func:`~nbkit.pscheck.hierarchy.resolve_models` has decided it is a Pydantic model and linked it, its
in-run parents and MRO; :class:`HierarchyIndex` tells, for the whole run, which models define a field,
config key or method. :class:`ModuleInfo` is one parsed file. :mod:`nbkit.pscheck.reader` builds
them; rules (and plugins) read them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from nbkit.pscheck.field import FieldSpec, ValidatorSpec, is_ellipsis
from nbkit.pscheck.literals import literal_value
from nbkit.pscheck.resolver import Resolver

# FieldSpec, ValidatorSpec and is_ellipsis are re-exported: plugins reach every model type from here.
__all__ = [
    "FieldSpec",
    "HierarchyIndex",
    "ModelInfo",
    "ModuleInfo",
    "ValidatorSpec",
    "is_ellipsis",
    "linearise",
]


@dataclass(eq=False, repr=False)  # identity semantics: models are compared with `is`/`in`
class ModelInfo:
    """A class of the run; ``is_model`` once :func:`resolve_models` has decided it is one."""

    name: str
    node: ast.ClassDef
    module: ModuleInfo
    base_nodes: list[ast.expr]
    fields: dict[str, FieldSpec] = field(default_factory=dict)
    all_field_specs: list[FieldSpec] = field(default_factory=list)  # duplicates kept, in order
    private_attrs: dict[str, ast.AST] = field(default_factory=dict)
    class_vars: dict[str, ast.AST] = field(default_factory=dict)
    non_annotated: list[tuple[str, ast.Assign | ast.AugAssign]] = field(default_factory=list)
    methods: dict[str, ast.AST] = field(default_factory=dict)
    validators: list[ValidatorSpec] = field(default_factory=list)
    config_node: ast.AST | None = None  # ``model_config = ...`` statement
    config: dict[str, ast.expr] = field(default_factory=dict)
    config_source: str = ""  # "ConfigDict" (pydantic's), "dict" (a literal) or the callable's qualname
    config_class: ast.ClassDef | None = None  # v1 ``class Config:``
    is_model: bool = False
    is_settings: bool = False
    is_v1: bool = False
    parents: list[ModelInfo] = field(default_factory=list)
    unresolved_bases: list[str] = field(default_factory=list)  # bases pscheck could not see
    too_deep: bool = False  # more than MAX_ANCESTORS classes above it: not checked (see resolve_models)
    _mro: tuple[ModelInfo, ...] | None = field(default=None, init=False)
    _complete: bool | None = field(default=None, init=False)
    _owners: HierarchyIndex | None = field(default=None, init=False)

    def __repr__(self) -> str:  # the dataclass repr would print the whole hierarchy, recursively
        return f"<ModelInfo {self.name} at {self.path}:{self.node.lineno}>"

    @property
    def path(self) -> str:
        return self.module.path

    def mro(self) -> tuple[ModelInfo, ...]:
        """This model, then its in-run parents, depth first, each once (computed once per model).

        Iterative, so any depth is fine, and memoised: rules ask about ancestors many times per
        model, and recomputing this per question made a run cubic in the inheritance depth.
        :func:`resolve_models` fills it parents first, so a model with one parent reuses that
        parent's tuple (a chain costs what Python's own ``__mro__`` costs: one tuple per class).
        """
        if self._mro is None:
            self._mro = linearise(self)
        return self._mro

    def nearest(self, kind: str, name: str, *, inherited: bool = False) -> ModelInfo | None:
        """The first class in :meth:`mro` whose ``kind`` (``"fields"``, ``"config"`` or
        ``"methods"``) has ``name`` — skipping this class itself when ``inherited``.

        The run's :class:`HierarchyIndex` lists the few classes that define ``name`` at all, so the
        usual answer costs a lookup and a C-speed search of the MRO tuple, not a walk over every
        ancestor (which made deep hierarchies quadratic per rule).
        """
        mro = self.mro()
        start = 1 if inherited else 0
        owners = self._owners.owners(kind, name) if self._owners is not None else None
        if owners is not None and len(owners) <= 16:
            best: int | None = None
            for o in owners:
                if o is self and start:
                    continue
                try:
                    i = mro.index(o, start)
                except ValueError:
                    continue
                best = i if best is None or i < best else best
            return None if best is None else mro[best]
        return next((m for m in mro[start:] if name in getattr(m, kind)), None)

    def inherited_field(self, name: str) -> tuple[ModelInfo, FieldSpec] | None:
        """The nearest in-run parent defining field ``name``, with its spec (``None`` if none)."""
        owner = self.nearest("fields", name, inherited=True)
        return None if owner is None else (owner, owner.fields[name])

    def inherited_fields(self) -> dict[str, tuple[ModelInfo, FieldSpec]]:
        """Fields of the in-run parents (nearest definition wins), excluding this class's own.

        Linear in the size of the hierarchy; rules asking about one name use :meth:`inherited_field`."""
        out: dict[str, tuple[ModelInfo, FieldSpec]] = {}
        for m in self.mro()[1:]:
            for name, spec in m.fields.items():
                out.setdefault(name, (m, spec))
        return out

    @property
    def hierarchy_complete(self) -> bool:
        """Whether every ancestor is either pydantic's own base or a class pscheck has read."""
        if self._complete is None:
            self._complete = all(not m.unresolved_bases for m in self.mro())
        return self._complete

    def config_literal(self, key: str) -> tuple[bool, Any]:
        m = self.nearest("config", key)
        return literal_value(m.config[key]) if m is not None else (False, None)


def linearise(model: ModelInfo) -> tuple[ModelInfo, ...]:
    """Pre-order depth-first walk of ``model`` and its parents, each once, without recursion.

    Same order as the recursive walk it replaces: a node, then each parent's subtree in turn. A
    parent whose linearisation is already known is spliced in whole (its ancestors not yet seen,
    in its order — the same nodes the walk would reach through it, since the graph is acyclic:
    :func:`resolve_models` cuts cycles); with one parent that is a plain tuple concatenation,
    which keeps a long chain linear per class.
    """
    if len(model.parents) == 1 and model.parents[0]._mro is not None:
        return (model, *model.parents[0]._mro)
    seen: set[int] = {id(model)}
    out: list[ModelInfo] = [model]
    stack = list(reversed(model.parents))
    while stack:
        m = stack.pop()
        if id(m) in seen:
            continue
        if m._mro is not None:
            for a in m._mro:
                if id(a) not in seen:
                    seen.add(id(a))
                    out.append(a)
            continue
        seen.add(id(m))
        out.append(m)
        stack.extend(reversed(m.parents))
    return tuple(out)


class HierarchyIndex:
    """Which models of a run define a given field, config key or method (one shared instance)."""

    KINDS = ("fields", "config", "methods")

    def __init__(self, models: list[ModelInfo]) -> None:
        self.models = models
        self._by_kind: dict[str, dict[str, list[ModelInfo]]] = {k: {} for k in self.KINDS}
        for m in models:
            for kind in self.KINDS:
                table = self._by_kind[kind]
                for name in getattr(m, kind):
                    table.setdefault(name, []).append(m)
        self._keys: dict[str, dict[str, list[tuple[ModelInfo, str]]]] = {}

    def owners(self, kind: str, name: str) -> list[ModelInfo]:
        return self._by_kind[kind].get(name, [])

    def key_owners(self, direction: str, key: str) -> list[tuple[ModelInfo, str]]:
        """``(model, field name)`` of every field read (``"input"``) or written (``"output"``) as ``key``."""
        if direction not in self._keys:
            table: dict[str, list[tuple[ModelInfo, str]]] = {}
            for m in self.models:
                for name, spec in m.fields.items():
                    for k, _ in spec.keys(direction):
                        table.setdefault(k, []).append((m, name))
            self._keys[direction] = table
        return self._keys[direction].get(key, [])


@dataclass
class ModuleInfo:
    path: str
    tree: ast.Module
    source: str
    resolver: Resolver
    classes: list[ModelInfo] = field(default_factory=list)
    imports_pydantic_v1: bool = False
    # Code only Pydantic v1 runs (compatibility branches): findings there are dropped (compat.py).
    v1_regions: list[tuple[int, int, int, int]] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        return self.source.splitlines()
