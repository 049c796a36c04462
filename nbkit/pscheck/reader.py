"""Reading one parsed file into a :class:`~nbkit.pscheck.model.ModuleInfo`, from ``ast`` only.

:func:`describe_module` collects the file's imports and module-level type aliases (its
:class:`~nbkit.pscheck.types.Resolver`), the code only Pydantic v1 runs (compatibility branches), and
every class it defines with its fields, config and validators as written. Which of those classes are
Pydantic models is decided afterwards, across every file of the run (:mod:`nbkit.pscheck.hierarchy`).
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from pathlib import PurePath
from typing import Any

from nbkit.pscheck.compat import v1_only_regions
from nbkit.pscheck.field import FieldSpec, ValidatorSpec
from nbkit.pscheck.literals import literal_value
from nbkit.pscheck.model import ModelInfo, ModuleInfo
from nbkit.pscheck.resolver import Resolver
from nbkit.pscheck.types import TypeRef

# Field(...) keyword arguments that are value constraints.
CONSTRAINT_KWARGS = (
    "gt",
    "ge",
    "lt",
    "le",
    "multiple_of",
    "min_length",
    "max_length",
    "pattern",
    "max_digits",
    "decimal_places",
    "allow_inf_nan",
    "strict",
)
# annotated_types classes pscheck understands inside ``Annotated[...]``: class name -> Field kwarg.
ANNOTATED_TYPES = {
    "Gt": "gt",
    "Ge": "ge",
    "Lt": "lt",
    "Le": "le",
    "MultipleOf": "multiple_of",
    "MinLen": "min_length",
    "MaxLen": "max_length",
}


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
        elif (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            if _looks_like_type(node.value, resolver):
                resolver.aliases[node.targets[0].id] = node.value
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.value is not None
            and resolver.canonical(node.annotation) == "TypeAlias"
        ):
            resolver.aliases[node.target.id] = node.value
        elif type(node).__name__ == "TypeAlias":  # ``type X = ...`` (3.12+)
            resolver.aliases[node.name.id] = node.value  # type: ignore[attr-defined]


def _looks_like_type(node: ast.expr, resolver: Resolver) -> bool:
    if isinstance(node, ast.Subscript):
        return resolver.canonical(node.value) in (
            "Optional",
            "Union",
            "Literal",
            "Annotated",
            "list",
            "dict",
            "set",
            "tuple",
            "frozenset",
        )
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
        info.config_source = (
            "ConfigDict" if (r.is_pydantic(value.func, "ConfigDict")) else (r.qualname(value.func) or "?")
        )
        for kw in value.keywords:
            if kw.arg:
                info.config[kw.arg] = kw.value
    elif isinstance(value, ast.Dict):
        info.config_source = "dict"
        for k, v in zip(value.keys, value.values, strict=True):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                info.config[k.value] = v


def _is_field_call(node: ast.AST | None, r: Resolver) -> bool:
    return isinstance(node, ast.Call) and (
        r.is_pydantic(node.func, "Field")
        or (isinstance(node.func, ast.Name) and node.func.id == "Field" and "Field" not in r.imports)
    )


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


_VALIDATOR_KINDS = {
    "field_validator",
    "validator",
    "field_serializer",
    "root_validator",
    "model_validator",
    "model_serializer",
    "computed_field",
}


def _describe_validator(
    func: ast.FunctionDef | ast.AsyncFunctionDef, dec: ast.expr, r: Resolver
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
                names.extend(
                    (e.value, e) for e in a.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                )
        for kw in call.keywords:
            if kw.arg == "check_fields":
                ok, v = literal_value(kw.value)
                check = bool(v) if ok else False
    return ValidatorSpec(kind=kind, func=func, decorator=dec, fields=names, check_fields=check)
