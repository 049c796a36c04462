"""What a run leaves for a person to read: HTML pages of executed notebooks and the run's index page.

* :func:`export_html` renders an executed notebook to HTML. Figures are stored in notebooks as
  plotly's own mime type (``application/vnd.plotly.v1+json``: JupyterLab renders it natively and the
  ``.ipynb`` stays small); nbconvert has no renderer for it, so each figure becomes a ``<div>`` plus
  a ``Plotly.newPlot`` call, and the page loads plotly.js from ONE shared file beside the pages
  (``plotly.min.js``, copied from the plotly package). The page requests nothing else: nbconvert's
  require.js, MathJax, mermaid and widget-manager loaders (all from CDNs) are left out, and so are
  widget views (a static page cannot run them). A figure with nothing to draw is one line saying so,
  and a notebook that ran at smoke size carries a banner saying its rows are not judged.
* :func:`write_index` writes ``index.html``, which answers first: a sentence saying what the run judged
  (how many rows hold, are refuted, are undecided, need a GPU) and what failed, each notebook's counts,
  its headline numbers in words with their units (``headline_spec``), one summary figure per theme
  notebook drawn at its own size (the output its registry marked, :data:`nbkit.live.FIGURE_METADATA`),
  then the **claims ledger**: one line per row (claim, measured, verdict, kind, n) grouped by notebook,
  its rule, interval, chances and why one click away, filterable by verdict and notebook. A smoke run
  carries a banner and its rows no verdict. Everything recorded stays in ``metrics.json``; the figures
  stay in the notebooks.
"""

from __future__ import annotations

import html
import json
import math
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nbkit.claims import HEADLINE_SPEC, NOT_JUDGED, run_family
from nbkit.live import (
    FIGURE_METADATA,
    NOTHING_PLOTTED,
    PLOTLY_MIME,
    figure_title,
    no_figure_bundle,
    nothing_to_draw,
)
from nbkit.record import METRIC_MIME
from nbkit.runfolder import KERNEL_LOG_SUFFIX, move_in, write_atomic

PLOTLY_JS = "plotly.min.js"


# -- plotly.js, once ---------------------------------------------------------------------------


def ensure_plotly_js(folder: Path) -> Path:
    """Put plotly.js (the copy the installed plotly package ships) into ``folder`` once."""
    target = Path(folder) / PLOTLY_JS
    if not target.is_file():
        from importlib.resources import files

        shipped = files("plotly") / "package_data" / PLOTLY_JS
        if shipped.is_file():
            with shipped.open("rb") as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
        else:  # an unusual plotly build: ask it for the library text
            from plotly.offline import get_plotlyjs

            target.write_text(get_plotlyjs(), encoding="utf-8")
    return target


def ensure_plotly_js_in(folder: Path) -> None:
    """Put plotly.js into a run folder that lacks it, written beside it and renamed in (a reader never
    sees half a file)."""
    if (Path(folder) / PLOTLY_JS).is_file():
        return
    with tempfile.TemporaryDirectory(prefix=".plotly-", dir=folder) as staging:
        move_in(ensure_plotly_js(Path(staging)).parent, Path(folder))


def plotly_div(figure_json: Mapping[str, Any], div_id: str) -> str:
    """A ``<div>`` and the script that draws one plotly figure given as its JSON dict."""
    # "</" inside a JSON string would end the <script> element early.
    data = json.dumps(figure_json.get("data", [])).replace("</", "<\\/")
    layout = json.dumps(figure_json.get("layout", {})).replace("</", "<\\/")
    config = json.dumps({"responsive": True, **figure_json.get("config", {})}).replace("</", "<\\/")
    return (
        f"<div id='{div_id}' class='nbkit-plotly' style='width:100%'></div>"
        f"<script>Plotly.newPlot('{div_id}', {data}, {layout}, {config});</script>"
    )


def head_script(html_text: str, src: str = PLOTLY_JS) -> str:
    """Load plotly.js first thing in ``<head>``: before any other script of the page, so the figure
    scripts find the global ``Plotly`` they call."""
    tag = f"<script src='{src}'></script>"
    lower = html_text.lower()
    at = lower.find("<head>")
    if at < 0:
        return tag + html_text
    at += len("<head>")
    meta = lower.find("<meta charset", at)
    if meta >= 0 and lower[at:meta].strip() == "":
        at = lower.find(">", meta) + 1
    return html_text[:at] + tag + html_text[at:]


WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"


def _plotly_preprocessor():
    from nbconvert.preprocessors import Preprocessor

    class PlotlyToHTML(Preprocessor):
        """Give every plotly mime output an HTML rendering (a figure with nothing to draw: one line saying
        so) and leave out recorded metrics and widget views (in memory; the .ipynb is not changed)."""

        def preprocess(self, nb, resources):
            count = 0
            for cell in nb.cells:
                if "outputs" in cell:
                    # A recorded metric is data for metrics.json, not something to read; a widget view
                    # needs a live kernel or the widget manager from a CDN, and the page has neither.
                    cell["outputs"] = [
                        o
                        for o in cell["outputs"]
                        if METRIC_MIME not in o.get("data", {}) and WIDGET_VIEW_MIME not in o.get("data", {})
                    ]
                for output in cell.get("outputs", []):
                    fig = output.get("data", {}).get(PLOTLY_MIME)
                    if fig is None:
                        continue
                    if nothing_to_draw(fig):
                        output["data"] = no_figure_bundle(figure_title(fig), NOTHING_PLOTTED)
                        continue
                    count += 1
                    output["data"]["text/html"] = plotly_div(fig, f"nbkit-fig-{count}")
                    output["data"].pop(PLOTLY_MIME)
            nb.metadata.pop("widgets", None)
            resources["plotly_figures"] = count
            return nb, resources

    return PlotlyToHTML()


# nbconvert's lab page, less what it would fetch from CDNs: require.js (nothing here is an AMD module:
# plotly.js is loaded as a plain script), MathJax (the notebooks write no TeX), mermaid and the widget
# manager (widget views are left out). The banner, when given, opens the page.
OFFLINE_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_css -%}<style>{{ resources.nbkit_css }}</style>{%- endblock html_head_css -%}
{%- block body_header -%}{{ super() }}{{ resources.nbkit_banner }}{%- endblock body_header -%}
"""
PAGE_CSS = (
    ".smoke-banner{background:#fff4d6;border:2px solid #e0a800;border-radius:4px;padding:.6em 1em;"
    "margin:.6em 1em;font-family:system-ui,sans-serif}"
)


def notebook_smoke(nb: Any) -> bool:
    """Whether an executed notebook ran at smoke size (``SMOKE`` among the parameters papermill gave it)."""
    parameters = ((nb.get("metadata") or {}).get("papermill") or {}).get("parameters") or {}
    return is_smoke(parameters)


def export_html(nb_path: Path, html_path: Path, js_src: str = PLOTLY_JS) -> int:
    """Render an executed notebook to ``html_path``; returns how many plotly figures it holds.

    With figures the page loads plotly.js from ``js_src``: by default ``plotly.min.js`` beside the
    page (put there once per folder); a relative path (``../../plotly.min.js``) points at one copy
    the caller keeps higher up (a sweep's runs share the sweep folder's). Nothing else is requested.
    """
    import nbformat
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        extra_loaders=[DictLoader({"nbkit_page.html.j2": OFFLINE_TEMPLATE})],
        template_file="nbkit_page.html.j2",
    )
    exporter.register_preprocessor(_plotly_preprocessor(), enabled=True)
    nb = nbformat.read(nb_path, as_version=4)
    banner = smoke_banner([nb_path.stem], 1, page="notebook") if notebook_smoke(nb) else ""
    body, resources = exporter.from_notebook_node(
        nb, resources={"nbkit_banner": banner, "nbkit_css": PAGE_CSS}
    )
    figures = int(resources.get("plotly_figures", 0))
    if figures:
        if "/" not in js_src:
            ensure_plotly_js(html_path.parent)
        body = head_script(body, js_src)
    html_path.write_text(body, encoding="utf-8")
    return figures


# -- the claims rows, as recorded -------------------------------------------------------------------

# HEADLINE_SPEC, the record beside ``headline`` that says each number in words: {name: {"label", "unit",
# "help", "tolerance", "relative"}}; older runs kept only the tolerances, under HEADLINE_TOLERANCE.
SMOKE_WHY = "smoke size: not judged"
# The verdicts a ledger counts, in the order the page names them, and their colours.
VERDICT_COLOURS = {
    "holds": "#d7f0d9",
    "refuted": "#f6d3d0",
    "inconclusive": "#fbecc5",
    "needs GPU": "#e3e3ea",
    NOT_JUDGED: "#e4ecf7",
}
_TEXT_FIELDS = (
    "key",
    "claim",
    "field_note",
    "source",
    "kind",
    "measured",
    "verdict",
    "why",
    "rule",
    "n",
    "interval",
    "true_value",
    "false_value",
)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _whole(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None and number.is_integer() else None


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def claim_rows(recorded: Any) -> list[dict[str, Any]]:
    """The claims rows a notebook recorded (``Claim.to_dict()`` each), read field by field: text fields
    as strings, ``level``/``p_*`` as floats, ``units``/``budget`` as integers, ``exact``/``decided`` as
    booleans, and a field a row lacks (an older run's) as None. A ValueError names the row and what was
    expected when the record is not a list of rows with at least a claim and a verdict."""
    if not isinstance(recorded, list):
        raise ValueError(f"a {type(recorded).__name__}, not a list of rows")
    rows = []
    for i, row in enumerate(recorded):
        if not isinstance(row, dict):
            raise ValueError(f"row {i} is a {type(row).__name__}, not an object")
        missing = [k for k in ("claim", "verdict") if not str(row.get(k) or "").strip()]
        if missing:
            raise ValueError(f"row {i} lacks {' and '.join(missing)}")
        out: dict[str, Any] = {k: (None if row.get(k) is None else str(row[k])) for k in _TEXT_FIELDS}
        out.update(
            level=_number(row.get("level")),
            exact=_flag(row.get("exact")),
            units=_whole(row.get("units")),
            budget=_whole(row.get("budget")),
            p_holds_if_true=_number(row.get("p_holds_if_true")),
            p_refuted_if_false=_number(row.get("p_refuted_if_false")),
            alpha_needed=_number(row.get("alpha_needed")),
            decided=_flag(row.get("decided")),
            # Before ``decided``, the probabilities were for the design's n, not the n that ran.
            older="decided" not in row,
        )
        rows.append(out)
    return rows


def as_not_judged(row: Mapping[str, Any]) -> dict[str, Any]:
    """A smoke run's row as the ledger shows it: what was measured, no verdict (an older run judged its
    smoke rows; their verdicts are not findings and are not shown). A row that needs a GPU was not
    measured at all and still says so."""
    if row["verdict"] in (NOT_JUDGED, "needs GPU"):
        return dict(row)
    return {**row, "verdict": NOT_JUDGED, "why": SMOKE_WHY}


def is_smoke(parameters: Mapping[str, Any] | None) -> bool:
    """Whether a notebook ran at smoke size: ``SMOKE`` true among its parameters (``nbkit run --smoke``
    sets it in every notebook; ``-p SMOKE True`` in one)."""
    value = (parameters or {}).get("SMOKE")
    return value is True or (isinstance(value, str) and value.strip() in ("True", "true", "1"))


def ledger_rows(
    notebook: str, recorded: Any, *, smoke: bool = False
) -> tuple[list[dict[str, Any]], str | None]:
    """The claims rows a notebook recorded (see :func:`claim_rows`), each with its notebook, and a
    one-line note when they cannot be read; a smoke notebook's rows carry no verdict."""
    if recorded is None:
        return [], f"{notebook}: recorded no claims"
    try:
        rows = claim_rows(recorded)
    except ValueError as exc:
        return [], f"{notebook}: claims not in the Claim shape ({exc})"
    return [{"notebook": notebook, **(as_not_judged(r) if smoke else r)} for r in rows], None


# -- what the row says, in words ----------------------------------------------------------------------


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _pct(level: float) -> str:
    return f"{100 * level:.4g} %"


def interval_words(row: Mapping[str, Any]) -> str:
    """The interval the verdict used, with its level (Holm-adjusted), or "exact"."""
    if row.get("exact"):
        return "exact measurement: no interval"
    interval = row.get("interval") or ""
    if not interval:
        return "none recorded"
    if row.get("level") is not None:
        return f"{interval} at {_pct(row['level'])} (Holm-adjusted: the interval the verdict used)"
    return f"{interval} (level not recorded)"


def chances_words(row: Mapping[str, Any]) -> str:
    """The rule's operating characteristics at the n that ran, in words."""
    if row.get("exact"):
        return "exact: no chance involved"
    p_true, p_false = row.get("p_holds_if_true"), row.get("p_refuted_if_false")
    if p_true is None or p_false is None:
        return "not recorded for this row"
    if row.get("older"):
        return "recorded by an older nbkit for the design's n, not the n that ran: not shown"
    at_true = f" at the claimed {row['true_value']}" if row.get("true_value") else ""
    at_false = f" at {row['false_value']}" if row.get("false_value") else ""
    decided = (
        "the design can decide at this n"
        if row.get("decided")
        else "the design cannot decide at this n (both need 0.8)"
    )
    return (
        f"at the n that ran ({row.get('n') or '?'}): P(holds | true{at_true}) = {p_true:.2f}, "
        f"P(refuted | false{at_false}) = {p_false:.2f}; {decided}"
    )


def source_words(row: Mapping[str, Any]) -> str:
    """Where a claim comes from: the field notes' section and figure, or nbkit's own claim."""
    source = (row.get("source") or "").strip()
    note = (row.get("field_note") or "").strip()
    if source == "nbkit":
        return "nbkit's own claim (not from the field notes)" + (f"; it states {note}" if note else "")
    where = f"field notes {source}" if source else "field notes (section not recorded)"
    return f"{where}: {note}" if note else where


def units_words(row: Mapping[str, Any]) -> str:
    units, budget = row.get("units"), row.get("budget")
    if units is None:
        return ""
    if budget is not None and units < budget:
        return f"decided after {units} units of a budget of {budget}"
    return f"{units} units" + (f" (the whole budget of {budget})" if budget is not None else "")


def details_html(row: Mapping[str, Any]) -> str:
    """A row's details, one click away: where the claim comes from, its rule, the interval and the
    chances the verdict used, the units that ran, and why."""
    items = [
        ("claim", f"{row['claim']}" + (f" ({row['key']})" if row.get("key") else "")),
        ("source", source_words(row)),
        ("measured", row.get("measured") or "—"),
        ("rule", row.get("rule") or "not recorded"),
        ("interval", interval_words(row)),
        ("chances", chances_words(row)),
        ("units", units_words(row)),
        ("why", row.get("why") or "not recorded"),
    ]
    return "<dl>" + "".join(f"<dt>{k}</dt><dd>{_esc(v)}</dd>" for k, v in items if v) + "</dl>"


# -- the ledger table -------------------------------------------------------------------------------

INDEX_JS = """
function nbkitFilter() {
  var shown = {};
  document.querySelectorAll('#verdict-filter input, #notebook-filter input').forEach(function (box) {
    shown[(box.name || 'verdict') + ':' + box.value] = box.checked;
  });
  var visible = 0;
  document.querySelectorAll('#ledger tr.row').forEach(function (row) {
    var on = shown['verdict:' + row.dataset.verdict] !== false &&
      shown['notebook:' + row.dataset.notebook] !== false;
    row.hidden = !on;
    var next = row.nextElementSibling;
    if (next && next.classList.contains('details')) { next.hidden = !on; }
    if (on) { visible += 1; }
  });
  document.querySelectorAll('#ledger tbody.nb').forEach(function (group) {
    group.hidden = !group.querySelector('tr.row:not([hidden])');
  });
  document.getElementById('ledger-count').textContent = visible;
}
document.querySelectorAll('#verdict-filter input, #notebook-filter input').forEach(function (box) {
  box.addEventListener('change', nbkitFilter);
});
document.querySelectorAll('#ledger tr.row').forEach(function (row) {
  function toggle() {
    row.classList.toggle('open');
    row.setAttribute('aria-expanded', row.classList.contains('open'));
  }
  row.addEventListener('click', toggle);
  row.addEventListener('keydown', function (e) {
    if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); toggle(); }
  });
});
"""

INDEX_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em 2em;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:4px 6px;vertical-align:top;text-align:left}
th{background:#f4f4f6}.note{color:#666;font-style:italic;margin:.2em 0}.failed{color:#a00;font-weight:bold}
code{font-size:90%}#verdict-filter label,#notebook-filter label{margin-right:.8em;padding:2px 6px;
border-radius:3px;white-space:nowrap;display:inline-block;margin-bottom:.2em}
#notebook-filter label{background:#f0f0f3}
.smoke-banner{background:#fff4d6;border:2px solid #e0a800;border-radius:4px;padding:.6em 1em;
margin:.6em 0;font-size:105%}
#answer{font-size:118%;margin:.6em 0}
#notebooks td.count,#notebooks th.count{text-align:right;white-space:nowrap}
#notebooks td.params{font-size:85%;color:#444}
#numbers{display:grid;grid-template-columns:repeat(auto-fill,minmax(600px,1fr));gap:0 1.5em}
#numbers h3{margin:.3em 0 0 0}table.headline{width:100%}
table.headline td.value{white-space:nowrap;font-variant-numeric:tabular-nums}
table.headline td.help{color:#555;font-size:90%}
#glance section{border:1px solid #ddd;border-radius:4px;padding:.4em .8em;margin:0 0 1em 0;overflow-x:auto}
#glance h3{margin:.2em 0}
#ledger{width:100%;table-layout:fixed}
#ledger th{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
#ledger td{line-height:1.35;overflow-wrap:break-word}
#ledger tr.row td{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;padding:2px 6px}
#ledger tbody tr.row{cursor:pointer}
#ledger tr.group th{background:#eef0f4;font-weight:600}
#ledger tr.details{display:none}#ledger tr.open + tr.details:not([hidden]){display:table-row}
#ledger tr.details dl{display:grid;grid-template-columns:max-content 1fr;gap:.15em 1em;margin:.3em 0}
#ledger tr.details dt{font-weight:600;color:#444}#ledger tr.details dd{margin:0;white-space:normal}
#ledger td.why div{display:-webkit-box;-webkit-line-clamp:3;line-clamp:3;
-webkit-box-orient:vertical;overflow:hidden;overflow-wrap:anywhere}
#ledger tr.open td.why div{display:block}
"""
# Column shares of the ledger (an unknown column takes an even share of what is left). The run's
# ledger is one line per row: claim, measured, verdict, kind, n; the rest is one click away.
LEDGER_COLUMNS = {
    "notebook": 8,
    "source": 7,
    "claim": 44,
    "field_note": 8,
    "measured": 22,
    "verdict": 11,
    "kind": 10,
    "rule": 12,
    "interval": 9,
    "n": 13,
    "why": 21,
}
RUN_LEDGER = ("claim", "measured", "verdict", "kind", "n")


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def ledger_html(
    rows: list[dict[str, Any]],
    columns: Sequence[str],
    colours: Mapping[str, str] = VERDICT_COLOURS,
    *,
    details: Callable[[Mapping[str, Any]], str] | None = None,
    groups: Sequence[str] | None = None,
) -> tuple[str, str]:
    """The ledger as HTML: the filter's check boxes (counts per verdict) and the table (``id='ledger'``,
    one row per claim coloured by verdict); ``INDEX_JS`` wires the boxes to the rows. ``colours`` names
    the verdicts and their colours (a word without a colour gets a white row and a box of its own).

    With ``details`` (row → HTML) each row is one line (long values end in "…", never broken mid-word)
    and a click opens the row's details below it; without, long values wrap and a ``why`` column shows
    three lines until its row is clicked. With ``groups`` (the notebooks, in order) the rows are grouped
    by their ``notebook``, one ``tbody`` each, with a box per notebook to filter by."""
    words = list(colours) + sorted({str(r["verdict"]) for r in rows} - set(colours))
    counts = {v: sum(1 for row in rows if row["verdict"] == v) for v in words}
    boxes = "".join(
        f"<label style='background:{colours.get(v, '#fff')}'><input type='checkbox' name='verdict' "
        f"value='{_esc(v)}' checked> {_esc(v)} ({counts[v]})</label>"
        for v in words
        if counts[v]
    )
    known = sum(LEDGER_COLUMNS.get(c, 0) for c in columns)
    unknown = [c for c in columns if c not in LEDGER_COLUMNS]
    widths = {c: LEDGER_COLUMNS.get(c) or max(5, (100 - known) / len(unknown)) for c in columns}
    total = sum(widths.values())
    colgroup = "".join(f"<col style='width:{100 * widths[c] / total:.1f}%'>" for c in columns)

    def one(row: Mapping[str, Any]) -> str:
        colour = colours.get(row["verdict"], "#fff")
        attrs = f"data-verdict='{_esc(row['verdict'])}' class='row' style='background:{colour}'"
        if "notebook" in row:
            attrs += f" data-notebook='{_esc(row['notebook'])}'"
        if details is not None:
            cells = "".join(
                f"<td title='{_esc(_cell(row.get(c)))}'>{_esc(_cell(row.get(c)))}</td>" for c in columns
            )
            return (
                f"<tr {attrs} tabindex='0' aria-expanded='false'>{cells}</tr>"
                f"<tr class='details' style='background:{colour}'><td colspan='{len(columns)}'>"
                f"{details(row)}</td></tr>"
            )
        cells = "".join(
            f"<td class='why'><div>{_esc(row.get(c, ''))}</div></td>"
            if c == "why"
            else f"<td>{_esc(_cell(row.get(c, '')))}</td>"
            for c in columns
        )
        return f"<tr {attrs}>{cells}</tr>"

    by_notebook = ""
    if groups is None:
        body = "<tbody>" + "".join(one(r) for r in rows) + "</tbody>"
    else:
        body = ""
        for group in groups:
            members = [r for r in rows if r.get("notebook") == group]
            if not members:
                continue
            body += (
                f"<tbody class='nb' data-notebook='{_esc(group)}'><tr class='group'>"
                f"<th colspan='{len(columns)}'>{_esc(group)} · {len(members)} rows</th></tr>"
                + "".join(one(r) for r in members)
                + "</tbody>"
            )
        shown = [g for g in groups if any(r.get("notebook") == g for r in rows)]
        if len(shown) > 1:
            by_notebook = "".join(
                f"<label><input type='checkbox' name='notebook' value='{_esc(g)}' checked> {_esc(g)}</label>"
                for g in shown
            )
            by_notebook = f"<div id='notebook-filter'>{by_notebook}</div>"
    head = "".join(f"<th>{_esc(c.replace('_', ' '))}</th>" for c in columns)
    if details is not None:
        note = "<p class='note'>One line per claim; click a row (or press Enter on it) for its details.</p>"
    elif "why" in columns:
        note = "<p class='note'>Click a row to read its <em>why</em> in full.</p>"
    else:
        note = ""
    return (
        boxes,
        f"{by_notebook}{note}<table id='ledger'><colgroup>{colgroup}</colgroup>"
        f"<thead><tr>{head}</tr></thead>{body}</table>",
    )


# -- the index page --------------------------------------------------------------------------------


def summary_figure(nb_path: Path | None) -> dict[str, Any] | None:
    """The figure an executed notebook's theme marked as its summary (the last output so marked), as
    plotly's JSON (without traces when it was stored as the line saying it had nothing to draw); None when
    there is none or the notebook cannot be read."""
    if nb_path is None:
        return None
    try:
        nb = json.loads(Path(nb_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    found = None
    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
        for output in cell.get("outputs", []) if isinstance(cell, dict) else []:
            mark = (output.get("metadata") or {}).get(FIGURE_METADATA) or {}
            if mark.get("summary") is True:
                figure = (output.get("data") or {}).get(PLOTLY_MIME)
                # marked but stored as one line: the figure had nothing to draw
                found = figure if isinstance(figure, dict) else {"data": [], "layout": {}}
    return found


def glance_figure(figure: Mapping[str, Any], div_id: str) -> str:
    """A summary figure drawn at its own size: its own height (and width, when it states one), the card's
    full width otherwise, as on the notebook's page; a figure with nothing to draw is one line."""
    if nothing_to_draw(figure):
        title = figure_title(figure)
        return (
            f"<p class='note'>{_esc(title or 'the summary figure')}: nothing to draw in this run (the "
            "notebook's page says why)</p>"
        )
    return plotly_div(figure, div_id)


def headline_rows(headline: Any, spec: Any) -> list[tuple[str, str, str]]:
    """Each headline number as (words, value with its unit, one line of help), from ``headline`` and its
    ``headline_spec``; a number without a spec (an older run) is named by its identifier."""
    if not isinstance(headline, dict):
        return []
    spec = spec if isinstance(spec, dict) else {}
    out = []
    for name, value in headline.items():
        about = spec.get(name) if isinstance(spec.get(name), dict) else {}
        label = str(about.get("label") or name)
        unit = str(about.get("unit") or "")
        number = _number(value)
        if number is not None and math.isnan(number):
            shown = "not measured in this run"
        elif isinstance(value, float) or (number is not None and not isinstance(value, int)):
            shown = f"{number:.4g}"
        else:
            shown = _fmt(value)
        if unit and shown != "not measured in this run":
            shown += f" {unit}" if unit not in ("%", "×") else unit
        out.append((label, shown, str(about.get("help") or "")))
    return out


def ran_rows(recorded: Any) -> list[tuple[str, str, str]]:
    """The ``ran`` record (experiment → where it ran, wall and CPU seconds) as (experiment, "CPU-s, wall",
    where) rows; nothing for an older run or a record not in that shape."""
    if not isinstance(recorded, Mapping):
        return []
    rows = []
    for slug, info in recorded.items():
        if isinstance(info, Mapping):
            cpu, wall = _number(info.get("cpu_s")), _number(info.get("wall_s"))
            shown = f"{cpu:.0f} CPU-s, {wall:.0f} s wall" if cpu is not None and wall is not None else "—"
            rows.append((str(slug), shown, str(info.get("where", ""))))
    return rows


def _headline_table(rows: list[tuple[str, str, str]]) -> str:
    return (
        "<table class='headline'>"
        + "".join(
            f"<tr><th>{_esc(label)}</th><td class='value'>{_esc(value)}</td>"
            + (f"<td class='help'>{_esc(help_)}</td>" if any(h for _, _, h in rows) else "")
            + "</tr>"
            for label, value, help_ in rows
        )
        + "</table>"
    )


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        text = json.dumps(value)
        return text if len(text) <= 120 else text[:117] + "…"
    return str(value)


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def answer_sentence(results: Sequence[Any], rows: Sequence[Mapping[str, Any]], smoke: Sequence[str]) -> str:
    """The run's answer in one sentence: what was judged, how many rows hold / are refuted / are
    undecided, what needs a GPU, what failed (or that smoke rows were measured, not judged)."""
    ok = [r for r in results if r.ok]
    failed = [r for r in results if not r.ok]
    count = lambda v: sum(1 for r in rows if r["verdict"] == v)  # noqa: E731
    gpu, not_judged = count("needs GPU"), count(NOT_JUDGED)
    holds, refuted = count("holds"), count("refuted")
    judged = len(rows) - gpu - not_judged
    undecided = judged - holds - refuted
    # where the counted rows come from: the judged ones, or (nothing judged) the smoke-size ones
    counted = [r for r in rows if r["verdict"] not in ("needs GPU", NOT_JUDGED)] if judged else rows
    own = sum(1 for r in counted if (r.get("source") or "").strip() == "nbkit")
    with_claims = sorted({r["notebook"] for r in rows})
    parts = []
    if not rows:
        parts.append(
            f"This run recorded no claims ({len(ok)} of {len(results)} notebooks finished)"
            if results
            else "This run has no notebooks"
        )
    else:
        where = f"{_plural(len(with_claims), 'notebook', 'notebooks')}"
        origin = f" ({len(counted) - own} from the field notes, {own} of nbkit's own)" if own else ""
        if judged:
            parts.append(
                f"This run judged {_plural(judged, 'claim', 'claims')} of {where}{origin}: "
                f"{holds} {'holds' if holds == 1 else 'hold'}, {refuted} {'is' if refuted == 1 else 'are'} "
                f"refuted, {undecided} {'is' if undecided == 1 else 'are'} undecided"
            )
        if not_judged:
            parts.append(
                f"{_plural(not_judged, 'claim was', 'claims were')} measured at smoke size"
                + ("" if judged else f" in {where}{origin}")
                + " and not judged: no verdict here is a finding"
            )
        if gpu:
            parts.append(f"{_plural(gpu, 'claim needs', 'claims need')} a GPU this machine does not have")
    if failed:
        parts.append(
            f"{_plural(len(failed), 'notebook', 'notebooks')} did not finish: "
            + ", ".join(f"{r.name} ({getattr(r, 'status', '') or 'failed'})" for r in failed)
        )
    elif results:
        parts.append("every notebook finished")
    return "; ".join(parts) + "."


def smoke_banner(notebooks: Sequence[str], total: int, page: str = "run") -> str:
    """The banner of a run (``page="run"``) or of a notebook's page whose notebooks ran at smoke size."""
    if len(notebooks) == total:
        which = f"This {page} ran at smoke size" if page != "run" else "This is a smoke run"
    else:
        which = f"{', '.join(notebooks)} ran at smoke size"
    return (
        f"<div class='smoke-banner' id='smoke-banner'><b>{_esc(which)}:</b> each experiment ran at its "
        "smallest size, to check that the notebooks work. Its measurements are shown but not judged: "
        "no verdict here is a finding. Run without <code>--smoke</code> for verdicts.</div>"
    )


def run_ledger(
    results: Sequence[Any], smoke: Sequence[str]
) -> dict[str, tuple[list[dict[str, Any]], str | None]]:
    """Each finished notebook's ledger rows and note (:func:`ledger_rows`), its decisive rows re-judged with
    every other notebook's as the run's one Holm family (:func:`nbkit.claims.run_family`)."""
    read = {r.name: ledger_rows(r.name, r.metrics.get("claims"), smoke=r.name in smoke) for r in results}
    rows = run_family([row for name in read for row in read[name][0]])
    out, k = {}, 0
    for name, (nb_rows, note) in read.items():
        out[name] = (rows[k : k + len(nb_rows)], note)
        k += len(nb_rows)
    return out


def write_index(
    run_dir: Path,
    results: Iterable[Any],
    parameters: Mapping[str, Mapping[str, Any]],
    *,
    name: str,
    date: str,
) -> Path:
    """Write ``run_dir/index.html`` (see the module docstring); ``results`` are NotebookResults and
    ``parameters`` each notebook's (a notebook with ``SMOKE`` true ran at smoke size)."""
    results = list(results)
    smoke = [r.name for r in results if is_smoke(parameters.get(r.name))]
    judged = run_ledger([r for r in results if r.ok], smoke)
    table: list[tuple[dict[str, int], str, str]] = []
    headlines, sections, ledger, notes = [], [], [], []
    figures = 0
    for r in results:
        link = f"<a href='{_esc(r.name)}.html'>{_esc(r.name)}</a>" if r.html else _esc(r.name)
        nb_link = f" · <a href='{_esc(r.name)}.ipynb'>ipynb</a>" if r.output else ""
        if (run_dir / f"{r.name}{KERNEL_LOG_SUFFIX}").is_file():  # what its kernel wrote outside the cells
            nb_link += f" · <a href='{_esc(r.name)}{KERNEL_LOG_SUFFIX}'>kernel log</a>"
        kind = getattr(r, "status", "") or ("ok" if r.ok else "failed")
        status = (
            "ok"
            if r.ok
            else f"<span class='failed'>{_esc(kind)}</span>" + (f": {_esc(r.error)}" if r.error else "")
        )
        params = (
            ", ".join(f"{_esc(k)}={_esc(repr(v))}" for k, v in parameters.get(r.name, {}).items())
            or "defaults"
        )
        rows, note = judged.get(r.name, ([], f"{r.name}: {kind}, no claims"))
        ledger.extend(rows)
        if note and r.ok:
            notes.append(note)
        tally = {v: sum(1 for x in rows if x["verdict"] == v) for v in VERDICT_COLOURS}
        tally["undecided"] = len(rows) - sum(tally.values()) + tally["inconclusive"]
        table.append(
            (
                tally,
                f"<tr><td>{link}{nb_link}</td><td>{status}</td>",
                f"<td class='count'>{r.seconds:.0f}</td><td class='params'><code>{params}</code></td></tr>",
            )
        )
        theme = r.ok and (r.metrics.get("headline") is not None or r.metrics.get("claims") is not None)
        numbers = headline_rows(r.metrics.get("headline"), r.metrics.get(HEADLINE_SPEC)) if r.ok else []
        ran = ran_rows(r.metrics.get("ran")) if r.ok else []
        if numbers or ran:
            headlines.append(
                f"<section class='numbers' data-notebook='{_esc(r.name)}'><h3>{_esc(r.name)}</h3>"
                f"{_headline_table(numbers) if numbers else ''}"
                + (
                    f"<details class='ran'><summary>where each experiment ran</summary>{_headline_table(ran)}"
                    "</details>"
                    if ran
                    else ""
                )
                + "</section>"
            )
        if theme:
            figure = summary_figure(r.output)
            if figure is not None:
                figures += 1
                drawn = glance_figure(figure, f"glance-{figures}")
            else:
                drawn = "<p class='note'>no summary figure recorded</p>"
            sections.append(
                f"<section class='nb' data-notebook='{_esc(r.name)}'><h3>{_esc(r.name)}</h3>{drawn}</section>"
            )
    boxes, ledger_table = ledger_html(
        ledger, RUN_LEDGER, details=details_html, groups=[r.name for r in results]
    )
    notes_html = "".join(f"<p class='note'>{_esc(n)}</p>" for n in notes)
    ok = sum(1 for r in results if r.ok)
    total_s = sum(r.seconds for r in results)
    script = ""
    if figures:
        ensure_plotly_js_in(run_dir)
        script = f"<script src='{PLOTLY_JS}'></script>"
    glance = (
        f"<div id='glance'>{''.join(sections)}</div>"
        if sections
        else "<p class='note'>no theme notebook finished</p>"
    )
    banner = smoke_banner(smoke, len(results)) if smoke else ""
    # The counts a run has: what it judged (hold, refuted, undecided), what needs a GPU, what was not judged.
    judged = any(t["holds"] + t["refuted"] + t["undecided"] for t, _, _ in table)
    shown = [
        (key, head)
        for key, head, present in (
            ("holds", "hold", judged),
            ("refuted", "refuted", judged),
            ("undecided", "undecided", judged),
            ("needs GPU", "need GPU", any(t["needs GPU"] for t, _, _ in table)),
            (NOT_JUDGED, "not judged", any(t[NOT_JUDGED] for t, _, _ in table)),
        )
        if present
    ]
    heads = "".join(f"<th class='count'>{head}</th>" for _, head in shown)
    notebooks = "".join(
        start + "".join(f"<td class='count'>{t[key] or ''}</td>" for key, _ in shown) + end
        for t, start, end in table
    )
    page = f"""<!doctype html><html><head><meta charset='utf-8'>{script}
<title>nbkit run {_esc(name)} ({_esc(date)})</title>
<style>{INDEX_CSS}</style></head><body>
<h1>nbkit workbook run {_esc(name)}</h1>
<p>{_esc(date)} · {ok} of {len(results)} notebooks ok · {total_s:.0f} s of notebook time ·
<a href='metrics.json'>metrics.json</a> (everything recorded)</p>
{banner}<p id='answer'>{_esc(answer_sentence(results, ledger, smoke))}</p>
<table id='notebooks'><thead>
<tr><th>notebook</th><th>status</th>{heads}<th class='count'>seconds</th><th>parameters</th></tr></thead>
<tbody>{notebooks}</tbody></table>
<h2>Headline numbers</h2>
<div id='numbers'>{"".join(headlines) or "<p class='note'>no headline numbers recorded</p>"}</div>
<h2>Summary figures</h2>
<p class='note'>Each theme notebook's summary figure; every figure is in the notebook's own page.</p>
{glance}
<h2>Claims ledger (<span id='ledger-count'>{len(ledger)}</span> of {len(ledger)} shown)</h2>
<p class='note'>Each notebook's measured rows judged on an interval are one family: Holm–Bonferroni keeps
the chance of any wrong decisive verdict among them at 5 %, so each row's interval is drawn at the level
its verdict used. A row's chances are its rule simulated at the n that ran: P(holds | true) at the claimed
value, P(refuted | false) at the rule's false value; a row that cannot reach 0.8 on both is undecided by
design and needs more units (<code>nbkit run --profile full</code>).</p>
<div id='verdict-filter'>{boxes}</div>{notes_html}
{ledger_table}
<script>{INDEX_JS}</script></body></html>"""
    index = run_dir / "index.html"
    write_atomic(index, page)  # rewritten as each notebook ends: a reader never sees half a page
    return index
