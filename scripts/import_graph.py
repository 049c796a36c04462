"""nbkit's own import graph, read statically: cycles among its modules and imports made inside functions.

``python scripts/import_graph.py`` prints both counts and each offender; ``tests/unit/test_imports.py``
holds them at zero. Module-level imports are the graph's edges, those under ``if TYPE_CHECKING:`` too:
a circle that only type checking closes is still two modules that each need the other to be read; an
import of an nbkit module inside a function body is what hid the cycles, so it is counted too.
Importing ``a.b`` also runs ``a/__init__``, so a package's ``__init__`` is an edge of every import below it.
"""

from __future__ import annotations

import ast
import graphlib
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "nbkit"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _targets(node: ast.Import | ast.ImportFrom, here: str, is_pkg: bool, modules: set[str]) -> list[str]:
    """The nbkit modules an import statement loads (the module, its packages, and imported submodules)."""
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            pkg = here.split(".") if is_pkg else here.split(".")[:-1]
            pkg = pkg[: len(pkg) - (node.level - 1)]
            base = ".".join(pkg + ([base] if base else []))
        names = [base] + [f"{base}.{a.name}" for a in node.names]
    # The packages above ``here`` are already importing when ``here`` runs, so reaching them only as the
    # prefix of a deeper module is no edge; reading a name from one (``from nbkit.audit.checks import
    # REGISTRY`` in a check) is, since that name may not exist yet.
    ancestors = {".".join(here.split(".")[:i]) for i in range(1, here.count(".") + 1 + (1 if is_pkg else 0))}
    named = set(names[:1]) if isinstance(node, ast.ImportFrom) else set(names)
    out = []
    for name in names:
        if not (name == "nbkit" or name.startswith("nbkit.")):
            continue
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            mod = ".".join(parts[:i])
            if mod in ancestors and mod not in named:
                continue
            if mod in modules and mod != here and mod not in out:
                out.append(mod)
    return out


@dataclass
class _File:
    """One module being scanned, and where its imports are recorded."""

    mod: str
    is_pkg: bool
    where: str  # its path relative to nbkit's parent, for the report
    modules: set[str]
    edges: dict[str, set[str]]
    inner: list[tuple[str, int, str]]
    type_edges: bool = True


def _visit(node: ast.AST, in_function: bool, type_only: bool, f: _File) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            _visit(child, True, type_only, f)
        elif isinstance(child, ast.If) and _is_type_checking(child):
            for n in child.body:
                _visit(ast.Module(body=[n], type_ignores=[]), in_function, True, f)
            for n in child.orelse:
                _visit(ast.Module(body=[n], type_ignores=[]), in_function, type_only, f)
        elif isinstance(child, (ast.Import, ast.ImportFrom)):
            targets = _targets(child, f.mod, f.is_pkg, f.modules)
            if not targets or (type_only and not f.type_edges):
                continue
            if in_function:
                f.inner.append((f.where, child.lineno, targets[-1]))
            else:
                f.edges[f.mod].update(targets)
        else:
            _visit(child, in_function, type_only, f)


def scan(root: Path = ROOT, type_edges: bool = True):
    """(edges, inner imports) of the package at ``root``; ``type_edges=False`` leaves out the imports
    under ``if TYPE_CHECKING:`` (the graph Python itself walks at run time)."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    modules = set(files)
    edges: dict[str, set[str]] = {m: set() for m in modules}
    inner: list[tuple[str, int, str]] = []  # (file, line, module) of nbkit imports inside functions

    for mod, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        where = str(path.relative_to(root.parent))
        f = _File(mod, path.name == "__init__.py", where, modules, edges, inner, type_edges)
        _visit(tree, False, False, f)
    return edges, inner


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (each is at least one cycle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def main() -> int:
    edges, inner = scan()
    comps = cycles(edges)
    # graphlib agrees (a cross-check of the hand-rolled SCC, which exists only to name the members).
    try:
        graphlib.TopologicalSorter(edges).prepare()
        acyclic = True
    except graphlib.CycleError:
        acyclic = False
    assert acyclic == (not comps)
    print(
        f"modules: {len(edges)}; import cycles (strongly connected groups): {len(comps)}; in-function "
        f"imports of nbkit modules: {len(inner)}"
    )
    for comp in comps:
        print("cycle group:", " ".join(comp))
    if "-v" in sys.argv:
        for f, line, m in inner:
            print(f"{f}:{line}: imports {m} inside a function")
    return 0


if __name__ == "__main__":
    sys.exit(main())
