"""The one result shape of a diagnostic check: a ``Finding`` (status, summary, figures, table, fix).

Audit checks, the KG pitfall detectors and any other check return a ``Finding``; notebooks display
it as a card, the CLI prints ``to_text()``, JSON output uses ``to_dict()``. Findings are data: this
module depends on nothing of the UI (errors are described by :mod:`nbkit.errors`).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from nbkit.errors import describe_error
from nbkit.record import to_jsonable

# Ordered from best to worst; "needs_gpu" and "skipped" are not failures.
STATUSES = ("pass", "warn", "fail", "needs_gpu", "skipped", "error")
FAILING = ("fail", "error")
_MARK = {
    "pass": "PASS",
    "warn": "WARN",
    "fail": "FAIL",
    "needs_gpu": "GPU?",
    "skipped": "SKIP",
    "error": "ERR ",
}
_COLOUR = {
    "pass": "#2a7",
    "warn": "#d90",
    "fail": "#c22",
    "needs_gpu": "#68a",
    "skipped": "#999",
    "error": "#c22",
}


@dataclass
class Finding:
    """One check's verdict on one input.

    ``check`` is the check's slug (its key everywhere), ``title`` its readable name; ``figures`` holds
    the key measured numbers (JSON-able scalars), ``table`` row dicts of evidence, ``figure`` an
    optional plotly figure (not serialised), ``fix`` what to change when not passing.
    """

    check: str
    title: str
    status: str
    summary: str
    figures: dict[str, Any] = field(default_factory=dict)
    table: list[dict[str, Any]] = field(default_factory=list)
    fix: str = ""
    figure: Any = None
    seconds: float = 0.0

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"finding status must be one of {STATUSES}, got {self.status!r}")

    @property
    def ok(self) -> bool:
        return self.status == "pass"

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    def to_dict(self, with_table: bool = True) -> dict[str, Any]:
        out = {
            "check": self.check,
            "title": self.title,
            "status": self.status,
            "summary": self.summary,
            "figures": to_jsonable(self.figures),
            "fix": self.fix,
            "seconds": round(self.seconds, 3),
        }
        if with_table:
            out["table"] = to_jsonable(self.table)
        return out

    def row(self) -> dict[str, Any]:
        """One flat row for a findings table."""
        return {
            "check": self.check,
            "title": self.title,
            "status": self.status,
            "summary": self.summary,
            "key figures": "; ".join(f"{k}={_fmt(v)}" for k, v in list(self.figures.items())[:4]),
        }

    def to_text(self) -> str:
        lines = [f"[{_MARK[self.status]}] {self.check}: {self.summary}"]
        for key, value in self.figures.items():
            lines.append(f"        {key} = {_fmt(value)}")
        if self.fix and self.status not in ("pass", "skipped"):
            lines.append(f"        fix: {self.fix}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return f"[{_MARK[self.status].strip()}] {self.check}: {self.summary}"

    def card_html(self) -> str:
        """A small HTML card for notebooks (status colour, summary, figures, fix)."""
        colour = _COLOUR[self.status]
        rows = "".join(
            f"<tr><td style='padding:0 8px'>{html.escape(str(k))}</td><td>{html.escape(_fmt(v))}</td></tr>"
            for k, v in self.figures.items()
        )
        fix = (
            f"<div><i>fix:</i> {html.escape(self.fix)}</div>"
            if self.fix and self.status not in ("pass", "skipped")
            else ""
        )
        return (
            f"<div style='border-left:6px solid {colour};padding:4px 10px;margin:6px 0'>"
            f"<b>{html.escape(self.title)}</b> <code>{html.escape(self.check)}</code> — <b "
            f"style='color:{colour}'>{self.status.upper()}</b>"
            f"<div>{html.escape(self.summary)}</div><table>{rows}</table>{fix}</div>"
        )

    def _repr_html_(self) -> str:
        return self.card_html()


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    return text if len(text) < 200 else text[:197] + "..."


def error_finding(check: str, title: str, exc: BaseException, seconds: float = 0.0) -> Finding:
    """A check crashed: one readable line, never a traceback wall."""
    return Finding(
        check,
        title,
        "error",
        describe_error(exc),
        fix="see the message; the check itself could not run",
        seconds=seconds,
    )


def findings_frame(findings: list[Finding]):
    """A pandas DataFrame with one row per finding (for notebooks)."""
    import pandas as pd

    return pd.DataFrame([f.row() for f in findings])
