"""A JSONL file streamed against a Pydantic model (lax and strict), with line numbers, and its schema
module linted by pscheck.

Every line ends up in exactly one bucket (:func:`nbkit.audit.jsonl_schema.validate_jsonl`) — valid, or
an issue naming its line, column/byte and cause — so nothing is dropped silently.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, Checked, CheckMetrics
from nbkit.audit.jsonl_schema import COERCED, JsonlReport, SchemaLoadError, load_schema, validate_jsonl
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
    from nbkit.audit.context import AuditContext

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


@dataclass(frozen=True, kw_only=True)
class DataSchemaMetrics(CheckMetrics):
    """Lines read, how many validate lax and strict, the lines with errors and the values lax parsing
    coerced that strict mode rejects."""

    lines: int
    valid_lax: int
    valid_strict: int
    lines_with_errors: int
    coerced_values: int


def schema_metrics(rep: JsonlReport) -> DataSchemaMetrics:
    """The typed counts of a report."""
    return DataSchemaMetrics(
        lines=rep.lines,
        valid_lax=rep.valid,
        valid_strict=rep.valid_strict,
        lines_with_errors=len({i["line"] for i in rep.issues if i["kind"] != COERCED}),
        coerced_values=rep.error_types[COERCED],
    )


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
    n_err_lines = len({i["line"] for i in rep.issues if i["kind"] != COERCED})
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
    strict_coercions = rep.error_types[COERCED]
    if n_err_lines:
        status = "fail"
        bad = [i for i in rep.issues if i["kind"] != COERCED]
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


def measure(cfg: DataSchemaConfig, ctx: AuditContext, live=None) -> Checked[DataSchemaMetrics]:
    """The data file against its schema, lax and strict, line by line; the schema module linted."""

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
    f, rep = check_jsonl_schema(path, schema, strict=cfg.strict, max_lines=cfg.max_lines or None)
    return Checked(f, schema_metrics(rep) if rep is not None else None)


CHECK = Check.of(SLUG, TITLE, DataSchemaConfig, DataSchemaMetrics, measure, number=7, needs="data")
