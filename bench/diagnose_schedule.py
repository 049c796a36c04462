"""Bench: the learning-rate check and the report's HTML on a long run's log, against the stepping check.

A synthetic log of ``--steps`` optimizer steps (default 1,000,000), every step logged, as the HF Trainer
logs them under transformers 5: a cosine schedule with 2,000 warmup steps, once as configured and once
restarted at 60 % (a resume without the scheduler's state). Prints, per log, the median of ``--repeats``
timings of ``verdict_schedule`` (the vectorised transformers formulas), and, once, the check as it was
before: the configured LR obtained by stepping a real torch optimizer and the audit's torch schedulers
(``LinearLR`` warmup, then ``CosineAnnealingLR``) once per step, then the same deviations at both
alignments — the least that check computed (a departure also stepped up to twelve more schedules for
its "it follows … instead"), so the ratio printed is a lower bound on the gain. Both must agree on the
configured LR (printed: the largest difference ÷ peak). Then the report page of a run whose loss, grad
norm and LR are that long: its size with the curves thinned for drawing and with every point drawn,
and the seconds to render it.

    PYTHONPATH=$PWD .venv/bin/python bench/diagnose_schedule.py [--steps 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from pathlib import Path

import numpy as np

PEAK, WARMUP = 3e-4, 2000


def stepped_cosine(total: int) -> np.ndarray:
    """The configured LR at steps 0…total as the check computed it before: each stage of the audit's
    scheduler model (real torch schedulers) stepped from the peak, concatenated."""
    from nbkit.audit.checks.schedulers import build, lr_trace
    from nbkit.audit.sections import SchedulerSection

    out: list[float] = []
    stages = [
        {"kind": "linear_warmup", "steps": WARMUP, "start_factor": 1e-12},
        {"kind": "cosine", "steps": total - WARMUP},
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, stage in enumerate(stages):
            opt, sched = build(SchedulerSection.model_validate({"base_lr": PEAK, "stages": [stage]}))
            out += lr_trace(opt, sched, stage["steps"] + (1 if i == len(stages) - 1 else 0))
    return np.array(out[: total + 1])


def stepped_check(lr_steps: np.ndarray, lr_values: np.ndarray, total: int) -> tuple[float, np.ndarray]:
    """The stepping check's work on a log: the stepped trace, then the deviation at both alignments."""
    exp = stepped_cosine(total)
    worst = np.inf
    for offset in (0, 1):
        idx = lr_steps - offset
        ok = (idx >= 0) & (idx < len(exp))
        dev = np.full(len(lr_steps), np.inf)
        dev[ok] = np.abs(lr_values[ok] - exp[idx[ok]]) / PEAK
        worst = min(worst, float(dev.max()))
    return worst, exp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from nbkit.diagnose import run_figures
    from nbkit.diagnose.artefacts import RunArtefacts
    from nbkit.diagnose.curves import GRAD_NORM, LEARNING_RATE, LOSS, Series
    from nbkit.diagnose.finished import FinishedRun
    from nbkit.diagnose.schedule import Schedule, expected_lr, verdict_schedule

    total = args.steps
    print(f"load average at start: {os.getloadavg()[0]:.1f}; {total:,} steps, every step logged", flush=True)
    steps = np.arange(1, total + 1)
    configured = expected_lr("cosine", PEAK, WARMUP, total, at=steps - 1)
    restart = int(total * 0.6)
    restarted = np.where(
        steps > restart, expected_lr("cosine", PEAK, WARMUP, total, at=steps - restart - 1), configured
    )
    where = {"lr_scheduler_type": "cfg lr_scheduler_type", "learning_rate": "cfg learning_rate"}
    schedule = Schedule("cosine", PEAK, WARMUP, 0.0, total, 1.0, where, "cfg.json", options={})
    rows, medians = {}, {}
    for name, values in (("as configured", configured), ("restarted at 60 %", restarted)):
        lr = Series(LEARNING_RATE, steps, values, "synthetic log")
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            row = verdict_schedule(lr, schedule, total, "max_steps")
            times.append(time.perf_counter() - t0)
        rows[name] = row
        medians[name] = statistics.median(times)
        print(
            f"verdict_schedule, {name}: {row.status} (steps {list(row.steps)}), median "
            f"{statistics.median(times):.3f} s of {args.repeats} ({', '.join(f'{t:.3f}' for t in times)})",
            flush=True,
        )
    t0 = time.perf_counter()
    worst, exp = stepped_check(steps, configured, total)
    stepped = time.perf_counter() - t0
    closed = expected_lr("cosine", PEAK, WARMUP, total)
    new = medians["as configured"]
    print(
        f"stepping check (reference), as configured: largest deviation {worst:.2e} of the peak, "
        f"{stepped:.1f} s; stepped and closed-form LR differ by at most "
        f"{float(np.abs(exp - closed).max()) / PEAK:.2e} of the peak",
        flush=True,
    )

    rng = np.random.default_rng(0)
    loss = 2.0 * np.exp(-steps / (total / 5)) + 0.5 + 0.05 * rng.standard_normal(total)
    grad = np.exp(0.3 * rng.standard_normal(total))
    curves = {
        LOSS: Series(LOSS, steps, loss, "synthetic log"),
        GRAD_NORM: Series(GRAD_NORM, steps, grad, "synthetic log"),
        LEARNING_RATE: Series(LEARNING_RATE, steps, restarted, "synthetic log"),
    }
    art = RunArtefacts(
        Path("synthetic"), curves, ["synthetic log"], [], None, schedule, total, "max_steps", []
    )
    run = FinishedRun(art, [rows["restarted at 60 %"]])
    t0 = time.perf_counter()
    page = run.html_page()
    thinned = time.perf_counter() - t0
    buckets, run_figures.DRAW_BUCKETS = run_figures.DRAW_BUCKETS, 10**12
    t0 = time.perf_counter()
    full = run.html_page()
    unthinned = time.perf_counter() - t0
    run_figures.DRAW_BUCKETS = buckets
    print(
        f"report page (loss, grad norm, logged and configured LR): thinned {len(page.encode()) / 1e6:.2f} MB "
        f"in {thinned:.1f} s; every point drawn {len(full.encode()) / 1e6:.1f} MB in {unthinned:.1f} s",
        flush=True,
    )
    print(
        f"ratio stepping check ÷ verdict_schedule (as configured): {stepped / new:.0f}×; "
        f"load average at end: {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
