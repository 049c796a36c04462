"""A JSONL file streamed against a Pydantic model (lax and strict), with line numbers.

Every line ends up in exactly one bucket — valid, or an issue naming its line, column/byte and
cause — so nothing is dropped silently: undecodable bytes, broken JSON, non-object lines, blank
lines, missing fields, wrong types, and values lax mode coerces but strict mode would reject.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, CheckMetrics
from nbkit.audit.sft import EXAMPLES_DIR
from nbkit.experiment import param
from nbkit.findings import Finding

try:  # a broken pscheck install must show in the finding, not switch the lint off
    from nbkit.pscheck import lint_paths
except Exception as _exc:
    lint_paths = None
    PSCHECK_IMPORT_ERROR = f"{type(_exc).__name__}: {_exc}"
else:
    PSCHECK_IMPORT_ERROR = ""

if TYPE_CHECKING:
    from nbkit.audit.experiments import AuditContext

SLUG, TITLE = "data-schema", "JSONL ↔ Pydantic"


@dataclass
class DataSchemaConfig(CheckConfig):
    path: str = param("sft.jsonl", help="JSONL file (a bare name is looked up in nbkit/audit/examples)")
    schema: str = param("sft_schema.py:SFTExample", help="'module:Class' or 'file.py:Class'")
    strict: bool = False
    max_lines: int = param(0, min=0, max=10_000_000, label="max lines (0 = all)")

    @classmethod
    def audit_values(cls, audit):
        d = audit.data
        return {
            "path": str(d.path),
            "schema": d.schema_ref,
            "strict": d.strict,
            "max_lines": d.max_lines or 0,
        }


@dataclass(frozen=True)
class DataSchemaMetrics(CheckMetrics):
    """Lines read and the issues found, counted by kind."""

    lines: int | None = None
    issue_counts: dict | None = None


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
                        "coerced (strict rejects)",
                        f"{err['msg']} (got {err.get('input')!r:.60})",
                        ".".join(map(str, err["loc"])),
                    )
            if keep_records:
                report.records.append(rec.model_dump())
    return report


def lint_schema(schema_file: Path) -> tuple[list[dict[str, Any]] | None, str]:
    """(pscheck diagnostics for the schema module, a note); diagnostics are None when pscheck could
    not run — the note then says why, and the finding shows it (never a silent skip)."""
    if lint_paths is None:
        return None, f"pscheck did not import ({PSCHECK_IMPORT_ERROR}); the schema was not linted"
    try:
        diags = lint_paths([schema_file])
    except Exception as exc:
        return [
            {
                "path": str(schema_file),
                "line": None,
                "code": "pscheck-error",
                "severity": "error",
                "message": f"{type(exc).__name__}: {exc}",
            }
        ], "pscheck failed"
    out = []
    for d in diags:
        keys = ("path", "line", "col", "code", "severity", "message")
        out.append({k: (d.get(k) if isinstance(d, dict) else getattr(d, k, None)) for k in keys})
    return out, f"{len(out)} diagnostic(s)"


def check_jsonl_schema(
    path: str | Path, schema_ref: str, *, strict: bool = False, max_lines: int | None = None
) -> tuple[Finding, JsonlReport | None]:
    """The data-schema check. Returns the finding and the report (its ``records`` feed loss-mask and
    reward-weights)."""
    import plotly.graph_objects as go

    try:
        schema = load_schema(schema_ref)
    except SchemaLoadError as exc:
        return Finding(
            SLUG,
            TITLE,
            "fail",
            str(exc),
            {"schema": schema_ref},
            fix="make the schema module importable on its own",
        ), None
    if Path(path).is_dir():
        return Finding(
            SLUG,
            TITLE,
            "fail",
            f"data path {path} is a directory; expected a JSONL file",
            {"path": str(path)},
        ), None
    if not Path(path).is_file():
        return Finding(SLUG, TITLE, "fail", f"data file {path} not found", {"path": str(path)}), None
    rep = validate_jsonl(path, schema, max_lines=max_lines)
    if rep.lines == 0:
        return Finding(
            SLUG,
            TITLE,
            "fail",
            f"data file {path} has no lines: no data is a failed data check",
            {"path": str(path), "lines": 0},
            fix="point data.path at the training file",
        ), rep
    n_err_lines = len({i["line"] for i in rep.issues if i["kind"] != "coerced (strict rejects)"})
    validation_errors = sum(
        v for k, v in rep.error_types.items() if k in ("missing field", "wrong type/value")
    )
    figures: dict[str, Any] = {
        "lines": rep.lines,
        "valid_lax": rep.valid,
        "valid_strict": rep.valid_strict,
        "pass_rate_pct": 100.0 * rep.pass_rate,
        "strict_pass_rate_pct": 100.0 * rep.valid_strict / rep.lines if rep.lines else 0.0,
        "lines_with_errors": n_err_lines,
        "missing_field_share_of_errors_pct": 100.0 * rep.error_types["missing field"] / validation_errors
        if validation_errors
        else 0.0,
        "issue_counts": dict(rep.error_types),
    }
    schema_file = (
        Path(schema_ref.rsplit(":", 1)[0])
        if schema_ref.rsplit(":", 1)[0].endswith(".py")
        else Path(getattr(sys.modules.get(schema.__module__), "__file__", "") or "")
    )
    lint, lint_note = (
        lint_schema(schema_file)
        if schema_file.is_file()
        else (None, f"schema source file not found ({schema_file}); not linted")
    )
    figures["pscheck"] = lint_note
    table = list(rep.issues)
    for d in lint or []:
        table.append(
            {
                "line": d.get("line"),
                "col": d.get("col"),
                "kind": f"pscheck {d.get('code')}",
                "field": None,
                "message": d.get("message"),
            }
        )
    strict_coercions = rep.error_types["coerced (strict rejects)"]
    if n_err_lines:
        status = "fail"
        bad = [i for i in rep.issues if i["kind"] != "coerced (strict rejects)"]
        listed = ", ".join(f"{i['line']} ({i['kind']})" for i in bad)
        summary = (
            f"{n_err_lines} of {rep.lines} lines invalid ({figures['pass_rate_pct']:.1f}% pass) — lines "
            f"{listed}; "
            f"first: line {bad[0]['line']}: {bad[0]['message']}"
        )
    elif strict_coercions:
        status = "fail" if strict else "warn"
        summary = (
            f"all {rep.lines} lines validate, but {strict_coercions} value(s) only by coercion (strict "
            "mode would reject)"
        )
    else:
        status, summary = "pass", f"all {rep.lines} lines validate in strict mode"
    if lint is None:
        summary += f"; {lint_note}"
    if lint and any(d.get("severity") == "error" for d in lint) and status == "pass":
        status, summary = "warn", summary + f"; pscheck reports {len(lint)} schema diagnostic(s)"
    fig = go.Figure(
        go.Bar(x=list(rep.error_types) or ["(no issues)"], y=list(rep.error_types.values()) or [0])
    )
    fig.update_layout(title=f"issues in {Path(path).name} ({rep.lines} lines)", yaxis_title="count")
    return Finding(
        SLUG,
        TITLE,
        status,
        summary,
        figures,
        table,
        fix="fix or drop the listed lines explicitly; make coerced fields the type the schema declares",
        figure=fig,
    ), rep


def finding(cfg: DataSchemaConfig, ctx: AuditContext, live=None) -> Finding:

    path, schema = Path(cfg.path), cfg.schema
    if not path.is_absolute() and not path.exists() and (EXAMPLES_DIR / path).exists():
        path = EXAMPLES_DIR / path  # the bundled examples by bare name (the panel's default)
    file_part, _, cls = schema.partition(":")
    if (
        file_part.endswith(".py")
        and not Path(file_part).is_absolute()
        and not Path(file_part).exists()
        and (EXAMPLES_DIR / file_part).exists()
    ):
        schema = f"{EXAMPLES_DIR / file_part}:{cls}"
    f, _ = check_jsonl_schema(path, schema, strict=cfg.strict, max_lines=cfg.max_lines or None)
    return f


CHECK = Check.of(SLUG, TITLE, DataSchemaConfig, DataSchemaMetrics, finding, number=7, needs="data")
