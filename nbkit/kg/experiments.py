"""The KG experiments: ``REGISTRY``, the :class:`KGContext` they share, and one ``run(cfg, ctx, live)``
per config of ``config.py``, each returning ``Result[XMetrics]`` with a frozen metrics dataclass.

The context resolves the device once (``ctx.torch_device``) and caches datasets, splits and the
fixed AUC negatives per (dataset file, seed), so the sections of notebook 01 share them. Choices are
made on the VALIDATION split only (:func:`run_selection`, whose :class:`~nbkit.kg.config.Chosen` the
later experiments take as config overrides; the ablation's best rung); the test split is scored
once, at the end of :func:`run_ablation`, for the chosen rung. A run the selection trained that the
ablation would train again identically (same split, rung, seed and settings) is kept in the context
and reused, not retrained.
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbkit.claims import fmt_interval, mean_interval
from nbkit.device import device_report, memory_probe, watch_peak
from nbkit.errors import UsageError
from nbkit.experiment import Context, Experiment, Registry
from nbkit.findings import findings_frame
from nbkit.kg import checks
from nbkit.kg import graph as kgg
from nbkit.kg import triples as kgt
from nbkit.kg.config import (
    AblationConfig,
    AggrConfig,
    Chosen,
    DownstreamConfig,
    LoadConfig,
    MinibatchConfig,
    PitfallConfig,
    ScaleConfig,
    SelectionConfig,
    TrainConfig,
)
from nbkit.kg.datasets import load_dataset
from nbkit.kg.downstream import downstream_check, downstream_skip_reason
from nbkit.kg.ladder import LADDER, config_read_by
from nbkit.kg.metrics import (
    AblationMetrics,
    AggrMetrics,
    AggrRun,
    AggrSummary,
    DownstreamMetrics,
    LoadMetrics,
    MinibatchMetrics,
    MinibatchRow,
    PitfallMetrics,
    RungMetrics,
    SelectionMetrics,
)
from nbkit.kg.ranking import cluster_oracle_mrr, eval_negatives, score_test
from nbkit.kg.rdf_bench import compare_rdf_parsers
from nbkit.kg.synthetic import synthetic_kg
from nbkit.kg.train import train_rung
from nbkit.record import record
from nbkit.result import Result

if TYPE_CHECKING:
    from nbkit.kg.graph import KGSplit
    from nbkit.kg.triples import KGTriples
    from nbkit.live import LiveFigure

__all__ = [
    "REGISTRY",
    "KGContext",
    "device_report",
    "run",
    "record_each",
    "ablation_summary",
    "downstream_summary",
    "minibatch_summary",
    "scale_summary",
    "loss_roughness",
]

EVAL_NEGATIVES_SEED = 12345  # the fixed AUC negatives: the same pairs for every rung and seed
REGISTRY = Registry("kg")
# A registered experiment run headless by slug (its SMOKE preset or defaults, then overrides): what a
# panel's Run button runs, without the panel.
run = REGISTRY.run


# -- the context ----------------------------------------------------------------------------------
def _stamp(dataset: str):
    """Cache key part that changes when a dataset FILE changes (bundled names never do)."""
    p = Path(dataset).expanduser()
    if p.is_file():
        st = p.stat()
        return (str(p.resolve()), st.st_mtime_ns, st.st_size)
    return dataset


class KGContext(Context):
    """What notebook 01's experiments share: the device, loaded datasets and splits, the fixed AUC
    negatives, and the runs the selection trained (for the ablation to reuse). Cached per context."""

    def kg(self, dataset: str) -> KGTriples:
        """The triples table of ``dataset``."""
        return self.cached(("kg", _stamp(dataset)), lambda: load_dataset(dataset))

    def split(self, dataset: str, seed: int = 0) -> KGSplit:
        """The split of ``dataset`` (per seed; a shipped split column wins)."""
        return self.cached(
            ("split", _stamp(dataset), seed), lambda: kgg.split_kg(self.kg(dataset), seed=seed)
        )

    def negatives(self, dataset: str, seed: int, which: str):
        """One filtered corruption per ``which`` triple, fixed: the AUC of every rung is on the same pairs."""
        key = ("negatives", _stamp(dataset), seed, which)
        return self.cached(key, lambda: eval_negatives(self.split(dataset, seed), which, EVAL_NEGATIVES_SEED))

    @property
    def selection_runs(self) -> dict[tuple, tuple]:
        """Runs trained by :func:`run_selection`, by :meth:`selection_key`:
        (epoch cap, (result, model, graph))."""
        return self.cached("selection_runs", dict)

    @staticmethod
    def selection_key(dataset: str, split_seed: int, rung: int, tc: TrainConfig) -> tuple:
        read = dataclasses.replace(config_read_by(LADDER[rung], tc), epochs=0)
        return (dataset, _stamp(dataset), split_seed, rung, dataclasses.astuple(read))

    def reusable(self, dataset: str, split_seed: int, rung: int, tc: TrainConfig):
        """A selection run that is exactly what ``train_rung(rung, tc)`` would compute, or None.

        Same dataset file, split, rung and every TrainConfig field the rung reads but ``epochs``; and
        either the same ``epochs``, or the stored run ended by early stopping (patience) before
        ``tc.epochs``: training is seeded, so a longer epoch cap would have followed the same steps and
        stopped at the same epoch. A time budget (``max_seconds``) or an interrupted run is never reused.
        """
        hit = self.selection_runs.get(self.selection_key(dataset, split_seed, rung, tc))
        if hit is None or tc.max_seconds is not None:
            return None
        cap, (res, model, graph) = hit
        stopped_early = res.epochs_run < cap
        if res.interrupted or not (cap == tc.epochs or (stopped_early and res.epochs_run < tc.epochs)):
            return None
        return res, model, graph


# -- load -----------------------------------------------------------------------------------------
def run_load(cfg: LoadConfig, ctx: KGContext, live: LiveFigure | None = None) -> Result[LoadMetrics]:
    """Load report, RDF parser comparison (round trip), split sizes, ``HeteroData`` summary, leakage."""
    import pandas as pd

    kg = ctx.kg(cfg.dataset)
    split = ctx.split(cfg.dataset, cfg.seed)
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*double underscores.*"
        )  # 'rel__inv' is the field notes' naming
        hetero = kgg.build_hetero_data(split, reverse="inverse")
    summary = kgg.hetero_summary(hetero)
    leak = kgg.leakage_meter(split)
    rdf: dict[str, Any] = {}
    if cfg.compare_rdf:
        with tempfile.TemporaryDirectory(prefix="nbkit_kg_") as tmp:
            nt_path = kgt.write_ntriples(kg, Path(tmp) / "kg.nt")
            rdf["rdf_parser_comparison"] = {
                k: v for k, v in compare_rdf_parsers(nt_path).items() if k != "file"
            }
            rdf["rdf_roundtrip_kept"] = kgt.load_rdf(nt_path).report.rows_kept
    metrics = LoadMetrics(
        load_report=kg.report.summary(),
        split_sizes=split.sizes(),
        hetero_summary={k: v for k, v in summary.items() if k != "nodes_per_type"},
        leakage=leak,
        leakage_test_reversed_pair_share=leak["test"]["reversed_pair_share"],
        leakage_test_same_pair_other_relation_share=leak["test"]["same_pair_other_relation_share"],
        **rdf,
    )
    data = {"kg": kg, "split": split, "hetero": hetero, "report": str(kg.report)}
    return Result(metrics=metrics, table=pd.DataFrame(leak).T, data=data)


# -- selection on validation ----------------------------------------------------------------------
def run_selection(
    cfg: SelectionConfig, ctx: KGContext, live: LiveFigure | None = None
) -> Result[SelectionMetrics]:
    """Choose the RGCN rungs' decoder and dropout (on rung 5) and hetero SAGE's edge-type aggregation
    (on rung 2; rung 3 uses the same encoder) by VALIDATION MRR; prints the validation figures it chose
    on. The test split is not read.
    """
    import pandas as pd

    device = ctx.torch_device
    split = ctx.split(cfg.dataset, cfg.seed)
    valid_negs = ctx.negatives(
        cfg.dataset, cfg.seed, "valid"
    )  # AUC too, so the ablation can reuse a run as is
    base = cfg.train_config()
    rows = []
    kept = ctx.selection_runs
    kept.clear()
    complex_grid = [
        {"complex_dim": d, "complex_n3": w, "complex_lr": lr, "complex_batch": b}
        for d in cfg.complex_dims
        for w in cfg.complex_n3s
        for lr in cfg.complex_lrs
        for b in cfg.complex_batches
    ]
    groups = (
        ("decoder, dropout", 5, [{"decoder": d, "dropout": p} for d in cfg.decoders for p in cfg.dropouts]),
        ("type_aggr", 2, [{"type_aggr": a} for a in cfg.type_aggrs]),
        # rung 6: every candidate early-stopped on validation (patience), validated every
        # complex_eval_every epochs
        ("complex dim, N3, lr, batch", 6, complex_grid),
    )
    chosen: dict[str, Any] = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(Chosen)}
    for what, rung, candidates in groups:
        for cand in candidates:
            name = f"rung {rung} " + " ".join(f"{k}={v}" for k, v in cand.items())
            tc = dataclasses.replace(base, **cand)
            res, model, graph = train_rung(
                split, LADDER[rung], tc, device=device, live=live, valid_negs=valid_negs, trace_prefix=name
            )
            if tc.max_seconds is None and not res.interrupted:
                kept[ctx.selection_key(cfg.dataset, cfg.seed, rung, tc)] = (tc.epochs, (res, model, graph))
            rows.append(
                {
                    "choice": what,
                    "rung": rung,
                    **cand,
                    "valid_mrr": res.metrics["valid_mrr"],
                    "best_epoch": res.best_epoch,
                    "train_s": round(res.train_seconds, 1),
                }
            )
        group = [r for r in rows if r["choice"] == what]
        if group:
            best = max(group, key=lambda r: r["valid_mrr"])
            chosen.update({k: best[k] for k in candidates[0]})
    table = pd.DataFrame(rows)
    lines = [
        f"chosen on validation MRR ({split.sizes()['valid']} validation triples, seed {cfg.seed}; test split "
        "not read):"
    ]
    for what, _, candidates in groups:
        figures = ", ".join(
            f"{' '.join(str(r[k]) for k in candidates[0])}: {r['valid_mrr']:.4f}"
            for r in rows
            if r["choice"] == what
        )
        if figures:
            values = ", ".join(str(chosen[k]) for k in candidates[0])
            lines.append(f"  {what} = {values}  (validation MRR {figures})")
    text = "\n".join(lines)
    print(text)
    return Result(
        metrics=SelectionMetrics(chosen=Chosen(**chosen), validation=rows), table=table, data={"text": text}
    )


# -- the ablation ladder --------------------------------------------------------------------------
def run_ablation(
    cfg: AblationConfig, ctx: KGContext, live: LiveFigure | None = None
) -> Result[AblationMetrics]:
    """Every rung on the same split and budget over ``cfg.seeds`` seeds (validation figures per seed);
    the best rung by mean validation MRR is then scored on the test split — the one look at it."""
    import pandas as pd

    if not cfg.rungs:
        raise UsageError("AblationConfig.rungs: choose at least one rung")
    unknown = [k for k in cfg.rungs if k not in LADDER]
    if unknown:
        raise UsageError(f"AblationConfig.rungs: unknown rung(s) {unknown}; the ladder has {sorted(LADDER)}")
    device = ctx.torch_device
    split = ctx.split(cfg.dataset, cfg.seed)
    valid_negs = ctx.negatives(cfg.dataset, cfg.seed, "valid")
    seeds = list(range(cfg.seed, cfg.seed + cfg.seeds))
    runs: dict[int, list] = {}
    interrupted = False
    for key in sorted(cfg.rungs):
        for s in seeds:
            # Only the first seed streams curves: one pair per rung keeps the figure readable.
            stream = live if s == seeds[0] else None
            tc = cfg.train_config(seed=s)
            res = ctx.reusable(cfg.dataset, cfg.seed, key, tc)
            if (
                res is not None
            ):  # run_selection trained exactly this run: replay its curves instead of retraining
                _replay(stream, f"rung {key}", res[0].history)
            else:
                res = train_rung(
                    split,
                    LADDER[key],
                    tc,
                    device=device,
                    live=stream,
                    valid_negs=valid_negs,
                    trace_prefix=f"rung {key}",
                )
            runs.setdefault(key, []).append(res)
            interrupted = res[0].interrupted
            if interrupted:
                break
        if interrupted:
            break
    rung_metrics: dict[str, RungMetrics] = {}
    rows = []
    measured = ("valid_mrr", "valid_hits_at_10", "valid_auc", "valid_mrr_select", "valid_mrr_judge")
    for key, rs in runs.items():
        per_seed = {m: [r.metrics[m] for r, _, _ in rs] for m in measured}
        ci = mean_interval(per_seed["valid_mrr"])
        rm = RungMetrics(
            **{m: statistics.fmean(v) for m, v in per_seed.items()},
            **{f"{m}_per_seed": v for m, v in per_seed.items()},
            valid_mrr_interval=list(ci),
            train_s=statistics.fmean(r.train_seconds for r, _, _ in rs),
            epochs=rs[0][0].epochs_run,
        )
        rung_metrics[str(key)] = rm
        rows.append(
            {
                "rung": key,
                "label": LADDER[key].label,
                "seeds": len(rs),
                **{m: getattr(rm, m) for m in measured},
                "valid_mrr_95%": fmt_interval(ci, level=None),
                "train_s": round(rm.train_s, 1),
            }
        )
    best = max(runs, key=lambda k: rung_metrics[str(k)].valid_mrr)
    test_negs = ctx.negatives(cfg.dataset, cfg.seed, "test")
    tests = [score_test(split, r, model, graph, negatives=test_negs) for r, model, graph in runs[best]]
    test = {k: statistics.fmean(t[k] for t in tests) for k in tests[0]}
    metrics = AblationMetrics(
        best_rung=best,
        seeds=len(seeds),
        test_mrr=test["test_mrr"],
        test_hits_at_1=test["test_hits_at_1"],
        test_hits_at_3=test["test_hits_at_3"],
        test_hits_at_10=test["test_hits_at_10"],
        test_mean_rank=test["test_mean_rank"],
        test_auc=test["test_auc"],
        test_mrr_per_seed=[t["test_mrr"] for t in tests],
        rung_metrics=rung_metrics,
        interrupted=interrupted,
    )
    return Result(metrics=metrics, table=pd.DataFrame(rows), data={"runs": runs, "label": LADDER[best].label})


def _replay(live, name: str, history: dict) -> None:
    """Stream a finished run's loss and validation curves to ``live`` (as train_rung would have)."""
    if live is None:
        return
    for epoch, loss in zip(history["epoch"], history["loss"], strict=True):
        live.add(f"{name} loss", epoch, loss)
    for epoch, mrr in zip(history["valid_epoch"], history["valid_mrr"], strict=True):
        live.add(f"{name} valid MRR", epoch, mrr)


# -- aggr -----------------------------------------------------------------------------------------
def loss_roughness(losses) -> float:
    """Wobble of a loss curve around its trend: the root-mean-square distance from the closest
    non-increasing curve (isotonic regression, scikit-learn), relative to the curve's mean level.

    0 for a curve that only falls, however fast; every rise (and the fall back from it) adds. A
    step-to-step change would count a fast, smooth descent as rough: learning is not instability.
    NaN with fewer than three points.
    """
    import numpy as np
    from sklearn.isotonic import IsotonicRegression

    y = np.asarray(losses, dtype=float)
    if len(y) < 3 or not np.all(np.isfinite(y)):
        return float("nan")
    trend = IsotonicRegression(increasing=False).fit_transform(np.arange(len(y)), y)
    level = float(np.mean(np.abs(y))) or 1.0
    return float(np.sqrt(np.mean((y - trend) ** 2)) / level)


AGGR_RUNG = 5  # the RGCN rung the aggr experiment trains


def run_aggr(cfg: AggrConfig, ctx: KGContext, live: LiveFigure | None = None) -> Result[AggrMetrics]:
    """The RGCN rung with ``aggr='mean'`` and ``'add'`` on the same seeds: loss roughness, divergence,
    validation MRR per run (a diverging run is recorded, not raised)."""
    import pandas as pd

    device = ctx.torch_device
    split = ctx.split(cfg.dataset, cfg.seed)
    runs = []
    for aggr in ("mean", "add"):
        for s in range(cfg.seed, cfg.seed + cfg.seeds):
            tc = cfg.train_config(aggr=aggr, seed=s)
            try:
                res, _, _ = train_rung(
                    split, LADDER[AGGR_RUNG], tc, device=device, live=live, trace_prefix=f"{aggr} s{s}"
                )
                rough = loss_roughness(res.history["loss"])
                runs.append(AggrRun(aggr, s, res.metrics["valid_mrr"], rough, diverged=False))
            except FloatingPointError:
                runs.append(AggrRun(aggr, s, float("nan"), float("nan"), diverged=True))
    summary = {}
    for aggr in ("mean", "add"):
        ok = [r for r in runs if r.aggr == aggr and not r.diverged]
        mrrs = [r.valid_mrr for r in ok]
        summary[aggr] = AggrSummary(
            valid_mrr_mean=statistics.fmean(mrrs) if mrrs else float("nan"),
            valid_mrr_std=statistics.stdev(mrrs) if len(mrrs) > 1 else float("nan"),
            roughness=statistics.fmean(r.roughness for r in ok) if ok else float("nan"),
            diverged=sum(r.diverged for r in runs if r.aggr == aggr),
        )
    metrics = AggrMetrics(runs=runs, summary=summary, seeds=cfg.seeds)
    return Result(metrics=metrics, table=pd.DataFrame([dataclasses.asdict(r) for r in runs]))


# -- downstream -----------------------------------------------------------------------------------
def run_downstream(
    cfg: DownstreamConfig, ctx: KGContext, live: LiveFigure | None = None
) -> Result[DownstreamMetrics]:
    """Rung 5 trained WITHOUT node types, once per seed; logistic regression predicts each entity's type
    from its embedding (5-fold macro-F1) next to a random-embedding control. The seeds are the
    independent runs the claim's interval is taken over (a run's folds share its embedding). On data
    with fewer than two usable classes (an untyped file) the result says why it was skipped instead of
    failing."""
    import pandas as pd
    import plotly.graph_objects as go

    split = ctx.split(cfg.dataset, cfg.seed)
    labels = {e: t for t in split.entity_types for e in split.entities[t]}
    reason = downstream_skip_reason(labels)
    if reason:
        return Result(metrics=DownstreamMetrics(skipped=reason), table=pd.DataFrame([{"skipped": reason}]))
    device = ctx.torch_device
    seeds = range(cfg.seed, cfg.seed + cfg.seeds)
    outs = [
        downstream_check(
            split,
            cfg.train_config(seed=s),
            labels=labels,
            device=device,
            live=live if s == cfg.seed else None,
        )
        for s in seeds
    ]
    per_seed = {k: [o[k]["macro_f1"] for o in outs] for k in ("trained", "random_control")}
    first = outs[0]["trained"]
    metrics = DownstreamMetrics(
        macro_f1=statistics.fmean(per_seed["trained"]),
        macro_f1_control=statistics.fmean(per_seed["random_control"]),
        seed_scores=per_seed["trained"],
        control_seed_scores=per_seed["random_control"],
        fold_scores=[o["trained"]["fold_scores"] for o in outs],
        control_fold_scores=[o["random_control"]["fold_scores"] for o in outs],
        seeds=len(outs),
        classes=first["classes"],
        samples=first["samples"],
        dropped_small_classes=first["dropped_small_classes"],
        link_valid_mrr_untyped=statistics.fmean(o["link_valid_mrr_untyped"] for o in outs),
        train_seconds=sum(o["train_seconds"] for o in outs),
    )
    names = ["trained embeddings", "random control"]
    vals = [metrics.macro_f1, metrics.macro_f1_control]
    errs = [statistics.stdev(per_seed[k]) if len(outs) > 1 else 0.0 for k in ("trained", "random_control")]
    fig = go.Figure(go.Bar(x=names, y=vals, error_y=dict(type="data", array=errs), name="macro-F1"))
    fig.add_hline(y=0.82, line_dash="dash", annotation_text="field notes: 0.82")
    fig.update_layout(
        title=f"5-fold macro-F1, mean of {len(outs)} embedding run(s) ± sd across runs, {first['classes']} "
        "classes "
        "(node type NOT an input)",
        yaxis_title="macro-F1",
        yaxis_range=[0, 1],
        template="plotly_white",
        height=360,
    )
    table = pd.DataFrame(
        [
            {
                "embeddings": k,
                "seed": s,
                **{m: o[k][m] for m in ("macro_f1", "macro_f1_std", "classes", "samples")},
                "dropped": o[k]["dropped_small_classes"],
            }
            for k in ("trained", "random_control")
            for s, o in zip(seeds, outs, strict=True)
        ]
    )
    return Result(metrics=metrics, table=table, figure=fig)


# -- mini-batch -----------------------------------------------------------------------------------
MINIBATCH_RUNG = 5  # the RGCN rung the mini-batch experiments train


def run_minibatch(
    cfg: MinibatchConfig, ctx: KGContext, live: LiveFigure | None = None
) -> Result[MinibatchMetrics]:
    """Rung 5 trained on neighbour-sampled subgraphs and (if asked) on the whole graph, with the SAME
    loss (batches of positives against shared pools of sampled negatives), epochs and time budget:
    differences in time and memory come from message passing. Validation MRR, steps, edges per step
    and peak memory per mode. The scale experiment is this run on ``ScaleConfig``."""
    import pandas as pd

    device = ctx.torch_device
    ceiling = None
    if cfg.source == "synthetic":
        kg = synthetic_kg(cfg.entities, cfg.triples, seed=cfg.seed, num_clusters=cfg.clusters)
        split = kgg.split_kg(kg, seed=cfg.seed)
    else:
        split = ctx.split(cfg.dataset, cfg.seed)
    if cfg.eval_max_triples and (cfg.eval_slice + 1) * cfg.eval_max_triples > len(split.valid):
        raise UsageError(
            f"{type(cfg).__name__}.eval_slice: slice {cfg.eval_slice} of {cfg.eval_max_triples} evaluated "
            "triples needs "
            f"{(cfg.eval_slice + 1) * cfg.eval_max_triples} validation triples; this split has "
            f"{len(split.valid)}"
        )
    if cfg.source == "synthetic":
        ceiling = cluster_oracle_mrr(
            split, kg.clusters, "valid", cfg.eval_max_triples, sample_slice=cfg.eval_slice
        )
    base = TrainConfig(
        epochs=cfg.epochs,
        hidden=cfg.hidden,
        lr=cfg.lr,
        dropout=cfg.dropout,
        seed=cfg.seed,
        eval_every=max(1, cfg.epochs // 5),
        max_seconds=cfg.max_seconds,
        eval_max_triples=cfg.eval_max_triples,
        cpu_threads=cfg.cpu_threads or None,
        batch_size=cfg.batch_size,
        num_negatives=cfg.num_negatives,
        embed_lr=cfg.embed_lr,
        input_init=cfg.input_init,
        eval_every_seconds=cfg.max_seconds / cfg.eval_points if cfg.eval_points else None,
        eval_slice=cfg.eval_slice,
    )
    modes = [("mini-batch", dataclasses.replace(base, num_neighbors=(cfg.fanout,) * base.layers))]
    if cfg.compare_full:
        modes.append(("full graph", dataclasses.replace(base, full_graph=True)))
    probe = memory_probe(device)
    rows = []
    # per mode, one (first, last) pair per seed: the first and last curve point's per-query reciprocal ranks
    # (nbkit.kg.claims.scale_claim judges the rise across seeds: the training runs are the independent unit)
    reciprocal_ranks: dict[str, list] = {}
    seeds = range(cfg.seed, cfg.seed + cfg.seeds)  # training seeds; the graph and split stay cfg.seed's
    for (name, tc), s in ((m, s) for m in modes for s in seeds):
        with watch_peak(probe) as peak:
            res, _, graph = train_rung(
                split,
                LADDER[MINIBATCH_RUNG],
                dataclasses.replace(tc, seed=s),
                device=device,
                live=live if s == cfg.seed else None,
                trace_prefix=name if s == cfg.seed else f"{name} seed {s}",
            )
        # with a known ceiling: what a perfect model reaches on this graph (same validation sample)
        rows.append(
            _minibatch_row(name, s, res, graph, split, peak, None if ceiling is None else round(ceiling, 5))
        )
        rr = res.history.get("valid_reciprocal_ranks", [])
        reciprocal_ranks.setdefault(name, []).append((rr[0], rr[-1]) if rr else ([], []))
        if res.interrupted:
            break
    metrics = MinibatchMetrics(rows=rows, sizes=split.sizes(), reciprocal_ranks=reciprocal_ranks)
    table = pd.DataFrame([_row_dict(r) for r in rows])
    return Result(metrics=metrics, table=table)


def _row_dict(row: MinibatchRow) -> dict[str, Any]:
    """A table row: the row's fields, without ``ceiling_mrr`` where no ceiling is known."""
    d = dataclasses.asdict(row)
    if row.ceiling_mrr is None:
        del d["ceiling_mrr"]
    return d


def _minibatch_row(name: str, seed: int, res, graph, split, peak, ceiling_mrr: float | None) -> MinibatchRow:
    """One (mode, seed) row of :func:`run_minibatch`."""
    h = res.history
    steps = len(h["step_loss"])
    nodes = sum(h["sampled_nodes"]) / max(len(h["sampled_nodes"]), 1)
    eval_s = h["eval_s"][-1] if h["eval_s"] else 0.0
    return MinibatchRow(
        mode=name,
        seed=seed,
        valid_mrr=res.metrics["valid_mrr"],
        valid_hits_at_10=res.metrics["valid_hits_at_10"],
        evaluated_triples=res.metrics.get("valid_eval_triples", len(split.valid)),
        epochs=res.epochs_run,
        steps=steps,
        train_s=round(res.train_seconds, 1),
        steps_per_s=round(steps / max(res.train_seconds - eval_s, 1e-9), 2),
        curve_steps=list(h["valid_step"]),
        curve_train_s=list(h["valid_train_s"]),
        curve_valid_mrr=[round(m, 5) for m in h["valid_mrr"]],
        edges_per_step=int(sum(h["sampled_edges"]) / max(len(h["sampled_edges"]), 1)),
        nodes_per_step=int(nodes),
        nodes_fraction=round(nodes / split.num_nodes, 4),
        message_graph_edges=int(graph.edge_index.size(1)),
        peak_memory_mb=round(peak.peak / 2**20, 1),
        peak_memory_growth_mb=round(peak.growth / 2**20, 1),
        memory_measured_as=peak.how,
        interrupted=res.interrupted,
        ceiling_mrr=ceiling_mrr,
    )


# -- pitfalls -------------------------------------------------------------------------------------
def _leaky_forward(edge_index):
    edge_index += 1  # the field notes' §4.1 bug: shifting ids in place
    return edge_index


def _safe_forward(edge_index):
    return edge_index.clone() + 1


def run_pitfalls(
    cfg: PitfallConfig, ctx: KGContext, live: LiveFigure | None = None
) -> Result[PitfallMetrics]:
    """Each pitfall detector on a deliberately broken input built from the dataset, and on its clean
    twin; plus the coalesce experiment (does RGCNConv raise without ``coalesce``?)."""
    import pandas as pd
    import torch

    kg = ctx.kg(cfg.dataset)
    split = ctx.split(cfg.dataset, cfg.seed)
    findings = []
    # (a) a forward that shifts edge_index in place, and the safe version
    ei = split.train[:50, [0, 2]].t().contiguous()
    findings.append(checks.detect_inplace_edge_mutation(_leaky_forward, ei.clone()))
    findings.append(checks.detect_inplace_edge_mutation(_safe_forward, ei.clone()))
    # (b) TPM-like expression features: huge range plus a NaN; then robust scaling
    gen = torch.Generator().manual_seed(cfg.seed)
    raw = torch.rand(len(split.entities[split.entity_types[0]]), 8, generator=gen) * torch.logspace(0, 4, 8)
    raw[0, 3] = float("nan")
    findings.append(checks.check_features(raw, "raw expression"))
    findings.append(checks.check_features(checks.robust_scale(raw), "robust-scaled"))
    # (c) a mapping built from heads only vs from heads and tails, on a table with one tail-only entity
    orphan = kg.df.iloc[[0]].assign(tail="orphan_concept_seen_only_as_tail")
    with_orphan = pd.concat([kg.df, orphan], ignore_index=True)
    heads_only = {
        t: sorted(set(with_orphan.loc[with_orphan["head_type"] == t, "head"])) for t in split.entity_types
    }
    findings.append(checks.check_mapping_covers(with_orphan, heads_only))
    findings.append(checks.check_mapping_covers(with_orphan, kgg.build_index(with_orphan)[1]))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*double underscores.*")
        hetero = kgg.build_hetero_data(split, reverse="inverse")
    broken = hetero.clone()
    et0 = broken.edge_types[0]
    broken[et0].edge_index = broken[et0].edge_index.clone()
    broken[et0].edge_index[1, 0] = broken[et0[2]].num_nodes + 5
    findings.append(checks.check_edge_indices(broken))
    findings.append(checks.check_edge_indices(hetero))
    # (d) an AUC stuck near chance: a model that never trained, on the stated direction only
    findings.append(
        checks.diagnose_auc_near_chance(0.51, loss_history=[0.693] * 10, split=split, reverse="none")
    )
    # (e) coalesce: does RGCNConv raise IndexError without it?
    coalesce = checks.coalesce_experiment(seed=cfg.seed)
    metrics = PitfallMetrics(
        pitfall_findings=[f.to_dict(with_table=False) for f in findings], coalesce_experiment=coalesce
    )
    return Result(metrics=metrics, table=findings_frame(findings), data={"findings": findings})


# -- the registry ---------------------------------------------------------------------------------
_CURVES = {"xaxis": "epoch", "yaxis": "loss / valid MRR"}  # what the training panels stream
REGISTRY.register(Experiment("load", "Load, split and leakage", LoadConfig, LoadMetrics, run_load))
REGISTRY.register(
    Experiment(
        "selection",
        "Choices made on the validation split",
        SelectionConfig,
        SelectionMetrics,
        run_selection,
        figure_title="selection: train loss and validation MRR per candidate",
        **_CURVES,
    )
)
REGISTRY.register(
    Experiment(
        "ablation",
        "KG link prediction: the ablation ladder",
        AblationConfig,
        AblationMetrics,
        run_ablation,
        figure_title="ablation ladder: train loss and validation MRR (first seed)",
        **_CURVES,
    )
)
REGISTRY.register(
    Experiment(
        "downstream",
        "Downstream check: node type from untyped embeddings",
        DownstreamConfig,
        DownstreamMetrics,
        run_downstream,
        figure_title="downstream: macro-F1",
        **_CURVES,
    )
)
REGISTRY.register(
    Experiment(
        "aggr",
        "Is aggr='mean' more stable than 'add'?",
        AggrConfig,
        AggrMetrics,
        run_aggr,
        figure_title="RGCN aggr=mean vs add: loss per seed",
        **_CURVES,
    )
)
REGISTRY.register(
    Experiment(
        "minibatch",
        "Mini-batch training on sampled neighbourhoods vs the full graph",
        MinibatchConfig,
        MinibatchMetrics,
        run_minibatch,
        figure_title="rung 5: sampled vs full-graph message passing, same loss",
        **_CURVES,
    )
)
REGISTRY.register(
    Experiment(
        "scale",
        "Mini-batch training at Hetionet's size (seeded synthetic graph)",
        ScaleConfig,
        MinibatchMetrics,
        run_minibatch,
        figure_title="rung 5 mini-batch on a Hetionet-sized graph",
        **_CURVES,
    )
)
REGISTRY.register(
    Experiment(
        "pitfalls",
        "Pitfall detectors on deliberately broken inputs",
        PitfallConfig,
        PitfallMetrics,
        run_pitfalls,
    )
)


# -- what the notebook prints and records ---------------------------------------------------------
def record_each(metrics, *names: str) -> None:
    """``nbkit.record(name, value)`` for each named field of ``metrics`` (every field when none are named)."""
    for name in names or [f.name for f in dataclasses.fields(metrics)]:
        record(name, getattr(metrics, name))


def ablation_summary(result: Result[AblationMetrics]) -> str:
    """The chosen rung and its one look at the test split."""
    m = result.metrics
    return (
        f"best rung by validation MRR: {LADDER[m.best_rung].label}; test (once, mean of {m.seeds} seeds): "
        f"MRR {m.test_mrr:.3f}, Hits@10 {m.test_hits_at_10:.3f}, AUC {m.test_auc:.3f}"
    )


def downstream_summary(result: Result[DownstreamMetrics]) -> str:
    """Why the downstream check was skipped, or its macro-F1 next to the random control."""
    m = result.metrics
    if m.skipped:
        return f"skipped: {m.skipped}"
    return (
        f"macro-F1 {m.macro_f1:.3f} (random control {m.macro_f1_control:.3f}), mean of {m.seeds} embedding "
        "run(s), "
        f"{m.classes} classes"
    )


def minibatch_summary(result: Result[MinibatchMetrics]) -> str:
    """One line per mode and seed: speed, the share of the graph one step's encoder runs on, memory, MRR."""
    return "\n".join(
        f"{row.mode:>10}: {row.steps_per_s} steps/s, encoder on {row.nodes_fraction:.0%} of the nodes per "
        f"step, peak memory growth {row.peak_memory_growth_mb:.0f} MB, validation MRR {row.valid_mrr:.3f}"
        for row in result.metrics.rows
    )


def scale_summary(result: Result[MinibatchMetrics]) -> str:
    """The scale run: the graph, the first run's speed, memory and MRR against the ceiling, every run's
    curve."""
    m = result.metrics
    row = m.rows[0]
    ceiling = f" (ceiling {row.ceiling_mrr:.4f})" if row.ceiling_mrr is not None else ""
    lines = [
        f"synthetic graph: {m.sizes['entities']:,} entities, {m.sizes['train']:,} train triples; "
        f"{row.steps} steps in {row.train_s} s, {row.edges_per_step:,} of {row.message_graph_edges:,} "
        f"message edges and {row.nodes_fraction:.0%} of the nodes per step ({row.steps_per_s} steps/s), "
        f"peak memory growth {row.peak_memory_growth_mb:.0f} MB ({row.memory_measured_as}); validation MRR "
        f"{row.valid_mrr:.4f} on {row.evaluated_triples} sampled validation triples{ceiling}"
    ]
    for run_row in m.rows:
        curve = ", ".join(
            f"{s:.0f} s: {v:.4f}" for s, v in zip(run_row.curve_train_s, run_row.curve_valid_mrr, strict=True)
        )
        lines.append(f"learning curve, seed {run_row.seed} (training seconds -> validation MRR): {curve}")
    return "\n".join(lines)
