"""Load a file that is not a module of an installed package (a bench, a tool under ``scripts/``, a fixture)
as a module, the one way every test does it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str) -> ModuleType:
    """The module of the file at ``path``, executed under ``name`` and registered in ``sys.modules``
    (dataclasses and pydantic look a class's module up there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
