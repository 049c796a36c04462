"""A finished run's diagnosis: ``nbkit diagnose RUN_DIR`` and notebook 04's "your finished run".

:func:`diagnose_run` reads every artefact of the run folder (:mod:`nbkit.diagnose.artefacts`), judges
the curves (:mod:`~nbkit.diagnose.curves`, :mod:`~nbkit.diagnose.schedule`) and each memory snapshot
(:mod:`~nbkit.diagnose.memory`), and returns a :class:`FinishedRun`: its rows, its pictures, and the
report as text, JSON or an HTML page. In Jupyter the object displays its report and figures. Its rows
are a diagnosis of the user's run, not field-note claims: they never enter the claims ledger.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbkit.diagnose.artefacts import RunArtefacts, read_run
from nbkit.diagnose.curves import plural
from nbkit.diagnose.memory import memory_rows
from nbkit.diagnose.rows import CLEAR, FIGURE, FOUND, NOT_CHECKED, UNDECIDED, RunRow, terminal_width, wrap
from nbkit.diagnose.rules import CURVE_KEYS, curve_rows
from nbkit.diagnose.run_figures import block_map, curves_figure
from nbkit.diagnose.schedule import expected_curve
from nbkit.diagnose.setup import EXAMPLES_DIR
from nbkit.diagnose.snapshot import Memory, allocation_site, analyse
from nbkit.record import to_jsonable
from nbkit.report import INDEX_CSS, PLOTLY_JS, plotly_div

if TYPE_CHECKING:
    import plotly.graph_objects as go

EXAMPLE_RUN = (
    "finished_run"  # nbkit/diagnose/examples/finished_run: a tiny CPU run and a constructed snapshot
)
STATUS_COLOURS = {
    "found": "#f6d3d0",
    "clear": "#d7f0d9",
    "undecided": "#fbecc5",
    "not checked": "#eeeeee",
    "figure": "#ffffff",
}


def run_folder(name: str | Path) -> Path:
    """``name`` as a path when it is a folder, else the bundled example run of that name."""
    p = Path(name)
    if p.is_dir() or not (EXAMPLES_DIR / p).is_dir():
        return p
    return EXAMPLES_DIR / p


@dataclass
class FinishedRun:
    """One finished run's diagnosis: what was read, the rows, and the pictures."""

    artefacts: RunArtefacts
    rows: list[RunRow]
    memories: list[tuple[str, list[Memory]]] = field(default_factory=list)

    @property
    def findings(self) -> list[RunRow]:
        return [r for r in self.rows if r.status == FOUND]

    @property
    def exit_code(self) -> int:
        """0 nothing found, 1 findings (undecided rows and figures never count); bad input never gets here."""
        return 1 if self.findings else 0

    # -- pictures ---------------------------------------------------------------------------------------

    def figures(self) -> list[go.Figure]:
        """The curves (when any were logged) and one block map per snapshot and device."""
        a = self.artefacts
        out = []
        sched = a.schedule
        expected = expected_curve(next((r for r in self.rows if r.key == "lr-schedule"), None))
        fig = curves_figure(
            a.curves, self.rows, max_grad_norm=sched.max_grad_norm if sched else None, expected_lr=expected
        )
        if fig is not None:
            out.append(fig)
        for (path, snap), (_, memories) in zip(a.snapshots, self.memories, strict=True):
            for m in memories:
                f = block_map(snap, m.device, allocation_site)
                f.update_layout(title=f"{a.rel(path)} · {f.layout.title.text}")
                out.append(f)
        return out

    # -- the report --------------------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Rows by status (figures, which judge nothing, left out)."""
        out = {st: 0 for st in (FOUND, CLEAR, UNDECIDED, NOT_CHECKED)}
        for r in self.rows:
            if r.status != FIGURE:
                out[r.status] += 1
        return out

    def summary(self) -> str:
        """The answer in one sentence: what was found (each with its first step), then the other rows."""
        c = self.counts()
        rest = ", ".join(
            f"{n} {word}"
            for n, word in (
                (c[CLEAR], "clear"),
                (c[UNDECIDED], "cannot tell"),
                (c[NOT_CHECKED], "not checked"),
            )
            if n
        )
        found = self.findings
        if not found:
            return f"nothing found ({rest or 'no rule applied'})"
        what = "; ".join(r.label + (f" (from step {r.steps[0]})" if r.steps else "") for r in found)
        return f"{plural(len(found), 'problem')} found: {what}" + (f" — and {rest}" if rest else "")

    def header(self) -> list[str]:
        """What was read, as what: the artefacts, each series with the name it was logged under, the
        schedule and precision, and the notes."""
        a = self.artefacts
        lines = ["read:"]
        lines += [f"  {x}" for x in a.read]
        if a.curves:
            lines.append("series (read as ← logged as, in which artefact):")
            for s in a.curves.values():
                convention = f", {s.convention} convention" if s.convention else ""
                lines.append(
                    f"  {s.what} ← {s.source}{convention}: {plural(len(s), 'point')}, steps "
                    f"{int(s.steps[0])}–{int(s.steps[-1])}"
                )
        if a.unread:
            lines.append(
                f"  loss-like series not read: {', '.join(a.unread[:12])}"
                f"{', …' if len(a.unread) > 12 else ''} (name one with --series KIND=NAME)"
            )
        if a.schedule is not None:
            s = a.schedule
            lines.append(
                f"schedule from {s.source}: {s.kind}, learning_rate {s.peak:g}, warmup_steps "
                f"{s.warmup_steps:g}"
                + (f", warmup_ratio {s.warmup_ratio:g}" if s.warmup_ratio else "")
                + (
                    f", max_grad_norm {s.max_grad_norm:g}"
                    if s.max_grad_norm is not None
                    else ", max_grad_norm not set"
                )
            )
        if a.precision_where:
            lines.append(f"precision: {a.precision or 'decided at launch (auto)'} ({a.precision_where})")
        if a.total_steps:
            lines.append(f"total steps: {a.total_steps} ({a.total_where})")
        lines += [f"note: {n}" for n in a.notes]
        return lines

    def text(self, width: int | None = None) -> str:
        """The report as text, the summary first, every line wrapped at ``width`` (the terminal's)."""
        width = width or terminal_width()
        out = wrap(f"nbkit diagnose: finished run {self.artefacts.path}", width, "", "  ")
        out += wrap(f"summary: {self.summary()}", width, "", "  ")
        out.append("")
        for line in self.header():
            indent = len(line) - len(line.lstrip())
            out += wrap(line.strip(), width, " " * indent, " " * (indent + 4))
        curve_rows = [r for r in self.rows if r.key.split(":")[0] in CURVE_KEYS]
        if curve_rows:
            out += ["", "curves:"]
            for r in curve_rows:
                out += r.text_lines(width)
        for (path, _), _mem in zip(self.artefacts.snapshots, self.memories, strict=True):
            src = self.artefacts.rel(path)
            out += ["", f"memory ({src}):"]
            for r in self.rows:
                if r.source == src:
                    out += r.text_lines(width)
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        a = self.artefacts
        s = a.schedule
        return {
            "run": str(a.path),
            "summary": {"text": self.summary(), "findings": [r.label for r in self.findings]} | self.counts(),
            "read": a.read,
            "notes": a.notes,
            "schedule": None
            if s is None
            else {
                "source": s.source,
                "lr_scheduler_type": s.kind,
                "learning_rate": s.peak,
                "warmup_steps": s.warmup_steps,
                "warmup_ratio": s.warmup_ratio,
                "max_steps": s.max_steps,
                "max_grad_norm": s.max_grad_norm,
                "where": s.where,
            },
            "total_steps": a.total_steps,
            "precision": a.precision,
            "precision_where": a.precision_where,
            "unread_loss_like": a.unread,
            "curves": {
                k: {
                    "kind": v.kind,
                    "logged": v.logged,
                    "eval_set": v.eval_set,
                    "convention": v.convention,
                    "source": v.source,
                    "points": len(v),
                    "first_step": int(v.steps[0]),
                    "last_step": int(v.steps[-1]),
                }
                for k, v in a.curves.items()
            },
            "rows": [r.to_dict() for r in self.rows],
            "findings": [r.key for r in self.findings],
            "exit_code": self.exit_code,
        }

    def table_html(self) -> str:
        head = "".join(f"<th>{c}</th>" for c in ("status", "row", "what was found", "rule", "read from"))
        body = "".join(
            f"<tr style='background:{STATUS_COLOURS[r.status]}'><td><b>{html.escape(r.status)}</b></td>"
            f"<td>{html.escape(r.label)}</td><td>{html.escape(r.measured)}"
            + (f"<br><i>fix: {html.escape(r.fix)}</i>" if r.fix and r.status == FOUND else "")
            + f"</td><td><small>{html.escape(r.rule)}</small></td>"
            f"<td><small>{html.escape(r.source)}</small></td></tr>"
            for r in self.rows
        )
        return (
            f"<p id='answer'><b>summary:</b> {html.escape(self.summary())}</p>"
            f"<table><tr>{head}</tr>{body}</table>"
            "<details><summary>what was read, as what</summary><pre>"
            + html.escape("\n".join(self.header()))
            + "</pre></details>"
        )

    def html_page(self, plotly_js: str = PLOTLY_JS, inline_js: str | None = None) -> str:
        """A page with the rows and the pictures; plotly.js from ``plotly_js`` beside it, or inline."""
        figs = "".join(plotly_div(f.to_plotly_json(), f"run-fig-{i}") for i, f in enumerate(self.figures()))
        script = (
            f"<script>{inline_js}</script>"
            if inline_js is not None
            else f"<script src='{plotly_js}'></script>"
        )
        return (
            "<!doctype html><html><head><meta charset='utf-8'>"
            f"{script}<title>nbkit diagnose {html.escape(str(self.artefacts.path))}</title>"
            f"<style>{INDEX_CSS}</style></head><body><h1>nbkit diagnose: a finished run</h1>"
            f"{self.table_html()}{figs}</body></html>"
        )

    def _repr_html_(self) -> str:
        return self.table_html()

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        display(HTML(self.table_html()))
        for f in self.figures():
            display(f)


def diagnose_run(
    run_dir: str | Path,
    config: str | Path | None = None,
    *,
    series_names: Iterable[tuple[str, str]] = (),
    run_id: str | None = None,
) -> FinishedRun:
    """Read the run in ``run_dir`` (and ``config``, a trainer config naming its schedule, clipping and
    precision; ``series_names``, ``(kind, name)`` pairs naming series; ``run_id``, the run of an MLflow
    store) and judge it. Bad input in any artefact: :class:`nbkit.diagnose.setup.DiagnoseError` naming the
    file."""

    a = read_run(run_dir, config, series_names=series_names, run_id=run_id)
    rows: list[RunRow] = []
    if a.curves or a.others:
        sched = a.schedule
        rows += curve_rows(
            a.curves,
            a.others,
            schedule=sched,
            total=a.total_steps,
            total_where=a.total_where,
            max_grad_norm=sched.max_grad_norm if sched else None,
            clip_where=sched.where.get("max_grad_norm", "") if sched else "",
            precision=a.precision,
            precision_where=a.precision_where,
        )
    memories = []
    for path, snap in a.snapshots:
        ms = analyse(snap)
        memories.append((a.rel(path), ms))
        rows += memory_rows(ms, a.rel(path))
    return FinishedRun(a, rows, memories)


def finished_run(run_dir: str | Path = EXAMPLE_RUN, config: str | Path | None = None) -> FinishedRun:
    """Notebook 04's "your finished run": the bundled example by default, or your run's folder, with its
    trainer config when given (``""`` or None: beside the run, else what the Trainer recorded). Displays its
    report and pictures (notebook 04 runs it as the audit's ``finished-run`` experiment, whose typed
    metrics are what it records)."""
    return diagnose_run(run_folder(run_dir), config or None)


def render(run: FinishedRun, fmt: str, *, plotly_js: str = PLOTLY_JS, inline_js: bool = False) -> str:
    if fmt == "json":
        # to_jsonable: numpy scalars as numbers, a non-finite figure as "inf"/"nan" (strict JSON for CI)
        return json.dumps(to_jsonable(run.to_json()), indent=2, ensure_ascii=False, allow_nan=False)
    if fmt == "html":
        js = None
        if inline_js:
            from plotly.offline import get_plotlyjs

            js = get_plotlyjs()
        return run.html_page(plotly_js, js)
    return run.text()
