"""The diagnosis as text (default), JSON (for CI) or an HTML page with the claims ledger.

The ledger is nbkit's own (:func:`nbkit.report.ledger_html`, the table of a run's index page): one
row per claim — each coupled setting, the fit, each audit check that ran — with its measured or
predicted value, verdict and why.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

from nbkit.diagnose.fit import gib_text
from nbkit.report import INDEX_CSS, INDEX_JS, ledger_html

if TYPE_CHECKING:
    from nbkit.diagnose.diagnosis import Diagnosis

FORMATS = ("text", "json", "html")
COLUMNS = ("source", "claim", "measured", "verdict", "rule", "n", "why")
_MARK = {
    "agree": "ok  ",
    "auto": "auto",
    "absent": "—   ",
    "error": "ERR ",
    "warning": "WARN",
    "not checked": "??  ",
}


def _gib(x: float) -> str:

    return gib_text(x / 2**30)


def header(d: Diagnosis) -> str:
    s = d.setup
    return (
        f"{s.config_path} ({s.fmt}) · deepspeed: {s.ds_source or 'none named'} · model: "
        f"{s.model_spec or s.model_note} · "
        f"{s.nodes} node(s) × {s.gpus_per_node} GPU(s) = {s.world_size} ({s.world_note})"
        + (f" · GPU {s.gpu_memory_gib:g} GiB" if s.gpu_memory_gib else "")
    )


def fit_lines(d: Diagnosis) -> list[str]:
    if d.fit is None:
        return [f"  {d.fit_skipped}"]
    f = d.fit
    p = f.parts
    lines = [
        f"  plan: {f.plan}",
        f"  predicted peak per rank: {_gib(f.peak_gib * 2**30)} GiB = params {_gib(p['params'])} + grads "
        f"{_gib(p['grads'])} + optimizer "
        f"{_gib(p['optimizer'])} + buckets {_gib(p['buffers'])} + activations {_gib(p['activations'])} + "
        "gathered "
        f"{_gib(p['gathered'])} + step temporaries {_gib(p['step_temporaries'])} GiB (peak at the "
        f"{p['phase']})",
        f"  verdict: {f.verdict} — {f.why}",
    ]
    acc = f.to_dict()["accuracy"]
    band = (
        f"predicted ÷ measured {f.ratio[0]}–{f.ratio[1]} at this stage, measured at CPU scale"
        if f.adapter_tolerance is None
        else f"band {f.ratio[0]}–{f.ratio[1]}: this stage's full-fine-tuning range, measured at CPU scale, "
        "widened by a stated "
        f"{f.adapter_tolerance:.0%} each way (no adapter run measured)"
    )
    lines.append(
        f"  accuracy: {band} ({acc['scale']}; {acc['command']}); on GPUs the figure is a prediction (not "
        f"measured: {acc['not_measured']})"
    )
    for n in f.notes:
        lines.append(f"  note: {n}")
    if f.fixes:
        lines.append("  changes that make it fit (cheapest first):")
        for x in f.fixes:
            lines.append(f"    - {x['change']}: {_gib(x['predicted_peak_gib'] * 2**30)} GiB ({x['why']})")
    return lines


def text(d: Diagnosis) -> str:
    out = [f"nbkit diagnose: {header(d)}", "", "coupling (trainer config ↔ ds_config):"]
    if not d.couplings:
        out.append("  no ds_config named: nothing coupled")
    for c in d.couplings:
        out.append(f"  {_MARK[c.status]} {c.setting}: {c.trainer}  |  {c.deepspeed}  →  {c.resolved}")
        if c.status in ("error", "warning", "not checked"):
            out.append(f"       {c.why}  [rule: {c.rule}]")
    out += ["", "will it fit:"] + fit_lines(d) + ["", f"audit ({d.audit_note}):"]
    out += [f"  {f.to_text()}" for f in d.findings]
    pr = d.problems
    out += [
        "",
        "summary: " + ", ".join(f"{v} {k}" for k, v in pr.items() if v)
        if any(pr.values())
        else "summary: clean",
    ]
    return "\n".join(out)


def to_json(d: Diagnosis) -> dict[str, Any]:
    s = d.setup
    return {
        "config": str(s.config_path),
        "format": s.fmt,
        "deepspeed": s.ds_source or None,
        "model": s.model_spec or None,
        "model_note": s.model_note,
        "world": {
            "nodes": s.nodes,
            "gpus_per_node": s.gpus_per_node,
            "world_size": s.world_size,
            "note": s.world_note,
        },
        "gpu_memory_gib": s.gpu_memory_gib,
        "couplings": [c.to_dict() for c in d.couplings],
        "fit": d.fit.to_dict() if d.fit is not None else {"skipped": d.fit_skipped},
        "audit": {"note": d.audit_note, "findings": [f.to_dict(with_table=False) for f in d.findings]},
        "claims": [c.to_dict() for c in d.claims()],
        "problems": d.problems,
        "exit_code": d.exit_code,
    }


def html_fragment(d: Diagnosis) -> str:
    """The ledger and the fit details as an HTML fragment (the notebook's display, the page's body)."""

    rows = [c.to_dict() for c in d.claims()]
    boxes, table = ledger_html(rows, COLUMNS)
    fit = "<br>".join(html.escape(x.strip()) for x in fit_lines(d))
    return (
        f"<p>{html.escape(header(d))}</p><p>claims: <span id='ledger-count'>{len(rows)}</span> of "
        f"{len(rows)} shown</p>"
        f"<div id='verdict-filter'>{boxes}</div>{table}"
        f"<h3>Will it fit</h3><p>{fit}</p><p><b>summary:</b> {html.escape(json.dumps(d.problems))}</p>"
    )


def html_page(d: Diagnosis) -> str:

    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>nbkit diagnose "
        f"{html.escape(str(d.setup.config_path))}</title>"
        f"<style>{INDEX_CSS}</style></head><body><h1>nbkit diagnose</h1>{html_fragment(d)}"
        f"<script>{INDEX_JS}</script></body></html>"
    )


def render(d: Diagnosis, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(to_json(d), indent=2, ensure_ascii=False, default=str)
    if fmt == "html":
        return html_page(d)
    return text(d)
