"""Bench: what nbkit.callbacks.DiagnoseCallback adds to a training step of a real HF Trainer on CPU.

Notebook 04's watched run (:mod:`nbkit.audit.watched_run`: a tiny Llama, the HF Trainer's own loop,
every step logged, an evaluation every ``--eval-every`` steps) trained ``--repeats`` times in each of four
ways, interleaved (the order rotates each repeat): without the callback; with it; with it and
``stop_on_nonfinite`` (each step's loss read from the device); with it drawing its live figures (static
plotly figures, no kernel to show them in). Every run carries the same step clock (a callback keeping
the time each step ends): the step time is the median interval. Printed per way: the median step time
over the repeats, its ratio to the run without the callback, and the callback's own time — every
callback method and the forward hook timed from inside — per step and as a share of the step, and
apart from it what it spends once per run (opening the panel, the last judgement, the summary line).

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


def timed(callback) -> dict[str, float]:
    """Wrap the callback's methods (and the hook it registers) to add their seconds to the returned dict."""
    spent = dict.fromkeys(METHODS, 0.0)
    for name in METHODS:
        method = getattr(callback, name)

        @functools.wraps(method)
        def wrapper(*args, _method=method, _name=name, **kwargs):
            t0 = time.perf_counter()
            try:
                return _method(*args, **kwargs)
            finally:
                spent[_name] += time.perf_counter() - t0

        setattr(callback, name, wrapper)
    return spent


def one_run(way: str, cfg, seed: int) -> tuple[float, float, float, int]:
    """(median seconds per step, the callback's seconds in its per-step methods and once per run, steps)
    of one training run."""
    from nbkit.audit.watched_run import build_trainer, step_clock
    from nbkit.callbacks import DiagnoseCallback

    clock = step_clock()
    callbacks: list = [clock]
    spent = dict.fromkeys(METHODS, 0.0)
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
    fixed = sum(spent[m] for m in FIXED)
    return clock.seconds_per_step(), sum(spent.values()) - fixed, fixed, steps


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
    step: dict[str, list[float]] = {w: [] for w in WAYS}
    own: dict[str, list[float]] = {w: [] for w in WAYS}
    once: dict[str, list[float]] = {w: [] for w in WAYS}
    for r in range(args.repeats):
        order = WAYS[r % len(WAYS) :] + WAYS[: r % len(WAYS)]
        for way in order:
            per_step, spent, fixed, steps = one_run(way, cfg, 0)
            step[way].append(per_step)
            own[way].append(spent / steps)
            once[way].append(fixed)
            print(
                f"  repeat {r + 1}, {way}: {per_step * 1e3:.1f} ms per step; callback "
                f"{spent / steps * 1e6:.0f} µs per step, {fixed:.2f} s at start and end",
                flush=True,
            )
    base = statistics.median(step["without"])
    for way in WAYS:
        s = statistics.median(step[way])
        line = f"{way}: {s * 1e3:.1f} ms per step (median of {args.repeats}), ÷ without {s / base:.3f}"
        if way != "without":
            o = statistics.median(own[way])
            line += (
                f"; the callback's own time {o * 1e6:.0f} µs per step = {o / s:.2%} of a step, "
                f"{statistics.median(once[way]):.2f} s at the start and end of the run"
            )
        print(line, flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
