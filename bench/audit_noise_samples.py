"""Bench: the spread of one gradient-noise variance estimate, which sizes the √L claim's n.

grad-accumulation estimates the gradient-noise variance at each sequence length from disjoint pairs of
micro-batch gradients (½‖g_a − g_b‖², one independent estimate per pair) and fits var ∝ L^slope. This
draws the check's samples (same stream, same seed, every parameter or the last layer) and prints, per
length, the pairs' mean and coefficient of variation (the design's spread), the seconds per gradient
sample, and the slope's t interval (:func:`nbkit.audit.checks.grad_accumulation.slope_interval`) at
the first k pairs per length.

    .venv/bin/python bench/audit_noise_samples.py [--model smollm2] [--samples 16] [--k 4 8]
        [--lengths 16 32 64 128] [--params all] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--k", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128])
    ap.add_argument("--params", choices=["all", "last_layer"], default="all")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    import torch

    from nbkit.audit.checks.grad_accumulation import (
        noise_variance_by_length,
        only_grad_for,
        slope_interval,
        text_token_stream,
    )
    from nbkit.audit.sft import load_model_and_tokenizer

    torch.set_num_threads(args.threads)
    model, tok = load_model_and_tokenizer(args.model, torch.device("cpu"))
    params = (
        [p for p in model.parameters() if p.requires_grad]
        if args.params == "all"
        else list(model.model.layers[-1].parameters())
    )
    stream = text_token_stream(tok, max_tokens=max(4000, 40 * max(args.lengths)))
    t0, c0 = time.perf_counter(), time.process_time()
    with only_grad_for(model, params):
        devs = noise_variance_by_length(
            model,
            stream,
            args.lengths,
            micro_batch=2,
            pairs=args.samples // 2,
            device=torch.device("cpu"),
            params=params,
            progress=False,
        )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = args.samples * len(args.lengths)
    print(f"{n} gradient samples ({args.params}): {wall:.0f} s wall, {cpu:.0f} CPU-s, {cpu / n:.2f} each")
    cvs = []
    for L in args.lengths:
        d = devs[L]
        cv = statistics.stdev(d) / statistics.mean(d)
        cvs.append(cv)
        print(f"L={L}: {len(d)} pairs, mean {statistics.mean(d):.4g}, cv {cv:.3f}")
    print(f"pooled cv (root mean square over lengths): {(sum(c * c for c in cvs) / len(cvs)) ** 0.5:.3f}")
    for k in args.k:
        slope, lo, hi = slope_interval(args.lengths, [devs[L][:k] for L in args.lengths])
        print(f"k={k} pairs per length: slope {slope:.3f}, 95% t interval [{lo:.3f}, {hi:.3f}]")


if __name__ == "__main__":
    main()
