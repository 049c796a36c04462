"""The figures notebook 01's experiments end with, built from what each run recorded.

A training loss (up to thousands, falling by decades) and a validation MRR (0–1) never share an axis:
losses go on a log axis of their own, MRRs on another, in subplots, with one legend entry per run.
Where runs are compared as curves of very different levels (the ladder's rungs), each run gets its own
small panel; where one number per run is what is compared (a candidate's MRR, a seed's wobble), it is
a bar.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

# plotly's default palette, one colour per run or arm
COLOURS = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880")
LAYOUT = dict(template="plotly_white", margin=dict(l=60, r=60, t=70, b=50))


def _go():
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    return go, make_subplots


def _finite(xs: Sequence[float]) -> list[float]:
    return [float(x) for x in xs if x is not None and math.isfinite(float(x))]


def ladder_figure(
    rows: Sequence[dict[str, Any]], curves: Sequence[tuple[str, dict[str, list]]], seeds: int
) -> Any:
    """The ablation: validation MRR per rung (mean over seeds with its 95% interval) on top, then one
    small panel per rung with its first seed's training loss (left, log axis) and validation MRR
    (right axis)."""
    go, make_subplots = _go()
    cols = 3
    panels = math.ceil(len(curves) / cols)
    specs: list[list[Any]] = [[{"colspan": cols}, *([None] * (cols - 1))]]
    specs += [[{"secondary_y": True} for _ in range(cols)] for _ in range(panels)]
    titles = [f"validation MRR per rung (mean of {seeds} seed(s), 95% interval)"] + [n for n, _ in curves]
    fig = make_subplots(
        rows=1 + panels,
        cols=cols,
        specs=specs,
        subplot_titles=titles,
        vertical_spacing=0.12,
        horizontal_spacing=0.1,
        row_heights=[1.3] + [1.0] * panels,
    )
    fig.add_trace(
        go.Bar(
            x=[f"rung {r['rung']}" for r in rows],
            y=[r["valid_mrr"] for r in rows],
            error_y=dict(
                type="data",
                symmetric=False,
                array=[_half(r, 1) for r in rows],
                arrayminus=[_half(r, 0) for r in rows],
            ),
            marker_color=[COLOURS[i % len(COLOURS)] for i in range(len(rows))],
            name="validation MRR",
            showlegend=False,
        ),
        row=1,
        col=1,
    )
    fig.update_yaxes(title_text="validation MRR", range=[0, 1], row=1, col=1)
    for i, (name, h) in enumerate(curves):
        row, col = 2 + i // cols, 1 + i % cols
        colour = COLOURS[i % len(COLOURS)]
        # Axis titles on the outer edges of a row only: between two panels they would overprint.
        last = col == cols or i == len(curves) - 1
        _loss_and_mrr(fig, h, name, colour, row, col, x="epoch", titles=(col == 1, last))
    fig.update_layout(
        title="ablation ladder: validation MRR per rung; each rung's first-seed loss (log, left) and "
        "validation MRR (right)",
        height=330 + 280 * panels,
        legend=dict(groupclick="togglegroup"),
        **LAYOUT,
    )
    return fig


def _half(row: dict[str, Any], side: int) -> float:
    lo, hi = row["valid_mrr_interval"]
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return 0.0
    return hi - row["valid_mrr"] if side else row["valid_mrr"] - lo


def _loss_and_mrr(
    fig: Any,
    h: dict[str, list],
    name: str,
    colour: str,
    row: int,
    col: int,
    x: str,
    titles: tuple[bool, bool] = (True, True),
) -> None:
    """One run in one panel: its loss on the panel's left axis (log), its validation MRR on the right
    (0–1, so a flat MRR reads flat); ``titles`` says whether each axis is titled."""
    go, _ = _go()
    fig.add_trace(
        go.Scatter(
            x=h[x],
            y=h["loss"],
            name=f"{name} loss",
            legendgroup=name,
            line=dict(color=colour),
            mode="lines",
        ),
        row=row,
        col=col,
        secondary_y=False,
    )
    fig.add_trace(
        go.Scatter(
            x=h["valid_epoch"],
            y=h["valid_mrr"],
            name=f"{name} valid MRR",
            legendgroup=name,
            line=dict(color=colour, dash="dot"),
            mode="lines+markers",
        ),
        row=row,
        col=col,
        secondary_y=True,
    )
    small = dict(size=10)  # a small panel's log axis labels every digit of a decade: 12 px ones overlap
    fig.update_yaxes(
        type="log",
        tickfont=small,
        title_text="loss" if titles[0] else "",
        row=row,
        col=col,
        secondary_y=False,
    )
    fig.update_yaxes(
        range=[0, 1],
        tickmode="linear",
        tick0=0,
        dtick=0.2,
        showgrid=False,
        tickfont=small,
        title_text="valid MRR" if titles[1] else "",
        row=row,
        col=col,
        secondary_y=True,
    )
    fig.update_xaxes(title_text="epoch", row=row, col=col)


def selection_figure(groups: Sequence[tuple[str, list[dict[str, Any]], list[str]]]) -> Any:
    """One bar panel per choice, each candidate a horizontal bar of its MRR on the selecting half of the
    validation queries, named by its settings on the left; the chosen one drawn solid, the others pale.
    Horizontal: a candidate's settings are too long to stand under a vertical bar without colliding."""
    go, make_subplots = _go()
    bar_px, gap_px = 26, 70  # one bar's height; a panel's title and x ticks between panels
    sizes = [max(1, len(rows)) for _, rows, _ in groups]
    height = sum(sizes) * bar_px + gap_px * len(groups) + 90
    fig = make_subplots(
        rows=len(groups),
        cols=1,
        subplot_titles=[g[0] for g in groups],
        row_heights=sizes,
        vertical_spacing=min(0.3, gap_px / height),
    )
    for i, (_, rows, keys) in enumerate(groups):
        fig.add_trace(
            go.Bar(
                y=[" ".join(f"{k}={r[k]}" for k in keys) for r in rows],
                x=[r["valid_mrr_select"] for r in rows],
                orientation="h",
                text=[f"{r['valid_mrr_select']:.3f}" for r in rows],
                textposition="outside",
                marker_color=[COLOURS[i % len(COLOURS)] for _ in rows],
                marker_opacity=[1.0 if r["chosen"] else 0.35 for r in rows],
                showlegend=False,
            ),
            row=1 + i,
            col=1,
        )
        fig.update_xaxes(range=[0, 1.08], nticks=6, row=1 + i, col=1)
        fig.update_yaxes(autorange="reversed", row=1 + i, col=1)
    fig.update_xaxes(title_text="MRR on the selecting half of the validation queries", row=len(groups), col=1)
    fig.update_layout(
        title="selection: validation MRR (selecting half) per candidate; the chosen one solid",
        height=height,
        **LAYOUT,
    )
    return fig


CURVES_SHOWN = 10  # loss curves drawn per aggregation (the first seeds'); every seed's wobble is drawn


def aggr_figure(
    runs: Sequence[tuple[str, int, list[float]]], wobble: dict[str, list[tuple[int, float]]]
) -> Any:
    """One panel per aggregation with its runs' training loss (log axis; the first seeds'), and each run's
    loss-curve wobble per aggregation (what the claim compares; log axis, every seed)."""
    go, make_subplots = _go()
    arms = ("mean", "add")
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=(*(f"aggr={a}: training loss per run" for a in arms), "loss-curve wobble per run"),
        horizontal_spacing=0.08,
    )
    colour = {"mean": COLOURS[0], "add": COLOURS[1]}
    for col, aggr in enumerate(arms, start=1):
        for i, (_, seed, losses) in enumerate(r for r in runs if r[0] == aggr):
            if i >= CURVES_SHOWN:
                break
            fig.add_trace(
                go.Scatter(
                    x=list(range(1, len(losses) + 1)),
                    y=losses,
                    name=f"aggr={aggr}",
                    legendgroup=aggr,
                    showlegend=i == 0,
                    line=dict(color=colour[aggr], width=1.5),
                    mode="lines",
                    hovertext=f"seed {seed}",
                ),
                row=1,
                col=col,
            )
        fig.update_yaxes(type="log", nticks=6, title_text="loss" if col == 1 else "", row=1, col=col)
        fig.update_xaxes(title_text="epoch", row=1, col=col)
    for aggr in arms:
        fig.add_trace(
            go.Box(
                y=[w for _, w in wobble.get(aggr, [])],
                text=[f"seed {s}" for s, _ in wobble.get(aggr, [])],
                name=f"aggr={aggr}",
                legendgroup=aggr,
                showlegend=False,
                boxpoints="all",
                marker_color=colour[aggr],
            ),
            row=1,
            col=3,
        )
    fig.update_yaxes(
        type="log", nticks=6, title_text="wobble (RMS around the falling trend ÷ level)", row=1, col=3
    )
    fig.update_layout(
        title="RGCN aggr=mean vs add: loss per run (log) and each run's loss-curve wobble",
        height=400,
        legend=dict(groupclick="togglegroup"),
        **LAYOUT,
    )
    return fig


def curves_figure(
    title: str, runs: Sequence[tuple[str, dict[str, list]]], *, ceiling: float | None = None
) -> Any:
    """Mini-batch runs against training steps: the per-step loss (top, log axis) and the validation MRR
    (bottom), one colour and one legend entry per run; ``ceiling``: a dashed line at the MRR an oracle
    of the graph's clusters reaches."""
    go, make_subplots = _go()
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        subplot_titles=("training loss per step", "validation MRR"),
        vertical_spacing=0.1,
    )
    for i, (name, h) in enumerate(runs):
        colour = COLOURS[i % len(COLOURS)]
        steps = h["step_loss"]
        fig.add_trace(
            go.Scatter(
                x=list(range(1, len(steps) + 1)),
                y=steps,
                name=name,
                legendgroup=name,
                line=dict(color=colour, width=1),
                mode="lines",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=h["valid_step"],
                y=h["valid_mrr"],
                name=f"{name} valid MRR",
                legendgroup=name,
                showlegend=False,
                line=dict(color=colour),
                mode="lines+markers",
            ),
            row=2,
            col=1,
        )
    if ceiling is not None:
        fig.add_hline(
            y=ceiling,
            line_dash="dash",
            line_color="grey",
            annotation_text=f"cluster oracle {ceiling:.3f}",
            row=2,
            col=1,
        )
    fig.update_yaxes(type="log", title_text="loss", row=1, col=1)
    fig.update_yaxes(title_text="valid MRR", row=2, col=1)
    fig.update_xaxes(title_text="training steps", row=2, col=1)
    fig.update_layout(title=title, height=520, legend=dict(groupclick="togglegroup"), **LAYOUT)
    return fig


def bars_figure(title: str, names: Sequence[str], values: Sequence[float], yaxis: str, **bar: Any) -> Any:
    """One bar per name (a few figures side by side)."""
    go, _ = _go()
    fig = go.Figure(go.Bar(x=list(names), y=list(values), **bar))
    fig.update_layout(title=title, yaxis_title=yaxis, height=360, **LAYOUT)
    return fig


def load_figure(names: Sequence[str], shares: Sequence[float], parse_seconds: dict[str, float]) -> Any:
    """The load panel: the leakage shares of the evaluation splits and, when the KG was written as
    N-Triples and parsed back (``compare_rdf``), each parser's seconds on a panel of its own."""
    colours = [COLOURS[i % 2] for i in range(len(names))]
    title = "leakage: evaluation triples a model can answer by lookup in train"
    if not parse_seconds:
        return bars_figure(title, names, shares, "share of the split's triples", marker_color=colours)
    go, make_subplots = _go()
    fig = make_subplots(
        rows=1, cols=2, column_widths=[0.7, 0.3], subplot_titles=("leakage", "N-Triples parse time")
    )
    fig.add_trace(go.Bar(x=list(names), y=list(shares), marker_color=colours, name="leakage"), row=1, col=1)
    fig.add_trace(
        go.Bar(x=list(parse_seconds), y=list(parse_seconds.values()), marker_color=COLOURS[2], name="parse"),
        row=1,
        col=2,
    )
    fig.update_yaxes(title_text="share of the split's triples", row=1, col=1)
    fig.update_yaxes(title_text="seconds", row=1, col=2)
    fig.update_layout(title=title, height=360, showlegend=False, **LAYOUT)
    return fig
