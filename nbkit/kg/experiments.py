"""The KG experiments: ``REGISTRY`` and one ``run(cfg, ctx, live)`` per config of ``config.py``, each
returning ``Result[XMetrics]`` with a frozen metrics dataclass, a table and a figure.

Choices are made on the SELECTING half of the validation queries only (:func:`run_selection`, whose
:class:`~nbkit.kg.config.Chosen` the later experiments take as config overrides; every run's epoch; the
ablation's best rung), with training seeds no judged run uses; the judging half scores what the claims
compare, and the test split is scored once, at the end of :func:`run_ablation`, for the chosen rung.
``run``, ``panel`` and ``show`` are the registry's own methods: ``show("ablation", ctx, **overrides)``
is a notebook section.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import statistics
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbkit.claims import fmt_interval, mean_interval
from nbkit.device import memory_probe, watch_peak
from nbkit.errors import UsageError
from nbkit.experiment import Experiment, Registry, Replicates
from nbkit.findings import findings_frame
from nbkit.kg import checks, figures
from nbkit.kg import graph as kgg
from nbkit.kg import triples as kgt
from nbkit.kg.config import (
    ABLATION_FULL_SEEDS,
    AGGR_FULL_SEEDS,
    DOWNSTREAM_FULL_SEEDS,
    SCALE_FULL_SEEDS,
    SELECTION_SEED_OFFSET,
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
from nbkit.kg.context import KGContext
from nbkit.kg.downstream import downstream_check, downstream_skip_reason
from nbkit.kg.field_notes import DOWNSTREAM_F1
from nbkit.kg.ladder import LADDER
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
from nbkit.kg.models import remove_generated_modules
from nbkit.kg.ranking import cluster_oracle_mrr, score_test
from nbkit.kg.rdf_bench import compare_rdf_parsers
from nbkit.kg.synthetic import synthetic_kg
from nbkit.kg.train import train_rung
from nbkit.replicates import replicate, where
from nbkit.result import Result

if TYPE_CHECKING:
    from nbkit.live import LiveFigure

__all__ = ["REGISTRY", "loss_roughness", "panel", "run", "show"]

REGISTRY = Registry("kg", summary="ablation")
run = REGISTRY.run
panel = REGISTRY.panel
show = REGISTRY.show


def _shown(*lines: str, table: Any = None, pre: str = "") -> Any:
    """What a panel shows under its figure: a preformatted report, lines of text and a table (rounded);
    the text is escaped (it carries file names, error messages and the dataset's own strings)."""
    from IPython.display import HTML

    out = f"<pre>{html.escape(pre)}</pre>" if pre else ""
    out += f"<p>{'<br>'.join(html.escape(line) for line in lines)}</p>" if lines else ""
    if table is not None:
        out += table.round(4).to_html(index=False)
    return HTML(out)


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
    parse_seconds: dict[str, float] = {}  # stays empty without compare_rdf: the figure has no parse panel
    if cfg.compare_rdf:
        with tempfile.TemporaryDirectory(prefix="nbkit_kg_") as tmp:
            nt_path = kgt.write_ntriples(kg, Path(tmp) / "kg.nt")
            comparison = {k: v for k, v in compare_rdf_parsers(nt_path).items() if k != "file"}
            rdf["rdf_parser_comparison"] = comparison
            rdf["rdf_roundtrip_kept"] = kgt.load_rdf(nt_path).report.rows_kept
            parse_seconds = {"pyoxigraph": comparison["pyoxigraph_s"], "rdflib": comparison["rdflib_s"]}
    metrics = LoadMetrics(
        load_report=kg.report.summary(),
        split_sizes=split.sizes(),
        hetero_summary={k: v for k, v in summary.items() if k != "nodes_per_type"},
        leakage=leak,
        leakage_test_reversed_pair_share=leak["test"]["reversed_pair_share"],
        leakage_test_same_pair_other_relation_share=leak["test"]["same_pair_other_relation_share"],
        **rdf,
    )
    table = pd.DataFrame(leak).T.reset_index(names="split")
    fig = figures.load_figure(
        [f"{s}: {k.replace('_share', '').replace('_', ' ')}" for s in ("valid", "test") for k in _LEAKS],
        [leak[s][k] for s in ("valid", "test") for k in _LEAKS],
        parse_seconds,
    )
    data = {"kg": kg, "split": split, "hetero": hetero, "report": str(kg.report)}
    return Result(metrics=metrics, table=table, figure=fig, data=data)


_LEAKS = ("reversed_pair_share", "same_pair_other_relation_share")


def _show_load(result: Result[LoadMetrics]) -> Any:
    m = result.metrics
    rdf = m.rdf_parser_comparison or {}
    rdf_line = f"RDF parsers (N-Triples round trip, {m.rdf_roundtrip_kept} rows kept): {rdf}" if rdf else ""
    lines = [f"split sizes: {m.split_sizes}", *([rdf_line] if rdf else [])]
    return _shown(*lines, table=result.table, pre=result.data["report"])


# -- selection on validation ----------------------------------------------------------------------
def _selection_groups(
    cfg: SelectionConfig,
) -> list[tuple[str, int, dict[str, Any], list[dict[str, Any]], str]]:
    """(what, rung, fixed settings, candidates, prefix of the Chosen fields) per choice. The RGCN grid
    and rung 6's have the same number of candidates at the defaults (2 each)."""
    rgcn = [
        {"decoder": d, "dropout": p, "rgcn_hidden": w}
        for d in cfg.decoders
        for p in cfg.dropouts
        for w in cfg.rgcn_hiddens
    ]
    complex_grid = [
        {"complex_dim": d, "complex_n3": w, "complex_lr": lr, "complex_batch": b}
        for d in cfg.complex_dims
        for w in cfg.complex_n3s
        for lr in cfg.complex_lrs
        for b in cfg.complex_batches
    ]
    return [
        ("RGCN (rung 5), aggr=mean", 5, {"aggr": "mean"}, rgcn, ""),
        ("RGCN (rung 5), aggr=add", 5, {"aggr": "add"}, rgcn, "add_"),
        ("hetero SAGE edge-type aggregation (rung 2)", 2, {}, [{"type_aggr": a} for a in cfg.type_aggrs], ""),
        ("rung 6: ComplEx-N3", 6, {}, complex_grid, ""),
    ]


def run_selection(
    cfg: SelectionConfig, ctx: KGContext, live: LiveFigure | None = None
) -> Result[SelectionMetrics]:
    """Choose, each on the SELECTING half of the validation queries (every candidate early-stopped on
    it): the RGCN rungs' decoder, dropout and width with ``aggr="mean"``, and again with ``aggr="add"``
    (the aggr experiment's other arm); hetero SAGE's edge-type aggregation (rung 2; rung 3 uses the same
    encoder); rung 6's width, N3 weight, learning rate and batch. Candidates train at seed
    ``cfg.seed + SELECTION_SEED_OFFSET``: no judged run replays one. The test split is not read."""
    import pandas as pd

    device = ctx.torch_device
    split = ctx.split(cfg.dataset, cfg.seed)
    seed = cfg.seed + SELECTION_SEED_OFFSET
    base = cfg.train_config(seed=seed)
    rows: list[dict[str, Any]] = []
    chosen: dict[str, Any] = dataclasses.asdict(Chosen())
    shown = []
    for what, rung, fixed, candidates, prefix in _selection_groups(cfg):
        group = []
        for cand in candidates:
            name = f"rung {rung} " + " ".join(f"{k}={v}" for k, v in {**fixed, **cand}.items())
            res, _, _ = train_rung(
                split,
                LADDER[rung],
                dataclasses.replace(base, **fixed, **cand),
                device=device,
                live=live,
                trace_prefix=name,
            )
            group.append(
                {
                    "choice": what,
                    "rung": rung,
                    **cand,
                    "valid_mrr_select": res.metrics["valid_mrr_select"],
                    "best_epoch": res.best_epoch,
                    "epochs": res.epochs_run,
                    "chosen": False,
                }
            )
        if group:
            best = max(group, key=lambda r: r["valid_mrr_select"])
            best["chosen"] = True
            chosen.update({prefix + k: best[k] for k in candidates[0]})
            shown.append((what, group, list(candidates[0])))
        rows += group
    table = pd.DataFrame(rows)
    metrics = SelectionMetrics(chosen=Chosen(**chosen), train_seed=seed, validation=rows)
    return Result(metrics=metrics, table=table, figure=figures.selection_figure(shown))


def _show_selection(result: Result[SelectionMetrics]) -> Any:
    m = result.metrics
    return _shown(
        f"chosen on the selecting half of the validation queries (candidates trained at seed {m.train_seed}, "
        f"a seed no later run uses; test split not read): {m.chosen}",
        table=result.table,
    )


# -- the ablation ladder --------------------------------------------------------------------------
_HALVES = (
    "valid_mrr",
    "valid_hits_at_10",
    "valid_auc",
    "valid_mrr_select",
    "valid_mrr_judge",
    "valid_auc_judge",
)


def run_ablation(
    cfg: AblationConfig, ctx: KGContext, live: LiveFigure | None = None
) -> Result[AblationMetrics]:
    """Every rung on the same split and budget over ``cfg.seeds`` seeds, each run trained here (its
    epoch chosen on the selecting half of the validation queries); the best rung by mean MRR on that
    half is then scored on the test split — the one look at it."""
    import pandas as pd

    if not cfg.rungs:
        raise UsageError("AblationConfig.rungs: choose at least one rung")
    unknown = [k for k in cfg.rungs if k not in LADDER]
    if unknown:
        raise UsageError(f"AblationConfig.rungs: unknown rung(s) {unknown}; the ladder has {sorted(LADDER)}")
    split = ctx.split(cfg.dataset, cfg.seed)
    stop = REGISTRY.stopper("ablation", ctx, cfg)
    seeds = list(range(cfg.seed, cfg.seed + cfg.seeds))
    at = where(ctx)
    if at.mode == "this process":

        def one(s: int) -> dict[int, tuple]:
            # Only the first seed streams curves: one pair per rung keeps the figure readable.
            return ablation_seed(cfg, s, ctx=ctx, live=live if s == cfg.seed else None)

    else:
        one = functools.partial(ablation_seed, cfg)
    # Seed by seed, every rung: after each seed the claims this ablation feeds are judged at their looks,
    # and the ladder stops once all of them are decided (at most cfg.seeds seeds).
    per_seed = replicate(
        seeds,
        one,
        stop=lambda done: _interrupted(done) or stop(_ablation_metrics(_by_rung(done), False)),
        at=at,
        ctx=ctx,
        slug="ablation",
    )
    runs = _by_rung(per_seed)
    interrupted = _interrupted(per_seed)
    # Interrupted (Ctrl-C in a panel): what finished is kept, the seed cut short included, and flagged.
    partial = _ablation_metrics(runs, interrupted)
    best = partial.best_rung
    test_negs = ctx.negatives(cfg.dataset, cfg.seed, "test")
    tests = [score_test(split, r, model, graph, negatives=test_negs) for r, model, graph in runs[best]]
    test = {k: statistics.fmean(t[k] for t in tests) for k in tests[0]}
    metrics = dataclasses.replace(
        partial,
        test_mrr=test["test_mrr"],
        test_hits_at_1=test["test_hits_at_1"],
        test_hits_at_3=test["test_hits_at_3"],
        test_hits_at_10=test["test_hits_at_10"],
        test_mean_rank=test["test_mean_rank"],
        test_auc=test["test_auc"],
        test_mrr_per_seed=tuple(t["test_mrr"] for t in tests),
    )
    rungs = metrics.rungs
    rows = [
        {
            "rung": r.rung,
            "label": LADDER[r.rung].label,
            "seeds": len(r.valid_mrr_per_seed),
            **{m: getattr(r, m) for m in _HALVES},
            "valid_mrr_interval": r.valid_mrr_interval,
            "epochs": r.epochs,
            "train_s": round(r.train_s, 1),
        }
        for r in rungs
    ]
    curves = [(f"rung {k}", rs[0][0].history) for k, rs in runs.items()]
    fig = figures.ladder_figure(rows, curves, metrics.seeds)
    table = pd.DataFrame(rows).assign(
        valid_mrr_interval=[fmt_interval(r["valid_mrr_interval"], level=None) for r in rows]
    )
    return Result(metrics=metrics, table=table, figure=fig, data={"runs": runs, "label": LADDER[best].label})


def ablation_seed(
    cfg: AblationConfig, seed: int, ctx: KGContext | None = None, live=None
) -> dict[int, tuple]:
    """One seed of the ablation: every rung trained on the same split, ``{rung: (result, model, graph)}``,
    in ``ctx`` (a worker process: its own context, made once). A rung interrupted by Ctrl-C ends the seed
    there."""
    ctx = ctx or _worker_context()
    split = ctx.split(cfg.dataset, cfg.seed)
    valid_negs = ctx.negatives(cfg.dataset, cfg.seed, "valid")
    out: dict[int, tuple] = {}
    for key in sorted(cfg.rungs):
        out[key] = train_rung(
            split,
            LADDER[key],
            cfg.train_config(seed=seed),
            device=ctx.torch_device,
            live=live,
            progress=ctx is not _WORKER.get("ctx"),  # a worker's bars would interleave on one stream
            valid_negs=valid_negs,
            trace_prefix=f"rung {key}",
        )
        if out[key][0].interrupted:
            break
    return out


# A worker process's own context (replicates.py): made on its first unit, kept for the next ones.
_WORKER: dict[str, KGContext] = {}


def _worker_context() -> KGContext:
    if "ctx" not in _WORKER:
        _WORKER["ctx"] = KGContext("cpu")
    return _WORKER["ctx"]


def _by_rung(per_seed: list[dict[int, tuple]]) -> dict[int, list]:
    runs: dict[int, list] = {}
    for seed in per_seed:
        for key, res in seed.items():
            runs.setdefault(key, []).append(res)
    return runs


def _interrupted(per_seed: list[dict[int, tuple]]) -> bool:
    return any(res[0].interrupted for seed in per_seed for res in seed.values())


def _ablation_metrics(runs: dict[int, list], interrupted: bool) -> AblationMetrics:
    """The ablation's metrics from the seeds trained so far (test figures NaN: the test split is scored
    once, at the end, for the best rung)."""
    rungs = tuple(_rung_metrics(key, [r for r, _, _ in rs]) for key, rs in sorted(runs.items()))
    nan = float("nan")
    return AblationMetrics(
        best_rung=max(rungs, key=lambda r: r.valid_mrr_select).rung,
        seeds=min(len(rs) for rs in runs.values()),
        test_mrr=nan,
        test_hits_at_1=nan,
        test_hits_at_3=nan,
        test_hits_at_10=nan,
        test_mean_rank=nan,
        test_auc=nan,
        test_mrr_per_seed=(),
        rungs=rungs,
        interrupted=interrupted,
    )


def _rung_metrics(key: int, results: list) -> RungMetrics:
    per_seed = {m: tuple(r.metrics[m] for r in results) for m in _HALVES}
    return RungMetrics(
        rung=key,
        **{m: statistics.fmean(v) for m, v in per_seed.items()},
        **{f"{m}_per_seed": v for m, v in per_seed.items()},
        valid_mrr_interval=mean_interval(per_seed["valid_mrr"]),
        train_s=statistics.fmean(r.train_seconds for r in results),
        epochs=results[0].epochs_run,
    )


def _show_ablation(result: Result[AblationMetrics]) -> Any:
    m = result.metrics
    return _shown(
        f"best rung by validation MRR (selecting half): {LADDER[m.best_rung].label}; test (once, mean of "
        f"{m.seeds} seeds): MRR {m.test_mrr:.3f}, Hits@10 {m.test_hits_at_10:.3f}, AUC {m.test_auc:.3f}",
        table=result.table,
    )


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
    """The RGCN rung with ``aggr='mean'`` and ``'add'`` on the same seeds, each with its own decoder,
    dropout and width (``cfg.arm``), both at the ladder's learning rate: loss-curve wobble, divergence
    (a non-finite loss, recorded, not raised) and validation MRR per run."""
    import pandas as pd

    stop = REGISTRY.stopper("aggr", ctx, cfg)
    at = where(ctx)
    one = (
        (lambda s: aggr_seed(cfg, s, ctx=ctx, live=live))
        if at.mode == "this process"
        else functools.partial(aggr_seed, cfg)
    )
    # Seed by seed, both arms; stops once the claim it feeds is decided (at most cfg.seeds seeds).
    per_seed = replicate(
        list(range(cfg.seed, cfg.seed + cfg.seeds)),
        one,
        stop=lambda done: stop(_aggr_metrics(cfg, [r for seed in done for r, _ in seed])),
        at=at,
        ctx=ctx,
        slug="aggr",
    )
    runs = [r for seed in per_seed for r, _ in seed]
    curves = [(r.aggr, r.seed, curve) for seed in per_seed for r, curve in seed if curve is not None]
    metrics = _aggr_metrics(cfg, runs)
    arms = {"mean": metrics.mean, "add": metrics.add}
    wobble = {a: [(r.seed, r.roughness) for r in runs if r.aggr == a and not r.diverged] for a in arms}
    fig = figures.aggr_figure(curves, wobble)
    return Result(metrics=metrics, table=pd.DataFrame([dataclasses.asdict(r) for r in runs]), figure=fig)


def aggr_seed(cfg: AggrConfig, seed: int, ctx: KGContext | None = None, live=None) -> list[tuple]:
    """One seed of both arms: ``[(AggrRun, loss curve or None when it diverged)]`` (mean, then add)."""
    ctx = ctx or _worker_context()
    split = ctx.split(cfg.dataset, cfg.seed)
    out: list[tuple] = []
    for aggr in ("mean", "add"):
        try:
            res, _, _ = train_rung(
                split,
                LADDER[AGGR_RUNG],
                cfg.arm(aggr, seed),
                device=ctx.torch_device,
                live=live,
                progress=ctx is not _WORKER.get("ctx"),
                trace_prefix=f"{aggr} s{seed}",
            )
        except FloatingPointError:
            out.append((AggrRun(aggr, seed, float("nan"), float("nan"), diverged=True), None))
            continue
        rough = loss_roughness(res.history["loss"])
        out.append(
            (AggrRun(aggr, seed, res.metrics["valid_mrr"], rough, diverged=False), list(res.history["loss"]))
        )
    return out


def _aggr_metrics(cfg: AggrConfig, runs: list[AggrRun]) -> AggrMetrics:
    arms = {a: _aggr_summary(cfg.arm(a, cfg.seed), [r for r in runs if r.aggr == a]) for a in ("mean", "add")}
    seeds = len({r.seed for r in runs})
    return AggrMetrics(runs=tuple(runs), mean=arms["mean"], add=arms["add"], seeds=seeds, lr=cfg.lr)


def _aggr_summary(tc: TrainConfig, runs: list[AggrRun]) -> AggrSummary:
    ok = [r for r in runs if not r.diverged]
    return AggrSummary(
        decoder=tc.decoder,
        dropout=tc.dropout,
        width=tc.rgcn_hidden or tc.hidden,
        valid_mrr_mean=statistics.fmean(r.valid_mrr for r in ok) if ok else float("nan"),
        roughness_mean=statistics.fmean(r.roughness for r in ok) if ok else float("nan"),
        diverged=sum(r.diverged for r in runs),
        runs=len(runs),
    )


def _show_aggr(result: Result[AggrMetrics]) -> Any:
    m = result.metrics
    arms = "; ".join(
        f"{a}: {s.decoder}, dropout {s.dropout}, width {s.width} — diverged {s.diverged} of {s.runs}, "
        f"mean wobble {s.roughness_mean:.4f}, valid MRR {s.valid_mrr_mean:.3f}"
        for a, s in (("mean", m.mean), ("add", m.add))
    )
    return _shown(f"learning rate {m.lr} (the ladder's) for both; {arms}", table=result.table)


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

    split = ctx.split(cfg.dataset, cfg.seed)
    labels = {e: t for t in split.entity_types for e in split.entities[t]}
    reason = downstream_skip_reason(labels)
    if reason:
        return Result(metrics=DownstreamMetrics(skipped=reason), table=pd.DataFrame([{"skipped": reason}]))
    stop = REGISTRY.stopper("downstream", ctx, cfg)
    at = where(ctx)
    one = (
        (lambda s: downstream_seed(cfg, s, ctx=ctx, live=live if s == cfg.seed else None))
        if at.mode == "this process"
        else functools.partial(downstream_seed, cfg)
    )
    # One embedding run per seed; stops once the claims it feeds are decided (at most cfg.seeds seeds).
    outs = replicate(
        list(range(cfg.seed, cfg.seed + cfg.seeds)),
        one,
        stop=lambda done: stop(_downstream_metrics(done)),
        at=at,
        ctx=ctx,
        slug="downstream",
    )
    seeds = range(cfg.seed, cfg.seed + len(outs))
    metrics = _downstream_metrics(outs)
    per_seed = {"trained": metrics.seed_scores, "random_control": metrics.control_seed_scores}
    first = outs[0]["trained"]
    errs = [statistics.stdev(per_seed[k]) if len(outs) > 1 else 0.0 for k in ("trained", "random_control")]
    fig = figures.bars_figure(
        f"5-fold macro-F1, mean of {len(outs)} embedding run(s) ± sd across runs, {first['classes']} classes "
        "(node type NOT an input)",
        ["trained embeddings", "random control"],
        [metrics.macro_f1, metrics.macro_f1_control],
        "macro-F1",
        error_y=dict(type="data", array=errs),
        name="macro-F1",
    )
    fig.add_hline(y=DOWNSTREAM_F1, line_dash="dash", annotation_text=f"field notes: {DOWNSTREAM_F1}")
    fig.update_layout(yaxis_range=[0, 1])
    table = pd.DataFrame(
        [
            {
                "embeddings": k,
                "seed": s,
                **{m: o[k][m] for m in ("macro_f1", "macro_f1_std", "classes", "samples")},
            }
            for k in ("trained", "random_control")
            for s, o in zip(seeds, outs, strict=True)
        ]
    )
    return Result(metrics=metrics, table=table, figure=fig)


def downstream_seed(cfg: DownstreamConfig, seed: int, ctx: KGContext | None = None, live=None) -> dict:
    """One embedding run (seed) and its downstream classifiers (:func:`downstream_check`)."""
    ctx = ctx or _worker_context()
    split = ctx.split(cfg.dataset, cfg.seed)
    labels = {e: t for t in split.entity_types for e in split.entities[t]}
    return downstream_check(
        split,
        cfg.train_config(seed=seed),
        labels=labels,
        device=ctx.torch_device,
        live=live,
        progress=ctx is not _WORKER.get("ctx"),
    )


def _downstream_metrics(outs: list[dict]) -> DownstreamMetrics:
    per_seed = {k: tuple(o[k]["macro_f1"] for o in outs) for k in ("trained", "random_control")}
    first = outs[0]["trained"]
    dropped = first["dropped_small_classes"]
    return DownstreamMetrics(
        macro_f1=statistics.fmean(per_seed["trained"]),
        macro_f1_control=statistics.fmean(per_seed["random_control"]),
        seed_scores=per_seed["trained"],
        control_seed_scores=per_seed["random_control"],
        fold_scores=tuple(tuple(o["trained"]["fold_scores"]) for o in outs),
        control_fold_scores=tuple(tuple(o["random_control"]["fold_scores"]) for o in outs),
        seeds=len(outs),
        classes=first["classes"],
        samples=first["samples"],
        dropped_classes=tuple(f"{c} ({n})" for c, n in dropped.items()),
        dropped_entities=sum(dropped.values()),
        link_valid_mrr_untyped=statistics.fmean(o["link_valid_mrr_untyped"] for o in outs),
        train_seconds=sum(o["train_seconds"] for o in outs),
    )


def _show_downstream(result: Result[DownstreamMetrics]) -> Any:
    m = result.metrics
    if m.skipped:
        return _shown(f"skipped: {m.skipped}")
    left = (
        f"; left out (fewer entities than folds): {', '.join(m.dropped_classes)}" if m.dropped_classes else ""
    )
    return _shown(
        f"macro-F1 {m.macro_f1:.3f} (random control {m.macro_f1_control:.3f}), mean of {m.seeds} embedding "
        f"run(s), {m.classes} classes{left}",
        table=result.table,
    )


# -- mini-batch -----------------------------------------------------------------------------------
MINIBATCH_RUNG = 5  # the RGCN rung the mini-batch experiments train


def _minibatch_split(cfg: MinibatchConfig, ctx: KGContext):
    """The graph's split and, on a synthetic graph, the MRR ceiling of its clusters (else None); kept in
    ``ctx`` (every seed of the experiment, in this process or a worker, trains on the same graph)."""
    key = ("minibatch split", cfg.source, cfg.dataset, cfg.entities, cfg.triples, cfg.clusters, cfg.seed)
    key += (cfg.eval_max_triples, cfg.eval_slice)
    return ctx.cached(key, lambda: _make_minibatch_split(cfg, ctx))


def _make_minibatch_split(cfg: MinibatchConfig, ctx: KGContext):
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
    if cfg.source != "synthetic":
        return split, None
    return split, cluster_oracle_mrr(
        split, kg.clusters, "valid", cfg.eval_max_triples, sample_slice=cfg.eval_slice
    )


def _minibatch_config(cfg: MinibatchConfig) -> TrainConfig:
    return TrainConfig(
        epochs=cfg.epochs,
        hidden=cfg.hidden,
        lr=cfg.lr,
        dropout=cfg.dropout,
        seed=cfg.seed,
        eval_every=max(1, cfg.epochs // 5),
        max_steps=cfg.max_steps,
        eval_every_steps=cfg.max_steps // cfg.eval_points if cfg.max_steps and cfg.eval_points else 0,
        eval_max_triples=cfg.eval_max_triples,
        cpu_threads=cfg.cpu_threads or None,
        batch_size=cfg.batch_size,
        num_negatives=cfg.num_negatives,
        embed_lr=cfg.embed_lr,
        input_init=cfg.input_init,
        eval_slice=cfg.eval_slice,
    )


def run_minibatch(
    cfg: MinibatchConfig, ctx: KGContext, live: LiveFigure | None = None
) -> Result[MinibatchMetrics]:
    """Rung 5 trained on neighbour-sampled subgraphs and (if asked) on the whole graph, with the SAME
    loss (batches of positives against shared pools of sampled negatives), epochs and step budget:
    differences in time and memory come from message passing. Validation MRR, steps, edges per step
    and peak memory per mode and training seed. The scale experiment is this run on ``ScaleConfig``."""
    import pandas as pd

    split, ceiling = _minibatch_split(cfg, ctx)
    slug = "scale" if isinstance(cfg, ScaleConfig) else "minibatch"
    stop = REGISTRY.stopper(slug, ctx, cfg)
    at = where(ctx)
    one = (
        (lambda s: minibatch_seed(cfg, s, ctx=ctx, live=live if s == cfg.seed else None))
        if at.mode == "this process"
        else functools.partial(minibatch_seed, cfg)
    )

    def metrics_of(done: list[list[tuple]]) -> MinibatchMetrics:
        return MinibatchMetrics(
            rows=tuple(r for seed in done for r, _ in seed), sizes=split.sizes(), graph_seed=cfg.seed
        )

    # Training seed by seed (the graph and split stay cfg.seed's), every mode; stops once the claims it
    # feeds are decided (at most cfg.seeds seeds).
    per_seed = replicate(
        list(range(cfg.seed, cfg.seed + cfg.seeds)),
        one,
        stop=lambda done: any(r.interrupted for seed in done for r, _ in seed) or stop(metrics_of(done)),
        at=at,
        ctx=ctx,
        slug=slug,
    )
    rows = [r for seed in per_seed for r, _ in seed]
    curves = [c for seed in per_seed for _, c in seed]
    metrics = MinibatchMetrics(rows=tuple(rows), sizes=split.sizes(), graph_seed=cfg.seed)
    table = pd.DataFrame([_row_dict(r) for r in rows])
    title = (
        f"rung 5 mini-batch on a synthetic graph of {split.num_nodes:,} entities (seed {cfg.seed}): "
        "loss per step (log) and validation MRR"
        if cfg.source == "synthetic"
        else "rung 5: sampled vs full-graph message passing, same loss: loss per step (log) and "
        "validation MRR"
    )
    fig = figures.curves_figure(title, curves, ceiling=ceiling)
    return Result(metrics=metrics, table=table, figure=fig)


def minibatch_seed(cfg: MinibatchConfig, seed: int, ctx: KGContext | None = None, live=None) -> list[tuple]:
    """One training seed of every mode on the experiment's graph: ``[(MinibatchRow, (label, history))]``;
    a mode interrupted by Ctrl-C ends the seed there."""
    ctx = ctx or _worker_context()
    split, ceiling = _minibatch_split(cfg, ctx)
    base = _minibatch_config(cfg)
    modes = [("mini-batch", dataclasses.replace(base, num_neighbors=(cfg.fanout,) * base.layers))]
    if cfg.compare_full:
        modes.append(("full graph", dataclasses.replace(base, full_graph=True)))
    probe = memory_probe(ctx.torch_device)
    out: list[tuple] = []
    for name, tc in modes:
        label = name if cfg.seeds == 1 else f"{name} seed {seed}"
        with watch_peak(probe) as peak:
            res, _, graph = train_rung(
                split,
                LADDER[MINIBATCH_RUNG],
                dataclasses.replace(tc, seed=seed),
                device=ctx.torch_device,
                live=live,
                progress=ctx is not _WORKER.get("ctx"),
                trace_prefix=label,
            )
        out.append((_minibatch_row(name, seed, res, graph, split, peak, ceiling), (label, res.history)))
        if res.interrupted:
            break
    return out


def _row_dict(row: MinibatchRow) -> dict[str, Any]:
    """A table row: the row's fields (curves shortened to their ends), without ``ceiling_mrr`` where no
    ceiling is known."""
    d = dataclasses.asdict(row)
    d["curve_valid_mrr"] = " → ".join(f"{v:.4f}" for v in row.curve_valid_mrr)
    d["curve_steps"] = " → ".join(str(v) for v in row.curve_steps)
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
        curve_steps=tuple(h["valid_step"]),
        curve_valid_mrr=tuple(h["valid_mrr"]),
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


def _show_minibatch(result: Result[MinibatchMetrics]) -> Any:
    m = result.metrics
    lines = [
        f"{row.mode} (seed {row.seed}): {row.steps} steps, {row.steps_per_s} steps/s, encoder on "
        f"{row.nodes_fraction:.0%} of the nodes per step, peak memory growth "
        f"{row.peak_memory_growth_mb:.0f} MB ({row.memory_measured_as}), validation MRR {row.valid_mrr:.4f}"
        for row in m.rows
    ]
    graph = (
        f"graph: {m.sizes['entities']:,} entities, {m.sizes['train']:,} train triples (seed {m.graph_seed})"
    )
    return _shown(graph, *lines, table=result.table)


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
    remove_generated_modules()  # RGCNConv's, imported by now
    metrics = PitfallMetrics(
        pitfall_findings=[f.to_dict(with_table=False) for f in findings], coalesce=coalesce
    )
    fig = figures.bars_figure(
        f"coalesce (PyG {coalesce.pyg_version}): RGCNConv's output change once duplicate edges are "
        "coalesced away (an error would show as no bar)",
        ["aggr=add", "aggr=mean"],
        [coalesce.max_abs_diff_add, coalesce.max_abs_diff_mean],
        "max |output change|",
        marker_color=figures.COLOURS[:2],
    )
    return Result(metrics=metrics, table=findings_frame(findings), figure=fig, data={"findings": findings})


def _show_pitfalls(result: Result[PitfallMetrics]) -> Any:
    c = result.metrics.coalesce
    raised = [f"{a}: {e}" for a, e in (("add", c.error_add), ("mean", c.error_mean)) if e]
    text = (
        f"coalesce: {c.edges} unsorted edges with {c.edges - c.distinct_typed_edges} exact duplicates "
        + (f"raised ({'; '.join(raised)})" if raised else "ran without error under add and mean")
        + f"; an out-of-range id after coalescing: {c.out_of_range_after_coalesce_error or 'no error'}"
    )
    return _shown(text, table=result.table)


# -- the registry ---------------------------------------------------------------------------------
# CPU-s per unit on 2 cores, each at the defaults: bench/RESULTS.md, "KG claim designs".
COSTS = "measured at the defaults on the shared 2-core machine (bench/RESULTS.md, KG claim designs)"
_CURVES = {"xaxis": "epoch", "yaxis": "loss, valid MRR (while it runs)"}  # what the training panels stream
REGISTRY.register(
    Experiment(
        "load",
        "Load, split and leakage",
        LoadConfig,
        LoadMetrics,
        run_load,
        figure_title="leakage",
        show_result=_show_load,
    )
)
REGISTRY.register(
    Experiment(
        "selection",
        "Choices made on the validation split (selecting half)",
        SelectionConfig,
        SelectionMetrics,
        run_selection,
        figure_title="selection: each candidate while it trains",
        show_result=_show_selection,
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
        figure_title="ablation ladder: each rung's first seed while it trains",
        replicates=Replicates(
            "seed", "seeds", full=ABLATION_FULL_SEEDS, cost_s=33.5, cost_source=COSTS, least=3
        ),
        show_result=_show_ablation,
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
        figure_title="downstream: the embedding run while it trains",
        replicates=Replicates(
            "seed", "seeds", full=DOWNSTREAM_FULL_SEEDS, cost_s=9.6, cost_source=COSTS, least=3
        ),
        show_result=_show_downstream,
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
        figure_title="RGCN aggr=mean vs add: each run while it trains",
        replicates=Replicates("seed", "seeds", full=AGGR_FULL_SEEDS, cost_s=8.7, cost_source=COSTS, least=3),
        show_result=_show_aggr,
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
        figure_title="rung 5: sampled vs full-graph message passing while it trains",
        show_result=_show_minibatch,
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
        figure_title="rung 5 mini-batch on a Hetionet-sized graph while it trains",
        replicates=Replicates(
            "training run", "seeds", full=SCALE_FULL_SEEDS, cost_s=31.1, cost_source=COSTS, least=3
        ),
        show_result=_show_minibatch,
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
        figure_title="pitfalls",
        show_result=_show_pitfalls,
    )
)
