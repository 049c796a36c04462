"""The result every audit check returns: a ``Finding`` with status, evidence figures and a fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Ordered from best to worst; "needs_gpu" and "skipped" are not failures.
STATUSES = ("pass", "warn", "fail", "needs_gpu", "skipped", "error")
FAILING = ("fail", "error")


@dataclass
class Finding:
    """One check's verdict on one configuration.

    ``figures`` holds the key measured numbers (JSON-able scalars), ``table`` row dicts of evidence,
    ``figure`` an optional plotly figure (not serialised), ``fix`` what to change when not passing.
    """

    check_id: int
    name: str
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
    def failed(self) -> bool:
        return self.status in FAILING

    def to_dict(self, with_table: bool = True) -> dict[str, Any]:
        from nbkit.record import to_jsonable

        out = {
            "check_id": self.check_id,
            "name": self.name,
            "status": self.status,
            "summary": self.summary,
            "figures": to_jsonable(self.figures),
            "fix": self.fix,
            "seconds": round(self.seconds, 3),
        }
        if with_table:
            out["table"] = to_jsonable(self.table)
        return out

    def to_text(self) -> str:
        mark = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "needs_gpu": "GPU?", "skipped": "SKIP", "error": "ERR "}[self.status]
        lines = [f"[{mark}] {self.check_id:>2}. {self.name}: {self.summary}"]
        for key, value in self.figures.items():
            lines.append(f"        {key} = {_fmt(value)}")
        if self.fix and self.status not in ("pass", "skipped"):
            lines.append(f"        fix: {self.fix}")
        return "\n".join(lines)

    def card_html(self) -> str:
        """A small HTML card for notebooks (status colour, summary, figures, fix)."""
        import html

        colour = {"pass": "#2a7", "warn": "#d90", "fail": "#c22", "needs_gpu": "#68a", "skipped": "#999", "error": "#c22"}[self.status]
        rows = "".join(
            f"<tr><td style='padding:0 8px'>{html.escape(str(k))}</td><td>{html.escape(_fmt(v))}</td></tr>" for k, v in self.figures.items()
        )
        fix = f"<div><i>fix:</i> {html.escape(self.fix)}</div>" if self.fix and self.status not in ("pass", "skipped") else ""
        return (
            f"<div style='border-left:6px solid {colour};padding:4px 10px;margin:6px 0'>"
            f"<b>{self.check_id}. {html.escape(self.name)}</b> — <b style='color:{colour}'>{self.status.upper()}</b>"
            f"<div>{html.escape(self.summary)}</div><table>{rows}</table>{fix}</div>"
        )

    def _repr_html_(self) -> str:
        return self.card_html()


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def error_finding(check_id: int, name: str, exc: BaseException, seconds: float = 0.0) -> Finding:
    """A check crashed: one readable line, never a traceback wall."""
    from nbkit.panels import describe_error

    return Finding(check_id, name, "error", describe_error(exc), fix="see the message; the check itself could not run", seconds=seconds)


def findings_frame(findings: list[Finding]):
    """A pandas DataFrame with one row per finding (for notebooks)."""
    import pandas as pd

    return pd.DataFrame(
        [
            {"check": f.check_id, "name": f.name, "status": f.status, "summary": f.summary, "key figures": "; ".join(f"{k}={_fmt(v)}" for k, v in list(f.figures.items())[:4])}
            for f in findings
        ]
    )

