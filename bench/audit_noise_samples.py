"""Bench: how many gradient samples per length does the √L claim need?

grad-accumulation fits gradient-noise variance ∝ L^slope on SmolLM2 and the claim "scale accumulation
by √L" is decided by whether the slope's 95 % bootstrap interval contains -0.5. This draws the
default lengths × the largest sample count once (the same draws the check makes, same seed) and refits
on the first k samples per length, so the interval — and so the verdict — can be read per k.

    .venv/bin/python bench/audit_noise_samples.py [--model smollm2] [--samples 8] [--k 3 4 6 8] [--threads 1]
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--k", type=int, nargs="+", default=[3, 4, 6, 8])
    ap.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128])
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    import torch

    from nbkit.audit.checks.grad_accumulation import _flat_grad, fit_slope, only_grad_for, text_token_stream
    from nbkit.audit.sft import load_model_and_tokenizer

    torch.set_num_threads(args.threads)
    model, tok = load_model_and_tokenizer(args.model, torch.device("cpu"))
    params = list(model.model.layers[-1].parameters())  # the check's default: the last decoder layer
    stream = text_token_stream(tok, max_tokens=max(4000, 40 * max(args.lengths)))
    gen = torch.Generator().manual_seed(0)
    grads: dict[int, list] = {}
    t0 = time.perf_counter()
    with only_grad_for(model, params):
        model.eval()
        for L in args.lengths:
            grads[L] = []
            for _ in range(args.samples):
                starts = torch.randint(0, len(stream) - L, (2,), generator=gen)
                ids = torch.stack([stream[s : s + L] for s in starts.tolist()])
                for p in params:
                    p.grad = None
                model(input_ids=ids, labels=ids).loss.backward()
                grads[L].append(_flat_grad(params))
            print(f"L={L}: {args.samples} samples, {time.perf_counter() - t0:.0f} s so far", flush=True)
    for k in args.k:
        devs = {}
        for L, gs in grads.items():
            g = torch.stack(gs[:k])
            devs[L] = ((g - g.mean(0)) ** 2).sum(1).tolist()
        slope, lo, hi = fit_slope(devs)
        verdict = "refutes √L" if not lo <= -0.5 <= hi else "√L inside the interval"
        print(
            f"k={k} samples per length: slope {slope:.3f}, 95% interval [{lo:.3f}, {hi:.3f}] → {verdict}; "
            f"tokens forwarded {2 * k * sum(args.lengths)}"
        )


if __name__ == "__main__":
    main()
