"""Benchmark: sampled-neighbourhood vs full-graph message passing for rung 5, same loss, same graph, same run.

    .venv/bin/python bench/kg_minibatch.py [--seconds 60] [--mem-limit-gb 16] [--presets mid hetionet]
        [--batch-size 1024] [--negatives 256] [--fanout 2] [--lr 0.01] [--embed-lr 0.01]
        [--input-init structural] [--dropout 0] [--eval-points 3]

Both modes optimise the SAME loss: batches of ``--batch-size`` positives, each scored against shared
pools of ``--negatives`` sampled entities per side (softmax cross-entropy). ``minibatch`` runs the
encoder on the sampled multi-hop neighbourhood of the batch; ``full`` runs it on the whole train graph
every step (``TrainConfig.full_graph``). So differences in memory and time come from message passing,
not from the loss. Each (preset, mode) trains in its own child process (so peak RSS is that mode's
alone) under an address-space limit, with the same wall-clock training budget, and is scored the same
way: filtered validation MRR on the same seeded sample of validation triples (the benchmark makes no
choice, so the test split is not read). Graphs are ``synthetic_kg`` (seeded):

* ``mid``: 5,000 entities / 100,000 triples — the full graph still fits, so both modes give numbers;
* ``hetionet``: 47,000 entities / 2,250,000 triples (Hetionet v1.0's counts; 1.6M train) — the size the
  mini-batch path exists for. The full graph is attempted under the same memory limit; measured here it fits:
  ``--presets hetionet --seconds 30`` at the defaults, load 2.3-2.9: full graph 0.17 steps/s, peak RSS
  2.55 GiB (+1.54 during training), curve .0008 / .0009 / .0010 (6 steps); mini-batch 2.67 steps/s,
  2.60 GiB (+1.59), .0120 / .0444 / .0578 (81 steps); ceiling .0739. Whole-graph message passing is one
  cached sparse-matrix product per layer (before it, the full graph took 40 s per step and +3.5 GB
  gathering per-edge tensors; the modelled limit drawn from those figures no longer applies and was not
  re-measured). Note the mini-batch peak includes validation, which embeds the whole graph (full
  neighbourhoods) at every curve point: at this size it sets both modes' peak.

Prints per mode: the learning curve (validation MRR after how many training seconds), steps/s, peak RSS
and its growth during training, the share of the graph's nodes one step's encoder runs on; then the ratios
full / mini-batch for peak memory (and its growth) and MRR, measured in the same run. The defaults are
``ScaleConfig``'s (the measurements they were chosen on are in bench/RESULTS.md). The real Hetionet
needs a download (``nbkit.kg.hetionet.download_hetionet``), which this offline machine cannot do.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

PRESETS = {
    "mid": {"entities": 5_000, "triples": 100_000, "clusters": 100},
    "hetionet": {"entities": 47_000, "triples": 2_250_000, "clusters": 200},
}


def child(preset: str, mode: str, args) -> dict:
    from nbkit.device import memory_probe, watch_peak
    from nbkit.kg.config import TrainConfig
    from nbkit.kg.graph import split_kg
    from nbkit.kg.ladder import LADDER
    from nbkit.kg.ranking import cluster_oracle_mrr
    from nbkit.kg.synthetic import synthetic_kg
    from nbkit.kg.train import train_rung

    p = PRESETS[preset]
    t0 = time.perf_counter()
    kg = synthetic_kg(p["entities"], p["triples"], seed=0, num_clusters=p["clusters"])
    split = split_kg(kg, seed=0)
    ceiling = cluster_oracle_mrr(split, kg.clusters, "valid", args.eval_triples)
    prep_s = time.perf_counter() - t0
    cfg = TrainConfig(
        epochs=10_000,
        eval_every=10_000,
        max_seconds=args.seconds,
        eval_max_triples=args.eval_triples,
        cpu_threads=args.threads,
        batch_size=args.batch_size,
        num_negatives=args.negatives,
        num_neighbors=(args.fanout,) * 2,
        lr=args.lr,
        dropout=args.dropout,
        eval_every_seconds=args.seconds / args.eval_points if args.eval_points else None,
        full_graph=mode == "full",
        embed_lr=args.embed_lr,
        input_init=args.input_init,
        hidden=args.hidden,
    )
    out = {
        "preset": preset,
        "mode": mode,
        "entities": split.num_nodes,
        "train_triples": len(split.train),
        "prep_s": round(prep_s, 1),
        "ceiling_mrr": round(ceiling, 4),
    }
    try:
        with watch_peak(memory_probe("cpu")) as peak:
            res, _, graph = train_rung(split, LADDER[5], cfg, progress=False)
    except (MemoryError, RuntimeError) as exc:  # RuntimeError: torch's "can't allocate memory"
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    else:
        h = res.history
        steps = len(h["step_loss"])
        out.update(
            steps=steps,
            train_s=round(res.train_seconds, 1),
            steps_per_s=round(
                steps / max(res.train_seconds - (h["eval_s"][-1] if h["eval_s"] else 0.0), 1e-9), 3
            ),
            curve=[[s_, round(m, 5)] for s_, m in zip(h["valid_train_s"], h["valid_mrr"], strict=True)],
            valid_mrr=round(res.metrics["valid_mrr"], 5),
            eval_triples=res.metrics.get("valid_eval_triples", len(split.valid)),
            message_edges=int(graph.edge_index.size(1)),
            edges_per_step=int(sum(h["sampled_edges"]) / max(steps, 1)),
            nodes_fraction=round(sum(h["sampled_nodes"]) / max(steps, 1) / split.num_nodes, 4),
            peak_growth_gb=round(peak.growth / 2**30, 3),
        )
    out["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    return out


def run_child(args, preset: str, mode: str) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        preset,
        mode,
        *(
            f"--{k.replace('_', '-')}={v}"
            for k, v in vars(args).items()
            if k not in ("child", "presets", "mem_limit_gb")
        ),
    ]
    limit = int(args.mem_limit_gb * 2**30)

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=cap)
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode == 0 and last.startswith("{"):
        return json.loads(last)
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1][:160]
    return {
        "preset": preset,
        "mode": mode,
        "error": f"exit {proc.returncode} under a {args.mem_limit_gb} GiB limit: {tail}",
    }


def main() -> None:
    from nbkit.kg.config import ScaleConfig

    d = ScaleConfig()  # the defaults are ScaleConfig's (chosen on validation MRR), read, not retyped
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=2, metavar=("PRESET", "MODE"))
    ap.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    ap.add_argument(
        "--seconds", type=float, default=60.0, help="training budget per mode (validation excluded)"
    )
    ap.add_argument("--batch-size", type=int, default=d.batch_size)
    ap.add_argument("--negatives", type=int, default=d.num_negatives)
    ap.add_argument(
        "--fanout", type=int, default=d.fanout, help="sampled incoming edges per node and hop (2 hops)"
    )
    ap.add_argument("--lr", type=float, default=d.lr)
    ap.add_argument(
        "--embed-lr",
        type=float,
        default=d.embed_lr,
        help="Adagrad rate of the per-entity tables (sparse gradients); 0 = Adam at --lr",
    )
    ap.add_argument(
        "--input-init",
        default=d.input_init,
        choices=["random", "structural"],
        help="how the per-entity tables start",
    )
    ap.add_argument("--hidden", type=int, default=d.hidden)
    ap.add_argument("--dropout", type=float, default=d.dropout)
    ap.add_argument(
        "--eval-points",
        type=int,
        default=d.eval_points,
        help="validation points inside the budget (the learning curve)",
    )
    ap.add_argument("--eval-triples", type=int, default=d.eval_max_triples)
    ap.add_argument("--threads", type=int, default=d.cpu_threads)
    ap.add_argument("--mem-limit-gb", type=float, default=16.0)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child, args)))
        return
    rows = []
    for preset in args.presets:
        for mode in ("full", "minibatch"):
            row = run_child(args, preset, mode)
            print(json.dumps(row), flush=True)
            rows.append(row)
    print(
        f"\nrung 5, same loss ({args.batch_size} positives x {args.negatives} shared negatives per side and "
        "step), fan-out "
        f"{args.fanout}x{args.fanout}, {args.seconds:.0f} s training budget per mode, memory limit "
        f"{args.mem_limit_gb} GiB, {args.threads} threads"
    )
    for preset in args.presets:
        full, mini = (
            next(r for r in rows if r["preset"] == preset and r["mode"] == m) for m in ("full", "minibatch")
        )
        for r in (full, mini):
            if "error" in r:
                print(f"  {preset:9s} {r['mode']:9s} FAILED: {r['error']}")
                continue
            print(
                f"  {preset:9s} {r['mode']:9s} peak RSS {r['peak_rss_gb']:6.2f} GiB (training "
                f"+{r['peak_growth_gb']:.2f})  "
                f"{r['steps_per_s']:.2f} steps/s  nodes/step {r['nodes_fraction']:.1%} of {r['entities']:,}  "
                f"valid MRR {r['valid_mrr']:.4f} (ceiling {r['ceiling_mrr']:.4f}, {r['eval_triples']} "
                "triples)"
            )
            print(
                "      curve (train s: valid MRR) " + ", ".join(f"{s_:.0f}: {m:.4f}" for s_, m in r["curve"])
            )
        if "error" in full or "error" in mini:
            print(f"  {preset}: ratios need both modes to finish")
        else:
            print(
                f"  {preset}: peak RSS full/mini-batch = {full['peak_rss_gb'] / mini['peak_rss_gb']:.2f}x, "
                "training growth "
                f"full/mini-batch = {full['peak_growth_gb'] / max(mini['peak_growth_gb'], 1e-3):.2f}x, "
                "steps/s mini-batch/full = "
                f"{mini['steps_per_s'] / max(full['steps_per_s'], 1e-9):.1f}x, valid MRR mini-batch/full = "
                f"{mini['valid_mrr'] / max(full['valid_mrr'], 1e-12):.2f}x"
            )


if __name__ == "__main__":
    main()
