"""Local LM serving for DSPy's threads: aggregate tokens/s at 1, 2, 4 concurrent requests, and the runaway.

    .venv/bin/python bench/signatures_server.py [--max-tokens 64] [--servers N] [--runaway-ctx 256]

llama-cpp-python's server answers one request at a time (``llama_outer_lock``), so DSPy's threads gain
nothing against one server. nbkit's ``LocalLMPool`` puts one single-threaded server per core behind a
dispatcher that hands each request to an idle server. Prints, all measured in this run:

* for one server (1 thread), one server with one thread per core, and the pool: aggregate completion
  tokens/s with 1, 2 and 4 concurrent requests (the same 8 prompts each time), the ratio to one stream
  of the single 1-thread server, and the ratio to the same setup's one stream (on a shared machine the
  load drifts between setups; within a setup it drifts less);
* whether every answer at temperature 0 equals the sequential answer of the single server;
* how many cores the server processes kept busy (their CPU seconds ÷ wall seconds) and their CPU
  milliseconds per generated token: what bounds the ratio. One stream keeps one core busy (each server
  has one thread); n servers can at best keep n cores busy, so the pool's ratio is bounded by the
  usable cores (2 here) times the single stream's own share of a core, and lower on a shared machine.
  Batching several sequences in one decode (llama.cpp's ``llama-server --parallel``) would lower the CPU
  cost per token instead; llama-cpp-python's server decodes one sequence at a time;
* the runaway: DSPy's request with ``max_tokens=N`` to a *stock* llama-cpp-python server (which ignores
  DSPy's ``max_completion_tokens``) with a small context, against nbkit's launcher.

The machine may be shared: the load average is printed next to the figures.
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor

from nbkit.signatures.server import LocalLMPool, LocalLMServer, usable_cores

PROMPTS = [
    "My mom's blood pressure is high and she keeps getting dizzy. What could it be?",
    "Burning when I pee and I need to go every few minutes. What is it?",
    "My big toe went red, hot and very painful overnight after beer. What is it?",
    "Sneezing, itchy watery eyes and a runny nose every spring. What is it?",
    "Crushing chest pain going down my left arm, and I am sweating. What is it?",
    "I've had a cough for three weeks, worse at night, with a low fever. What could it be?",
    "Always thirsty, peeing a lot and losing weight without trying. What could it be?",
    "Headache on one side with flashing lights before it starts. What is it?",
]


def server_cpu_seconds(server) -> float:
    """CPU seconds (user + system) used so far by the llama.cpp server process(es) behind ``server``."""
    import psutil

    procs = [s.process for s in getattr(server, "servers", [server])]
    return sum(sum(psutil.Process(p.pid).cpu_times()[:2]) for p in procs)


def run_batch(server, concurrency: int, max_tokens: int) -> tuple[float, int, list[str], float]:
    """Send every prompt with ``concurrency`` requests in flight; (seconds, completion tokens, texts, server CPU seconds)."""
    cpu0 = server_cpu_seconds(server)
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex:
        stats = list(ex.map(lambda p: server.complete(p, max_tokens=max_tokens), PROMPTS))
    seconds = time.perf_counter() - start
    return seconds, sum(s.completion_tokens for s in stats), [s.text for s in stats], server_cpu_seconds(server) - cpu0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--servers", type=int, default=0, help="servers in the pool (0 = one per usable core)")
    ap.add_argument("--runaway-ctx", type=int, default=256, help="context of the stock server (bounds the runaway)")
    args = ap.parse_args()
    n, cores = args.max_tokens, usable_cores()
    n_servers = args.servers or cores
    print(f"{cores} usable cores, load average {os.getloadavg()[0]:.2f}; {len(PROMPTS)} prompts, max_tokens={n}, temperature 0")

    setups = [("1 server, 1 thread", lambda: LocalLMServer(n_threads=1)),
              (f"1 server, {cores} threads", lambda: LocalLMServer(n_threads=cores)),
              (f"pool of {n_servers} servers x 1 thread", lambda: LocalLMPool(n_servers))]  # fmt: skip
    reference: list[str] | None = None
    one_stream: float | None = None
    for name, make in setups:
        if name.startswith(f"1 server, {cores} ") and cores == 1:
            continue
        with make() as server:
            server.complete("warm up", max_tokens=4)
            own_one_stream = None
            for concurrency in (1, 2, 4):
                seconds, tokens, texts, cpu = run_batch(server, concurrency, n)
                rate = tokens / seconds
                if reference is None:
                    reference, one_stream = texts, rate  # the single 1-thread server, one stream: the baseline
                own_one_stream = own_one_stream or rate  # the same setup at concurrency 1: immune to load drift between setups
                same = sum(a == b for a, b in zip(texts, reference, strict=True))
                print(f"{name:34s} concurrency {concurrency}: {tokens:4d} tokens in {seconds:6.1f} s = {rate:6.1f} tokens/s, "
                      f"ratio to one stream {rate / one_stream:4.2f}x (to this setup's {rate / own_one_stream:4.2f}x), "
                      f"answers equal to sequential {same}/{len(texts)}; "
                      f"server CPU {cpu / seconds:4.2f} cores busy, {1000 * cpu / max(tokens, 1):5.1f} CPU-ms/token "
                      f"(load {os.getloadavg()[0]:.2f})")  # fmt: skip

    from nbkit.signatures.lm import dspy_request_usage

    with LocalLMServer(n_threads=1) as fixed:
        through = dspy_request_usage(fixed, n)
        print(f"nbkit launcher, DSPy max_tokens={n}: {through['completion_tokens']} tokens (prompt {through['prompt_tokens']})")
    with LocalLMServer(n_ctx=args.runaway_ctx, n_threads=1, stock=True) as stock:
        t0 = time.perf_counter()
        usage = dspy_request_usage(stock, n)
        runaway = args.runaway_ctx - through["prompt_tokens"] if usage["context_full"] else usage["completion_tokens"]
        print(f"stock server (context {args.runaway_ctx}), DSPy max_tokens={n}: {runaway} tokens"
              f"{' (ran until the context was full: HTTP 500)' if usage['context_full'] else ''} in {time.perf_counter() - t0:.1f} s, "
              f"ratio to the limit {runaway / n:.1f}x")  # fmt: skip


if __name__ == "__main__":
    main()
