"""Does each section of notebook 03 keep the local LM servers' slots full? Per section, cold cache.

    .venv/bin/python bench/signatures_slots.py [--smoke] [--cache-dir DIR] [--slots N] [--servers N]

Runs notebook 03's experiments in this process, in the notebook's order and at its default parameters
(SMOKE presets with ``--smoke``), with a fresh DSPy disk cache (a temporary folder unless
``--cache-dir``), and prints per section: wall seconds, requests served, seconds with at least one request
in a slot, mean requests in slots while serving, that as a share of the slots (servers × slots: the batch the
servers could decode), and the seconds requests queued for a slot. A section whose slots sit mostly empty
leaves cores idle; one that queues could use more slots. The servers' CPU seconds (their processes' user
+ system time) say what the section cost the machine.

Read it on an idle machine (the load average is printed): the figures are wall-clock.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from signatures_server import server_cpu_seconds  # this folder's token bench (run as a script: on sys.path)

from nbkit.cache import use_cache_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="SMOKE presets (fast)")
    ap.add_argument("--cache-dir", default="", help="DSPy's disk cache (default: a fresh temporary folder)")
    ap.add_argument(
        "--slots", type=int, default=0, help="requests each llama-server decodes together (0: default)"
    )
    ap.add_argument(
        "--servers", type=int, default=-1, help="local servers (0: one per usable core; default: as 03)"
    )
    args = ap.parse_args()
    cache = args.cache_dir or tempfile.mkdtemp(prefix="nbkit-slots-cache-")
    use_cache_dir(cache)  # before DSPy is imported: its cache lives there

    from nbkit.signatures import experiments
    from nbkit.signatures.context import SignaturesContext

    smoke = args.smoke
    overrides = {"slots": args.slots} if args.slots else {}
    if args.servers >= 0:
        overrides["servers"] = args.servers
    print(
        f"load average {os.getloadavg()[0]:.2f}; DSPy cache {cache}; {'SMOKE' if smoke else 'defaults'}"
        f"{' with ' + str(overrides) if overrides else ''}"
    )
    ctx = SignaturesContext(smoke=smoke, **overrides)
    try:
        ctx.start_lm()
        if ctx.server is None:
            raise SystemExit("the LM is not served by local servers: no slots to measure")
        print(ctx.llm.serving(), flush=True)
        print(
            f"{'section':14s} {'wall s':>7s} {'served':>6s} {'serving s':>9s} {'in slots':>8s} "
            f"{'fill':>5s} {'queued s':>8s} {'server CPU-s':>12s}"
        )
        whole, cpu0, t00 = ctx.llm.occupancy(), server_cpu_seconds(ctx.server), time.perf_counter()

        def line(name: str, wall: float, fill, cpu: float) -> str:
            return (
                f"{name:14s} {wall:7.1f} {fill.requests:6d} {fill.serving_seconds:9.1f} "
                f"{fill.mean_in_flight or 0:8.2f} {fill.fill or 0:5.0%} {fill.queued_seconds:8.1f} "
                f"{cpu:12.1f}"
            )

        for slug in ("token_limit", "retrieval", "modules", "contracts", "compile", "ask"):
            before, cpu, t0 = ctx.llm.occupancy(), server_cpu_seconds(ctx.server), time.perf_counter()
            experiments.run(slug, ctx)
            wall = time.perf_counter() - t0
            fill = ctx.llm.slot_fill(since=before)
            cpu = server_cpu_seconds(ctx.server) - cpu
            print(line(slug, wall, fill, cpu), flush=True)
        fill = ctx.llm.slot_fill(since=whole)
        print(line("all", time.perf_counter() - t00, fill, server_cpu_seconds(ctx.server) - cpu0))
        print(f"capacity {fill.capacity} slots; load average {os.getloadavg()[0]:.2f}")
    finally:
        ctx.close()


if __name__ == "__main__":
    main()
