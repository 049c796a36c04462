"""Every notebook's widget panels in a real JupyterLab + headless Chromium.

For each workbook notebook (SMOKE=True injected into a temp copy): run its cells in the browser up
to and including the first panel (``--browser-all-cells``: all of them), then check that each
panel renders (controls, Run button and plotly graph visible; no widget error), that changing a
control and pressing Run changes the graph's trace data, and that a failing run shows one
readable line in the panel's output. A generated notebook around a core Panel checks the same
things deterministically, including the error raised by the run function itself.
"""

from __future__ import annotations

import os
import re
import textwrap
import time
from pathlib import Path

import pytest
from labdriver import ROOT, LabError, candidate_changes, has_points, prepare_notebook

pytestmark = pytest.mark.browser

WORKBOOK = sorted(p for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb") if not p.stem.startswith("00_"))
CELL_TIMEOUT_S = 300  # one smoke cell (the first panel's default run included)
RUN_TIMEOUT_S = 180  # one press of Run at smoke size

SYNTHETIC_PANEL = textwrap.dedent(
    """
    from dataclasses import dataclass, field

    from nbkit.panels import Panel


    @dataclass
    class CurveParams:
        steps: int = field(default=5, metadata={"min": 1, "max": 50})
        rate: float = field(default=0.5, metadata={"min": 0.01, "max": 1.0})
        shape: str = field(default="decay", metadata={"choices": ["decay", "growth"]})
        explode: bool = False


    def run_curve(params, live):
        if params.explode:
            raise ValueError("rate too high: loss diverged")
        value = 1.0
        for step in range(params.steps):
            value = value * (1 - params.rate) if params.shape == "decay" else value * (1 + params.rate)
            live.add("loss", step, value)
        return {"final": value}


    panel = Panel(CurveParams(steps=3 if SMOKE else 5), run_curve, title="curve")
    panel.display(); result = panel.run()
    """
)


def write_synthetic_notebook(path: Path, body: str = SYNTHETIC_PANEL) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('SMOKE = False\nDEVICE = "auto"\nSEED = 0')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# synthetic panel"), params, nbformat.v4.new_code_cell(body)]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def assert_renders(nb, k: int, *, fixed_ok: bool = False) -> dict:
    """Panel k shows its controls, Run button and graph, and no widget failed to render. With
    ``fixed_ok`` a panel that draws nothing may have no controls: an experiment whose config has no field
    (notebook 03's signature, derived from the shipped examples)."""
    d = nb.panel(k).describe()
    where = f"{nb.name}: panel {k} ({d['title'] or 'untitled'})"
    assert d["run_visible"], f"{where}: Run button not visible"
    assert d["controls"] or (fixed_ok and not has_points(d["traces"])), f"{where}: no controls rendered"
    hidden = [c["label"] for c in d["controls"] if not c["visible"] and not c["advanced"]]
    assert not hidden, f"{where}: controls not visible: {hidden}"
    shown = [c["label"] for c in d["controls"] if c["visible"] and c["advanced"]]
    assert not shown, f"{where}: the advanced section is open at first: {shown}"
    assert d["graph_visible"], f"{where}: the plotly graph did not render (traces seen: {d['traces']})"
    errors = nb.widget_errors()
    assert not errors, f"{where}: widget rendering errors: {errors}"
    return d


def assert_failure_is_one_readable_line(view, expected: str) -> None:
    d = view.describe()
    where = f"{view.nb.name}: panel {view.k}"
    assert re.search(r"failed", d["status"]), f"{where}: status after a failing run is {d['status']!r}"
    text = d["output_text"].strip()
    assert expected in text, f"{where}: the panel's output does not show {expected!r}: {text[:500]!r}"
    assert "Traceback" not in d["output_text"] and "Traceback" not in d["output_html"], (
        f"{where}: raw traceback shown: {text[:500]!r}"
    )
    assert len(text.splitlines()) == 1, f"{where}: the error is not one line: {text[:500]!r}"
    assert not d["run_disabled"], f"{where}: Run stays disabled after a failure"


def exercise_first_panel(nb, stem: str, save_screenshot, mirror: bool = True, k: int = 0) -> None:
    """The generic checks on a notebook's first panel (or panel k): drawn, responds to a control,
    fails readably."""
    view = nb.panel(k)
    before = view.describe()
    assert has_points(before["traces"]), (
        f"{nb.name}: the first panel's default run drew nothing: {before['traces']}"
    )
    save_screenshot(view, f"{stem}-panel1-before", mirror=mirror)

    # Change one control at a time (cheapest first) and press Run until the figure's data changes.
    tried = []
    changed = False
    for idx, kind, new, old in candidate_changes(before["controls"])[:4]:
        if kind == "dropdown":
            options = [o for o in view.options(idx) if o != old]
            if not options:
                continue
            new = options[0]
        traces_before = view.traces()
        view.set_control(idx, kind, new)
        started = time.monotonic()
        status = view.click_run(RUN_TIMEOUT_S)
        print(
            f"{nb.name}: {before['controls'][idx]['label']} {old!r} -> {new!r}: "
            f"{status} in {time.monotonic() - started:.1f}s"
        )
        after = view.wait_for_traces_change(traces_before)
        label = before["controls"][idx]["label"]
        if status.startswith("done") and after != traces_before and has_points(after):
            changed = True
            break
        tried.append(
            f"{label}: {old!r} -> {new!r} gave status {status!r}, "
            f"output {view.describe()['output_text'].strip()[:160]!r}, data changed: {after != traces_before}"
        )
        view.set_control(idx, kind, old)
    assert changed, f"{nb.name}: no control change made Run update the figure; tried: {tried}"
    save_screenshot(view, f"{stem}-panel1-after", mirror=mirror)
    assert nb.widget_errors() == []

    # A failure inside the run (injected into this notebook's panels) is one readable line.
    nb.execute_silently(FAULT_INJECTION)
    try:
        view.click_run(RUN_TIMEOUT_S)
        assert_failure_is_one_readable_line(view, "RuntimeError: injected by the browser tier")
    finally:
        nb.execute_silently(FAULT_REMOVAL)


# -- the core Panel, deterministic ---------------------------------------------------------------
THEME_LIKE_PANELS = textwrap.dedent(
    """
    import math
    from dataclasses import dataclass, field

    import plotly.graph_objects as go

    from nbkit.panels import Panel


    @dataclass
    class SweepParams:
        lr: float = field(default=0.01, metadata={"min": 1e-4, "max": 1.0, "log": True})
        epochs: int = field(default=6, metadata={"min": 1, "max": 40})
        optimizers: tuple = field(default=("sgd", "adam"), metadata={"choices": ["sgd", "adam"]})


    def sweep(params):  # a theme-style function: returns a finished figure
        xs = list(range(params.epochs))
        fig = go.Figure()
        for opt in params.optimizers:
            ys = [math.exp(-params.lr * 50 * e) * (0.9 if opt == "adam" else 1.0) for e in xs]
            fig.add_scatter(x=xs, y=ys, name=opt)
        return fig


    sweep_panel = Panel(SweepParams(epochs=3 if SMOKE else 6), sweep, title="sweep")
    sweep_panel.display(); result = sweep_panel.run()
    """
)
SECOND_PANEL = textwrap.dedent(
    """
    @dataclass
    class BarsParams:
        n: int = field(default=3, metadata={"min": 1, "max": 8})


    def bars(params, live):  # a streaming function
        live.extend("bytes", list(range(params.n)), [2**k for k in range(params.n)])


    bars_panel = Panel(BarsParams(), bars, title="bars")
    bars_panel.display(); bars_result = bars_panel.run()
    """
)


@pytest.mark.timeout(300)
def test_generated_panels_render_respond_and_fail_readably(open_notebook, lab_root, save_screenshot):
    """Known content, so exact checks: a core Panel whose run function can raise, a theme-style
    panel (log slider, multi-select, function returning a figure) given the workbook's generic
    checks, and a streaming panel."""
    import nbformat

    src = write_synthetic_notebook(lab_root / "src" / "generated.ipynb")
    nb_json = nbformat.read(src, as_version=4)
    nb_json.cells += [nbformat.v4.new_code_cell(THEME_LIKE_PANELS), nbformat.v4.new_code_cell(SECOND_PANEL)]
    nbformat.write(nb_json, src)
    prepare_notebook(src, lab_root / "generated", {"SMOKE": True})
    nb = open_notebook("generated/generated.ipynb")
    nb.run_until_first_panel(CELL_TIMEOUT_S)
    assert nb.panel_count() == 1, "stops after the first panel's cell"
    nb.run_until_first_panel(CELL_TIMEOUT_S, all_cells=True)
    assert nb.panel_count() == 3
    for k in range(3):
        assert_renders(nb, k)

    # Panel 0, the core Panel: exact values.
    d = nb.panel(0).describe()
    assert [c["kind"] for c in d["controls"]] == ["slider", "slider", "dropdown", "checkbox"]
    assert [c["label"] for c in d["controls"]] == ["steps", "rate", "shape", "explode"]
    # SMOKE=True reached the kernel through the injected parameters: 3 steps, not 5.
    assert d["traces"] == [{"type": "scatter", "name": "loss", "x": [0, 1, 2], "y": [0.5, 0.25, 0.125]}]
    view = nb.panel(0)
    save_screenshot(view, "generated-panel1-before", mirror=False)
    view.set_control(0, "slider", 6)
    view.set_control(2, "dropdown", "growth")
    assert view.click_run(RUN_TIMEOUT_S).startswith("done")
    after = view.wait_for_traces_change(d["traces"])
    assert after == [
        {"type": "scatter", "name": "loss", "x": list(range(6)), "y": [1.5**k for k in range(1, 7)]}
    ]
    save_screenshot(view, "generated-panel1-after", mirror=False)
    view.set_control(3, "checkbox", True)
    view.click_run(RUN_TIMEOUT_S)
    assert_failure_is_one_readable_line(view, "ValueError: rate too high: loss diverged")

    # Panel 2 streams into its live figure.
    assert nb.panel(2).traces() == [{"type": "scatter", "name": "bytes", "x": [0, 1, 2], "y": [1, 2, 4]}]

    # Panel 1 gets exactly what the workbook notebooks get; its multi-select grid is folded under the
    # closed "advanced" section until opened.
    folded = nb.panel(1).describe()
    assert folded["advanced_title"] == "advanced (1 setting)"
    assert [(c["label"], c["advanced"], c["visible"]) for c in folded["controls"]] == [
        ("lr", False, True),
        ("epochs", False, True),
        ("optimizers", True, False),
    ]
    nb.panel(1).open_advanced()
    before_change = nb.panel(1).describe()["controls"]
    assert candidate_changes(before_change)[:2] == [
        (2, "multiselect", ["sgd"], ["sgd", "adam"]),
        (0, "slider", "0.005", "0.0100"),
    ]
    exercise_first_panel(nb, "generated-sweep", save_screenshot, mirror=False, k=1)
    # The first candidate change kept one optimizer of the multi-selection (a cheaper rerun).
    d = nb.panel(1).describe()
    assert [(c["label"], c["kind"], c["value"]) for c in d["controls"]][2] == (
        "optimizers",
        "multiselect",
        ["sgd"],
    )
    assert nb.widget_errors() == []


@pytest.mark.timeout(240)
def test_missing_plotly_frontend_is_detected(open_notebook, lab_page, lab_root):
    """The render check can fail: with anywidget's frontend blocked, the graph is reported missing."""
    src = write_synthetic_notebook(lab_root / "src" / "no_frontend.ipynb")
    prepare_notebook(src, lab_root / "no_frontend", {"SMOKE": True})
    lab_page.route(re.compile(r".*/extensions/anywidget/.*"), lambda route: route.abort())
    nb = open_notebook("no_frontend/no_frontend.ipynb")
    nb.run_until_first_panel(CELL_TIMEOUT_S)
    lab_page.wait_for_timeout(3000)  # let the widget manager give up on the model class
    with pytest.raises(AssertionError, match=r"did not render|widget rendering errors"):
        assert_renders(nb, 0)


@pytest.mark.timeout(120)
def test_notebook_that_cannot_open_fails_with_its_name(open_notebook, lab_root):
    broken = lab_root / "broken" / "broken.ipynb"
    broken.parent.mkdir(parents=True, exist_ok=True)
    broken.write_text('{"cells": [ this is not json', encoding="utf-8")
    with pytest.raises(
        LabError, match=r"broken/broken\.ipynb: the notebook did not open.*(dialog|nothing opened)"
    ):
        open_notebook("broken/broken.ipynb")


# -- the workbook's notebooks ------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("source", WORKBOOK, ids=lambda p: p.stem)
def test_workbook_panels_render_respond_and_fail_readably(
    source, request, open_notebook, lab_root, save_screenshot
):
    # The option exists only when pytest is pointed at tests/browser; the env var works either way.
    all_cells = (
        request.config.getoption("--browser-all-cells", default=False)
        or os.environ.get("NBKIT_BROWSER_ALL_CELLS") == "1"
    )
    prepare_notebook(source, lab_root / source.stem, {"SMOKE": True})
    nb = open_notebook(f"{source.stem}/{source.name}")
    cells = nb.run_until_first_panel(CELL_TIMEOUT_S, all_cells=all_cells, drawn=True)
    print(
        f"{source.stem}: cells run in the browser (index: seconds): "
        + ", ".join(f"{c.index}: {c.seconds:.1f}" for c in cells)
    )
    if nb.panel_count() == 0:
        as_text = nb.widgets_shown_as_text()
        hint = (
            f"; widgets were shown as plain text ({as_text[:3]}): the widget frontend is missing"
            if as_text
            else ""
        )
        pytest.fail(
            f"{source.name}: no widget panel (a 'Run' button) appeared after running its cells{hint}",
            pytrace=False,
        )

    drawn = [k for k in range(nb.panel_count()) if has_points(assert_renders(nb, k, fixed_ok=True)["traces"])]
    # A panel that only shows a table (notebook 03's cases and signature) has nothing to redraw: the
    # generic checks take the first panel whose default run drew a figure.
    assert drawn, f"{source.name}: no panel's default run drew a figure"
    exercise_first_panel(nb, source.stem, save_screenshot, k=drawn[0])


# Patch every Panel's run function (test set-up through the kernel; the panel code is untouched).
FAULT_INJECTION = textwrap.dedent(
    """
    import gc as _gc
    from nbkit.panels import Panel as _Panel

    def _nbkit_browser_fault(params, live=None):
        raise RuntimeError("injected by the browser tier")

    _nbkit_saved_runs = {}
    for _p in _gc.get_objects():
        try:
            _is_panel = isinstance(_p, _Panel)
        except ReferenceError:  # dead weak proxies in gc's list
            continue
        if _is_panel:
            _nbkit_saved_runs[id(_p)] = (_p, _p._run_fn)
            _p._run_fn = _nbkit_browser_fault
    assert _nbkit_saved_runs, "no nbkit Panel in this kernel"
    """
)
FAULT_REMOVAL = "for _p, _fn in _nbkit_saved_runs.values():\n    _p._run_fn = _fn\n"


@pytest.mark.timeout(240)
def test_start_here_opens_and_lists_the_workbook(open_notebook, lab_root, lab_page):
    source = ROOT / "notebooks" / "00_start_here.ipynb"
    if not source.exists():
        pytest.fail("notebooks/00_start_here.ipynb (the workshop landing notebook) is missing", pytrace=False)
    prepare_notebook(source, lab_root / source.stem, {"SMOKE": True})
    open_notebook(f"{source.stem}/{source.name}")  # its cells run headless in tests/notebooks
    links = lab_page.locator(".jp-RenderedMarkdown table a").evaluate_all(
        "as => as.map(a => a.textContent.trim())"
    )
    assert [p.stem for p in WORKBOOK] == links, (
        f"landing table links {links}, workbook has {[p.stem for p in WORKBOOK]}"
    )
    text = lab_page.locator(".jp-Notebook").inner_text()
    assert "nbkit run --all --smoke" in text and "nbkit doctor" in text, (
        "the instructor's pre-class commands are not shown"
    )
