"""What one of the default workbook's costliest experiments costs, run alone at its notebook's default size.

    PYTHONPATH=<tree> .venv/bin/python bench/experiment_cost.py EXPERIMENT [--smoke] [--json FILE]

EXPERIMENT is one of ``kiss`` (kiss-lora), ``compile``, ``ladder`` (the ZeRO ladder), ``ablation`` (KG).

Opens the theme's context as its notebook does (the kiss check on ``good_smollm2.yaml`` with SmolLM2 and one
torch thread; notebook 03's LM with a cold in-run cache; notebook 02's CPU ranks; UMLS), runs the experiment
once through the theme's registry (``REGISTRY.run(slug, ctx)``; the KG ablation at its own defaults, without
the selection's overrides), and prints one line: wall seconds, CPU seconds of this process and of every
process it started (rank processes, LM servers), the load average. ``--json`` also writes the figures the
verdicts read (steps to target, every compiled program's answers, every loss and peak, every rung's MRR), so
two trees compare figure for figure. ``--smoke``: the notebooks' SMOKE sizes (a check of this script).

Before and after a change: run the two trees side by side, at the same time, from a directory outside both
(``python -m nbkit.zero.worker`` puts the working directory first on a rank's path), with the thread share
``nbkit run --jobs 2`` gives a kernel on 2 cores::

    git archive 0eab162 nbkit | tar -x -C /tmp/before
    cd /tmp
    OMP_NUM_THREADS=1 PYTHONPATH=/tmp/before python $REPO/bench/experiment_cost.py ladder --json b.json &
    OMP_NUM_THREADS=1 PYTHONPATH=$REPO python $REPO/bench/experiment_cost.py ladder --json a.json

Figures: ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

EXPERIMENTS = ("kiss", "compile", "ladder", "ablation")


def _reaped_cpu() -> float:
    """CPU-s of the children this process has waited for (the ranks of a finished launch)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _live_cpu(me) -> dict[int, float]:
    """CPU-s so far of every descendant alive now, by pid (the LM servers, until the context closes)."""
    import psutil

    out = {}
    for p in me.children(recursive=True):
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
        except psutil.Error:
            pass
    return out


def _kiss(smoke: bool) -> tuple[Any, Callable[[], Any], Callable[[Any], dict]]:
    from nbkit.audit import context, experiments
    from nbkit.audit.checks.kiss import notes_model_counts

    ctx = context.AuditContext(
        "cpu", smoke=smoke, config="good_smollm2.yaml", model="smollm2", seed=0, threads=1
    )
    ctx.model_and_tokenizer("")  # loaded by the notebook before the check: not the check's cost
    ctx.shared.cached(("notes-model-counts",), notes_model_counts)

    def figures(r):
        m = r.metrics
        return {
            "runs": [(x.seed, x.kiss_steps, x.over_steps, x.steps_trained) for x in m.runs],
            "peak_ratio_kiss_vs_over": m.peak_ratio_kiss_vs_over,
        }

    return ctx, lambda: experiments.run("kiss-lora", ctx), figures


def _compile(smoke: bool):
    from nbkit.signatures import context, experiments

    ctx = context.SignaturesContext("cpu", smoke=smoke, cache="memory")
    ctx.start_lm()  # the servers start with the notebook's first LM section: not the compile's cost

    def figures(r):
        m = r.metrics
        return {
            "module": m.module,
            "programs": [
                (p.name, p.standard, p.colloquial, p.demos_bootstrapped, p.demos_labeled, p.outcomes.hit)
                for p in m.programs
            ],
            "requests_served": ctx.llm.calls_summary().served,
        }

    return ctx, lambda: experiments.run("compile", ctx), figures


def _ladder(smoke: bool):
    from nbkit.zero import context, experiments

    ctx = context.ZeroContext("cpu", smoke=smoke, world_size=8)

    def figures(r):
        m = r.metrics
        return {
            "formula_ratios": [(x.stage, x.ratio) for x in m.formula_ratios],
            "loss_max_rel_diff": m.loss_max_rel_diff,
            "control_rel_diff": m.control_rel_diff,
            "replicas_in_sync": m.replicas_in_sync,
            "checkpoint_round_trip_ok": m.checkpoint_round_trip_ok,
            "losses": [t["losses"] for t in r.data["ladder"] if t["rank"] == 0],
            "peaks": [(p.rung, p.launch, p.measured) for p in m.peaks],
            "growth": [(p.rung, p.launch, p.growth) for p in m.peaks],
            "growth_ratios": {s: m.growth_ratios(s) for s in (1, 2, 3)},
        }

    return ctx, lambda: experiments.run("ladder", ctx, world_size=ctx.ranks), figures


def _ablation(smoke: bool):
    from nbkit.kg import context, experiments

    ctx = context.KGContext("cpu", smoke=smoke)
    ctx.split("umls", 0)  # the load section's work, and the fixed evaluation negatives
    ctx.negatives("umls", 0, "valid")
    ctx.negatives("umls", 0, "test")

    def figures(r):
        m = r.metrics
        return {
            "best_rung": m.best_rung,
            "test_mrr": m.test_mrr,
            "rungs": {x.rung: (x.valid_mrr_per_seed, x.valid_mrr_select, x.epochs) for x in m.rungs},
        }

    return ctx, lambda: experiments.run("ablation", ctx, dataset="umls", seed=0), figures


def main(argv: list[str] | None = None) -> int:
    import psutil

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment", choices=EXPERIMENTS)
    ap.add_argument("--smoke", action="store_true", help="the notebooks' SMOKE sizes")
    ap.add_argument("--json", help="also write the timings and the figures to this file")
    args = ap.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")
    ctx, run, figures = {"kiss": _kiss, "compile": _compile, "ladder": _ladder, "ablation": _ablation}[
        args.experiment
    ](args.smoke)
    me = psutil.Process()
    try:
        own0, reaped0, live0 = me.cpu_times(), _reaped_cpu(), _live_cpu(me)
        load0, t0 = os.getloadavg()[0], time.perf_counter()
        result = run()
        wall = time.perf_counter() - t0
        own1, reaped1, live1 = me.cpu_times(), _reaped_cpu(), _live_cpu(me)
        children = (reaped1 - reaped0) + sum(v - live0.get(pid, 0.0) for pid, v in live1.items())
        out = {
            "experiment": args.experiment,
            "tree": os.path.dirname(os.path.dirname(sys.modules["nbkit"].__file__)),
            "wall_s": round(wall, 1),
            "cpu_s": round((own1.user + own1.system) - (own0.user + own0.system), 1),
            "children_cpu_s": round(children, 1),
            "load_average": [round(load0, 2), round(os.getloadavg()[0], 2)],
            "started": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() - wall)),
        }
        print(json.dumps(out), flush=True)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump(dict(out, figures=figures(result)), fh, default=str)
    finally:
        ctx.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
