"""Bench: ``nbkit diagnose`` on a long run's log — every curve rule and the reading — and the spike rule's
trailing statistics against the per-point loop they replace.

1. ``trailing_jumps`` (the trailing median and local robust scale behind the spike and explosion rules)
   on ``--reference-points`` points of a noisy loss, vectorised and as it was (one ``np.median`` per point
   in Python, copied below as the reference): both timed in this process, their outputs compared; then the
   vectorised one alone on ``--steps`` points.
2. A synthetic HF Trainer run of ``--steps`` optimizer steps, every step logged (loss to 4 decimals, grad
   norm, the LR of a cosine schedule with 2,000 warmup steps) and an evaluation every 1 % of the run,
   written as ``trainer_state.json`` with a ``training_args.json`` beside it: ``diagnose_run`` on the
   folder (reading, every rule), split into reading and judging, then the text and the HTML page.

Timings in wall and process-CPU seconds (on a loaded machine the CPU figures are the ones to read), the
load average at the start and the end.

    PYTHONPATH=$PWD .venv/bin/python bench/diagnose_rules.py [--steps 1000000] [--reference-points 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def trailing_jumps_per_point(y: np.ndarray, window: int = 10, floor: float = 0.0, scale_window: int = 50):
    """The reference: ``nbkit.diagnose.curves.trailing_jumps`` as it was, one median per point."""
    med = np.array([np.median(y[i - window : i]) for i in range(window, len(y))])
    diff = y[window:] - med

    def mad(d: np.ndarray) -> float:
        return 1.4826 * float(np.median(np.abs(d - np.median(d))))

    sigma = np.array(
        [
            mad(diff[: 2 * window]) if i < window else mad(diff[max(0, i - scale_window) : i])
            for i in range(len(diff))
        ]
    )
    return diff, med, np.maximum(sigma, floor)


def clocked(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def write_run(folder: Path, steps: int) -> None:
    from nbkit.diagnose.schedule import expected_lr

    rng = np.random.default_rng(0)
    s = np.arange(1, steps + 1)
    loss = np.round(2.0 * np.exp(-s / (steps / 5)) + 0.5 + 0.005 * rng.standard_normal(steps), 4)
    grad = 0.4 * np.exp(0.1 * rng.standard_normal(steps))
    lr = expected_lr("cosine", 3e-4, 2000, steps, at=s - 1)
    every = max(1, steps // 100)
    history = []
    for k in range(steps):
        epoch, step = float(s[k] / steps), int(s[k])
        history.append(
            {"epoch": epoch, "grad_norm": float(grad[k]), "learning_rate": float(lr[k]),
             "loss": float(loss[k]), "step": step}
        )  # fmt: skip
        if step % every == 0:
            ev = float(0.55 + 0.01 * rng.standard_normal())
            history.append({"epoch": epoch, "eval_loss": ev, "eval_runtime": 1.0, "step": step})
    state = {"global_step": steps, "max_steps": steps, "log_history": history}
    (folder / "trainer_state.json").write_text(json.dumps(state))
    args = {"lr_scheduler_type": "cosine", "learning_rate": 3e-4, "warmup_steps": 2000, "max_steps": steps,
            "max_grad_norm": 1.0}  # fmt: skip
    (folder / "training_args.json").write_text(json.dumps(args))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--reference-points", type=int, default=20_000)
    args = ap.parse_args()

    import scipy.stats  # noqa: F401  (imported once here, not inside the first timing)

    from nbkit.diagnose.artefacts import read_run
    from nbkit.diagnose.finished import FinishedRun, diagnose_run, render
    from nbkit.diagnose.rules import curve_rows

    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    from nbkit.diagnose.curves import trailing_jumps

    rng = np.random.default_rng(1)
    trailing_jumps(rng.standard_normal(200))  # pandas imported here, not inside the timing
    n = args.reference_points
    y = 0.5 + np.exp(-np.arange(n) / n) + 0.02 * rng.standard_normal(n)
    old, old_wall, old_cpu = clocked(lambda: trailing_jumps_per_point(y))
    new, new_wall, new_cpu = clocked(lambda: trailing_jumps(y))
    worst = max(float(np.max(np.abs(a - b))) for a, b in zip(old, new, strict=True))
    print(
        f"trailing_jumps on {n:,} points: per point {old_wall:.2f} s wall / {old_cpu:.2f} s CPU; vectorised "
        f"{new_wall:.3f} s / {new_cpu:.3f} s; ratio (CPU) {old_cpu / new_cpu:.0f}×; largest difference "
        f"{worst:.1e}",
        flush=True,
    )
    big = 0.5 + np.exp(-np.arange(args.steps) / args.steps) + 0.02 * rng.standard_normal(args.steps)
    _, wall, cpu = clocked(lambda: trailing_jumps(big))
    print(
        f"trailing_jumps on {args.steps:,} points (vectorised): {wall:.2f} s wall / {cpu:.2f} s CPU",
        flush=True,
    )

    with tempfile.TemporaryDirectory(prefix="nbkit-long-run-") as tmp:
        folder = Path(tmp)
        write_run(folder, args.steps)
        size = (folder / "trainer_state.json").stat().st_size
        art, read_wall, read_cpu = clocked(lambda: read_run(folder))
        rows, judge_wall, judge_cpu = clocked(
            lambda: curve_rows(
                art.curves,
                art.others,
                schedule=art.schedule,
                total=art.total_steps,
                total_where=art.total_where,
                max_grad_norm=art.schedule.max_grad_norm if art.schedule else None,
                clip_where="training_args.json",
                precision=art.precision,
                precision_where=art.precision_where,
            )
        )
        run, wall, cpu = clocked(lambda: diagnose_run(folder))
        text, text_wall, _ = clocked(lambda: render(run, "text"))
        page, html_wall, _ = clocked(
            lambda: render(FinishedRun(run.artefacts, run.rows, run.memories), "html")
        )
        mb = len(page.encode()) / 1e6
        print(
            f"trainer_state.json of {args.steps:,} steps ({size / 1e6:.0f} MB): read {read_wall:.2f} s "
            f"wall / "
            f"{read_cpu:.2f} s CPU; every curve rule {judge_wall:.2f} s / {judge_cpu:.2f} s; diagnose_run "
            f"(both) {wall:.2f} s / {cpu:.2f} s; text {text_wall:.2f} s; HTML page {mb:.2f} MB in "
            f"{html_wall:.2f} s",
            flush=True,
        )
        print("rows: " + "; ".join(f"{r.key} {r.status}" for r in rows))
        print(text.splitlines()[1])
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
