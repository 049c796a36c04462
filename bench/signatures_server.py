"""Local LM server benchmark: start-up, tokens/s by thread count, and the token-limit bug, measured.

    .venv/bin/python bench/signatures_server.py [--max-tokens 64] [--runaway-ctx 512]

Prints, all measured in this run:
* start-up seconds and generation tokens/s with 1 and 2 llama.cpp threads (ratio 2 vs 1);
* the token-limit check: max_tokens=N and max_completion_tokens=N through nbkit's launcher, and
  max_completion_tokens=N against the *stock* server behaviour (NBKIT_LLAMA_MAP_MAX_COMPLETION_TOKENS=0)
  with a small context, where the request runs until the context is full (ratio tokens / N).
"""

from __future__ import annotations

import argparse
import os
import time

from nbkit.signatures.server import LocalLMServer

PROMPT = "Write a very long story about a dragon who learns to cook, with many chapters."


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--runaway-ctx", type=int, default=512, help="context of the stock-behaviour server (bounds the runaway)")
    args = ap.parse_args()
    n = args.max_tokens

    speeds = {}
    for threads in (1, 2):
        t0 = time.perf_counter()
        with LocalLMServer(n_threads=threads) as server:
            startup = time.perf_counter() - t0
            stats = server.complete(PROMPT, max_tokens=n)
            speeds[threads] = stats.tokens_per_s
            print(f"threads={threads}: start-up {startup:.1f} s, {stats.completion_tokens} tokens in {stats.seconds:.1f} s = {stats.tokens_per_s:.1f} tokens/s")
            if threads == 1:
                a = server.complete(PROMPT, max_tokens=n)
                b = server.complete(PROMPT, max_tokens=n, field="max_completion_tokens")
                print(f"nbkit launcher: max_tokens={n} -> {a.completion_tokens} tokens; max_completion_tokens={n} -> {b.completion_tokens} tokens")
    print(f"tokens/s ratio 2 threads / 1 thread: {speeds[2] / speeds[1]:.2f}")

    os.environ["NBKIT_LLAMA_MAP_MAX_COMPLETION_TOKENS"] = "0"
    try:
        with LocalLMServer(n_ctx=args.runaway_ctx) as stock:
            c = stock.complete(PROMPT, max_tokens=n, field="max_completion_tokens", timeout=900)
            print(f"stock server, max_completion_tokens={n}: {c.completion_tokens} tokens (finish={c.finish_reason}), "
                  f"ratio to the limit {c.completion_tokens / n:.1f}x, {c.seconds:.1f} s")  # fmt: skip
    finally:
        os.environ.pop("NBKIT_LLAMA_MAP_MAX_COMPLETION_TOKENS", None)


if __name__ == "__main__":
    main()
