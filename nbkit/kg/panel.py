"""Widget panels for notebook 01: the ablation ladder, aggr stability, the downstream check.

Each panel wraps a plain run function of ``nbkit.kg``; ``panel.run()`` executes the default headless.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LadderParams:
    rungs: tuple = field(default=(1, 2, 3, 4, 5), metadata={"choices": [1, 2, 3, 4, 5], "label": "rungs"})
    epochs: int = field(default=200, metadata={"min": 1, "max": 2000})
    hidden: int = field(default=64, metadata={"min": 8, "max": 512, "step": 8})
    lr: float = field(default=0.005, metadata={"min": 1e-4, "max": 0.1, "log": True})
    num_negatives: int = field(default=0, metadata={"min": 0, "max": 256, "label": "negatives per positive (0 = all candidates)"})
    aggr: str = field(default="mean", metadata={"choices": ["mean", "add"]})
    dropout: float = field(default=0.5, metadata={"min": 0.0, "max": 0.9, "step": 0.05})
    eval_every: int = field(default=20, metadata={"min": 1, "max": 200})
    seed: int = field(default=0, metadata={"min": 0, "max": 10_000})
    device: str = field(default="auto", metadata={"hidden": True})


def train_config(p, **overrides):
    from nbkit.device import pick_device
    from nbkit.kg.train import TrainConfig

    values = dict(
        epochs=p.epochs, hidden=p.hidden, lr=p.lr, num_negatives=p.num_negatives, aggr=p.aggr, dropout=p.dropout,
        eval_every=p.eval_every, seed=p.seed, device=str(pick_device(p.device)),
    )
    values.update(overrides)
    return TrainConfig(**values)


def run_ladder_panel(split, p: LadderParams, live=None, eval_negs=None) -> dict[str, Any]:
    from nbkit.kg.train import run_ladder

    if not p.rungs:
        raise ValueError("choose at least one rung")
    results, table = run_ladder(split, tuple(sorted(p.rungs)), train_config(p), live=live, eval_negs=eval_negs)
    return {"results": results, "table": table}


def ladder_panel(split, params: LadderParams | None = None, *, widget=None, eval_negs=None):
    from nbkit.live import LiveFigure
    from nbkit.panels import Panel

    figure = LiveFigure("ablation ladder: train loss and validation MRR", xaxis="epoch", yaxis="loss / MRR", widget=widget)
    return Panel(
        params or LadderParams(),
        lambda p, live: run_ladder_panel(split, p, live, eval_negs=eval_negs),
        title="KG link prediction: the ablation ladder",
        figure=figure,
        widget=widget,
        show_result=lambda r: r["table"].round(4),
    )


@dataclass
class AggrParams:
    seeds: int = field(default=3, metadata={"min": 1, "max": 10, "label": "seeds per aggr"})
    epochs: int = field(default=150, metadata={"min": 1, "max": 2000})
    hidden: int = field(default=64, metadata={"min": 8, "max": 512, "step": 8})
    lr: float = field(default=0.005, metadata={"min": 1e-4, "max": 0.1, "log": True})
    num_negatives: int = field(default=0, metadata={"min": 0, "max": 256})
    dropout: float = field(default=0.5, metadata={"min": 0.0, "max": 0.9, "step": 0.05})
    eval_every: int = field(default=25, metadata={"min": 1, "max": 200})
    device: str = field(default="auto", metadata={"hidden": True})


def run_aggr_panel(split, p: AggrParams, live=None, eval_negs=None) -> dict[str, Any]:
    from nbkit.kg.claims import aggr_stability

    lp = LadderParams(epochs=p.epochs, hidden=p.hidden, lr=p.lr, num_negatives=p.num_negatives, dropout=p.dropout, eval_every=p.eval_every, device=p.device)
    return aggr_stability(split, train_config(lp), seeds=tuple(range(p.seeds)), live=live, eval_negs=eval_negs)


def aggr_panel(split, params: AggrParams | None = None, *, widget=None, eval_negs=None):
    from nbkit.live import LiveFigure
    from nbkit.panels import Panel

    figure = LiveFigure("RGCN aggr=mean vs add: loss per seed", xaxis="epoch", yaxis="loss / valid MRR", widget=widget)

    def show(r):
        import pandas as pd

        return pd.DataFrame(r["runs"]).round(4)

    return Panel(params or AggrParams(), lambda p, live: run_aggr_panel(split, p, live, eval_negs=eval_negs), title="Is aggr='mean' more stable than 'add'?", figure=figure, widget=widget, show_result=show)


@dataclass
class DownstreamParams:
    epochs: int = field(default=200, metadata={"min": 1, "max": 2000})
    hidden: int = field(default=64, metadata={"min": 8, "max": 512, "step": 8})
    lr: float = field(default=0.005, metadata={"min": 1e-4, "max": 0.1, "log": True})
    dropout: float = field(default=0.5, metadata={"min": 0.0, "max": 0.9, "step": 0.05})
    eval_every: int = field(default=25, metadata={"min": 1, "max": 200})
    seed: int = field(default=0, metadata={"min": 0, "max": 10_000})
    device: str = field(default="auto", metadata={"hidden": True})


def run_downstream_panel(split, labels: dict[str, str], p: DownstreamParams, live=None) -> dict[str, Any]:
    import plotly.graph_objects as go

    from nbkit.kg.downstream import downstream_check

    lp = LadderParams(epochs=p.epochs, hidden=p.hidden, lr=p.lr, dropout=p.dropout, eval_every=p.eval_every, seed=p.seed, device=p.device)
    out = downstream_check(split, train_config(lp), labels=labels, live=live)
    names = ["trained embeddings", "random control"]
    vals = [out["trained"]["macro_f1"], out["random_control"]["macro_f1"]]
    errs = [out["trained"]["macro_f1_std"], out["random_control"]["macro_f1_std"]]
    fig = go.Figure(go.Bar(x=names, y=vals, error_y=dict(type="data", array=errs), name="macro-F1"))
    fig.add_hline(y=0.82, line_dash="dash", annotation_text="seed claim 0.82")
    fig.update_layout(title=f"5-fold macro-F1, {out['trained']['classes']} classes (node type NOT an input)", yaxis_title="macro-F1", yaxis_range=[0, 1], template="plotly_white", height=360)
    out["figure"] = fig
    return out


def downstream_panel(split, labels: dict[str, str], params: DownstreamParams | None = None, *, widget=None):
    from nbkit.live import LiveFigure
    from nbkit.panels import Panel

    figure = LiveFigure("downstream: macro-F1", widget=widget)

    def show(r):
        import pandas as pd

        return pd.DataFrame(
            [{"embeddings": k, **{m: r[k][m] for m in ("macro_f1", "macro_f1_std", "classes", "samples")}, "dropped": r[k]["dropped_small_classes"]} for k in ("trained", "random_control")]
        ).round(4)

    return Panel(params or DownstreamParams(), lambda p, live: run_downstream_panel(split, labels, p, live), title="Downstream check: semantic group from untyped embeddings", figure=figure, widget=widget, show_result=show)


@dataclass
class MinibatchParams:
    source: str = field(default="notebook dataset", metadata={"choices": ["notebook dataset", "synthetic"], "label": "graph"})
    entities: int = field(default=47_000, metadata={"min": 100, "max": 1_000_000, "label": "synthetic entities"})
    triples: int = field(default=2_250_000, metadata={"min": 1_000, "max": 20_000_000, "label": "synthetic triples"})
    clusters: int = field(default=200, metadata={"min": 2, "max": 10_000, "label": "synthetic clusters"})
    batch_size: int = field(default=512, metadata={"min": 16, "max": 65_536})
    fanout: int = field(default=10, metadata={"min": -1, "max": 100, "label": "neighbours per node and hop (-1 = all)"})
    num_negatives: int = field(default=64, metadata={"min": 1, "max": 4096, "label": "shared negatives per batch and side"})
    epochs: int = field(default=30, metadata={"min": 1, "max": 2000})
    max_seconds: float = field(default=120.0, metadata={"min": 5.0, "max": 7200.0, "label": "time budget per mode (s)"})
    eval_max_triples: int = field(default=0, metadata={"min": 0, "max": 1_000_000, "label": "evaluated triples (0 = all)"})
    compare_full: bool = field(default=True, metadata={"label": "also train full-batch (same budget)"})
    hidden: int = field(default=64, metadata={"min": 8, "max": 512, "step": 8})
    lr: float = field(default=0.005, metadata={"min": 1e-4, "max": 0.1, "log": True})
    # 1 thread wins on small graphs (per-op overhead); big mini-batch steps are large matmuls.
    cpu_threads: int = field(default=1, metadata={"min": 0, "max": 256, "label": "CPU threads (0 = torch default)"})
    seed: int = field(default=0, metadata={"min": 0, "max": 10_000})
    device: str = field(default="auto", metadata={"hidden": True})


def run_minibatch_panel(split, p: MinibatchParams, live=None) -> dict[str, Any]:
    """Rung 5 trained on neighbour-sampled mini-batches (and, if asked, full-batch) on the same split,
    same epochs and time budget; MRR, time, subgraph size and peak memory per mode."""
    import pandas as pd

    from nbkit.device import memory_probe, watch_peak
    from nbkit.kg.graph import split_kg
    from nbkit.kg.train import LADDER
    from nbkit.kg.train import train_rung as train
    from nbkit.kg.triples import synthetic_kg

    if p.source == "synthetic":
        split = split_kg(synthetic_kg(p.entities, p.triples, seed=p.seed, num_clusters=p.clusters), seed=p.seed)
    lp = LadderParams(epochs=p.epochs, hidden=p.hidden, lr=p.lr, seed=p.seed, device=p.device, eval_every=max(1, p.epochs // 5))
    common = dict(max_seconds=p.max_seconds, eval_max_triples=p.eval_max_triples, cpu_threads=p.cpu_threads or None)
    layers = train_config(lp).layers
    modes = [("mini-batch", train_config(lp, batch_size=p.batch_size, num_negatives=p.num_negatives, num_neighbors=(p.fanout,) * layers, **common))]
    if p.compare_full:
        modes.append(("full batch", train_config(lp, **common)))
    probe = memory_probe(modes[0][1].device)
    rows = []
    for name, cfg in modes:
        with watch_peak(probe) as peak:
            res, _, graph = train(split, LADDER[5], cfg, live=live, trace_prefix=name)
        h = res.history
        sampled = h.get("sampled_edges") or [int(graph.edge_index.size(1))]
        rows.append({
            "mode": name,
            "test_mrr": res.metrics["mrr"],
            "test_hits_at_10": res.metrics["hits_at_10"],
            "evaluated_triples": res.metrics.get("eval_triples", len(split.test)),
            "epochs": res.epochs_run,
            "steps": len(h.get("step_loss") or h["loss"]),
            "train_s": round(res.train_seconds, 1),
            "edges_per_step": int(sum(sampled) / len(sampled)),
            "message_graph_edges": int(graph.edge_index.size(1)),
            "peak_memory_mb": round(peak.peak / 2**20, 1),
            "peak_memory_growth_mb": round(peak.growth / 2**20, 1),
            "memory_measured_as": peak.how,
            "interrupted": res.interrupted,
        })
    return {"rows": rows, "table": pd.DataFrame(rows), "sizes": split.sizes()}


def minibatch_panel(split, params: MinibatchParams | None = None, *, widget=None):
    from nbkit.live import LiveFigure
    from nbkit.panels import Panel

    figure = LiveFigure("rung 5: mini-batch vs full-batch training loss", xaxis="epoch", yaxis="loss / valid MRR", widget=widget)
    return Panel(
        params or MinibatchParams(),
        lambda p, live: run_minibatch_panel(split, p, live),
        title="Mini-batch training on sampled neighbourhoods (Hetionet-sized graphs)",
        figure=figure,
        widget=widget,
        show_result=lambda r: r["table"].drop(columns=["memory_measured_as"]).round(4),
    )


def best_rung(results) -> Any:
    """The rung with the best VALIDATION MRR (selecting on test would be optimistic)."""
    return max(results, key=lambda r: r.metrics.get("valid_mrr", float("-inf")))


def with_overrides(params, **kw):
    return dataclasses.replace(params, **{k: v for k, v in kw.items() if v is not None})
