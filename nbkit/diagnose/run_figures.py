"""Pictures of a finished run: its curves on shared steps with the flagged steps marked, and a memory
snapshot's segments as a map of allocated and free blocks.

Quantities with different units get their own axes (the training loss and every eval set's loss share
one; the grad norm, on a log scale, and the learning rate each have theirs), all on the same step axis.
Each kind of event has its own marker (:data:`EVENTS`: a spike, a grad-norm explosion, an overfitting
onset — named with its eval set —, the LR leaving its schedule) and a legend entry saying what it is.

A long run's curves are drawn thinned (:func:`thin`): a million points per curve would make a page of
tens of megabytes that no browser draws smoothly, while a screen is a few thousand pixels wide. Each of
:data:`DRAW_BUCKETS` equal step ranges keeps its first, last, lowest and highest point, so every spike and
dip stays visible at its height, and the steps a row flagged and every non-finite value are always kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from nbkit.diagnose.curves import EVAL_LOSS, GRAD_NORM, LEARNING_RATE, LOSS, Series
from nbkit.diagnose.rows import FOUND, RunRow
from nbkit.diagnose.snapshot import ACTIVE_STATES, MIB, size_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

FLAG = "#c22"
DRAW_BUCKETS = 1000  # equal step ranges a long curve is drawn in (four points each at most)
STATE_COLOURS = {"active_allocated": "#3a6fb0", "pending": "#e39b2d", "inactive": "#d8d8d8"}
MAX_SEGMENTS = 40


def _at(s: Series, steps: tuple[int, ...]) -> tuple[list[int], list[float]]:
    idx = np.searchsorted(s.steps, steps)
    xs, ys = [], []
    for st, i in zip(steps, idx, strict=True):
        if i < len(s.steps) and s.steps[i] == st:
            xs.append(int(st))
            ys.append(float(s.values[i]) if np.isfinite(s.values[i]) else float("nan"))
    return xs, ys


def thin(steps: np.ndarray, values: np.ndarray, keep=(), buckets: int = DRAW_BUCKETS) -> np.ndarray:
    """Indices of the points of a curve to draw: all of them when there are at most 4 × ``buckets``; else,
    in each of ``buckets`` equal ranges of steps, the first, last, lowest and highest finite point, and
    always the non-finite points and those at the steps in ``keep``. Hand-written because plotly draws
    every point it is given (its WebGL traces included) and neither numpy nor pandas has a min/max
    decimation; vectorised, so a million points take milliseconds."""

    steps = np.asarray(steps)
    values = np.asarray(values, dtype=float)
    n = len(steps)
    if n <= 4 * buckets:
        return np.arange(n)
    span = int(steps[-1]) - int(steps[0]) + 1
    bucket = (steps.astype(np.int64) - int(steps[0])) * buckets // span
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    ends = np.r_[starts[1:], n] - 1
    of = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
    finite = np.isfinite(values)
    low = np.where(finite, values, np.inf)
    high = np.where(finite, values, -np.inf)

    def first_where(hit: np.ndarray) -> np.ndarray:  # the first index of each bucket where ``hit`` holds
        idx = np.flatnonzero(hit)
        return idx[np.r_[True, of[idx][1:] != of[idx][:-1]]]

    lowest = first_where(low == np.minimum.reduceat(low, starts)[of])
    highest = first_where(high == np.maximum.reduceat(high, starts)[of])
    wanted = np.asarray(sorted({int(k) for k in keep}), dtype=steps.dtype)
    at = np.searchsorted(steps, wanted)
    at = at[(at < n) & (steps[np.minimum(at, n - 1)] == wanted)]
    return np.unique(np.concatenate([starts, ends, lowest, highest, np.flatnonzero(~finite), at]))


def _drawn(steps: np.ndarray, values: np.ndarray, keep=()) -> tuple[np.ndarray, np.ndarray]:
    idx = thin(steps, values, keep, DRAW_BUCKETS)
    return np.asarray(steps)[idx], np.asarray(values)[idx]


# One marker per kind of event, each its own shape and colour, so a legend entry names what a mark is.
EVENTS = {
    "loss-spikes": ("spike", {"symbol": "x", "color": "#c22", "size": 11}),
    "grad-explosions": ("grad-norm explosion", {"symbol": "triangle-up", "color": "#e07b00", "size": 12}),
    "overfitting": ("overfitting onset", {"symbol": "star", "color": "#7b2cbf", "size": 14}),
    "lr-schedule": (
        "LR departs from the configured schedule",
        {"symbol": "diamond", "color": "#1b7f5f", "size": 11},
    ),
}
NONFINITE_LINE = {"color": FLAG, "dash": "dot"}


def log_ticks(values: Any) -> dict[str, Any]:
    """Tick settings for a log axis over ``values``: within two decades, 1, 2 and 5 of each decade.

    Plotly labels every digit of a short log range on its own (2, 3, … 9, 10), and in a panel 260 px high
    the 9 and the 10 above it overlap; over more decades its own choice (one label a decade) is legible."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if v.size and np.log10(v.max() / v.min()) <= 2:
        return {"dtick": "D2"}
    return {}


def curves_figure(
    curves: dict[str, Series],
    rows: list[RunRow],
    *,
    max_grad_norm: float | None = None,
    expected_lr: tuple[np.ndarray, np.ndarray] | None = None,
) -> go.Figure | None:
    """Loss and every eval set's loss, grad norm and LR on one step axis (one panel per unit), each kind of
    event marked with its own marker and named in the legend (an overfitting onset with its eval set)."""

    from plotly.subplots import make_subplots

    evals = [s for s in curves.values() if s.kind == EVAL_LOSS]
    panels = [
        p
        for p in ("loss", GRAD_NORM, LEARNING_RATE)
        if (p == "loss" and (LOSS in curves or evals)) or p in curves
    ]
    if not panels:
        return None
    titles = {
        "loss": "loss (train, eval)",
        GRAD_NORM: "grad norm (log scale)",
        LEARNING_RATE: "learning rate",
    }
    fig = make_subplots(
        rows=len(panels),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.07,
        subplot_titles=[titles[p] for p in panels],
    )
    row_of = {p: i + 1 for i, p in enumerate(panels)}
    by = {r.key: r for r in rows}
    flagged = {st for r in rows if r.status == FOUND for st in r.steps}
    longest = max(len(s) for s in curves.values())

    def marks(s: Series, row_key: str, panel: str) -> None:
        r = by.get(row_key)
        if r is None or r.status != FOUND or not r.steps:
            return
        xs, ys = _at(s, r.steps)
        if xs:
            name, marker = EVENTS[row_key.partition(":")[0]]
            fig.add_scatter(
                x=xs,
                y=ys,
                mode="markers",
                name=name + (f" (eval set {s.eval_set})" if s.eval_set else ""),
                marker=marker,
                row=row_of[panel],
                col=1,
            )

    if LOSS in curves:
        s = curves[LOSS]
        x, y = _drawn(s.steps, s.values, flagged)
        fig.add_scatter(
            x=x,
            y=y,
            name="train loss",
            mode="lines",
            line={"width": 1.2},
            row=row_of["loss"],
            col=1,
        )
        marks(s, "loss-spikes", "loss")
        plateau = by.get("plateau")
        if plateau is not None and plateau.status == FOUND and plateau.figures.get("window"):
            lo, hi = plateau.figures["window"]
            fig.add_vrect(
                x0=lo,
                x1=hi,
                fillcolor=FLAG,
                opacity=0.08,
                line_width=0,
                row=row_of["loss"],
                col=1,
                annotation_text="plateau",
                annotation_position="top left",
            )
    for s in evals:
        x, y = _drawn(s.steps, s.values, flagged)
        fig.add_scatter(x=x, y=y, name=s.what, mode="lines+markers", row=row_of["loss"], col=1)
        marks(s, "overfitting" + (f":{s.eval_set}" if s.eval_set else ""), "loss")
    nonfinite = by.get("non-finite")
    if nonfinite is not None and nonfinite.status == FOUND:
        for st in nonfinite.steps[:20]:
            fig.add_vline(x=st, line=NONFINITE_LINE, opacity=0.6)
        # vlines have no legend entry: an empty trace in their style names them
        fig.add_scatter(x=[None], y=[None], mode="lines", line=NONFINITE_LINE, name="non-finite value logged")
    if GRAD_NORM in curves:
        s = curves[GRAD_NORM]
        x, y = _drawn(s.steps, s.values, flagged)
        fig.add_scatter(
            x=x,
            y=y,
            name="grad norm",
            mode="lines",
            line={"width": 1.2},
            row=row_of[GRAD_NORM],
            col=1,
        )
        marks(s, "grad-explosions", GRAD_NORM)
        if max_grad_norm is not None and max_grad_norm > 0:
            fig.add_hline(
                y=max_grad_norm,
                line_dash="dash",
                line_color="#888",
                row=row_of[GRAD_NORM],
                col=1,
                annotation_text=f"max_grad_norm {max_grad_norm:g}",
            )
        fig.update_yaxes(type="log", row=row_of[GRAD_NORM], col=1, **log_ticks(s.values))
    if LEARNING_RATE in curves:
        s = curves[LEARNING_RATE]
        x, y = _drawn(s.steps, s.values, flagged)
        fig.add_scatter(
            x=x,
            y=y,
            name="learning rate (logged)",
            mode="lines",
            row=row_of[LEARNING_RATE],
            col=1,
        )
        if expected_lr is not None:
            ex, ey = _drawn(*expected_lr)
            fig.add_scatter(
                x=ex,
                y=ey,
                name="learning rate (configured)",
                mode="lines",
                line={"dash": "dot", "color": "#555"},
                row=row_of[LEARNING_RATE],
                col=1,
            )
        marks(s, "lr-schedule", LEARNING_RATE)
    fig.update_xaxes(title_text="step", row=len(panels), col=1)
    title = "the run's curves"
    if longest > 4 * DRAW_BUCKETS:
        title += (
            f"<br><sup>{longest:,} logged points: each curve drawn as the first, last, lowest and highest "
            f"point of {DRAW_BUCKETS} equal step ranges, flagged steps kept</sup>"
        )
    fig.update_layout(height=260 * len(panels) + 80, title=title, legend={"orientation": "h"})
    return fig


def block_map(snapshot: dict[str, Any], device: int, site_of=None) -> go.Figure:
    """The device's large-pool segments (the largest 40) as rows of blocks: allocated, freed-but-pending
    and free, each bar as long as its block (MiB from the segment's start)."""

    import plotly.graph_objects as go

    segs = [
        (i, s)
        for i, s in enumerate(snapshot["segments"])
        if int(s.get("device", 0) or 0) == device and s.get("segment_type", "large") == "large"
    ]
    small = [
        s
        for s in snapshot["segments"]
        if int(s.get("device", 0) or 0) == device and s.get("segment_type", "large") == "small"
    ]
    segs.sort(key=lambda x: (-x[1]["total_size"], x[0]))
    shown = segs[:MAX_SEGMENTS]
    traces: dict[str, dict[str, list]] = {
        k: {"x": [], "base": [], "y": [], "text": []} for k in STATE_COLOURS
    }
    labels = []
    for i, seg in shown:
        label = f"segment {i} · {size_text(seg['total_size'])}"
        labels.append(label)
        offset = 0
        for b in seg["blocks"]:
            state = b["state"]
            kind = (
                "active_allocated"
                if state == "active_allocated"
                else "pending"
                if state in ACTIVE_STATES
                else "inactive"
            )
            t = traces[kind]
            t["x"].append(b["size"] / MIB)
            t["base"].append(offset / MIB)
            t["y"].append(label)
            hover = f"{size_text(b['size'])} {state}"
            if site_of is not None and state == "active_allocated":
                hover += f"<br>{site_of(b.get('frames') or [])}"
            t["text"].append(hover)
            offset += b["size"]
    fig = go.Figure()
    names = {"active_allocated": "allocated", "pending": "freed, awaiting a stream", "inactive": "free"}
    for kind, t in traces.items():
        if t["x"]:
            fig.add_bar(
                x=t["x"],
                base=t["base"],
                y=t["y"],
                orientation="h",
                name=names[kind],
                marker={"color": STATE_COLOURS[kind], "line": {"color": "#fff", "width": 0.5}},
                hovertext=t["text"],
                hoverinfo="text",
            )
    note = (
        f"the {MAX_SEGMENTS} largest of {len(segs)} large segments"
        if len(segs) > MAX_SEGMENTS
        else f"{len(segs)} large segments"
    )
    if small:
        small_total = size_text(sum(s["total_size"] for s in small))
        note += f"; small pool ({len(small)} segments, {small_total}) not drawn"
    fig.update_layout(
        barmode="overlay",
        title=f"cuda:{device} allocator segments: {note}",
        xaxis_title="MiB from the segment's start",
        yaxis={"categoryorder": "array", "categoryarray": labels[::-1]},
        height=max(240, 26 * len(labels) + 140),
        legend={"orientation": "h"},
    )
    return fig
