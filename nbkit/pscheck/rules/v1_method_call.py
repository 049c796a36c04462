"""PSC018 ``v1-method-call``: A Pydantic v1 method (`parse_raw`, `parse_obj`, `.dict()`, `.json()`...)
called on a v2 model.

The class attributes are the rule's documentation (``docs/pscheck.md`` is generated from them).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.model import ModuleInfo
from nbkit.pscheck.rule import BaseRule, RuleContext

V1_CLASS_METHODS = {
    "parse_raw": "model_validate_json",
    "parse_obj": "model_validate",
    "parse_file": "model_validate_json(Path(...).read_text())",
    "from_orm": "model_validate",
    "construct": "model_construct",
    "schema": "model_json_schema",
    "schema_json": "json.dumps(model_json_schema())",
    "update_forward_refs": "model_rebuild",
    "validate": "model_validate",
}
V1_INSTANCE_METHODS = {
    "dict": "model_dump",
    "json": "model_dump_json",
    "copy": "model_copy",
    **V1_CLASS_METHODS,
}
# Methods that return an instance of the model they are called on (or on its class).
_RETURNS_INSTANCE = frozenset(
    {
        "model_copy",
        "copy",
        "model_validate",
        "model_validate_json",
        "model_validate_strings",
        "model_construct",
        "construct",
        "parse_obj",
        "parse_raw",
        "parse_file",
        "from_orm",
        "validate",
    }
)
_V1_CALL_HINT = re.compile(r"\.(?:" + "|".join(sorted(V1_INSTANCE_METHODS)) + r")\s*\(")


class V1MethodCall(BaseRule):
    code = "PSC018"
    name = "v1-method-call"
    severity = "warning"
    also_in = ("migration",)
    summary = "A Pydantic v1 method (`parse_raw`, `parse_obj`, `.dict()`, `.json()`...) called on a v2 model."
    bad = """
from pydantic import BaseModel

class Sample(BaseModel):
    text: str

def load(line: str) -> Sample:
    return Sample.parse_raw(line)
"""
    good = """
from pydantic import BaseModel

class Sample(BaseModel):
    text: str

def load(line: str) -> Sample:
    return Sample.model_validate_json(line)
"""
    rationale = """Deprecated in v2 with a warning per call and removed in v3; some changed meaning
(`copy(update=...)` skips validation, `parse_raw` routes through the deprecated `load_str_bytes`).
The field notes' own JSONL checker calls `model.parse_raw(line)`. The receiver must be known to be a model
— a model class of the run, `self`/`cls` in a model method, or a name annotated or assigned as one
(including `Type[BaseModel]` parameters) — so `response.json()` on an HTTP client is not flagged."""

    def check_module(self, module: ModuleInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        if module.imports_pydantic_v1 or not _V1_CALL_HINT.search(module.source):
            return  # cheap text pre-filter: most files call none of these methods
        r = module.resolver

        # A "kind" is ("class" | "instance", the model of the run or None when only known to be a
        # BaseModel): the model lets the rule skip methods the project defines itself (openai's
        # BaseModel defines its own ``construct``; overriding ``dict`` is common).
        Kind = tuple[str, Any]

        def model_kind(ann: ast.expr | None) -> Kind | None:
            if ann is None:
                return None
            t = r.parse(ann).strip_annotated()
            t = t.without_none() if t.is_optional else t
            is_type = t.name == "type" and bool(t.args)
            target = t.args[0] if is_type else t
            if not target.name.startswith("cls:"):
                return None
            q = target.name[4:]
            m = ctx.model_for(q, module)
            if m is None and q not in ("pydantic.BaseModel", "pydantic.main.BaseModel"):
                return None
            return ("class" if is_type else "instance", m)

        model_by_node = {id(m.node): m for m in ctx.models if m.module is module}
        rule = self
        out: list[Diagnostic] = []

        class Scanner(ast.NodeVisitor):
            # Scope-aware walk: which names hold a model class or instance at each call site.
            def __init__(self) -> None:
                self.scopes: list[dict[str, Kind]] = [{}]
                self.enclosing: list[Any] = [None]  # model whose body we are directly in

            def visit_ClassDef(self, node: ast.ClassDef) -> None:
                for d in node.decorator_list + node.bases:
                    self.visit(d)
                self.scopes.append(dict(self.scopes[-1]))
                self.enclosing.append(model_by_node.get(id(node)))
                for stmt in node.body:
                    self.visit(stmt)
                self.enclosing.pop()
                self.scopes.pop()

            def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
                for d in node.decorator_list:
                    self.visit(d)
                scope = dict(self.scopes[-1])
                params = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                owner = self.enclosing[-1]
                for i, a in enumerate(params):
                    k = model_kind(a.annotation)
                    if k:
                        scope[a.arg] = k
                    elif i == 0 and owner is not None and a.arg in ("self", "cls"):
                        is_cls = a.arg == "cls" or any(
                            isinstance(d, ast.Name) and d.id == "classmethod" for d in node.decorator_list
                        )
                        scope[a.arg] = ("class" if is_cls else "instance", owner)
                self.scopes.append(scope)
                self.enclosing.append(None)
                for stmt in node.body:
                    self.visit(stmt)
                self.enclosing.pop()
                self.scopes.pop()

            visit_AsyncFunctionDef = visit_FunctionDef

            def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
                if isinstance(node.target, ast.Name):
                    k = model_kind(node.annotation)
                    if k:
                        self.scopes[-1][node.target.id] = k
                self.generic_visit(node)

            def kind_of(self, node: ast.expr) -> Kind | None:
                """What ``node`` is known to evaluate to: a model class or instance (and which model)."""
                if isinstance(node, ast.Name):
                    if node.id in self.scopes[-1]:
                        return self.scopes[-1][node.id]
                    m = ctx.model_at(node, module)
                    return ("class", m) if m is not None else None
                if isinstance(node, ast.Call):
                    f = node.func
                    if isinstance(f, ast.Name):
                        m = ctx.model_at(f, module)
                        return ("instance", m) if m is not None else None
                    if isinstance(f, ast.Attribute) and f.attr in _RETURNS_INSTANCE:
                        inner = self.kind_of(f.value)
                        if inner:
                            return ("instance", inner[1])
                return None

            def visit_Assign(self, node: ast.Assign) -> None:
                self.generic_visit(node)
                k = self.kind_of(node.value)
                if k:
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            self.scopes[-1][t.id] = k

            def visit_Call(self, node: ast.Call) -> None:
                if isinstance(node.func, ast.Attribute):
                    attr = node.func.attr
                    kind = self.kind_of(node.func.value)
                    table = (
                        {}
                        if kind is None
                        else V1_CLASS_METHODS
                        if kind[0] == "class"
                        else V1_INSTANCE_METHODS
                    )
                    own = (
                        kind is not None
                        and kind[1] is not None
                        and kind[1].nearest("methods", attr) is not None
                    )
                    if attr in table and not own:
                        out.append(
                            rule.diag(
                                module,
                                node,
                                f"{ast.unparse(node.func)}() is Pydantic v1 API "
                                f"(deprecated in v2); use {table[attr]}",
                            )
                        )
                self.generic_visit(node)

        Scanner().visit(module.tree)  # a RecursionError is reported by the engine as PSC999, not dropped
        yield from out
