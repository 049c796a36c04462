"""The diagnosis as text (default), JSON (for CI) or an HTML page, each leading with its answer.

First what the user came for: **will it start** (the errors that stop the job at start, one line each)
and **will it fit** (each rank's predicted peak against the GPU, and the cheapest change that fits, with
its figure); then the table — each coupled setting (error / warning / ok), the fit (fits / does not fit)
and each audit check that ran (its own pass / warn / fail) — then the fit's details.

All three are rendered from one document, the diagnosis's JSON (``Diagnosis.to_dict()``), so they say the
same; this module reads that document only (the diagnosis renders itself through it, not the other way).
The table is nbkit's ledger (:func:`nbkit.report.ledger_html`), coloured and filtered by these words.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any

from nbkit.diagnose.fit import gib_text
from nbkit.diagnose.rows import terminal_width, wrap
from nbkit.report import INDEX_CSS, INDEX_JS, ledger_html

FORMATS = ("text", "json", "html")
COLUMNS = ("source", "claim", "measured", "verdict", "rule", "n", "why")

# What each row says, and its colour in the HTML table: a coupling, the fit, an audit check.
ROW_COLOURS = {
    "error": "#f6d3d0",
    "warning": "#fbecc5",
    "ok": "#d7f0d9",
    "not checked": "#e3e3ea",
    "does not fit": "#f6d3d0",
    "may not fit": "#fbecc5",
    "fits": "#d7f0d9",
    "not judged": "#e3e3ea",
    "fail": "#f6d3d0",
    "warn": "#fbecc5",
    "pass": "#d7f0d9",
    "needs GPU": "#e3e3ea",
}


def _gib(x: float) -> str:
    return gib_text(x / 2**30)


def header(doc: Mapping[str, Any]) -> str:
    w = doc["world"]
    return (
        f"{doc['config']} ({doc['format']}) · deepspeed: {doc['deepspeed'] or 'none named'} · model: "
        f"{doc['model'] or doc['model_note']} · "
        f"{w['nodes']} node(s) × {w['gpus_per_node']} GPU(s) = {w['world_size']} ({w['note']})"
        + (f" · GPU {doc['gpu_memory_gib']:g} GiB" if doc["gpu_memory_gib"] else "")
    )


def answer_lines(doc: Mapping[str, Any]) -> list[str]:
    """Will it start, will it fit: the first lines of every format."""
    a = doc["answer"]
    stops, warns = a["stops"], a["warnings"]
    if not doc["couplings"]:
        start = "will it start: not checked — no ds_config named, nothing coupled"
    elif stops:
        start = f"will it start: no — {len(stops)} error(s) stop the job at start"
    else:
        start = "will it start: yes — no setting the two files state stops the job"
    lines = [start, *(f"  ✘ {s}" for s in stops)]
    if warns:
        lines.append(f"  and {len(warns)} warning(s): it runs, but trains otherwise:")
        lines += [f"  ! {w}" for w in warns]
    fit = f"will it fit: {a['fit']}" + (f" — {a['fit_line']}" if a["fit_line"] else "")
    if a["fix"] is not None:
        fit += f"; cheapest fix: {a['fix']['change']} → {gib_text(a['fix']['predicted_peak_gib'])} GiB"
    return [*lines, fit]


def fit_lines(doc: Mapping[str, Any]) -> list[str]:
    f = doc["fit"]
    if "skipped" in f:
        return [f"  {f['skipped']}"]
    p = f["parts_bytes"]
    lines = [
        f"  plan: {f['plan']}",
        f"  predicted peak per rank: {gib_text(f['predicted_peak_gib'])} GiB = params {_gib(p['params'])} + "
        f"grads {_gib(p['grads'])} + optimizer {_gib(p['optimizer'])} + buckets {_gib(p['buffers'])} + "
        f"activations {_gib(p['activations'])} + gathered {_gib(p['gathered'])} + step temporaries "
        f"{_gib(p['step_temporaries'])} GiB (peak at the {f['phase']})",
        f"  verdict: {f['verdict']} — {f['why']}",
    ]
    acc = f["accuracy"]
    lo, hi = acc["pred_over_meas"]
    band = (
        f"predicted ÷ measured {lo}–{hi} at this stage, measured at CPU scale"
        if acc["adapter_tolerance"] is None
        else f"band {lo}–{hi}: this stage's full-fine-tuning range, measured at CPU scale, widened by a "
        f"stated {acc['adapter_tolerance']:.0%} each way (no adapter run measured)"
    )
    lines.append(
        f"  accuracy: {band} ({acc['scale']}; {acc['command']}); on GPUs the figure is a prediction (not "
        f"measured: {acc['not_measured']})"
    )
    lines += [f"  note: {n}" for n in f["notes"]]
    if f["fixes"]:
        lines.append("  changes that make it fit (cheapest first):")
        lines += [
            f"    - {x['change']}: {gib_text(x['predicted_peak_gib'])} GiB ({x['why']})" for x in f["fixes"]
        ]
    return lines


def summary(doc: Mapping[str, Any]) -> str:
    """The problems counted, or clean: the line every text report leads with."""
    pr = doc["problems"]
    return "summary: " + (", ".join(f"{v} {k}" for k, v in pr.items() if v) or "clean")


def text(doc: Mapping[str, Any], width: int | None = None) -> str:
    """The report as text: the summary, will it start, will it fit, then the details; every line wrapped
    at ``width`` (the terminal's), its continuation indented under it."""
    out = [
        f"nbkit diagnose: {doc['config']}",
        summary(doc),
        header(doc),
        "",
        *answer_lines(doc),
        "",
        "coupling (trainer config ↔ ds_config):",
    ]
    if not doc["couplings"]:
        out.append("  no ds_config named: nothing coupled")
    for c in doc["couplings"]:
        out.append(
            f"  {c['verdict']:<11} {c['setting']}: {c['trainer']}  |  {c['deepspeed']}  →  {c['resolved']}"
        )
        if c["verdict"] != "ok":
            out.append(f"              {c['why']}  [rule: {c['rule']}]")
    out += ["", "will it fit:", *fit_lines(doc), "", f"audit ({doc['audit']['note']}):"]
    out += [f"  {line}" for line in doc["audit"]["lines"]]
    width = width or terminal_width()
    wrapped = []
    for line in out:
        indent = " " * (len(line) - len(line.lstrip()))
        wrapped += wrap(line.strip(), width, indent, indent + "    ") if line.strip() else [""]
    return "\n".join(wrapped)


def html_fragment(doc: Mapping[str, Any]) -> str:
    """The answer, the table and the fit's details as HTML (the notebook's display, the page's body)."""
    esc = html.escape
    first, *rest = answer_lines(doc)
    fit_at = next(i for i, line in enumerate(rest) if line.startswith("will it fit:"))
    start_items = "".join(f"<li>{esc(x.strip())}</li>" for x in rest[:fit_at])
    answer = (
        f"<div id='answer'><h2>{esc(first)}</h2>{f'<ul>{start_items}</ul>' if start_items else ''}"
        f"<h2>{esc(rest[fit_at])}</h2></div>"
    )
    rows = doc["rows"]
    boxes, table = ledger_html(rows, COLUMNS, ROW_COLOURS)
    details = "<br>".join(esc(x.strip()) for x in fit_lines(doc))
    return (
        f"<p><b>{esc(summary(doc))}</b></p><p>{esc(header(doc))}</p>{answer}"
        "<h3>Every setting, the fit and the audit</h3>"
        f"<p>rows: <span id='ledger-count'>{len(rows)}</span> of {len(rows)} shown</p>"
        f"<div id='verdict-filter'>{boxes}</div>{table}"
        f"<h3>Will it fit: the details</h3><p>{details}</p>"
    )


def html_page(doc: Mapping[str, Any]) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>nbkit diagnose "
        f"{html.escape(str(doc['config']))}</title>"
        f"<style>{INDEX_CSS}</style></head><body><h1>nbkit diagnose</h1>{html_fragment(doc)}"
        f"<script>{INDEX_JS}</script></body></html>"
    )


def render(doc: Mapping[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(doc, indent=2, ensure_ascii=False, default=str)
    if fmt == "html":
        return html_page(doc)
    return text(doc)
