"""Bench: what nbkit.callbacks.DiagnoseCallback adds to a training step of a real HF Trainer on CPU.

Notebook 04's watched run (:mod:`nbkit.audit.watched_run`: a tiny Llama, the HF Trainer's own loop,
every step logged, an evaluation every ``--eval-every`` steps) trained ``--repeats`` times in each of four
ways, interleaved (the order rotates each repeat): without the callback; with it; with it and
``stop_on_nonfinite`` (each step's loss read from the device); with it drawing its live figures (static
plotly figures, no kernel to show them in). Every run carries the same two clocks (callbacks keeping the
wall time and the training thread's CPU time at each step's end): the step time is the median interval.
Printed per way, each the median over the repeats: the step time in wall and CPU seconds and its ratio
to the run without the callback, and the callback's own time — every callback method and the forward
hook timed from inside, wall and thread CPU — per step and as a share of the step, and apart from it
what it spends once per run (opening the panel, the last judgement, the summary line). On a loaded
machine the CPU figures are the ones to read: other processes' time does not enter them.

    PYTHONPATH=$PWD .venv/bin/python bench/diagnose_callback.py [--steps 200] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import time

WAYS = ("without", "with", "with, stop_on_nonfinite", "with, live figures")
METHODS = (
    "on_train_begin",
    "on_step_begin",
    "on_step_end",
    "on_log",
    "on_evaluate",
    "on_train_end",
    "_on_forward",
)


FIXED = ("on_train_begin", "on_train_end")  # once per run: the panel, the last judgement and the summary


def timed(callback) -> dict[str, list[float]]:
    """Wrap the callback's methods (and the hook it registers) to add their wall and CPU seconds (this
    thread's: what a loaded machine's other processes cannot inflate) to the returned dict."""
    spent = {name: [0.0, 0.0] for name in METHODS}
    for name in METHODS:
        method = getattr(callback, name)

        @functools.wraps(method)
        def wrapper(*args, _method=method, _name=name, **kwargs):
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return _method(*args, **kwargs)
            finally:
                spent[_name][0] += time.perf_counter() - t0
                spent[_name][1] += time.thread_time() - c0

        setattr(callback, name, wrapper)
    return spent


def cpu_clock():
    """A Trainer callback keeping this thread's CPU time at each step's end (the step's CPU seconds)."""
    from transformers import TrainerCallback

    class CpuClock(TrainerCallback):
        def __init__(self) -> None:
            self.ends: list[float] = []

        def on_step_end(self, args, state, control, **kwargs):
            self.ends.append(time.thread_time())

    return CpuClock()


def one_run(way: str, cfg, seed: int) -> dict[str, float]:
    """One training run: median wall and CPU seconds per step, and the callback's wall and CPU seconds
    in its per-step methods and once per run, per step."""
    import numpy as np

    from nbkit.audit.watched_run import build_trainer, step_clock
    from nbkit.callbacks import DiagnoseCallback

    clock, cpu = step_clock(), cpu_clock()
    callbacks: list = [clock, cpu]
    spent = {name: [0.0, 0.0] for name in METHODS}
    if way != "without":
        cb = DiagnoseCallback(
            stop_on_nonfinite=way.endswith("stop_on_nonfinite"),
            live=way.endswith("live figures"),
            echo=lambda line: None,
        )
        spent = timed(cb)
        callbacks.append(cb)
    with tempfile.TemporaryDirectory(prefix="nbkit-bench-") as out:
        trainer = build_trainer(cfg, callbacks, out, seed)
        trainer.train()
        steps = int(trainer.state.global_step)
    per_step = [m for m in METHODS if m not in FIXED]
    return {
        "wall": clock.seconds_per_step(),
        "cpu": float(np.median(np.diff(cpu.ends))),
        "own_wall": sum(spent[m][0] for m in per_step) / steps,
        "own_cpu": sum(spent[m][1] for m in per_step) / steps,
        "once": sum(spent[m][0] for m in FIXED),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    import torch
    import transformers

    from nbkit.audit.watched_run import WatchedRunConfig

    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    cfg = WatchedRunConfig(steps=args.steps, train_examples=64, eval_every=args.eval_every)
    print(
        f"load average at start: {os.getloadavg()[0]:.1f}; {args.steps} steps per run, every step logged, "
        f"an evaluation every {args.eval_every}; {args.threads} torch thread(s)",
        flush=True,
    )
    one_run("without", WatchedRunConfig(steps=5), 0)  # warm-up: the tokenizer, imports, first allocations
    runs: dict[str, list[dict[str, float]]] = {w: [] for w in WAYS}
    for r in range(args.repeats):
        order = WAYS[r % len(WAYS) :] + WAYS[: r % len(WAYS)]
        for way in order:
            m = one_run(way, cfg, 0)
            runs[way].append(m)
            print(
                f"  repeat {r + 1}, {way}: {m['wall'] * 1e3:.1f} ms per step ({m['cpu'] * 1e3:.1f} CPU-ms); "
                f"callback {m['own_wall'] * 1e6:.0f} µs per step ({m['own_cpu'] * 1e6:.0f} CPU-µs), "
                f"{m['once']:.2f} s at start and end",
                flush=True,
            )

    def med(way: str, key: str) -> float:
        return statistics.median(m[key] for m in runs[way])

    base_wall, base_cpu = med("without", "wall"), med("without", "cpu")
    for way in WAYS:
        line = (
            f"{way}: {med(way, 'wall') * 1e3:.1f} ms per step, ÷ without {med(way, 'wall') / base_wall:.3f}; "
            f"{med(way, 'cpu') * 1e3:.1f} CPU-ms per step, ÷ without {med(way, 'cpu') / base_cpu:.3f}"
        )
        if way != "without":
            line += (
                f"; the callback's own time per step {med(way, 'own_wall') * 1e6:.0f} µs = "
                f"{med(way, 'own_wall') / med(way, 'wall'):.2%} of a step ({med(way, 'own_cpu') * 1e6:.0f} "
                f"CPU-µs = {med(way, 'own_cpu') / med(way, 'cpu'):.2%}), and {med(way, 'once'):.2f} s once "
                "at the start and end of the run"
            )
        print(line, flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
