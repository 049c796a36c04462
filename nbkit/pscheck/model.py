"""Static descriptions of Pydantic models, read from a module's ``ast`` (no import, no execution).

:func:`describe_module` turns one parsed file into a :class:`ModuleInfo` with every class it
defines; :func:`resolve_models` then decides, across all files of one run, which classes are
Pydantic v2 models — directly (``BaseModel``, ``RootModel``, ``BaseSettings``) or through project
base classes found in the same run — and links each :class:`ModelInfo` to its parents.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from nbkit.pscheck.compat import v1_only_regions
from nbkit.pscheck.types import Resolver, TypeRef, literal_value

# Deeper hierarchies are reported as not checked: real ones are a few levels deep, and the MRO
# tuples of an N-class chain hold N²/2 entries (5,000 levels: 12.5 M, about 100 MB).
MAX_ANCESTORS = 5000
MODEL_ROOTS = {"BaseModel", "RootModel", "GenericModel"}
SETTINGS_ROOTS = {"BaseSettings"}
# Field(...) keyword arguments that are value constraints.
CONSTRAINT_KWARGS = ("gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length", "pattern",
                     "max_digits", "decimal_places", "allow_inf_nan", "strict")
# annotated_types classes pscheck understands inside ``Annotated[...]``: class name -> Field kwarg.
ANNOTATED_TYPES = {"Gt": "gt", "Ge": "ge", "Lt": "lt", "Le": "le", "MultipleOf": "multiple_of",
                   "MinLen": "min_length", "MaxLen": "max_length"}


@dataclass
class FieldSpec:
    """One annotated field of a model as written in the class body."""

    name: str
    node: ast.AnnAssign
    type: TypeRef
    annotation: ast.expr
    value: ast.expr | None  # right-hand side as written (``None`` when there is none)
    field_call: ast.Call | None = None  # ``= Field(...)``
    annotated_fields: list[ast.Call] = field(default_factory=list)  # ``Annotated[T, Field(...)]``
    kwargs: dict[str, ast.expr] = field(default_factory=dict)  # merged Field(...) keyword arguments
    default: ast.expr | None = None  # the default expression (not for factories)
    default_positional: bool = False
    factory: ast.expr | None = None
    constraints: dict[str, Any] = field(default_factory=dict)  # name -> literal value (or node)
    constraint_nodes: dict[str, ast.AST] = field(default_factory=dict)

    @property
    def line(self) -> int:
        return self.node.lineno

    @property
    def col(self) -> int:
        return self.node.col_offset

    @property
    def has_default(self) -> bool:
        """A default (other than the ``...`` "required" marker) or a default factory."""
        if self.factory is not None:
            return True
        return self.default is not None and not is_ellipsis(self.default)

    @property
    def explicitly_required(self) -> bool:
        """``= ...``, ``= Field(...)`` or ``Field(default=...)``: "required" said in so many words.

        ``Field(description="x")`` without a default is required too, but does not *say* so."""
        return self.default is not None and is_ellipsis(self.default)

    def literal_default(self) -> tuple[bool, Any]:
        if self.default is None or is_ellipsis(self.default):
            return False, None
        return literal_value(self.default)

    def kwarg_literal(self, name: str) -> tuple[bool, Any]:
        node = self.kwargs.get(name)
        return literal_value(node) if node is not None else (False, None)

    def keys(self, direction: str) -> tuple[tuple[str, ast.AST], ...]:
        """The names this field is read by (``"input"``) or written as (``"output"``), with the node
        that sets each: its aliases for that direction, else its own name. Computed once per field."""
        cache = self.__dict__.get("_keys")
        if cache is None:
            cache = self.__dict__["_keys"] = {}
        if direction not in cache:
            aliases = self.aliases()
            if direction == "input":
                keys = [(a, node) for kind, a, node in aliases if kind in ("alias", "validation_alias")]
            else:  # serialization_alias wins over alias
                keys = [(a, n) for k, a, n in aliases if k == "serialization_alias"] or [
                    (a, n) for k, a, n in aliases if k == "alias"][:1]
            cache[direction] = tuple(keys) or ((self.name, self.node),)
        return cache[direction]

    def aliases(self) -> list[tuple[str, str, ast.AST]]:
        """``(kind, alias string, node)`` for every literal alias of this field."""
        out = []
        for kind in ("alias", "validation_alias", "serialization_alias"):
            node = self.kwargs.get(kind)
            if node is None:
                continue
            ok, v = literal_value(node)
            if ok and isinstance(v, str):
                out.append((kind, v, node))
            elif isinstance(node, ast.Call):  # AliasChoices("a", "b") / AliasPath("a", 0)
                fname = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if fname == "AliasChoices":
                    for a in node.args:
                        ok, v = literal_value(a)
                        if ok and isinstance(v, str):
                            out.append((kind, v, a))
        return out


@dataclass
class ValidatorSpec:
    kind: str  # field_validator, validator, field_serializer, root_validator, model_validator
    func: ast.FunctionDef | ast.AsyncFunctionDef
    decorator: ast.expr
    fields: list[tuple[str, ast.AST]]
    check_fields: bool = True


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
            self._mro = _linearise(self)
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


def _linearise(model: ModelInfo) -> tuple[ModelInfo, ...]:
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


def is_ellipsis(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is Ellipsis


def _collect_imports(nodes: list[ast.AST], resolver: Resolver, module: ModuleInfo) -> None:
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    resolver.imports[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    resolver.imports.setdefault(top, top)
                if a.name == "pydantic.v1" or a.name.startswith("pydantic.v1."):
                    module.imports_pydantic_v1 = True
        elif isinstance(node, ast.ImportFrom):
            mod = ("." * node.level) + (node.module or "")
            for a in node.names:
                if a.name == "*":
                    continue
                resolver.imports[a.asname or a.name] = f"{mod}.{a.name}" if mod else a.name
            if node.module and (node.module == "pydantic.v1" or node.module.startswith("pydantic.v1.")):
                module.imports_pydantic_v1 = True
            if node.module == "pydantic" and any(a.name == "v1" for a in node.names):
                module.imports_pydantic_v1 = True


def _collect_aliases(tree: ast.Module, resolver: Resolver) -> None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            resolver.local_classes.add(node.name)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if _looks_like_type(node.value, resolver):
                resolver.aliases[node.targets[0].id] = node.value
        elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None
              and resolver.canonical(node.annotation) == "TypeAlias"):
            resolver.aliases[node.target.id] = node.value
        elif type(node).__name__ == "TypeAlias":  # ``type X = ...`` (3.12+)
            resolver.aliases[node.name.id] = node.value  # type: ignore[attr-defined]


def _looks_like_type(node: ast.expr, resolver: Resolver) -> bool:
    if isinstance(node, ast.Subscript):
        return resolver.canonical(node.value) in (
            "Optional", "Union", "Literal", "Annotated", "list", "dict", "set", "tuple", "frozenset")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return True
    return False


_STATEMENT_HOLDERS = (ast.stmt, ast.excepthandler, ast.match_case)


def _statements(tree: ast.Module) -> Iterator[ast.AST]:
    """Every statement of ``tree``, breadth first in ``ast.walk``'s order, without entering
    expressions: classes and imports are statements, and statements only sit in the statement
    lists of other statements (``except``/``case`` clauses included). Skipping the expressions —
    most of a file's nodes — made this walk several times cheaper than ``ast.walk``.
    """
    queue = deque([tree])
    while queue:
        node = queue.popleft()
        yield node
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list) and value and isinstance(value[0], _STATEMENT_HOLDERS):
                queue.extend(value)


def describe_module(path: str, source: str, tree: ast.Module) -> ModuleInfo:
    resolver = Resolver(module=PurePath(path).stem)
    module = ModuleInfo(path=path, tree=tree, source=source, resolver=resolver)
    imports: list[ast.AST] = []
    classdefs: list[ast.ClassDef] = []
    for node in _statements(tree):  # one walk for both
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(node)
        elif isinstance(node, ast.ClassDef):
            classdefs.append(node)
    _collect_imports(imports, resolver, module)
    _collect_aliases(tree, resolver)
    module.v1_regions = v1_only_regions(tree, source, resolver)
    module.classes = [_describe_class(node, module) for node in classdefs]
    return module


def _describe_class(node: ast.ClassDef, module: ModuleInfo) -> ModelInfo:
    r = module.resolver
    info = ModelInfo(name=node.name, node=node, module=module, base_nodes=list(node.bases))
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            name = stmt.target.id
            t = r.parse(stmt.annotation)
            if t.name in ("ClassVar",) or (t.name == "Final" and stmt.value is not None):
                info.class_vars[name] = stmt
                continue
            if name == "model_config":
                info.config_node = stmt
                _read_config(stmt.value, info, r)
                continue
            if name.startswith("_"):
                info.private_attrs[name] = stmt
                continue
            spec = _describe_field(name, stmt, t, r)
            info.all_field_specs.append(spec)
            info.fields[name] = spec
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if not isinstance(target, ast.Name):
                    continue
                if target.id == "model_config":
                    info.config_node = stmt
                    _read_config(stmt.value, info, r)
                elif target.id.startswith("_"):
                    info.private_attrs[target.id] = stmt
                else:
                    info.non_annotated.append((target.id, stmt))
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            info.methods[stmt.name] = stmt
            for dec in stmt.decorator_list:
                v = _describe_validator(stmt, dec, r)
                if v is not None:
                    info.validators.append(v)
        elif isinstance(stmt, ast.ClassDef) and stmt.name == "Config":
            info.config_class = stmt
    return info


def _read_config(value: ast.expr | None, info: ModelInfo, r: Resolver) -> None:
    if isinstance(value, ast.Call):
        info.config_source = "ConfigDict" if (r.is_pydantic(value.func, "ConfigDict")) else (
            r.qualname(value.func) or "?")
        for kw in value.keywords:
            if kw.arg:
                info.config[kw.arg] = kw.value
    elif isinstance(value, ast.Dict):
        info.config_source = "dict"
        for k, v in zip(value.keys, value.values, strict=True):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                info.config[k.value] = v


def _is_field_call(node: ast.AST | None, r: Resolver) -> bool:
    return isinstance(node, ast.Call) and (r.is_pydantic(node.func, "Field") or (
        isinstance(node.func, ast.Name) and node.func.id == "Field" and "Field" not in r.imports))


def _describe_field(name: str, stmt: ast.AnnAssign, t: TypeRef, r: Resolver) -> FieldSpec:
    spec = FieldSpec(name=name, node=stmt, type=t, annotation=stmt.annotation, value=stmt.value)
    # Annotated[T, Field(...), Gt(0), ...] metadata, outermost Annotated only (what pydantic reads).
    ann = stmt.annotation
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value.strip(), mode="eval").body
        except (SyntaxError, ValueError):
            ann = stmt.annotation
    metas: list[ast.expr] = []
    _annotated_metadata(ann, r, metas, 0)
    for meta in metas:
        if _is_field_call(meta, r):
            assert isinstance(meta, ast.Call)
            spec.annotated_fields.append(meta)
            _merge_field_call(spec, meta, from_annotated=True)
        elif isinstance(meta, ast.Call):
            q = r.canonical(meta.func) or ""
            short = q.rpartition(".")[2]
            if short in ANNOTATED_TYPES and meta.args:
                spec.constraints[ANNOTATED_TYPES[short]] = _lit_or_node(meta.args[0])
                spec.constraint_nodes[ANNOTATED_TYPES[short]] = meta
            elif short == "Len":
                for i, key in enumerate(("min_length", "max_length")):
                    if i < len(meta.args):
                        spec.constraints[key] = _lit_or_node(meta.args[i])
                        spec.constraint_nodes[key] = meta
            elif short == "StringConstraints":
                for kw in meta.keywords:
                    if kw.arg in CONSTRAINT_KWARGS:
                        spec.constraints[kw.arg] = _lit_or_node(kw.value)
                        spec.constraint_nodes[kw.arg] = kw.value
    for k, v in t.strip_annotated().constraints:
        spec.constraints.setdefault(k, v)
    if _is_field_call(stmt.value, r):
        assert isinstance(stmt.value, ast.Call)
        spec.field_call = stmt.value
        _merge_field_call(spec, stmt.value, from_annotated=False)
    elif stmt.value is not None:
        spec.default = stmt.value
    return spec


def _annotated_metadata(node: ast.expr, r: Resolver, out: list[ast.expr], depth: int) -> None:
    if depth > 10 or not isinstance(node, ast.Subscript):
        return
    head = r.canonical(node.value)
    if head == "Annotated":
        sl = node.slice
        items = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
        _annotated_metadata(items[0], r, out, depth + 1)  # nested Annotated flattens
        out.extend(items[1:])
    elif head == "Optional" or head == "Union":
        return  # metadata inside a union member applies to that member only; not this field


def _lit_or_node(node: ast.expr) -> Any:
    ok, v = literal_value(node)
    return v if ok else node


def _merge_field_call(spec: FieldSpec, call: ast.Call, from_annotated: bool) -> None:
    if call.args:
        spec.default = call.args[0]
        spec.default_positional = True
    for kw in call.keywords:
        if kw.arg is None:
            continue
        spec.kwargs[kw.arg] = kw.value
        if kw.arg == "default":
            spec.default = kw.value
        elif kw.arg == "default_factory":
            spec.factory = kw.value
        elif kw.arg in CONSTRAINT_KWARGS:
            spec.constraints[kw.arg] = _lit_or_node(kw.value)
            spec.constraint_nodes[kw.arg] = kw.value


_VALIDATOR_KINDS = {"field_validator", "validator", "field_serializer", "root_validator", "model_validator",
                    "model_serializer", "computed_field"}


def _describe_validator(func: ast.FunctionDef | ast.AsyncFunctionDef, dec: ast.expr, r: Resolver
                        ) -> ValidatorSpec | None:
    call = dec if isinstance(dec, ast.Call) else None
    target = call.func if call else dec
    q = r.qualname(target) or ""
    kind = q.rpartition(".")[2]
    if kind not in _VALIDATOR_KINDS:
        return None
    if not (q.startswith("pydantic") and not q.startswith("pydantic.v1")) and q != kind:
        return None
    if q == kind and kind not in r.imports and kind not in ("field_validator", "validator"):
        return None
    names: list[tuple[str, ast.AST]] = []
    check = True
    if call is not None:
        for a in call.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                names.append((a.value, a))
            elif isinstance(a, (ast.List, ast.Tuple)):
                names.extend((e.value, e) for e in a.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
        for kw in call.keywords:
            if kw.arg == "check_fields":
                ok, v = literal_value(kw.value)
                check = bool(v) if ok else False
    return ValidatorSpec(kind=kind, func=func, decorator=dec, fields=names, check_fields=check)


def _module_parts(path: str) -> tuple[str, ...]:
    pp = PurePath(path)
    parts = tuple(pp.with_suffix("").parts)
    return parts[:-1] if pp.stem == "__init__" else parts


class ClassIndex:
    """Resolves a qualified class name, as one module spells it, to a class of the run.

    ``pkg.mod.Base`` (after ``from pkg.mod import Base``) matches a class ``Base`` defined in a file
    whose path ends in ``pkg/mod.py`` (or ``pkg/mod/__init__.py``, following re-exports there);
    relative imports are resolved against the importing file. A name that resolves nowhere in the
    run — ``httpx.Response``, a base from an uninstalled package — is *not* matched by its short
    name to some unrelated class that happens to share it: it stays unknown.
    """

    def __init__(self, modules: list[ModuleInfo]) -> None:
        self.modules = modules
        self.by_tail: dict[str, list[ModuleInfo]] = {}
        for m in modules:
            parts = _module_parts(m.path)
            if parts:
                self.by_tail.setdefault(parts[-1], []).append(m)
        self._cache: dict[tuple[int, str], ModelInfo | None] = {}
        self._by_name: dict[int, tuple[dict[str, ModelInfo], dict[str, ModelInfo]]] = {}

    def _classes(self, module: ModuleInfo) -> tuple[dict[str, ModelInfo], dict[str, ModelInfo]]:
        """(first class of each name anywhere in ``module``, first top-level class of each name),
        built once per module: a scan per lookup made files with thousands of classes quadratic."""
        key = id(module)
        if key not in self._by_name:
            top = {id(n) for n in module.tree.body}
            anywhere: dict[str, ModelInfo] = {}
            toplevel: dict[str, ModelInfo] = {}
            for c in module.classes:
                anywhere.setdefault(c.name, c)
                if id(c.node) in top:
                    toplevel.setdefault(c.name, c)
            self._by_name[key] = (anywhere, toplevel)
        return self._by_name[key]

    def _modules_named(self, dotted: tuple[str, ...]) -> list[ModuleInfo]:
        if not dotted:
            return []
        return [m for m in self.by_tail.get(dotted[-1], []) if _module_parts(m.path)[-len(dotted):] == dotted]

    def _absolute(self, mod: str, importer: ModuleInfo) -> tuple[str, ...]:
        level = len(mod) - len(mod.lstrip("."))
        rest = tuple(p for p in mod.lstrip(".").split(".") if p)
        if not level:
            return rest
        pkg = _module_parts(importer.path)
        if PurePath(importer.path).stem != "__init__":
            pkg = pkg[:-1]
        base = pkg[: len(pkg) - (level - 1)] if level > 1 else pkg
        return base + rest

    def find(self, qualname: str, module: ModuleInfo, _depth: int = 0) -> ModelInfo | None:
        key = (id(module), qualname)
        if key in self._cache:
            return self._cache[key]
        found = self._find(qualname, module, _depth)
        self._cache[key] = found
        return found

    def _find(self, qualname: str, module: ModuleInfo, depth: int) -> ModelInfo | None:
        if depth > 8 or not qualname:
            return None
        mod, _, short = qualname.rpartition(".")
        if not mod:
            return self._classes(module)[0].get(short)
        for target in self._modules_named(self._absolute(mod, module)):
            local = self._classes(target)[1].get(short)
            if local is not None:
                return local
            if short in target.resolver.imports:  # re-export, e.g. from a package __init__
                hit = self.find(target.resolver.imports[short], target, depth + 1)
                if hit is not None:
                    return hit
        return None

    def origin(self, qualname: str, module: ModuleInfo, _depth: int = 0) -> str:
        """Where a name imported through modules of the run really comes from: ``BaseModel``
        imported from a project's ``bridge/pydantic.py`` that re-exports pydantic's is
        ``pydantic.BaseModel``. Names defined in the run, or not found, are returned unchanged."""
        mod, _, short = qualname.rpartition(".")
        if not mod or _depth > 8:
            return qualname
        for target in self._modules_named(self._absolute(mod, module)):
            if short in self._classes(target)[1]:
                return qualname
            if short in target.resolver.imports:
                return self.origin(target.resolver.imports[short], target, _depth + 1)
        return qualname

    def find_node(self, node: ast.expr, module: ModuleInfo) -> ModelInfo | None:
        if isinstance(node, ast.Subscript):
            node = node.value
        q = module.resolver.qualname(node)
        return self.find(q, module) if q else None

    def model(self, qualname: str, module: ModuleInfo) -> ModelInfo | None:
        c = self.find(qualname, module)
        return c if c is not None and c.is_model else None


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
            elif (root in MODEL_ROOTS and (c.module.resolver.is_pydantic(node, *MODEL_ROOTS) or _from_pydantic(q))) or (
                    root in SETTINGS_ROOTS and q.startswith("pydantic_settings")):
                continue
            elif c.module.resolver.canonical(node) in ("Generic", "typing.Generic", "typing_extensions.Generic",
                                                       "ABC", "abc.ABC", "object"):
                continue
            else:
                c.unresolved_bases.append(q or ast.unparse(b))
    _link_hierarchy(models)
    return models


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
        if q.startswith("pydantic.v1") or (root in MODEL_ROOTS and c.module.imports_pydantic_v1
                                            and "pydantic.v1" in r.imports.get(root, "")):
            c.is_v1 = True
            return
        if root in MODEL_ROOTS and (r.is_pydantic(node, *MODEL_ROOTS) or _from_pydantic(q)):
            c.is_model = True
        elif root in SETTINGS_ROOTS and q.startswith("pydantic_settings"):
            c.is_model = c.is_settings = True
        elif found is not None and found.is_v1:
            c.is_v1 = True
            return
        elif found is not None and found.is_model:
            c.is_model = True
            c.is_settings = c.is_settings or found.is_settings
        if c.is_model:
            return


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
    mro = _linearise(m)
    if len(mro) > MAX_ANCESTORS + 1:
        m.too_deep = True
    else:
        m._mro = mro
