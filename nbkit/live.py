"""Live-updating plotly curves for loss, memory and throughput.

``LiveFigure`` streams points into named traces. With a widget frontend (JupyterLab, Notebook 7,
VS Code) it drives a ``plotly.graph_objects.FigureWidget`` in place; headless (papermill,
``nbkit run``, plain Python) it keeps a static ``go.Figure`` with the same data and, inside a
kernel, refreshes ONE display output through a display id (``update_display``, which nbclient
applies to the stored output), so the executed notebook holds each figure once, in its final state.

A figure with nothing to draw (no trace holds a point: a drill that only runs on CUDA, an experiment
whose result is text) is never shown as an empty frame: its output is one line naming it and saying so
(:func:`figure_bundle`; the HTML export applies the same rule to figures a notebook displays itself).

Headless outputs are plotly's own mime bundle (``application/vnd.plotly.v1+json`` + a text line)
published raw: displaying the ``go.Figure`` object instead would go through plotly's renderers,
which ignore the display id (every refresh became a new output) and, with the ``notebook``
renderer, embed the whole plotly.js library into the notebook. The HTML export adds plotly.js
once (``nbkit.report``). Redraws are throttled: streaming a point per training step must not cost
more than the step.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

HEADLESS_ENV = "NBKIT_HEADLESS"
PLOTLY_MIME = "application/vnd.plotly.v1+json"
# The key of a figure output's metadata that says what the figure is: ``{"experiment": slug, "summary":
# bool}`` (``nbkit.experiment`` marks each experiment's panel figure; the run's index page shows, per
# notebook, the figure marked as its theme's summary).
FIGURE_METADATA = "nbkit"


def headless() -> bool:
    """True when the harness said there is no widget frontend (``$NBKIT_HEADLESS``)."""
    return os.environ.get(HEADLESS_ENV, "").strip() not in ("", "0", "false", "False")


def widgets_available() -> bool:
    """True when a widget frontend can render ``FigureWidget``s.

    A kernel cannot see whether a frontend is attached, so the harness that runs notebooks
    headless (``nbkit run``, the tests) says so through ``$NBKIT_HEADLESS``; outside a kernel there
    is never a frontend.
    """
    if headless():
        return False
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython

        ip = get_ipython()
        if ip is None or not hasattr(ip, "kernel"):
            return False
        import anywidget  # noqa: F401  (plotly>=6 FigureWidget is an anywidget)
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and hasattr(ip, "kernel")


def configure_static_renderer() -> None:
    """Choose how figures a notebook displays itself (``fig`` as a cell's value) are rendered.

    Headless: plotly's mime type only — the executed notebook carries no copy of plotly.js and the
    HTML export adds the library once per page (``nbkit run`` also sets ``$PLOTLY_RENDERER``, so this
    holds before any LiveFigure exists). In a kernel with a frontend but no widgets: the mime type
    plus "notebook" (plotly.js embedded once), so figures render without network access.
    """
    import plotly.io as pio

    if headless():
        pio.renderers.default = "plotly_mimetype"
    elif in_kernel():
        pio.renderers.default = "plotly_mimetype+notebook"


# The keys a trace draws from: a trace with none of them holding a value draws nothing.
_DRAWN_FROM = (
    "x", "y", "z", "values", "labels", "r", "theta", "lat", "lon", "a", "b", "c",
    "open", "high", "low", "close", "dimensions", "cells", "value", "ids", "locations",
)  # fmt: skip
NOTHING_PLOTTED = "nothing was plotted in this run; what it found is written below"


def nothing_to_draw(figure: Mapping[str, Any]) -> bool:
    """Whether a figure (plotly's JSON) would be an empty frame: no trace, or no trace with a value to
    draw (a drill that only runs on CUDA streamed no point on CPU; an experiment whose result is text)."""
    return not any(_draws(trace) for trace in figure.get("data") or [] if isinstance(trace, Mapping))


def _draws(trace: Mapping[str, Any]) -> bool:
    for key in _DRAWN_FROM:
        value = trace.get(key)
        if isinstance(value, Mapping):  # plotly's typed array {"dtype", "bdata"}
            if value.get("bdata") or value.get("values"):
                return True
        elif isinstance(value, (list, tuple, str)):
            if len(value):
                return True
        elif value is not None:
            return True
    return False


def figure_title(figure: Mapping[str, Any]) -> str:
    """The title text of a figure given as plotly's JSON ("" when it has none)."""
    title = (figure.get("layout") or {}).get("title")
    if isinstance(title, Mapping):
        title = title.get("text")
    return str(title or "")


def no_figure_bundle(title: str, why: str) -> dict[str, Any]:
    """The display bundle that stands in for an empty frame: one line naming the figure and saying why
    there is nothing to draw (HTML for pages and JupyterLab, text for everything else)."""
    import html

    line = f"{title}: {why}" if title else why
    style = "color:#555;font-style:italic"
    return {
        "text/html": f"<p class='nbkit-no-figure' style='{style}'>{html.escape(line)}</p>",
        "text/plain": line,
    }


def figure_bundle(fig) -> dict[str, Any]:
    """The raw display bundle of a static figure: plotly's mime type plus a one-line text fallback; a
    figure with nothing to draw is one line saying so instead of an empty frame."""
    # to_json handles numpy/pandas trace data; the mime payload must be plain JSON.
    payload = json.loads(fig.to_json())
    payload.setdefault("config", {})
    title = fig.layout.title.text or ""
    if nothing_to_draw(payload):
        return no_figure_bundle(title, NOTHING_PLOTTED)
    return {PLOTLY_MIME: payload, "text/plain": f"<plotly figure {title!r}: {len(fig.data)} trace(s)>"}


class LiveFigure:
    """A figure whose traces grow while a run streams points into it.

    >>> live = LiveFigure("loss", xaxis="step", yaxis="loss")
    >>> live.add("train", 0, 2.3); live.add("train", 1, 2.1); live.flush()
    >>> live.trace_data("train")
    ([0, 1], [2.3, 2.1])
    """

    def __init__(
        self,
        title: str = "",
        *,
        xaxis: str = "",
        yaxis: str = "",
        widget: bool | None = None,
        min_interval_s: float | None = None,
        height: int = 360,
        mode: str = "lines+markers",
    ):
        import plotly.graph_objects as go

        self.widget = widgets_available() if widget is None else widget
        # Widget redraws are cheap; re-sending a whole static figure through a display id is not.
        self.min_interval_s = min_interval_s if min_interval_s is not None else (0.25 if self.widget else 2.0)
        self.mode = mode
        layout = dict(
            title=title,
            xaxis_title=xaxis,
            yaxis_title=yaxis,
            height=height,
            template="plotly_white",
            margin=dict(l=60, r=20, t=50, b=50),
        )
        self.figure = go.FigureWidget(layout=layout) if self.widget else go.Figure(layout=layout)
        self._pending: dict[str, tuple[list, list]] = {}
        self._data: dict[str, tuple[list, list]] = {}
        self._last_push: float | None = None  # None: nothing pushed yet, so the first point shows at once
        self._handle = None
        self._shown_in: int | None = None  # the execution count of the cell that last showed it
        # Sent with every display and update of the headless output (nbclient replaces a stored
        # output's metadata with each update's): see :meth:`mark`.
        self.metadata: dict[str, Any] = {}
        if not self.widget:
            configure_static_renderer()

    # -- streaming -----------------------------------------------------------------------
    def add(self, name: str, x: Any, y: Any) -> None:
        """Append one point to trace ``name`` (created on first use)."""
        self.extend(name, [x], [y])

    def extend(self, name: str, xs: Iterable[Any], ys: Iterable[Any]) -> None:
        xs, ys = list(xs), list(ys)
        if len(xs) != len(ys):
            raise ValueError(f"trace {name!r}: {len(xs)} x values but {len(ys)} y values")
        px, py = self._pending.setdefault(name, ([], []))
        px.extend(xs)
        py.extend(ys)
        dx, dy = self._data.setdefault(name, ([], []))
        dx.extend(xs)
        dy.extend(ys)
        if self._last_push is None or time.monotonic() - self._last_push >= self.min_interval_s:
            self.flush()

    def flush(self) -> None:
        """Push pending points to the figure now."""
        if not self._pending:
            return
        names = {t.name: i for i, t in enumerate(self.figure.data)}
        ctx = self.figure.batch_update() if self.widget else contextlib.nullcontext()
        with ctx:
            for name, (xs, ys) in self._pending.items():
                if name not in names:
                    self.figure.add_scatter(x=list(xs), y=list(ys), name=name, mode=self.mode)
                    names[name] = len(self.figure.data) - 1
                else:
                    trace = self.figure.data[names[name]]
                    trace.x = tuple(trace.x or ()) + tuple(xs)
                    trace.y = tuple(trace.y or ()) + tuple(ys)
        self._pending = {}
        self._last_push = time.monotonic()
        self._refresh()

    def reset(self, title: str | None = None) -> None:
        """Remove every trace (a new run starts); keep the layout."""
        self._pending = {}
        self._data = {}
        self.figure.data = ()
        if title is not None:
            self.figure.layout.title = title
        self._refresh()

    def set_figure(self, fig) -> None:
        """Replace traces and layout with those of ``fig`` (a finished figure from a theme module)."""
        ctx = self.figure.batch_update() if self.widget else contextlib.nullcontext()
        with ctx:
            self.figure.data = ()
            for trace in fig.data:
                self.figure.add_trace(trace)
            self.figure.layout = fig.layout
        self._pending = {}
        self._data = {
            t.name: (_as_list(t.x), _as_list(t.y))
            for t in self.figure.data
            if hasattr(t, "x") and hasattr(t, "y")
        }
        self._refresh()

    def mark(self, **fields: Any) -> None:
        """Say what this figure is in its output's metadata (``metadata["nbkit"]``), e.g.
        ``mark(experiment="ladder", summary=True)``; a later mark adds to the earlier ones."""
        self.metadata = {FIGURE_METADATA: {**self.metadata.get(FIGURE_METADATA, {}), **fields}}
        self._refresh()

    # -- reading -------------------------------------------------------------------------
    def trace_data(self, name: str) -> tuple[list, list]:
        """All points streamed into ``name`` so far, flushed or not."""
        xs, ys = self._data.get(name, ([], []))
        return list(xs), list(ys)

    @property
    def trace_names(self) -> Sequence[str]:
        return list(self._data)

    # -- display -------------------------------------------------------------------------
    def show(self):
        """Display the figure (a live widget, or a static output refreshed through its display id)."""
        from IPython.display import display

        if self.widget:
            display(self.figure)
        elif in_kernel():
            cell = _execution_count()
            if self._handle is None:
                self._handle = display(
                    figure_bundle(self.figure), raw=True, metadata=self.metadata, display_id=True
                )
            elif cell == self._shown_in:  # shown again by the same cell (a loop): still one output
                self._refresh()
            else:  # shown again by another cell: one output there too, under the same id, kept in step
                display(
                    figure_bundle(self.figure),
                    raw=True,
                    metadata=self.metadata,
                    display_id=self._handle.display_id,
                )
            self._shown_in = cell
        return self

    def _refresh(self) -> None:
        # Headless only: replace the stored output in place (nbclient applies update_display_data).
        if self._handle is not None:
            self._handle.update(figure_bundle(self.figure), raw=True, metadata=self.metadata)

    def close(self) -> None:
        self.flush()

    def _ipython_display_(self):  # displaying a LiveFigure shows its figure
        self.show()


def _execution_count() -> int | None:
    from IPython import get_ipython

    ip = get_ipython()
    return getattr(ip, "execution_count", None)


def _as_list(values) -> list:
    # Trace data may be a tuple, a numpy array or a pandas Series: never test its truth value.
    return [] if values is None else list(values)
