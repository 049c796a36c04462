"""A JSONL file streamed against a Pydantic model, lax and strict, with line numbers.

Every line ends up in exactly one bucket — valid, or an issue naming its line, column/byte and
cause — so nothing is dropped silently: undecodable bytes, broken JSON, non-object lines, blank
lines, missing fields, wrong types, and values lax mode coerces but strict mode would reject. The
data-schema check judges the report; the audit's context reads the valid records from it (the SFT
examples the other checks train and score on).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The issue kind of a value lax parsing accepted only by coercion (strict mode rejects it).
COERCED = "coerced (strict rejects)"


class SchemaLoadError(ImportError):
    """The schema reference could not be turned into a Pydantic model class."""


def load_schema(ref: str):
    """``'pkg.module:Class'`` or ``'/path/file.py:Class'`` -> the Pydantic model class."""
    from pydantic import BaseModel

    if ":" not in ref:
        raise SchemaLoadError(f"schema {ref!r}: expected 'module:Class' or 'file.py:Class'")
    mod_ref, cls_name = ref.rsplit(":", 1)
    try:
        if mod_ref.endswith(".py"):
            path = Path(mod_ref)
            if not path.is_file():
                raise SchemaLoadError(f"schema module {path} does not exist")
            name = f"nbkit_audit_schema_{abs(hash(str(path.resolve())))}"
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(name, None)
                raise
        else:
            module = importlib.import_module(mod_ref)
    except SchemaLoadError:
        raise
    except Exception as exc:  # any import-time failure of user code: one clear line
        raise SchemaLoadError(
            f"schema module {mod_ref} does not import: {type(exc).__name__}: {exc}"
        ) from None
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise SchemaLoadError(f"schema module {mod_ref} has no class {cls_name!r}")
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        raise SchemaLoadError(f"{ref} is not a pydantic.BaseModel subclass")
    return cls


@dataclass
class JsonlReport:
    path: str
    lines: int = 0
    valid: int = 0
    valid_strict: int = 0
    issues: list[dict[str, Any]] = field(default_factory=list)
    error_types: Counter = field(default_factory=Counter)
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def pass_rate(self) -> float:
        return self.valid / self.lines if self.lines else 0.0


def validate_jsonl(
    path: str | Path,
    schema,
    *,
    max_lines: int | None = None,
    keep_records: bool = True,
    progress: bool = False,
) -> JsonlReport:
    """Stream ``path`` line by line (bytes, so a bad byte is located, not fatal)."""
    from pydantic import ValidationError
    from tqdm.auto import tqdm

    path = Path(path)
    report = JsonlReport(str(path))

    def issue(lineno, kind, message, field_=None, col=None):
        report.issues.append({"line": lineno, "col": col, "kind": kind, "field": field_, "message": message})
        report.error_types[kind] += 1

    with open(path, "rb") as fh:
        for lineno, raw in enumerate(tqdm(fh, desc=path.name, disable=not progress, leave=False), 1):
            if max_lines is not None and lineno > max_lines:
                break
            report.lines += 1
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                issue(
                    lineno,
                    "not UTF-8",
                    f"byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} is not valid UTF-8 ({exc.reason})",
                    col=exc.start + 1,
                )
                continue
            if not text.strip():
                issue(lineno, "blank line", "blank line (dropped)")
                continue
            try:
                obj = json.loads(text.rstrip("\r\n"))
            except json.JSONDecodeError as exc:
                issue(lineno, "broken JSON", f"{exc.msg} (column {exc.colno})", col=exc.colno)
                continue
            if not isinstance(obj, dict):
                issue(lineno, "not an object", f"a JSON {type(obj).__name__}, expected an object")
                continue
            try:
                rec = schema.model_validate(obj)
            except ValidationError as exc:
                for err in exc.errors():
                    kind = "missing field" if err["type"] == "missing" else "wrong type/value"
                    issue(
                        lineno,
                        kind,
                        f"{err['msg']} (got {err.get('input')!r:.60})"
                        if err["type"] != "missing"
                        else "field is missing",
                        ".".join(map(str, err["loc"])),
                    )
                continue
            report.valid += 1
            try:
                schema.model_validate(obj, strict=True)
                report.valid_strict += 1
            except ValidationError as exc:
                for err in exc.errors():
                    issue(
                        lineno,
                        COERCED,
                        f"{err['msg']} (got {err.get('input')!r:.60})",
                        ".".join(map(str, err["loc"])),
                    )
            if keep_records:
                report.records.append(rec.model_dump())
    return report
