"""Pictures of a finished run: its curves on shared steps with the flagged steps marked, and a memory
snapshot's segments as a map of allocated and free blocks.

Quantities with different units get their own axes (loss and eval loss share one; the grad norm, on a
log scale, and the learning rate each have theirs), all on the same step axis.
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


def curves_figure(
    curves: dict[str, Series],
    rows: list[RunRow],
    *,
    max_grad_norm: float | None = None,
    expected_lr: tuple[np.ndarray, np.ndarray] | None = None,
) -> go.Figure | None:
    """Loss and eval loss, grad norm and LR on one step axis (one panel per unit), flagged steps marked."""

    from plotly.subplots import make_subplots

    panels = [
        p
        for p in ("loss", GRAD_NORM, LEARNING_RATE)
        if (p == "loss" and ({LOSS, EVAL_LOSS} & set(curves))) or p in curves
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

    def marks(s: Series, row_key: str, panel: str, label: str) -> None:
        r = by.get(row_key)
        if r is None or r.status != FOUND or not r.steps:
            return
        xs, ys = _at(s, r.steps)
        if xs:
            fig.add_scatter(
                x=xs,
                y=ys,
                mode="markers",
                name=label,
                marker={"color": FLAG, "size": 11, "symbol": "x"},
                row=row_of[panel],
                col=1,
            )

    if LOSS in curves:
        s = curves[LOSS]
        fig.add_scatter(
            x=s.steps,
            y=s.values,
            name="train loss",
            mode="lines",
            line={"width": 1.2},
            row=row_of["loss"],
            col=1,
        )
        marks(s, "loss-spikes", "loss", "spike")
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
    if EVAL_LOSS in curves:
        s = curves[EVAL_LOSS]
        fig.add_scatter(
            x=s.steps, y=s.values, name="eval loss", mode="lines+markers", row=row_of["loss"], col=1
        )
        marks(s, "overfitting", "loss", "overfitting onset")
    nonfinite = by.get("non-finite")
    if nonfinite is not None and nonfinite.status == FOUND:
        for st in nonfinite.steps[:20]:
            fig.add_vline(x=st, line_color=FLAG, line_dash="dot", opacity=0.6)
    if GRAD_NORM in curves:
        s = curves[GRAD_NORM]
        fig.add_scatter(
            x=s.steps,
            y=s.values,
            name="grad norm",
            mode="lines",
            line={"width": 1.2},
            row=row_of[GRAD_NORM],
            col=1,
        )
        marks(s, "grad-explosions", GRAD_NORM, "explosion")
        if max_grad_norm is not None and max_grad_norm > 0:
            fig.add_hline(
                y=max_grad_norm,
                line_dash="dash",
                line_color="#888",
                row=row_of[GRAD_NORM],
                col=1,
                annotation_text=f"max_grad_norm {max_grad_norm:g}",
            )
        fig.update_yaxes(type="log", row=row_of[GRAD_NORM], col=1)
    if LEARNING_RATE in curves:
        s = curves[LEARNING_RATE]
        fig.add_scatter(
            x=s.steps,
            y=s.values,
            name="learning rate (logged)",
            mode="lines",
            row=row_of[LEARNING_RATE],
            col=1,
        )
        if expected_lr is not None:
            fig.add_scatter(
                x=expected_lr[0],
                y=expected_lr[1],
                name="learning rate (configured)",
                mode="lines",
                line={"dash": "dot", "color": "#555"},
                row=row_of[LEARNING_RATE],
                col=1,
            )
        marks(s, "lr-schedule", LEARNING_RATE, "LR departs from the config")
    fig.update_xaxes(title_text="step", row=len(panels), col=1)
    fig.update_layout(height=260 * len(panels) + 80, title="the run's curves", legend={"orientation": "h"})
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
