"""Local LM serving for DSPy's threads: tokens/s of llama.cpp's batching ``llama-server`` at 4 and 8
concurrent requests against one stream, prefix reuse, today's llama-cpp-python pool, and the runaway.

    .venv/bin/python bench/signatures_server.py [--max-tokens 64] [--questions 16] [--runaway-ctx 256]
        [--quick]

The workload is notebook 03's: the prompts DSPy's JSON adapter builds for the typed diagnosis signature on
dev questions (one long instruction prefix shared by every request, the question at the end), greedy,
``max_tokens`` each. Prints, all measured in this run, for each setup on the same cores:

* aggregate completion tokens/s with 1, 4 and 8 requests in flight, and the ratio to the same setup's
  one stream and to llama-cpp-python's one stream (the goal: ≥ 2x on 2 cores at 4-8 requests);
* answers equal to llama-cpp-python's sequential answers (at 1 request they must all be; in a batch the
  kernels may round differently, so differences are counted, not hidden);
* prompt tokens the server took from its cache (llama-server's ``timings.cache_n``): what prefix reuse saved;
* how many cores the server processes kept busy (CPU seconds ÷ wall seconds) and CPU ms per token.

Setups: llama-cpp-python's server (one request at a time; the fallback), today's pool of one such server per
core, llama-server with one thread and 8 slots, notebook 03's default (one llama-server per core, one
thread and 4 slots each, behind the dispatcher) and one llama-server with a thread per core.
Last, the runaway: DSPy's request with ``max_tokens=N`` to a *stock* llama-cpp-python server (which ignores
DSPy's ``max_completion_tokens``) with a small context, against nbkit's launcher.

The machine may be shared: the load average is printed beside every figure; re-run on an idle machine
for figures to quote.
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor

from nbkit.procs import usable_cores
from nbkit.signatures.server import (
    LlamaCppServer,
    LocalLMPool,
    LocalLMServer,
    llama_server_binary,
)


def dspy_prompts(n: int) -> list[list[dict]]:
    """The chat messages DSPy's JSONAdapter sends for the typed signature on ``n`` dev questions (both
    phrasings)."""
    import dspy

    from nbkit.signatures.cases import load_cases, load_knowledge_base, split_cases, to_examples
    from nbkit.signatures.contracts import signature_by_name

    kb = load_knowledge_base()
    examples = to_examples(split_cases(load_cases(None, kb), 0).dev)[:n]
    signature = signature_by_name("typed")
    adapter = dspy.JSONAdapter()
    return [adapter.format(signature, [], dict(ex.inputs())) for ex in examples]


def server_cpu_seconds(server) -> float:
    """CPU seconds (user + system) used so far by the server process trees behind ``server``."""
    import psutil

    total = 0.0
    for s in getattr(server, "servers", [server]):
        proc = psutil.Process(s.process.pid)
        for p in [proc, *proc.children(recursive=True)]:
            try:
                total += sum(p.cpu_times()[:2])
            except psutil.NoSuchProcess:
                pass
    return total


def run_batch(server, prompts, concurrency: int, max_tokens: int) -> dict:
    cpu0 = server_cpu_seconds(server)
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex:
        stats = list(ex.map(lambda p: server.complete(p, max_tokens=max_tokens), prompts))
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "tokens": sum(s.completion_tokens for s in stats),
        "texts": [s.text for s in stats],
        "prompt": sum(s.prompt_tokens for s in stats),
        "cached": sum(s.cached_prompt_tokens or 0 for s in stats),
        "cpu": server_cpu_seconds(server) - cpu0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--questions", type=int, default=16, help="dev questions (each phrasing counts)")
    ap.add_argument(
        "--runaway-ctx", type=int, default=256, help="context of the stock server (bounds the runaway)"
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="only llama-cpp-python's one stream and notebook 03's default setup",
    )
    args = ap.parse_args()
    n, cores = args.max_tokens, len(usable_cores())
    prompts = dspy_prompts(args.questions)
    print(
        f"{cores} usable cores, load average {os.getloadavg()[0]:.2f}; "
        f"{len(prompts)} DSPy prompts (typed signature, JSON adapter), "
        f"max_tokens={n}, temperature 0; llama-server binary: {llama_server_binary()}"
    )

    setups = [
        ("llama-cpp-python, 1 server x 1 thread", lambda: LocalLMServer(n_threads=1), (1,)),
        (
            f"llama-cpp-python, pool {cores} x 1 thread (the fallback)",
            lambda: LocalLMPool(cores),
            (1, cores, 2 * cores),
        ),
    ]
    if llama_server_binary() is not None:
        setups += [
            ("llama-server, 1 x 1 thread x 8 slots", lambda: LlamaCppServer(n_threads=1, slots=8), (1, 4, 8)),
            (
                f"llama-server, pool {cores} x 1 thread x 4 slots (notebook 03)",
                lambda: LocalLMPool(cores, kind="llama-server", slots=4),
                (1, 4, 8),
            ),
            (
                f"llama-server, 1 x {cores} threads x 8 slots",
                lambda: LlamaCppServer(n_threads=cores, slots=8),
                (1, 4, 8),
            ),
        ]
    else:
        print("llama-server is not built (make setup builds it): only llama-cpp-python's server is measured")
    if args.quick:
        setups = [setups[0], *setups[3:4]]
    reference: list[str] | None = None
    one_stream: float | None = None
    for name, make, levels in setups:
        with make() as server:
            server.complete("warm up", max_tokens=4)
            own = None
            for concurrency in levels:
                r = run_batch(server, prompts, concurrency, n)
                rate = r["tokens"] / r["seconds"]
                if reference is None:
                    reference, one_stream = r["texts"], rate  # llama-cpp-python, one stream: the baseline
                own = own or rate
                same = sum(a == b for a, b in zip(r["texts"], reference, strict=True))
                print(
                    f"{name:58s} {concurrency} in flight: {r['tokens']:4d} tokens in {r['seconds']:6.1f} s = "
                    f"{rate:6.1f} tokens/s, "
                    f"x{rate / own:4.2f} this setup's one stream, "
                    f"x{rate / one_stream:4.2f} llama-cpp-python's; "
                    f"answers equal to llama-cpp-python's sequential {same}/{len(prompts)}; "
                    f"prompt tokens {r['prompt']}, "
                    f"from cache {r['cached']} ({r['cached'] / max(r['prompt'], 1):.0%}); "
                    f"server CPU {r['cpu'] / r['seconds']:4.2f} cores busy, "
                    f"{1000 * r['cpu'] / max(r['tokens'], 1):5.1f} CPU-ms/token "
                    f"(load {os.getloadavg()[0]:.2f})",
                    flush=True,
                )
    if args.quick:
        return

    from nbkit.signatures.lm import dspy_request_usage

    with LocalLMServer(n_threads=1) as fixed:
        through = dspy_request_usage(fixed, n)
        print(
            f"nbkit launcher, DSPy max_tokens={n}: {through['completion_tokens']} tokens "
            f"(prompt {through['prompt_tokens']})"
        )
    with LocalLMServer(n_ctx=args.runaway_ctx, n_threads=1, stock=True) as stock:
        t0 = time.perf_counter()
        usage = dspy_request_usage(stock, n)
        runaway = (
            args.runaway_ctx - through["prompt_tokens"]
            if usage["context_full"]
            else usage["completion_tokens"]
        )
        print(
            f"stock server (context {args.runaway_ctx}), DSPy max_tokens={n}: {runaway} tokens"
            f"{' (ran until the context was full: HTTP 500)' if usage['context_full'] else ''} "
            f"in {time.perf_counter() - t0:.1f} s, "
            f"ratio to the limit {runaway / n:.1f}x"
        )


if __name__ == "__main__":
    main()
