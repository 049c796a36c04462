"""The KG experiments: ``run_x(cfg, live=None) -> nbkit.result.Result``, one per config in ``config.py``.

Each resolves the device ONCE (``nbkit.device.pick_device(cfg.device)``) and hands the
``torch.device`` down. Datasets and splits are loaded once per (dataset, seed) and cached, so the
panels of notebook 01 share them. Choices are made on the VALIDATION split only
(:func:`run_selection`, the ablation's best rung); the test split is scored once, at the end of
:func:`run_ablation`, for the chosen rung. A run the selection trained that the ablation would train
again identically (same split, rung, seed and settings) is reused, not retrained.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from pathlib import Path
from typing import Any

from nbkit.kg.config import (
    AblationConfig,
    AggrConfig,
    DownstreamConfig,
    LoadConfig,
    MinibatchConfig,
    PitfallConfig,
    SelectionConfig,
)
from nbkit.result import Result

EVAL_NEGATIVES_SEED = 12345  # the fixed AUC negatives: the same pairs for every rung and seed


# -- data, loaded once ----------------------------------------------------------------------------
def _stamp(dataset: str):
    """Cache key part that changes when a dataset FILE changes (bundled names never do)."""
    p = Path(dataset).expanduser()
    if p.is_file():
        st = p.stat()
        return (str(p.resolve()), st.st_mtime_ns, st.st_size)
    return dataset


@functools.lru_cache(maxsize=4)
def _load(dataset: str, stamp):
    from nbkit.kg.triples import load_dataset

    return load_dataset(dataset)


@functools.lru_cache(maxsize=4)
def _split(dataset: str, stamp, seed: int):
    from nbkit.kg.graph import split_kg

    return split_kg(_load(dataset, stamp), seed=seed)


@functools.lru_cache(maxsize=8)
def _negatives(dataset: str, stamp, seed: int, which: str):
    from nbkit.kg.train import eval_negatives

    return eval_negatives(_split(dataset, stamp, seed), which, EVAL_NEGATIVES_SEED)


def load_kg(dataset: str):
    """The triples table of ``dataset`` (cached)."""
    return _load(dataset, _stamp(dataset))


def load_split(dataset: str, seed: int = 0):
    """The split of ``dataset`` (cached per seed; a shipped split column wins)."""
    return _split(dataset, _stamp(dataset), seed)


def fixed_negatives(dataset: str, seed: int, which: str):
    """One filtered corruption per ``which`` triple, fixed: the AUC of every rung is on the same pairs."""
    return _negatives(dataset, _stamp(dataset), seed, which)


# Runs trained by run_selection, kept for run_ablation: the chosen candidate of a group on the first seed is
# the very run the ablation would train again (rung 6 always; rungs 2 and 5 when their epochs agree).
_SELECTED_RUNS: dict[tuple, tuple] = {}


def _selection_key(dataset: str, split_seed: int, rung: int, tc) -> tuple:
    from nbkit.kg.train import LADDER, config_read_by

    return (dataset, _stamp(dataset), split_seed, rung, dataclasses.astuple(dataclasses.replace(config_read_by(LADDER[rung], tc), epochs=0)))


def _reusable(dataset: str, split_seed: int, rung: int, tc):
    """A selection run that is exactly what ``train_rung(rung, tc)`` would compute, or None.

    Same dataset file, split, rung and every TrainConfig field the rung reads but ``epochs``; and either the same
    ``epochs``, or the stored run ended by early stopping (patience) before ``tc.epochs``: training is
    seeded, so a longer epoch cap would have followed the same steps and stopped at the same epoch.
    A time budget (``max_seconds``) or an interrupted run is never reused.
    """
    hit = _SELECTED_RUNS.get(_selection_key(dataset, split_seed, rung, tc))
    if hit is None or tc.max_seconds is not None:
        return None
    cap, (res, model, graph) = hit
    stopped_early = res.epochs_run < cap
    if res.interrupted or not (cap == tc.epochs or (stopped_early and res.epochs_run < tc.epochs)):
        return None
    return res, model, graph


def _device(name: str):
    from nbkit.device import pick_device

    return pick_device(name)


# -- load -----------------------------------------------------------------------------------------
def run_load(cfg: LoadConfig, live=None) -> Result:
    """Load report, RDF parser comparison (round trip), split sizes, ``HeteroData`` summary, leakage."""
    import tempfile
    import warnings

    import pandas as pd

    from nbkit.kg import graph as kgg
    from nbkit.kg import triples as kgt

    kg = load_kg(cfg.dataset)
    split = load_split(cfg.dataset, cfg.seed)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*double underscores.*")  # 'rel__inv' is the field notes' naming
        hetero = kgg.build_hetero_data(split, reverse="inverse")
    summary = kgg.hetero_summary(hetero)
    leak = kgg.leakage_meter(split)
    metrics: dict[str, Any] = {
        "load_report": kg.report.summary(),
        "split_sizes": split.sizes(),
        "hetero_summary": {k: v for k, v in summary.items() if k != "nodes_per_type"},
        "leakage": leak,
        "leakage_test_reversed_pair_share": leak["test"]["reversed_pair_share"],
        "leakage_test_same_pair_other_relation_share": leak["test"]["same_pair_other_relation_share"],
    }
    if cfg.compare_rdf:
        with tempfile.TemporaryDirectory(prefix="nbkit_kg_") as tmp:
            nt_path = kgt.write_ntriples(kg, Path(tmp) / "kg.nt")
            metrics["rdf_parser_comparison"] = {k: v for k, v in kgt.compare_rdf_parsers(nt_path).items() if k != "file"}
            metrics["rdf_roundtrip_kept"] = kgt.load_rdf(nt_path).report.rows_kept
    return Result(metrics=metrics, table=pd.DataFrame(leak).T, data={"kg": kg, "split": split, "hetero": hetero, "report": str(kg.report)})


# -- selection on validation ----------------------------------------------------------------------
def run_selection(cfg: SelectionConfig, live=None) -> Result:
    """Choose the RGCN rungs' decoder and dropout (on rung 5) and hetero SAGE's edge-type aggregation
    (on rung 2; rung 3 uses the same encoder) by VALIDATION MRR; prints the validation figures it chose
    on. The test split is not read.
    """
    import pandas as pd

    from nbkit.kg.train import LADDER, train_rung

    device = _device(cfg.device)
    split = load_split(cfg.dataset, cfg.seed)
    valid_negs = fixed_negatives(cfg.dataset, cfg.seed, "valid")  # AUC too, so the ablation can reuse a run as is
    base = cfg.train_config()
    rows = []
    _SELECTED_RUNS.clear()
    complex_grid = [{"complex_dim": d, "complex_n3": w, "complex_lr": lr, "complex_batch": b}
                    for d in cfg.complex_dims for w in cfg.complex_n3s for lr in cfg.complex_lrs for b in cfg.complex_batches]
    groups = (
        ("decoder, dropout", 5, [{"decoder": d, "dropout": p} for d in cfg.decoders for p in cfg.dropouts]),
        ("type_aggr", 2, [{"type_aggr": a} for a in cfg.type_aggrs]),
        # rung 6: every candidate early-stopped on validation (patience), validated every complex_eval_every epochs
        ("complex dim, N3, lr, batch", 6, complex_grid),
    )
    chosen: dict[str, Any] = {"decoder": cfg.decoder, "dropout": cfg.dropout, "type_aggr": cfg.type_aggr,
                              **{k: getattr(cfg, k) for k in ("complex_dim", "complex_n3", "complex_lr", "complex_batch")}}
    for what, rung, candidates in groups:
        for cand in candidates:
            name = f"rung {rung} " + " ".join(f"{k}={v}" for k, v in cand.items())
            tc = dataclasses.replace(base, **cand)
            res, model, graph = train_rung(split, LADDER[rung], tc, device=device, live=live, valid_negs=valid_negs, trace_prefix=name)
            if tc.max_seconds is None and not res.interrupted:
                _SELECTED_RUNS[_selection_key(cfg.dataset, cfg.seed, rung, tc)] = (tc.epochs, (res, model, graph))
            rows.append({"choice": what, "rung": rung, **cand, "valid_mrr": res.metrics["valid_mrr"], "best_epoch": res.best_epoch,
                         "train_s": round(res.train_seconds, 1)})
        group = [r for r in rows if r["choice"] == what]
        if group:
            best = max(group, key=lambda r: r["valid_mrr"])
            chosen.update({k: best[k] for k in candidates[0]})
    table = pd.DataFrame(rows)
    lines = [f"chosen on validation MRR ({split.sizes()['valid']} validation triples, seed {cfg.seed}; test split not read):"]
    for what, _, candidates in groups:
        figures = ", ".join(f"{' '.join(str(r[k]) for k in candidates[0])}: {r['valid_mrr']:.4f}" for r in rows if r["choice"] == what)
        if figures:
            lines.append(f"  {what} = {', '.join(str(chosen[k]) for k in candidates[0])}  (validation MRR {figures})")
    text = "\n".join(lines)
    print(text)
    return Result(metrics={"chosen": chosen, "validation": rows}, table=table, data={"text": text})


# -- the ablation ladder --------------------------------------------------------------------------
def run_ablation(cfg: AblationConfig, live=None) -> Result:
    """Every rung on the same split and budget over ``cfg.seeds`` seeds (validation figures per seed);
    the best rung by mean validation MRR is then scored on the test split — the one look at it."""
    import pandas as pd

    from nbkit.claims import fmt_interval, mean_interval
    from nbkit.errors import UsageError
    from nbkit.kg.train import LADDER, score_test, train_rung

    if not cfg.rungs:
        raise UsageError("AblationConfig.rungs: choose at least one rung")
    unknown = [k for k in cfg.rungs if k not in LADDER]
    if unknown:
        raise UsageError(f"AblationConfig.rungs: unknown rung(s) {unknown}; the ladder has {sorted(LADDER)}")
    device = _device(cfg.device)
    split = load_split(cfg.dataset, cfg.seed)
    valid_negs = fixed_negatives(cfg.dataset, cfg.seed, "valid")
    seeds = list(range(cfg.seed, cfg.seed + cfg.seeds))
    runs: dict[int, list] = {}
    interrupted = False
    for key in sorted(cfg.rungs):
        for s in seeds:
            # Only the first seed streams curves: one pair per rung keeps the figure readable.
            stream = live if s == seeds[0] else None
            tc = cfg.train_config(seed=s)
            res = _reusable(cfg.dataset, cfg.seed, key, tc)
            if res is not None:  # run_selection trained exactly this run: replay its curves instead of retraining
                _replay(stream, f"rung {key}", res[0].history)
            else:
                res = train_rung(split, LADDER[key], tc, device=device, live=stream, valid_negs=valid_negs, trace_prefix=f"rung {key}")
            runs.setdefault(key, []).append(res)
            interrupted = res[0].interrupted
            if interrupted:
                break
        if interrupted:
            break
    rung_metrics, rows = {}, []
    for key, rs in runs.items():
        # valid_mrr_select / valid_mrr_judge: two disjoint halves of the validation queries (train.query_halves),
        # so the claims can choose between rungs on one half and judge the choice on the other
        per_seed = {m: [r.metrics[m] for r, _, _ in rs] for m in ("valid_mrr", "valid_hits_at_10", "valid_auc", "valid_mrr_select", "valid_mrr_judge")}
        ci = mean_interval(per_seed["valid_mrr"])
        rung_metrics[str(key)] = {
            **{m: statistics.fmean(v) for m, v in per_seed.items()},
            **{f"{m}_per_seed": v for m, v in per_seed.items()},
            "valid_mrr_interval": list(ci),
            "train_s": statistics.fmean(r.train_seconds for r, _, _ in rs),
            "epochs": rs[0][0].epochs_run,
        }
        rows.append({"rung": key, "label": LADDER[key].label, "seeds": len(rs), **{m: rung_metrics[str(key)][m] for m in per_seed},
                     "valid_mrr_95%": fmt_interval(ci, level=None), "train_s": round(rung_metrics[str(key)]["train_s"], 1)})
    best = max(runs, key=lambda k: rung_metrics[str(k)]["valid_mrr"])
    test_negs = fixed_negatives(cfg.dataset, cfg.seed, "test")
    tests = [score_test(split, r, model, graph, negatives=test_negs) for r, model, graph in runs[best]]
    test = {k: statistics.fmean(t[k] for t in tests) for k in tests[0]}
    metrics = {"best_rung": best, "seeds": len(seeds), **test, "test_mrr_per_seed": [t["test_mrr"] for t in tests],
               "rung_metrics": rung_metrics, "interrupted": interrupted}
    table = pd.DataFrame(rows)
    return Result(metrics=metrics, table=table, data={"runs": runs, "label": LADDER[best].label})


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


def run_aggr(cfg: AggrConfig, live=None, rung_key: int = 5) -> Result:
    """The RGCN rung with ``aggr='mean'`` and ``'add'`` on the same seeds: loss roughness, divergence,
    validation MRR per run (a diverging run is recorded, not raised)."""
    import pandas as pd

    from nbkit.kg.train import LADDER, train_rung

    device = _device(cfg.device)
    split = load_split(cfg.dataset, cfg.seed)
    runs = []
    for aggr in ("mean", "add"):
        for s in range(cfg.seed, cfg.seed + cfg.seeds):
            tc = cfg.train_config(aggr=aggr, seed=s)
            try:
                res, _, _ = train_rung(split, LADDER[rung_key], tc, device=device, live=live, trace_prefix=f"{aggr} s{s}")
                runs.append({"aggr": aggr, "seed": s, "valid_mrr": res.metrics["valid_mrr"], "roughness": loss_roughness(res.history["loss"]), "diverged": False})
            except FloatingPointError:
                runs.append({"aggr": aggr, "seed": s, "valid_mrr": float("nan"), "roughness": float("nan"), "diverged": True})
    summary = {}
    for aggr in ("mean", "add"):
        ok = [r for r in runs if r["aggr"] == aggr and not r["diverged"]]
        mrrs = [r["valid_mrr"] for r in ok]
        summary[aggr] = {
            "valid_mrr_mean": statistics.fmean(mrrs) if mrrs else float("nan"),
            "valid_mrr_std": statistics.stdev(mrrs) if len(mrrs) > 1 else float("nan"),
            "roughness": statistics.fmean(r["roughness"] for r in ok) if ok else float("nan"),
            "diverged": sum(r["diverged"] for r in runs if r["aggr"] == aggr),
        }
    return Result(metrics={"runs": runs, "summary": summary, "seeds": cfg.seeds}, table=pd.DataFrame(runs))


# -- downstream -----------------------------------------------------------------------------------
def run_downstream(cfg: DownstreamConfig, live=None) -> Result:
    """Rung 5 trained WITHOUT node types, once per seed; logistic regression predicts each entity's type
    from its embedding (5-fold macro-F1) next to a random-embedding control. The seeds are the
    independent runs the claim's interval is taken over (a run's folds share its embedding). On data
    with fewer than two usable classes (an untyped file) the result says why it was skipped instead of
    failing."""
    import pandas as pd
    import plotly.graph_objects as go

    from nbkit.kg.downstream import downstream_check, downstream_skip_reason

    split = load_split(cfg.dataset, cfg.seed)
    labels = {e: t for t in split.entity_types for e in split.entities[t]}
    reason = downstream_skip_reason(labels)
    if reason:
        return Result(metrics={"skipped": reason}, table=pd.DataFrame([{"skipped": reason}]))
    device = _device(cfg.device)
    outs = [downstream_check(split, cfg.train_config(seed=s), labels=labels, device=device, live=live if s == cfg.seed else None)
            for s in range(cfg.seed, cfg.seed + cfg.seeds)]
    per_seed = {k: [o[k]["macro_f1"] for o in outs] for k in ("trained", "random_control")}
    first = outs[0]["trained"]
    metrics = {"macro_f1": statistics.fmean(per_seed["trained"]), "macro_f1_control": statistics.fmean(per_seed["random_control"]),
               "seed_scores": per_seed["trained"], "control_seed_scores": per_seed["random_control"],
               "fold_scores": [o["trained"]["fold_scores"] for o in outs], "control_fold_scores": [o["random_control"]["fold_scores"] for o in outs],
               "seeds": len(outs), "classes": first["classes"], "samples": first["samples"], "dropped_small_classes": first["dropped_small_classes"],
               "link_valid_mrr_untyped": statistics.fmean(o["link_valid_mrr_untyped"] for o in outs),
               "train_seconds": sum(o["train_seconds"] for o in outs)}
    names = ["trained embeddings", "random control"]
    vals = [metrics["macro_f1"], metrics["macro_f1_control"]]
    errs = [statistics.stdev(per_seed[k]) if len(outs) > 1 else 0.0 for k in ("trained", "random_control")]
    fig = go.Figure(go.Bar(x=names, y=vals, error_y=dict(type="data", array=errs), name="macro-F1"))
    fig.add_hline(y=0.82, line_dash="dash", annotation_text="field notes: 0.82")
    fig.update_layout(title=f"5-fold macro-F1, mean of {len(outs)} embedding run(s) ± sd across runs, {first['classes']} classes "
                            "(node type NOT an input)", yaxis_title="macro-F1", yaxis_range=[0, 1], template="plotly_white", height=360)
    table = pd.DataFrame([{"embeddings": k, "seed": s, **{m: o[k][m] for m in ("macro_f1", "macro_f1_std", "classes", "samples")},
                           "dropped": o[k]["dropped_small_classes"]}
                          for k in ("trained", "random_control") for s, o in zip(range(cfg.seed, cfg.seed + cfg.seeds), outs, strict=True)])
    return Result(metrics=metrics, table=table, figure=fig)


# -- mini-batch -----------------------------------------------------------------------------------
def run_minibatch(cfg: MinibatchConfig, live=None) -> Result:
    """Rung 5 trained on neighbour-sampled subgraphs and (if asked) on the whole graph, with the SAME
    loss (batches of positives against shared pools of sampled negatives), epochs and time budget:
    differences in time and memory come from message passing. Validation MRR, steps, edges per step
    and peak memory per mode."""
    import pandas as pd

    from nbkit.device import memory_probe, watch_peak
    from nbkit.kg.config import TrainConfig
    from nbkit.kg.graph import split_kg
    from nbkit.kg.train import LADDER, cluster_oracle_mrr, train_rung
    from nbkit.kg.triples import synthetic_kg

    device = _device(cfg.device)
    ceiling = None
    if cfg.source == "synthetic":
        kg = synthetic_kg(cfg.entities, cfg.triples, seed=cfg.seed, num_clusters=cfg.clusters)
        split = split_kg(kg, seed=cfg.seed)
    else:
        split = load_split(cfg.dataset, cfg.seed)
    if cfg.eval_max_triples and (cfg.eval_slice + 1) * cfg.eval_max_triples > len(split.valid):
        from nbkit.errors import UsageError

        raise UsageError(f"{type(cfg).__name__}.eval_slice: slice {cfg.eval_slice} of {cfg.eval_max_triples} evaluated triples needs "
                         f"{(cfg.eval_slice + 1) * cfg.eval_max_triples} validation triples; this split has {len(split.valid)}")
    if cfg.source == "synthetic":
        ceiling = cluster_oracle_mrr(split, kg.clusters, "valid", cfg.eval_max_triples, sample_slice=cfg.eval_slice)
    base = TrainConfig(epochs=cfg.epochs, hidden=cfg.hidden, lr=cfg.lr, dropout=cfg.dropout, seed=cfg.seed, eval_every=max(1, cfg.epochs // 5),
                       max_seconds=cfg.max_seconds, eval_max_triples=cfg.eval_max_triples, cpu_threads=cfg.cpu_threads or None,
                       batch_size=cfg.batch_size, num_negatives=cfg.num_negatives, embed_lr=cfg.embed_lr, input_init=cfg.input_init,
                       eval_every_seconds=cfg.max_seconds / cfg.eval_points if cfg.eval_points else None, eval_slice=cfg.eval_slice)
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
            res, _, graph = train_rung(split, LADDER[5], dataclasses.replace(tc, seed=s), device=device, live=live if s == cfg.seed else None,
                                       trace_prefix=name if s == cfg.seed else f"{name} seed {s}")
        h = res.history
        rows.append({
            "mode": name,
            "seed": s,
            "valid_mrr": res.metrics["valid_mrr"],
            "valid_hits_at_10": res.metrics["valid_hits_at_10"],
            "evaluated_triples": res.metrics.get("valid_eval_triples", len(split.valid)),
            "epochs": res.epochs_run,
            "steps": len(h["step_loss"]),
            "train_s": round(res.train_seconds, 1),
            # training steps per second of training (validation time excluded)
            "steps_per_s": round(len(h["step_loss"]) / max(res.train_seconds - (h["eval_s"][-1] if h["eval_s"] else 0.0), 1e-9), 2),
            # the learning curve: validation MRR after how many steps / seconds of training
            "curve_steps": list(h["valid_step"]),
            "curve_train_s": list(h["valid_train_s"]),
            "curve_valid_mrr": [round(m, 5) for m in h["valid_mrr"]],
            "edges_per_step": int(sum(h["sampled_edges"]) / max(len(h["sampled_edges"]), 1)),
            # how much of the graph one step's encoder runs on (1.0 = every node: full-graph cost)
            "nodes_per_step": int(sum(h["sampled_nodes"]) / max(len(h["sampled_nodes"]), 1)),
            "nodes_fraction": round(sum(h["sampled_nodes"]) / max(len(h["sampled_nodes"]), 1) / split.num_nodes, 4),
            "message_graph_edges": int(graph.edge_index.size(1)),
            "peak_memory_mb": round(peak.peak / 2**20, 1),
            "peak_memory_growth_mb": round(peak.growth / 2**20, 1),
            "memory_measured_as": peak.how,
            "interrupted": res.interrupted,
        })
        if ceiling is not None:  # what a perfect model reaches on this graph (same validation sample)
            rows[-1]["ceiling_mrr"] = round(ceiling, 5)
        rr = h.get("valid_reciprocal_ranks", [])
        reciprocal_ranks.setdefault(name, []).append((rr[0], rr[-1]) if rr else ([], []))
        if res.interrupted:
            break
    return Result(metrics={"rows": rows, "sizes": split.sizes()}, table=pd.DataFrame(rows), data={"reciprocal_ranks": reciprocal_ranks})


# -- pitfalls -------------------------------------------------------------------------------------
def _leaky_forward(edge_index):
    edge_index += 1  # the field notes' §4.1 bug: shifting ids in place
    return edge_index


def _safe_forward(edge_index):
    return edge_index.clone() + 1


def run_pitfalls(cfg: PitfallConfig, live=None) -> Result:
    """Each pitfall detector on a deliberately broken input built from the dataset, and on its clean
    twin; plus the coalesce experiment (does RGCNConv raise without ``coalesce``?)."""
    import warnings

    import pandas as pd
    import torch

    from nbkit.findings import findings_frame
    from nbkit.kg import checks
    from nbkit.kg import graph as kgg

    kg = load_kg(cfg.dataset)
    split = load_split(cfg.dataset, cfg.seed)
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
    heads_only = {t: sorted(set(with_orphan.loc[with_orphan["head_type"] == t, "head"])) for t in split.entity_types}
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
    findings.append(checks.diagnose_auc_near_chance(0.51, loss_history=[0.693] * 10, split=split, reverse="none"))
    # (e) coalesce: does RGCNConv raise IndexError without it?
    coalesce = checks.coalesce_experiment(seed=cfg.seed)
    metrics = {"pitfall_findings": [f.to_dict(with_table=False) for f in findings], "coalesce_experiment": coalesce}
    return Result(metrics=metrics, table=findings_frame(findings), data={"findings": findings})
