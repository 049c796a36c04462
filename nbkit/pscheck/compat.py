"""Which code of a module can only run under Pydantic v1: its compatibility branches.

Libraries that support both major versions keep the v1 spelling (``model.dict()``, ``class
Config``, ``@validator``) in code that Pydantic v2 never reaches: the branch of an ``if`` whose
test says "this is v1", the code after an ``if <v2>: return ...``, the ``except`` of a ``try``
whose body uses the v2 API. pscheck lints v2 models, so findings in those places are not findings.

The tests are understood by what they *mean*, not by how one library spells them: a small
three-valued evaluator (``True`` / ``False`` / unknown) runs each ``if`` test in a world where the
installed pydantic is some 2.x release, knowing only that much. It understands version flags
(``PYDANTIC_V1``, ``IS_PYDANTIC_V2``, ...), pydantic's version values (``pydantic.VERSION``,
``pydantic.version.VERSION``, ``pydantic.__version__``, ``importlib.metadata.version("pydantic")``,
names like ``PYDANTIC_VERSION`` / ``PYDANTIC_MAJOR_VERSION`` and module-level names assigned from
them) with ``startswith``, ``split``, indexing, ``.major``, ``int()``, ``Version()``/``parse()``
and comparisons against strings, tuples or ints; ``hasattr(x, "<v2-only attribute>")``;
``not``/``and``/``or``. A test it cannot decide leaves both branches linted.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

from nbkit.pscheck.resolver import Resolver

# Attributes and names that exist only in Pydantic v2: a test for one is a test for v2, and a
# ``try`` body using one makes its ``except`` the v1 fallback.
V2_ONLY_ATTRS = frozenset(
    {
        "model_dump",
        "model_dump_json",
        "model_validate",
        "model_validate_json",
        "model_validate_strings",
        "model_copy",
        "model_construct",
        "model_json_schema",
        "model_fields",
        "model_fields_set",
        "model_computed_fields",
        "model_rebuild",
        "model_post_init",
        "model_extra",
        "model_config",
        "model_parametrized_name",
        "__pydantic_fields__",
        "__pydantic_core_schema__",
        "__pydantic_validator__",
        "__pydantic_serializer__",
        "__pydantic_generic_metadata__",
        "__pydantic_fields_set__",
    }
)
V2_ONLY_NAMES = frozenset(
    {
        "field_validator",
        "model_validator",
        "field_serializer",
        "model_serializer",
        "computed_field",
        "ConfigDict",
        "TypeAdapter",
        "RootModel",
        "ValidationInfo",
        "ValidatorFunctionWrapHandler",
        "SerializationInfo",
        "AliasChoices",
        "AliasPath",
        "PrivateAttr",
        "with_config",
        "validate_call",
        "WithJsonSchema",
        "GetCoreSchemaHandler",
        "GetJsonSchemaHandler",
        "BeforeValidator",
        "AfterValidator",
        "PlainValidator",
        "WrapValidator",
        "PlainSerializer",
        "WrapSerializer",
        "SerializeAsAny",
        "InstanceOf",
    }
)
_V2_ATTR_OR_NAME = V2_ONLY_ATTRS | V2_ONLY_NAMES
# ``PYDANTIC_V1``, ``IS_PYDANTIC_V2``, ``_PYDANTIC_V2``, ``pydantic_v1``, ``USING_PYDANTIC2`` ...
_FLAG = re.compile(r"pydantic_?v?_?([0-9])(?![0-9])", re.I)
_VERSION_NAME = re.compile(r"pydantic.*version|version.*pydantic", re.I)
_PYDANTIC_VERSION_QUALNAMES = frozenset(
    {
        "pydantic.VERSION",
        "pydantic.version.VERSION",
        "pydantic.__version__",
        "pydantic.version.version_short",
        "pydantic.version.VERSION_SHORT",
    }
)
_VERSION_CALL = re.compile(r"(?:^|\.)(?:Version|LooseVersion|StrictVersion|parse|parse_version)$")
# Cheap text pre-filters (most modules have no compatibility code, and walking them costs): a
# version test names pydantic's version, a flag or hasattr; a v2-fallback try uses a v2-only name.
# (Lower-cased text, no IGNORECASE: a case-insensitive alternation scanned every file slowly.)
_TEST_HINT = re.compile(
    r"pydantic_?v?_?[0-9]|pydantic\w*version|version\w*pydantic|version\(\s*[\"']pydantic"
    r"|pydantic\.__version__|hasattr\([^)\n]*[\"'](?:model_|__pydantic)"
)
_VERSION_CONST = re.compile(r"\bVERSION\b")  # ``from pydantic import VERSION``: case matters


def _has_version_tests(source: str) -> bool:
    if (
        "VERSION" not in source
        and "hasattr(" not in source
        and "ydantic" not in source
        and "YDANTIC" not in source
    ):
        return False
    return _TEST_HINT.search(source.lower()) is not None or _VERSION_CONST.search(source) is not None


def _mentions_v2(text: str) -> bool:
    """Whether ``text`` contains a v2-only name (a substring test: a gate before the exact AST check;
    C-speed substring scans are several times cheaper here than one regex alternation)."""
    return any(tok in text for tok in _V2_ATTR_OR_NAME)


_V2_WORLD_LOW, _V2_WORLD_HIGH = (2, 0, 0), (3, 0, 0)  # what "some 2.x release" means: [2.0.0, 3.0.0)
UNKNOWN: Any = object()


class _Version:
    """Pydantic's version in the v2 world: somewhere in [2.0.0, 3.0.0), nothing more known."""


class _Major:
    """Pydantic's major version in the v2 world: 2 (as an int or a string)."""


class _Parts:
    """``VERSION.split(".")``: a list whose first item is the major version."""


def _threshold(v: Any) -> tuple[int, ...] | None:
    """A version literal as a 3-tuple of ints (``"2"`` -> (2, 0, 0), ``(1, 10)`` -> (1, 10, 0))."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return (v, 0, 0)
    if isinstance(v, str):
        nums = re.match(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", v.strip())
        if not nums:
            return None
        return tuple(int(g) if g else 0 for g in nums.groups())
    if isinstance(v, tuple) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return (tuple(v) + (0, 0, 0))[:3]
    return None


def _compare_version(op: ast.cmpop, t: tuple[int, ...]) -> Any:
    """``VERSION <op> t`` for a version anywhere in [2.0.0, 3.0.0): True, False or UNKNOWN."""
    lo, hi = _V2_WORLD_LOW, _V2_WORLD_HIGH
    if isinstance(op, ast.GtE):
        return True if t <= lo else (False if t >= hi else UNKNOWN)
    if isinstance(op, ast.Gt):
        return True if t < lo else (False if t >= hi else UNKNOWN)
    if isinstance(op, ast.Lt):
        return True if t >= hi else (False if t <= lo else UNKNOWN)
    if isinstance(op, ast.LtE):
        return True if t >= hi else (False if t < lo else UNKNOWN)
    if isinstance(op, (ast.Eq, ast.NotEq)):
        outside = t < lo or t >= hi
        if not outside:
            return UNKNOWN
        return isinstance(op, ast.NotEq)
    return UNKNOWN


def _compare_major(op: ast.cmpop, other: Any) -> Any:
    try:
        n = int(other)
    except (TypeError, ValueError):
        return UNKNOWN
    ops = {ast.Eq: 2 == n, ast.NotEq: 2 != n, ast.Lt: 2 < n, ast.LtE: 2 <= n, ast.Gt: 2 > n, ast.GtE: 2 >= n}
    return ops.get(type(op), UNKNOWN)


_FLIP = {
    ast.Lt: ast.Gt,
    ast.Gt: ast.Lt,
    ast.LtE: ast.GtE,
    ast.GtE: ast.LtE,
    ast.Eq: ast.Eq,
    ast.NotEq: ast.NotEq,
}


class V2World:
    """Evaluates expressions of one module as they would be under some Pydantic 2.x."""

    def __init__(self, resolver: Resolver, tree: ast.Module) -> None:
        self.r = resolver
        self.names: dict[str, Any] = {}
        # Module-level names assigned from a version test (``IS_V2 = VERSION.startswith("2")``).
        for stmt in tree.body:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                if len(targets) == 1 and isinstance(targets[0], ast.Name):
                    v = self.eval(stmt.value)
                    if v is not UNKNOWN and (isinstance(v, (bool, _Version, _Major, _Parts))):
                        self.names[targets[0].id] = v

    def truth(self, node: ast.expr) -> Any:
        """``True`` / ``False`` when ``node``'s truth value is the same under every Pydantic 2.x."""
        v = self.eval(node)
        return v if isinstance(v, bool) else UNKNOWN

    def eval(self, node: ast.expr, depth: int = 0) -> Any:
        if depth > 30:
            return UNKNOWN
        d = depth + 1
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Tuple):
            items = [self.eval(e, d) for e in node.elts]
            return UNKNOWN if any(i is UNKNOWN for i in items) else tuple(items)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            v = self.truth(node.operand)
            return UNKNOWN if v is UNKNOWN else not v
        if isinstance(node, ast.BoolOp):
            vals = [self.truth(v) for v in node.values]
            decisive = isinstance(node.op, ast.Or)  # a True decides an ``or``, a False an ``and``
            if decisive in vals:
                return decisive
            return (not decisive) if all(v is not UNKNOWN for v in vals) else UNKNOWN
        if isinstance(node, (ast.Name, ast.Attribute)):
            return self._name(node)
        if isinstance(node, ast.Compare):
            return self._compare(node, d)
        if isinstance(node, ast.Call):
            return self._call(node, d)
        if isinstance(node, ast.Subscript):
            base = self.eval(node.value, d)
            idx = self.eval(node.slice, d)
            if isinstance(base, (_Version, _Parts)) and idx == 0 and not isinstance(idx, bool):
                return _Major()
            return UNKNOWN
        return UNKNOWN

    def _name(self, node: ast.Name | ast.Attribute) -> Any:
        q = self.r.qualname(node) or ""
        if q in _PYDANTIC_VERSION_QUALNAMES:
            return _Version()
        if isinstance(node, ast.Attribute):
            base = self.eval(node.value, 1) if not q.startswith("pydantic") else UNKNOWN
            if isinstance(base, _Version) and node.attr == "major":
                return _Major()
        ident = node.id if isinstance(node, ast.Name) else node.attr
        if isinstance(node, ast.Name) and ident in self.names:
            return self.names[ident]
        if q.startswith("pydantic.") and q.count(".") == 1:
            return UNKNOWN  # pydantic's own members (``pydantic.v1`` is a module, not a flag)
        m = _FLAG.search(ident)
        if m:
            return m.group(1) == "2"
        if _VERSION_NAME.search(ident):
            return _Major() if "major" in ident.lower() else _Version()
        return UNKNOWN

    def _call(self, node: ast.Call, d: int) -> Any:
        q = self.r.qualname(node.func) or ""
        args = node.args
        if q in ("hasattr", "getattr") and len(args) >= 2 and isinstance(args[1], ast.Constant):
            if args[1].value in _V2_ATTR_OR_NAME and (q == "hasattr" or len(args) == 2):
                return True
            return UNKNOWN
        if (
            q
            in ("importlib.metadata.version", "importlib_metadata.version", "pkg_resources.get_distribution")
            and args
            and isinstance(args[0], ast.Constant)
            and args[0].value == "pydantic"
        ):
            return _Version()
        if isinstance(node.func, ast.Attribute):
            recv = self.eval(node.func.value, d)
            attr = node.func.attr
            if isinstance(recv, _Version):
                if attr == "startswith" and args:
                    prefix = self.eval(args[0], d)
                    prefixes = prefix if isinstance(prefix, tuple) else (prefix,)
                    results = {_startswith_v2(p) for p in prefixes}
                    if True in results:
                        return True
                    return False if results == {False} else UNKNOWN
                if attr == "split":
                    return _Parts()
                return UNKNOWN
        if q == "int" and len(args) == 1:
            v = self.eval(args[0], d)
            return v if isinstance(v, _Major) else UNKNOWN
        if (q == "str" or _VERSION_CALL.search(q)) and len(args) == 1:
            v = self.eval(args[0], d)
            if isinstance(v, (_Version, _Major)) or (isinstance(v, str) and q != "str"):
                return v
        return UNKNOWN

    def _compare(self, node: ast.Compare, d: int) -> Any:
        left = self.eval(node.left, d)
        results = []
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.eval(right_node, d)
            a, b, o = left, right, op
            if not isinstance(a, (_Version, _Major)) and isinstance(b, (_Version, _Major)):
                a, b = b, a
                flip = _FLIP.get(type(op))
                o = flip() if flip else op
            if isinstance(a, _Version) and not isinstance(b, (_Version, _Major)):
                t = _threshold(b)
                results.append(UNKNOWN if t is None else _compare_version(o, t))
            elif isinstance(a, _Major) and not isinstance(b, (_Version, _Major)):
                results.append(_compare_major(o, b))
            else:
                results.append(UNKNOWN)
            left = right
        if False in results:
            return False
        return True if all(r is True for r in results) else UNKNOWN


def _startswith_v2(prefix: Any) -> Any:
    if not isinstance(prefix, str) or not prefix:
        return UNKNOWN
    if prefix[0] != "2":
        return False if prefix[0].isdigit() else UNKNOWN
    if prefix in ("2", "2."):
        return True
    return UNKNOWN  # "2.5": depends on the minor version


def _terminates(stmts: list[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def _span(nodes: list[Any]) -> tuple[int, int, int, int]:
    first, last = nodes[0], nodes[-1]
    return (first.lineno, first.col_offset, last.end_lineno or last.lineno, last.end_col_offset or 0)


def _uses_v2_api(stmts: list[ast.stmt], lines: list[str]) -> bool:
    first, last = stmts[0].lineno, stmts[-1].end_lineno or stmts[-1].lineno
    if not _mentions_v2("\n".join(lines[first - 1 : last])):
        return False  # the text names no v2-only attribute: no need to walk the statements
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Attribute) and n.attr in V2_ONLY_ATTRS:
                return True
            if (
                isinstance(n, ast.ImportFrom)
                and (n.module or "").split(".")[0] == "pydantic"
                and any(a.name in V2_ONLY_NAMES for a in n.names)
            ):
                return True
    return False


def v1_only_regions(tree: ast.Module, source: str, resolver: Resolver) -> list[tuple[int, int, int, int]]:
    """Spans ``(line, col, end_line, end_col)`` (1-based lines, 0-based columns, as ``ast``) of the
    code no Pydantic 2.x release runs: v1 branches of version tests, code after a v2 branch that
    returns, ``except`` clauses of ``try`` bodies that use the v2 API, v1 arms of ``x if T else y``."""
    has_tests = _has_version_tests(source)
    has_fallbacks = "try:" in source and _mentions_v2(source)
    if not (has_tests or has_fallbacks):
        return []
    world = V2World(resolver, tree) if has_tests else None
    lines = source.splitlines()
    out: list[tuple[int, int, int, int]] = []

    def block(stmts: list[ast.stmt]) -> None:
        for i, s in enumerate(stmts):
            if isinstance(s, ast.If):
                v = world.truth(s.test) if world is not None else UNKNOWN
                taken = s.body if v is True else s.orelse if v is False else None
                dead = s.orelse if v is True else s.body if v is False else None
                if dead:
                    out.append(_span(dead))
                if taken is None:
                    block(s.body)
                    block(s.orelse)
                    continue
                block(taken)
                if _terminates(taken) and i + 1 < len(stmts):
                    out.append(_span(stmts[i + 1 :]))
                    return
                continue
            if isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
                block(s.body)  # type: ignore[attr-defined]
                fallback = has_fallbacks and _uses_v2_api(s.body, lines)  # type: ignore[attr-defined]
                for h in s.handlers:  # type: ignore[attr-defined]
                    if fallback:
                        out.append(_span(h.body))
                    else:
                        block(h.body)
                block(s.orelse)  # type: ignore[attr-defined]
                block(s.finalbody)  # type: ignore[attr-defined]
                continue
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                sub = getattr(s, name, None)
                if not sub:
                    continue
                if name in ("handlers", "cases"):
                    for h in sub:
                        block(h.body)
                else:
                    block(sub)

    block(tree.body)
    if world is None:
        return out
    for node in _ifexps(tree, source):
        v = world.truth(node.test)
        if v is True:
            out.append(_span([node.orelse]))
        elif v is False:
            out.append(_span([node.body]))
    return out


_IFEXP_TEST = re.compile(r"\S[ \t(]+if [^\n]*?(?:" + _TEST_HINT.pattern + r")")  # on lower-cased text
_IFEXP_CONST = re.compile(r"\S[ \t(]+if [^\n]*?\bVERSION\b")


def _ifexps(tree: ast.Module, source: str) -> Iterator[ast.IfExp]:
    if not (_IFEXP_TEST.search(source.lower()) or _IFEXP_CONST.search(source)):
        return  # walking every expression is the costly part; only a one-line "x if <test> else y" needs it
    for n in ast.walk(tree):
        if isinstance(n, ast.IfExp):
            yield n


def in_regions(regions: list[tuple[int, int, int, int]], line: int, col0: int) -> bool:
    """Whether the position (1-based line, 0-based column) lies inside one of ``regions``."""
    pos = (line, col0)
    return any((a, b) <= pos < (c, e) for a, b, c, e in regions)
