"""Finding a class of the run by the qualified name one module spells it with.

Base classes and annotations name classes through imports, relative imports and package re-exports;
:class:`ClassIndex` follows those across the files of one run so a model's parents defined in another
file are found, and a name that resolves nowhere in the run stays unknown instead of being guessed.
"""

from __future__ import annotations

import ast
from pathlib import PurePath

from nbkit.pscheck.model import ModelInfo, ModuleInfo


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
        return [
            m for m in self.by_tail.get(dotted[-1], []) if _module_parts(m.path)[-len(dotted) :] == dotted
        ]

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
