"""Benchmark: sampled-neighbourhood vs full-graph message passing for rung 5, same loss, same graph, same run.

    .venv/bin/python bench/kg_minibatch.py [--seconds 60] [--mem-limit-gb 16] [--presets mid hetionet]

Both modes optimise the SAME loss: batches of ``--batch-size`` positives, each scored against shared
pools of ``--negatives`` sampled entities per side (softmax cross-entropy). ``minibatch`` runs the
encoder on the sampled multi-hop neighbourhood of the batch; ``full`` runs it on the whole train graph
every step (``TrainConfig.full_graph``). So differences in memory and time come from message passing,
not from the loss. Each (preset, mode) trains in its own child process (so peak RSS is that mode's
alone) under an address-space limit, with the same wall-clock training budget, and is scored the same
way: filtered validation MRR on the same seeded sample of validation triples (the benchmark makes no
choice, so the test split is not read). Graphs are ``synthetic_kg`` (seeded):

* ``mid``: 5,000 entities / 100,000 triples — the full graph still fits, so both modes give numbers;
* ``hetionet``: 47,000 entities / 2,250,000 triples (Hetionet v1.0's counts) — the size the mini-batch
  path exists for; the full graph is attempted under the same memory limit and a failure is reported.

Prints per-mode peak RSS, steps, training seconds and validation MRR, then the ratios full / mini-batch
for peak memory and MRR. The real Hetionet needs a download (``nbkit.kg.triples.download_hetionet``),
which this offline machine cannot do.
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


def child(preset: str, mode: str, seconds: float, batch_size: int, negatives: int, eval_triples: int, threads: int) -> dict:
    from nbkit.kg.graph import split_kg
    from nbkit.kg.train import LADDER, TrainConfig, train_rung
    from nbkit.kg.triples import synthetic_kg

    p = PRESETS[preset]
    t0 = time.perf_counter()
    split = split_kg(synthetic_kg(p["entities"], p["triples"], seed=0, num_clusters=p["clusters"]), seed=0)
    prep_s = time.perf_counter() - t0
    cfg = TrainConfig(epochs=10_000, eval_every=1, max_seconds=seconds, eval_max_triples=eval_triples, cpu_threads=threads,
                      batch_size=batch_size, num_negatives=negatives, full_graph=mode == "full")
    out = {"preset": preset, "mode": mode, "entities": split.num_nodes, "train_triples": len(split.train), "prep_s": round(prep_s, 1)}
    try:
        res, _, graph = train_rung(split, LADDER[5], cfg, progress=False)
    except (MemoryError, RuntimeError) as exc:  # RuntimeError: torch's "can't allocate memory"
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    else:
        h = res.history
        out.update(
            steps=len(h.get("step_loss") or h["loss"]),
            epochs=res.epochs_run,
            train_s=round(res.train_seconds, 1),
            valid_mrr=round(res.metrics["valid_mrr"], 4),
            valid_hits_at_10=round(res.metrics["valid_hits_at_10"], 4),
            eval_triples=res.metrics.get("valid_eval_triples", len(split.valid)),
            message_edges=int(graph.edge_index.size(1)),
        )
        out["edges_per_step"] = int(sum(h["sampled_edges"]) / max(len(h["sampled_edges"]), 1))
    out["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    return out


def run_child(args, preset: str, mode: str) -> dict:
    cmd = [sys.executable, __file__, "--child", preset, mode, "--seconds", str(args.seconds), "--batch-size", str(args.batch_size),
           "--negatives", str(args.negatives), "--eval-triples", str(args.eval_triples), "--threads", str(args.threads)]
    limit = int(args.mem_limit_gb * 2**30)

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=cap)
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode == 0 and last.startswith("{"):
        return json.loads(last)
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1][:160]
    return {"preset": preset, "mode": mode, "error": f"exit {proc.returncode} under a {args.mem_limit_gb} GiB limit: {tail}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=2, metavar=("PRESET", "MODE"))
    ap.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    ap.add_argument("--seconds", type=float, default=60.0, help="training budget per mode")
    ap.add_argument("--batch-size", type=int, default=4096)
    ap.add_argument("--negatives", type=int, default=256)
    ap.add_argument("--eval-triples", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mem-limit-gb", type=float, default=16.0)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child, args.seconds, args.batch_size, args.negatives, args.eval_triples, args.threads)))
        return
    rows = []
    for preset in args.presets:
        for mode in ("full", "minibatch"):
            row = run_child(args, preset, mode)
            print(json.dumps(row), flush=True)
            rows.append(row)
    print(f"\nrung 5, same loss ({args.batch_size} positives x {args.negatives} shared negatives per side and step), "
          f"{args.seconds:.0f} s training budget per mode, memory limit {args.mem_limit_gb} GiB, {args.threads} threads")
    for preset in args.presets:
        full, mini = (next(r for r in rows if r["preset"] == preset and r["mode"] == m) for m in ("full", "minibatch"))
        for r in (full, mini):
            if "error" in r:
                print(f"  {preset:9s} {r['mode']:9s} FAILED: {r['error']}")
            else:
                print(f"  {preset:9s} {r['mode']:9s} peak RSS {r['peak_rss_gb']:6.2f} GiB  steps {r['steps']:5d}  train {r['train_s']:6.1f} s  "
                      f"edges/step {r['edges_per_step']:9d}  valid MRR {r['valid_mrr']:.4f} (on {r['eval_triples']} triples)")
        if "error" in full or "error" in mini:
            print(f"  {preset}: ratios need both modes to finish")
        else:
            print(f"  {preset}: peak memory full/mini-batch = {full['peak_rss_gb'] / mini['peak_rss_gb']:.2f}x, "
                  f"valid MRR mini-batch/full = {mini['valid_mrr'] / max(full['valid_mrr'], 1e-12):.2f}x, "
                  f"steps mini-batch/full = {mini['steps'] / max(full['steps'], 1):.2f}x")


if __name__ == "__main__":
    main()
