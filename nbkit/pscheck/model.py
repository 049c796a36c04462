"""Static descriptions of Pydantic models, read from a module's ``ast`` (no import, no execution).

:func:`describe_module` turns one parsed file into a :class:`ModuleInfo` with every class it
defines; :func:`resolve_models` then decides, across all files of one run, which classes are
Pydantic v2 models — directly (``BaseModel``, ``RootModel``, ``BaseSettings``) or through project
base classes found in the same run — and links each :class:`ModelInfo` to its parents.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from nbkit.pscheck.types import Resolver, TypeRef, literal_value

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


@dataclass
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

    @property
    def path(self) -> str:
        return self.module.path

    def mro(self) -> list[ModelInfo]:
        """This model, then its in-run parents, depth first, each once."""
        seen: list[ModelInfo] = []

        def walk(m: ModelInfo) -> None:
            if any(m is s for s in seen):
                return
            seen.append(m)
            for p in m.parents:
                walk(p)

        walk(self)
        return seen

    def inherited_fields(self) -> dict[str, tuple[ModelInfo, FieldSpec]]:
        """Fields of the in-run parents (nearest definition wins), excluding this class's own."""
        out: dict[str, tuple[ModelInfo, FieldSpec]] = {}
        for m in self.mro()[1:]:
            for name, spec in m.fields.items():
                out.setdefault(name, (m, spec))
        return out

    @property
    def hierarchy_complete(self) -> bool:
        """Whether every ancestor is either pydantic's own base or a class pscheck has read."""
        return all(not m.unresolved_bases for m in self.mro())

    def config_literal(self, key: str) -> tuple[bool, Any]:
        for m in self.mro():
            if key in m.config:
                return literal_value(m.config[key])
        return False, None


@dataclass
class ModuleInfo:
    path: str
    tree: ast.Module
    source: str
    resolver: Resolver
    classes: list[ModelInfo] = field(default_factory=list)
    imports_pydantic_v1: bool = False

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


def describe_module(path: str, source: str, tree: ast.Module) -> ModuleInfo:
    resolver = Resolver(module=PurePath(path).stem)
    module = ModuleInfo(path=path, tree=tree, source=source, resolver=resolver)
    imports: list[ast.AST] = []
    classdefs: list[ast.ClassDef] = []
    for node in ast.walk(tree):  # one walk for both: this is most of the per-file cost
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(node)
        elif isinstance(node, ast.ClassDef):
            classdefs.append(node)
    _collect_imports(imports, resolver, module)
    _collect_aliases(tree, resolver)
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
            local = [c for c in module.classes if c.name == short]
            return local[0] if local else None
        for target in self._modules_named(self._absolute(mod, module)):
            local = [c for c in target.classes if c.name == short and c.node in target.tree.body]
            if local:
                return local[0]
            if short in target.resolver.imports:  # re-export, e.g. from a package __init__
                hit = self.find(target.resolver.imports[short], target, depth + 1)
                if hit is not None:
                    return hit
        return None

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
            rows.append((b, found if found is not c else None, q))
        bases_of[id(c)] = rows
    changed = True
    while changed:
        changed = False
        for c in classes:
            if c.is_model or c.is_v1:
                continue
            r = c.module.resolver
            for b, found, q in bases_of[id(c)]:
                node = b.value if isinstance(b, ast.Subscript) else b
                root = q.rpartition(".")[2]
                if q.startswith("pydantic.v1") or (root in MODEL_ROOTS and c.module.imports_pydantic_v1
                                                    and "pydantic.v1" in r.imports.get(root, "")):
                    c.is_v1 = True
                    changed = True
                    break
                if root in MODEL_ROOTS and (r.is_pydantic(node, *MODEL_ROOTS)):
                    c.is_model = True
                elif root in SETTINGS_ROOTS and q.startswith("pydantic_settings"):
                    c.is_model = c.is_settings = True
                elif found is not None and found.is_v1:
                    c.is_v1 = True
                    changed = True
                    break
                elif found is not None and found.is_model:
                    c.is_model = True
                    c.is_settings = c.is_settings or found.is_settings
                if c.is_model:
                    changed = True
                    break
    models = [c for c in classes if c.is_model]
    for c in models:
        for b, found, q in bases_of[id(c)]:
            node = b.value if isinstance(b, ast.Subscript) else b
            root = q.rpartition(".")[2]
            if found is not None and found.is_model:
                c.parents.append(found)
            elif (root in MODEL_ROOTS and c.module.resolver.is_pydantic(node, *MODEL_ROOTS)) or (
                    root in SETTINGS_ROOTS and q.startswith("pydantic_settings")):
                continue
            elif c.module.resolver.canonical(node) in ("Generic", "typing.Generic", "typing_extensions.Generic",
                                                       "ABC", "abc.ABC", "object"):
                continue
            else:
                c.unresolved_bases.append(q or ast.unparse(b))
    return models
