"""The child process of ``--import``: imports the checked modules and inspects their models' fields.

Run as ``python -m nbkit.pscheck.introspect`` by :func:`nbkit.pscheck.runtime.runtime_check`, never
imported by the static linter: it is the only place pscheck imports pydantic (and the user's code), so
the static mode stays standard-library only and a module that hangs, exits or pollutes ``sys.modules``
cannot take the linter down. Reads the models to check as JSON on stdin; writes the findings as one JSON
line, last on stdout.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import sys
import warnings
from pathlib import Path
from typing import Annotated, Any


def _module_name(path: Path) -> tuple[str, str]:
    """(sys.path root, dotted module name) for a file, climbing packages with ``__init__.py``."""
    path = path.resolve()
    parts = [path.stem]
    parent = path.parent
    while (parent / "__init__.py").exists() and parent.parent != parent:
        parts.insert(0, parent.name)
        parent = parent.parent
    if parts[-1] == "__init__":
        parts.pop()
    return str(parent), ".".join(parts)


def _child(payload: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"findings": [], "errors": [], "imported": 0, "models": 0}
    try:
        from pydantic import BaseModel, TypeAdapter, ValidationError
        from pydantic_core import PydanticUndefined
    except ImportError as exc:
        out["errors"] += [
            {"path": p["path"], "message": f"pydantic is not importable: {exc}"} for p in payload
        ]
        return out
    for item in payload:
        path = Path(item["path"])
        root, name = _module_name(path)
        if root not in sys.path:
            sys.path.insert(0, root)
        try:
            # The module's own prints must not corrupt the JSON answer on stdout.
            with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
                warnings.simplefilter("ignore")
                try:
                    module = importlib.import_module(name)
                    if Path(getattr(module, "__file__", "") or "").resolve() != path.resolve():
                        raise ModuleNotFoundError(name)  # another module of that name won the lookup
                except ModuleNotFoundError:
                    spec = importlib.util.spec_from_file_location(f"_pscheck_{abs(hash(str(path)))}", path)
                    assert spec and spec.loader
                    module = importlib.util.module_from_spec(spec)
                    sys.modules[spec.name] = module
                    spec.loader.exec_module(module)
        except BaseException as exc:  # the user's module may raise anything, SystemExit included
            if isinstance(exc, KeyboardInterrupt):
                raise
            out["errors"].append(
                {"path": item["path"], "message": f"importing failed: {type(exc).__name__}: {exc}"}
            )
            continue
        out["imported"] += 1
        for m in item["models"]:
            cls = getattr(module, m["name"], None)
            if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
                continue
            out["models"] += 1
            for fname, line in m["fields"].items():
                info = cls.model_fields.get(fname)
                if info is None:
                    continue
                factory = info.default_factory
                if factory is not None and not callable(factory):
                    out["findings"].append(
                        {
                            "path": item["path"],
                            "line": line,
                            "col": 1,
                            "code": "PSC004",
                            "message": f"default_factory of '{fname}' is a "
                            f"{type(factory).__name__} value, not a callable",
                        }
                    )
                if (
                    info.default is PydanticUndefined
                    or info.validate_default
                    or cls.model_config.get("validate_default")
                ):
                    continue
                try:
                    adapter = TypeAdapter(
                        Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
                    )
                    adapter.validate_python(info.default, strict=True)
                except ValidationError as exc:
                    first = exc.errors()[0]["msg"] if exc.errors() else str(exc)
                    out["findings"].append(
                        {
                            "path": item["path"],
                            "line": line,
                            "col": 1,
                            "code": "PSC001",
                            "message": f"default {info.default!r:.40} of '{fname}' does not "
                            f"validate as {_type_repr(info.annotation)}: {first}",
                        }
                    )
                except Exception:  # noqa: S112 - an annotation TypeAdapter cannot build: no verdict
                    continue
    return out


def _type_repr(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__qualname__
    return str(annotation).replace("typing.", "").replace("typing_extensions.", "")


if __name__ == "__main__":
    result = _child(json.loads(sys.stdin.read()))
    sys.stdout.write("\n" + json.dumps(result) + "\n")
