"""Which classes of a run are Pydantic v2 models, and how they inherit from each other.

:func:`resolve_models` decides each class from its bases (pydantic's own, or project base classes found
in the run), links every model to its in-run parents, cuts inheritance cycles and fills each model's
MRO, and gives every model the run's :class:`~nbkit.pscheck.model.HierarchyIndex`.
"""

from __future__ import annotations

import ast

from nbkit.pscheck.class_index import ClassIndex
from nbkit.pscheck.model import HierarchyIndex, ModelInfo, ModuleInfo, linearise
from nbkit.pscheck.resolver import Resolver

# HierarchyIndex is re-exported: it lives with ModelInfo, whose lookups use it.
__all__ = ["MAX_ANCESTORS", "HierarchyIndex", "resolve_models"]

# Deeper hierarchies are reported as not checked: real ones are a few levels deep, and the MRO
# tuples of an N-class chain hold N²/2 entries (5,000 levels: 12.5 M, about 100 MB).
MAX_ANCESTORS = 5000
MODEL_ROOTS = {"BaseModel", "RootModel", "GenericModel"}
SETTINGS_ROOTS = {"BaseSettings"}
# Pydantic v1's BaseSettings (v2 moved it to pydantic-settings): a v1 settings class is a model being
# ported, and the migration rules must see its Config, validators and fields.
V1_SETTINGS = frozenset({"pydantic.BaseSettings", "pydantic.env_settings.BaseSettings"})


def resolve_models(modules: list[ModuleInfo], index: ClassIndex | None = None) -> list[ModelInfo]:
    """Mark which classes are Pydantic v2 models and link parents; returns the models."""
    index = index or ClassIndex(modules)
    classes = [c for m in modules for c in m.classes]
    bases_of: dict[int, list[tuple[ast.expr, ModelInfo | None, str]]] = {}
    for c in classes:
        rows = []
        for b in c.base_nodes:
            node = b.value if isinstance(b, ast.Subscript) else b
            q = c.module.resolver.qualname(node) or ""
            found = index.find(q, c.module) if q else None
            if found is None and q:
                q = index.origin(q, c.module)  # a pydantic base re-exported by a module of the run
            rows.append((b, found if found is not c else None, q))
        bases_of[id(c)] = rows
    # Decide each class from its bases; when one becomes a model (or v1), decide the classes that
    # derive from it again. A worklist rather than "repeat until nothing changes", which costs one
    # pass over every class per level when subclasses come before their bases in the files.
    children: dict[int, list[ModelInfo]] = {}
    for c in classes:
        for _, found, _ in bases_of[id(c)]:
            if found is not None:
                children.setdefault(id(found), []).append(c)
    pending = list(reversed(classes))
    while pending:
        c = pending.pop()
        if c.is_model or c.is_v1:
            continue
        _decide(c, bases_of[id(c)])
        if c.is_model or c.is_v1:
            pending.extend(reversed(children.get(id(c), ())))
    models = [c for c in classes if c.is_model]
    for c in models:
        for b, found, q in bases_of[id(c)]:
            node = b.value if isinstance(b, ast.Subscript) else b
            root = q.rpartition(".")[2]
            if found is not None and found.is_model:
                c.parents.append(found)
            elif (
                root in MODEL_ROOTS
                and (c.module.resolver.is_pydantic(node, *MODEL_ROOTS) or _from_pydantic(q))
            ) or _is_settings_root(root, q):
                continue
            elif c.module.resolver.canonical(node) in (
                "Generic",
                "typing.Generic",
                "typing_extensions.Generic",
                "ABC",
                "abc.ABC",
                "object",
            ):
                continue
            else:
                c.unresolved_bases.append(q or ast.unparse(b))
    _link_hierarchy(models)
    return models


def _is_settings_root(root: str, q: str) -> bool:
    return root in SETTINGS_ROOTS and (q.startswith("pydantic_settings") or q in V1_SETTINGS)


def _from_pydantic(q: str) -> bool:
    """``q`` (an origin-resolved qualified name) is a pydantic v2 member."""
    head = q.rpartition(".")[0]
    return (head == "pydantic" or head.startswith("pydantic.")) and not head.startswith("pydantic.v1")


def _decide(c: ModelInfo, bases: list[tuple[ast.expr, ModelInfo | None, str]]) -> None:
    """Mark ``c`` as a v2 model or a v1 class from its bases as known so far (first base that decides)."""
    r = c.module.resolver
    for b, found, q in bases:
        node = b.value if isinstance(b, ast.Subscript) else b
        root = q.rpartition(".")[2]
        if q.startswith("pydantic.v1") or (
            root in MODEL_ROOTS and c.module.imports_pydantic_v1 and "pydantic.v1" in r.imports.get(root, "")
        ):
            c.is_v1 = True
            return
        if root in MODEL_ROOTS and (r.is_pydantic(node, *MODEL_ROOTS) or _from_pydantic(q)):
            c.is_model = True
        elif _is_settings_root(root, q):
            c.is_model = c.is_settings = True
        elif found is not None and found.is_v1:
            c.is_v1 = True
            return
        elif found is not None and found.is_model:
            c.is_model = True
            c.is_settings = c.is_settings or found.is_settings
        if c.is_model:
            return
    if _uses_v1_validators(c) and any(found is None and _external(b, q, r) for b, found, q in bases):
        c.is_model = True  # its model base lives in a package outside the run (see _uses_v1_validators)


def _uses_v1_validators(c: ModelInfo) -> bool:
    """Whether ``c`` decorates a method with pydantic's own v1 ``@validator`` / ``@root_validator``.

    They act only inside a pydantic model, so a class using them whose bases come from a package
    outside the run (beanie's ``Document(LazyModel, ...)``, ``LazyModel`` being a model of the
    ``lazy_model`` package) is taken for a model instead of being skipped. Only the v1 decorators
    count: they are what a port must find, and v2-native code does not use them.
    """
    r = c.module.resolver
    for v in c.validators:
        if v.kind in ("validator", "root_validator"):
            target = v.decorator.func if isinstance(v.decorator, ast.Call) else v.decorator
            q = r.qualname(target) or ""
            if q.rpartition(".")[0].startswith("pydantic") and not q.startswith("pydantic.v1"):
                return True
    return False


def _external(base: ast.expr, q: str, r: Resolver) -> bool:
    """A base imported from a package outside the run (not typing's, not abc's, not a builtin)."""
    node = base.value if isinstance(base, ast.Subscript) else base
    head = q.partition(".")[0]
    if not q or "." not in q or head in ("typing", "typing_extensions", "abc", "collections", "builtins"):
        return False
    return r.canonical(node) not in ("Generic", "ABC", "object")


def _link_hierarchy(models: list[ModelInfo]) -> None:
    """Cut inheritance cycles, then fill each model's MRO, completeness and depth, parents first.

    A parent link that closes a cycle (``class A(B, BaseModel)`` with ``class B(A)``: Python cannot
    define these) is dropped and reported as an unresolved base, so rules needing the whole
    hierarchy stay silent and every walk may assume a DAG. Iterative depth-first search (no depth
    exhausts the stack); post-order, so each model's MRO reuses its parents'. A model with more than
    ``MAX_ANCESTORS`` classes above it is marked ``too_deep`` (and keeps no MRO tuple): the tuples
    of a chain grow with the square of its length, as Python's own ``__mro__`` does.
    """
    index = HierarchyIndex(models)
    state: dict[int, int] = {}  # 1 = on the current path, 2 = finished
    for root in models:
        if id(root) in state:
            continue
        state[id(root)] = 1
        stack: list[tuple[ModelInfo, int]] = [(root, 0)]
        while stack:
            m, i = stack[-1]
            if i == len(m.parents):
                state[id(m)] = 2
                stack.pop()
                _finish(m, index)
                continue
            p = m.parents[i]
            if state.get(id(p)) == 1:
                m.parents.pop(i)
                m.unresolved_bases.append(f"{p.name} (circular inheritance)")
                continue
            stack[-1] = (m, i + 1)
            if id(p) not in state:
                state[id(p)] = 1
                stack.append((p, 0))


def _finish(m: ModelInfo, index: HierarchyIndex) -> None:
    m._owners = index
    m._complete = not m.unresolved_bases and all(p._complete for p in m.parents)
    if any(p.too_deep for p in m.parents):
        m.too_deep = True
        return
    mro = linearise(m)
    if len(mro) > MAX_ANCESTORS + 1:
        m.too_deep = True
    else:
        m._mro = mro
