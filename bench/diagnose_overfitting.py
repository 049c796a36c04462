"""Bench: how often the overfitting rule reads flat noisy eval curves as overfitting (its false alarms), and
how often it finds a step up that stays (its power), on simulated curves.

Flat: ``--curves`` curves per cell of evaluations × noise, each evaluation an independent draw of
exp(noise × N(0, 1)) — flat noise, whose lowest evaluation is its luckiest draw — beside a training loss
that falls throughout (so the rule's last condition always holds). Step: the same curves, falling over
their first third to a lowest point, then every later evaluation ``step`` higher (× the same noise):
the shape of a run whose eval loss steps up after its minimum and stays there — reached by a descent that
flattens (U) or by a straight one (V, whose steep evaluations just before the lowest raise the level the
rule measures the step from). Printed per cell: the
share found, clear and undecided. Then the rule on a public DNABERT-2 fine-tune's eval losses as its HF
Trainer logged them (11 evaluations; lowest 0.2317 at step 800, the seven after it 10–31 % higher, the
training loss falling 0.18 → 0.03), with the chance flat curves of its shape step up as far.

    PYTHONPATH=$PWD .venv/bin/python bench/diagnose_overfitting.py [--curves 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

EVALS = (8, 12, 20, 30)
NOISES = (0.02, 0.05, 0.10)
STEPS = (0.10, 0.20, 0.30)
DNABERT_EVAL = [0.3139, 0.2554, 0.2665, 0.2317, 0.3033, 0.2723, 0.2541, 0.2833, 0.2941, 0.2944, 0.2878]
DNABERT_TRAIN = [0.4605, 0.3215, 0.2989, 0.257, 0.2309, 0.1856, 0.2026, 0.1838, 0.1709, 0.1294, 0.1035]
DNABERT_TRAIN += [0.0985, 0.1197, 0.0996, 0.0648, 0.0606, 0.0428, 0.0498, 0.0431, 0.0192, 0.0261, 0.0276]


def shares(statuses: list[str]) -> str:
    n = len(statuses)
    return " / ".join(f"{statuses.count(s) / n:.1%}" for s in ("found", "clear", "undecided"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--curves", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from nbkit.diagnose.curves import EVAL_LOSS, LOSS, Series, verdict_overfitting

    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    t0 = time.perf_counter()
    rng = np.random.default_rng(args.seed)

    def train(n: int) -> Series:
        s = np.arange(1, 100 * n + 1)
        return Series(LOSS, s, 2.0 * np.exp(-s / 500) + 0.1, "simulated")

    print("flat curves: found / clear / undecided")
    print("| evaluations | " + " | ".join(f"noise {x:.0%}" for x in NOISES) + " |")
    print("|---|" + "---|" * len(NOISES))
    worst = 0.0
    for n in EVALS:
        steps = np.arange(1, n + 1) * 100
        cells = []
        for noise in NOISES:
            st = [
                verdict_overfitting(
                    train(n), Series(EVAL_LOSS, steps, np.exp(noise * rng.standard_normal(n)), "simulated")
                ).status
                for _ in range(args.curves)
            ]
            worst = max(worst, st.count("found") / len(st))
            cells.append(shares(st))
        print(f"| {n} | " + " | ".join(cells) + " |", flush=True)
    print(f"largest share of flat curves found: {worst:.1%}")

    print("a step up that stays (lowest after the first third): found / clear / undecided")
    print("| shape, evaluations, step | " + " | ".join(f"noise {x:.0%}" for x in NOISES) + " |")
    print("|---|" + "---|" * len(NOISES))
    for kind, n, step in [(k, n, st) for k in ("U", "V") for n in (12, 20) for st in STEPS]:
        steps = np.arange(1, n + 1) * 100
        low = n // 3
        if kind == "V":  # a straight descent to the lowest, then the step
            descent = np.linspace(1.5, 1.0, low + 1)
        else:  # a descent that flattens: the evaluations before the lowest within a few per cent of it
            descent = 1.0 + 0.5 * np.exp(-4.0 * np.arange(low + 1) / low) - 0.5 * np.exp(-4.0)
        shape = np.concatenate([descent, np.full(n - low - 1, 1.0 + step)])
        cells = []
        for noise in NOISES:
            st = [
                verdict_overfitting(
                    train(n),
                    Series(EVAL_LOSS, steps, shape * np.exp(noise * rng.standard_normal(n)), "simulated"),
                ).status
                for _ in range(args.curves)
            ]
            cells.append(shares(st))
        print(f"| {kind}, {n}, +{step:.0%} | " + " | ".join(cells) + " |", flush=True)

    row = verdict_overfitting(
        Series(LOSS, np.arange(100, 2201, 100), np.array(DNABERT_TRAIN), "trainer_state.json: loss"),
        Series(EVAL_LOSS, np.arange(200, 2201, 200), np.array(DNABERT_EVAL), "trainer_state.json: eval_loss"),
    )
    print(f"DNABERT-2 fine-tune: {row.status}: {row.measured}")
    print(f"{time.perf_counter() - t0:.0f} s; load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
