"""Bench: kiss-lora's learning rate per variant, and the spread of one seed's steps ratio.

``--tune``: each variant (KISS q/v r8, the over-parameterised q/v/o r64) trains at every learning rate of
``--lrs`` on tuning seeds that the notebook never judges (``--tune-seeds``, from seed 100 on), the check's
own path and defaults otherwise; for each rate, the steps each variant took to the validation target.
Each variant's rate is the one with the fewest steps (the same grid and seeds for both: a peer tuned with
the same budget). ``--seeds N``: the check at its defaults (or ``--kiss-lr``/``--over-lr``) over seeds 0 …
N−1 — each seed's log steps ratio, their standard deviation (the kiss_steps design's spread) and the
minutes per seed.

    .venv/bin/python bench/audit_kiss_steps.py --tune [--lrs 1e-3 3e-3 1e-2] [--tune-seeds 2]
    .venv/bin/python bench/audit_kiss_steps.py --seeds 6 [--kiss-lr X --over-lr Y] [--threads 1]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time


def run(ctx, check, **overrides):
    """The check as the notebook runs it (its own defaults, ``overrides``) in ``ctx``: (metrics, CPU-s)."""
    c0 = time.process_time()
    result = check.run(check.config(**overrides), ctx, None)
    return result.metrics, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--tune", action="store_true")
    ap.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3, 1e-2])
    ap.add_argument("--tune-seeds", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=0)
    ap.add_argument("--kiss-lr", type=float)
    ap.add_argument("--over-lr", type=float)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    from nbkit.audit.context import AuditContext
    from nbkit.audit.registry import REGISTRY

    check = REGISTRY.check("kiss-lora")
    if args.tune:
        ctx = AuditContext(
            "cpu", config="good_smollm2.yaml", model=args.model, seed=100, threads=args.threads
        )
        ctx.progress = False
        for lr in args.lrs:
            m, cpu = run(ctx, check, kiss_lr=lr, over_lr=lr, seeds=args.tune_seeds)
            kiss = [r.kiss_steps for r in m.runs]
            over = [r.over_steps for r in m.runs]
            print(
                f"lr {lr:g}: steps to target KISS {kiss}, over {over} (seeds 100…; {cpu:.0f} CPU-s)",
                flush=True,
            )
    if args.seeds:
        ctx = AuditContext("cpu", config="good_smollm2.yaml", model=args.model, seed=0, threads=args.threads)
        ctx.progress = False
        lrs = {k: v for k, v in (("kiss_lr", args.kiss_lr), ("over_lr", args.over_lr)) if v is not None}
        m, cpu = run(ctx, check, seeds=args.seeds, **lrs)
        ratios = m.log_step_ratios
        for r in m.runs:
            print(
                f"seed {r.seed}: KISS {r.kiss_steps}, over {r.over_steps} steps ({r.steps_trained} trained)"
            )
        sd = statistics.stdev(ratios) if len(ratios) > 1 else math.nan
        print(
            f"log steps ratio KISS/over: mean {statistics.mean(ratios):.3f} (ratio "
            f"{math.exp(statistics.mean(ratios)):.3f}), sd {sd:.3f} over {len(ratios)} seeds; "
            f"{cpu:.0f} CPU-s, {cpu / 60 / args.seeds:.2f} CPU-min per seed"
        )


if __name__ == "__main__":
    main()
