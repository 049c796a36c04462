"""What a run leaves for a person to read: HTML pages of executed notebooks and the run's index page.

* :func:`export_html` renders an executed notebook to HTML. Figures are stored in notebooks as
  plotly's own mime type (``application/vnd.plotly.v1+json``: JupyterLab renders it natively and the
  ``.ipynb`` stays small); nbconvert has no renderer for it, so each figure becomes a ``<div>`` plus
  a ``Plotly.newPlot`` call, and the page loads plotly.js from ONE shared file beside the pages
  (``plotly.min.js``, copied from the plotly package) — no CDN, renders offline, one copy per run.
* :func:`write_index` writes ``index.html``: the run's name and date; per notebook its status, wall
  time, parameters and links; **at a glance**, each theme notebook's summary figure (the output its
  theme's registry marked as the summary, :data:`nbkit.live.FIGURE_METADATA`, drawn from the figure
  stored in the executed notebook with the run's one ``plotly.min.js``) beside its ``headline``
  numbers; the run's **claims ledger** (every ``claims`` row every notebook recorded, in the
  :class:`nbkit.claims.Claim` shape), verdicts colour-coded and filterable with a few lines of inline
  JavaScript; browser-tier screenshots. Everything recorded stays in ``metrics.json``; the figures
  stay in the notebooks.
"""

from __future__ import annotations

import html
import json
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nbkit.claims import as_claims
from nbkit.live import FIGURE_METADATA, PLOTLY_MIME
from nbkit.record import METRIC_MIME
from nbkit.runfolder import KERNEL_LOG_SUFFIX, move_in, write_atomic

PLOTLY_JS = "plotly.min.js"

VERDICT_COLOURS = {
    "holds": "#d7f0d9",
    "refuted": "#f6d3d0",
    "inconclusive": "#fbecc5",
    "needs GPU": "#e3e3ea",
}


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
    """Load plotly.js first thing in ``<head>``: before any AMD loader (require.js) that would
    capture it as a module instead of the global ``Plotly`` the figure scripts call."""
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


def _plotly_preprocessor():
    from nbconvert.preprocessors import Preprocessor

    class PlotlyToHTML(Preprocessor):
        """Give every plotly mime output an HTML rendering and leave recorded metrics out (in memory; the
        .ipynb is not changed)."""

        def preprocess(self, nb, resources):
            count = 0
            for cell in nb.cells:
                if "outputs" in cell:  # a recorded metric is data for metrics.json, not something to read
                    cell["outputs"] = [o for o in cell["outputs"] if METRIC_MIME not in o.get("data", {})]
                for output in cell.get("outputs", []):
                    fig = output.get("data", {}).get(PLOTLY_MIME)
                    if fig is None:
                        continue
                    count += 1
                    output["data"]["text/html"] = plotly_div(fig, f"nbkit-fig-{count}")
                    output["data"].pop(PLOTLY_MIME)
            resources["plotly_figures"] = count
            return nb, resources

    return PlotlyToHTML()


def export_html(nb_path: Path, html_path: Path, js_src: str = PLOTLY_JS) -> int:
    """Render an executed notebook to ``html_path``; returns how many plotly figures it holds.

    With figures the page loads plotly.js from ``js_src``: by default ``plotly.min.js`` beside the
    page (put there once per folder); a relative path (``../../plotly.min.js``) points at one copy
    the caller keeps higher up (a sweep's runs share the sweep folder's).
    """
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter()
    exporter.register_preprocessor(_plotly_preprocessor(), enabled=True)
    body, resources = exporter.from_notebook_node(nbformat.read(nb_path, as_version=4))
    figures = int(resources.get("plotly_figures", 0))
    if figures:
        if "/" not in js_src:
            ensure_plotly_js(html_path.parent)
        body = head_script(body, js_src)
    html_path.write_text(body, encoding="utf-8")
    return figures


# -- the index page --------------------------------------------------------------------------------


def _esc(value: Any) -> str:
    return html.escape(str(value))


def ledger_rows(notebook: str, recorded: Any) -> tuple[list[dict[str, str]], str | None]:
    """The claims rows a notebook recorded, as dicts, and a one-line note when they cannot be read."""
    if recorded is None:
        return [], f"{notebook}: recorded no claims"
    if not isinstance(recorded, list):
        return [], f"{notebook}: its claims are a {type(recorded).__name__}, not a list of Claim rows"
    try:
        claims = as_claims(recorded)
    except (TypeError, ValueError) as exc:  # an older shape, or a row a theme got wrong
        return [], f"{notebook}: claims not in the Claim shape ({exc})"
    return [{"notebook": notebook, **c.to_dict()} for c in claims], None


def summary_figure(nb_path: Path | None) -> dict[str, Any] | None:
    """The figure an executed notebook's theme marked as its summary (the last output so marked), as
    plotly's JSON; None when there is none or the notebook cannot be read."""
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
            figure = (output.get("data") or {}).get(PLOTLY_MIME)
            if mark.get("summary") is True and isinstance(figure, dict):
                found = figure
    return found


GLANCE_HEIGHT = 340  # px: two figures side by side and their numbers fit a laptop screen's first view


def glance_figure(figure: Mapping[str, Any], div_id: str) -> str:
    """A summary figure drawn at the glance's size: its own data and layout, the card's width, a height
    of at most :data:`GLANCE_HEIGHT`."""
    layout = dict(figure.get("layout") or {})
    layout.pop("width", None)
    layout["height"] = min(int(layout.get("height") or GLANCE_HEIGHT), GLANCE_HEIGHT)
    layout["autosize"] = True
    return plotly_div({**figure, "layout": layout}, div_id)


def _headline_table(headline: Any) -> str:
    if headline is None:
        return "<p class='note'>no headline recorded</p>"
    if not isinstance(headline, dict):
        return f"<p class='note'>headline is a {_esc(type(headline).__name__)}, not a dict</p>"
    rows = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(_fmt(v))}</td></tr>" for k, v in headline.items())
    return f"<table class='headline'>{rows}</table>"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        text = json.dumps(value)
        return text if len(text) <= 120 else text[:117] + "…"
    return str(value)


INDEX_JS = """
function nbkitFilter() {
  var shown = {};
  document.querySelectorAll('#verdict-filter input').forEach(function (box) {
    shown[box.value] = box.checked;
  });
  var visible = 0;
  document.querySelectorAll('#ledger tbody tr').forEach(function (row) {
    var on = shown[row.dataset.verdict] !== false;
    row.style.display = on ? '' : 'none';
    if (on) { visible += 1; }
  });
  document.getElementById('ledger-count').textContent = visible;
}
document.querySelectorAll('#verdict-filter input').forEach(function (box) {
  box.addEventListener('change', nbkitFilter);
});
document.querySelectorAll('#ledger tbody tr').forEach(function (row) {
  row.addEventListener('click', function () { row.classList.toggle('open'); });
});
"""

INDEX_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:4px 6px;vertical-align:top;text-align:left}
th{background:#f4f4f6}.note{color:#666;font-style:italic;margin:.2em 0}.failed{color:#a00;font-weight:bold}
code{font-size:90%}#verdict-filter label{margin-right:1em;padding:2px 6px;border-radius:3px}
figure{display:inline-block;margin:.5em}
#glance{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:1em}
#glance section{border:1px solid #ddd;border-radius:4px;padding:.4em .8em;min-width:0}
#glance h3{margin:.2em 0}#glance table.headline{font-size:92%}
#ledger{width:100%;table-layout:fixed}#ledger td{overflow-wrap:anywhere;line-height:1.35}
#ledger tbody tr{cursor:pointer}
#ledger td.why div{display:-webkit-box;-webkit-line-clamp:3;line-clamp:3;
-webkit-box-orient:vertical;overflow:hidden}
#ledger tr.open td.why div{display:block}
"""
# The ledger fits a laptop screen: fixed column shares, long values wrap, `why` shows three lines
# until its row is clicked.
LEDGER_COLUMNS = {
    "notebook": 8,
    "claim": 13,
    "field_note": 8,
    "measured": 11,
    "verdict": 8,
    "kind": 6,
    "interval": 9,
    "n": 6,
    "p_holds_if_true": 5,
    "p_refuted_if_false": 5,
    "why": 21,
}
# Column heads where the field name would not say it: the rule's operating characteristics at defaults.
LEDGER_HEADS = {"p_holds_if_true": "P(holds | true)", "p_refuted_if_false": "P(refuted | false)"}


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def ledger_html(
    rows: list[dict[str, Any]], columns: Sequence[str], colours: Mapping[str, str] = VERDICT_COLOURS
) -> tuple[str, str]:
    """The claims ledger as HTML: the verdict filter's check boxes (counts per verdict) and the table
    (``id='ledger'``, one row per claim coloured by verdict); ``INDEX_JS`` wires the boxes to the rows.
    ``colours`` names the verdicts and their colours (a table whose rows say other words passes its own;
    a word without a row gets no box). Column widths come from ``LEDGER_COLUMNS`` (an unknown column takes
    an even share of what is left), long values wrap, and ``why`` shows three lines until its row is
    clicked."""
    counts = {v: sum(1 for row in rows if row["verdict"] == v) for v in colours}
    boxes = "".join(
        f"<label style='background:{colour}'><input type='checkbox' value='{_esc(v)}' checked> {_esc(v)} "
        f"({counts[v]})</label>"
        for v, colour in colours.items()
        if counts[v] or colours is VERDICT_COLOURS
    )
    known = sum(LEDGER_COLUMNS.get(c, 0) for c in columns)
    unknown = [c for c in columns if c not in LEDGER_COLUMNS]
    widths = {c: LEDGER_COLUMNS.get(c) or max(5, (100 - known) / len(unknown)) for c in columns}
    total = sum(widths.values())
    colgroup = "".join(f"<col style='width:{100 * widths[c] / total:.1f}%'>" for c in columns)
    body = "".join(
        f"<tr data-verdict='{_esc(row['verdict'])}' "
        f"style='background:{colours.get(row['verdict'], '#fff')}'>"
        + "".join(
            f"<td class='why'><div>{_esc(row.get(c, ''))}</div></td>"
            if c == "why"
            else f"<td>{_esc(_cell(row.get(c, '')))}</td>"
            for c in columns
        )
        + "</tr>"
        for row in rows
    )
    head = "".join(f"<th>{_esc(LEDGER_HEADS.get(c, c.replace('_', ' ')))}</th>" for c in columns)
    note = "<p class='note'>Click a row to read its <em>why</em> in full.</p>" if "why" in columns else ""
    return (
        boxes,
        f"{note}<table "
        f"id='ledger'><colgroup>{colgroup}</colgroup><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>",
    )


def write_index(
    run_dir: Path,
    results: Iterable[Any],
    parameters: Mapping[str, Mapping[str, Any]],
    *,
    name: str,
    date: str,
) -> Path:
    """Write ``run_dir/index.html`` (see the module docstring); ``results`` are NotebookResults."""
    results = list(results)
    summary, sections, ledger, notes = [], [], [], []
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
        summary.append(
            f"<tr><td>{link}{nb_link}</td><td>{status}</td><td>{r.seconds:.1f}</td><td><code>{params}</code></td></tr>"
        )
        rows, note = (
            ledger_rows(r.name, r.metrics.get("claims")) if r.ok else ([], f"{r.name}: {kind}, no claims")
        )
        ledger.extend(rows)
        if note:
            notes.append(note)
        if r.ok and (r.metrics.get("headline") is not None or r.metrics.get("claims") is not None):
            figure = summary_figure(r.output)
            if figure is not None:
                figures += 1
                drawn = glance_figure(figure, f"glance-{figures}")
            else:
                drawn = "<p class='note'>no summary figure recorded</p>"
            headline = _headline_table(r.metrics.get("headline"))
            sections.append(
                f"<section class='nb' data-notebook='{_esc(r.name)}'><h3>{_esc(r.name)}</h3>"
                f"{drawn}{headline}</section>"
            )
    boxes, table = ledger_html(ledger, tuple(LEDGER_COLUMNS))
    notes_html = "".join(f"<p class='note'>{_esc(n)}</p>" for n in notes)
    shots_dir = run_dir / "screenshots"
    shots = sorted(shots_dir.glob("*.png")) if shots_dir.is_dir() else []
    gallery = "".join(
        f"<figure><img src='screenshots/{_esc(p.name)}' "
        f"width='480'><figcaption>{_esc(p.stem)}</figcaption></figure>"
        for p in shots
    )
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
    page = f"""<!doctype html><html><head><meta charset='utf-8'>{script}
<title>nbkit run {_esc(name)} ({_esc(date)})</title>
<style>{INDEX_CSS}</style></head><body>
<h1>nbkit workbook run {_esc(name)}</h1>
<p>{_esc(date)} · {ok} of {len(results)} notebooks ok · {total_s:.0f} s of notebook time ·
<a href='metrics.json'>metrics.json</a> (everything recorded)</p>
<h2>Notebooks</h2>
<table id='notebooks'><thead>
<tr><th>notebook</th><th>status</th><th>seconds</th><th>parameters</th></tr></thead>
<tbody>{"".join(summary)}</tbody></table>
<h2>At a glance</h2>
<p class='note'>Each theme notebook's summary figure and headline numbers; every figure is in the
notebook's own page.</p>
{glance}
<h2>Claims ledger (<span id='ledger-count'>{len(ledger)}</span> of {len(ledger)} shown)</h2>
<p class='note'>Each notebook's measured rows judged on an interval are one family: Holm–Bonferroni
keeps the chance of any wrong decisive verdict among them at 5 %. P(holds | true) and
P(refuted | false) are each rule's own verdict function simulated at the default n with its stated
spread; a row that cannot reach 0.8 on both reads "not decided at defaults" and runs in the full
profile (<code>nbkit run --profile full</code>).</p>
<div id='verdict-filter'>{boxes}</div>{notes_html}
{table}
{("<h2>Panel screenshots (browser tier)</h2>" + gallery) if gallery else ""}
<script>{INDEX_JS}</script></body></html>"""
    index = run_dir / "index.html"
    write_atomic(index, page)  # rewritten as each notebook ends: a reader never sees half a page
    return index
