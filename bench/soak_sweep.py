"""Soak: a sweep of a real notebook, twice over, with one notebook worker killed at random in each round.

    .venv/bin/python bench/soak_sweep.py [--notebook 02] [--grid SEED=0,1,2,3,4,5 --grid PRECISION=bf16,fp32]
                                         [--rounds 2] [--jobs 2] [--seed 0] [--out DIR]

Each round runs ``nbkit sweep NOTEBOOK --smoke --jobs N`` (12 points by default) as a subprocess,
SIGKILLs one of its notebook workers (a child of the nbkit process) at a random moment while
notebooks run, lets the sweep finish, then runs ``nbkit sweep --resume`` until every row is ok.
It checks, and prints:

* every combination is exactly one row of ``comparison.csv``, all ok after the resume;
* no process the sweep started (workers, kernels, ZeRO ranks — every descendant seen while it ran)
  is alive afterwards;
* no temporary folder or file is left: no ``.NAME.tmp-*`` staging folder beside the output, nothing
  new in the sweep's own temp dir (``TMPDIR`` set to ``OUT/tmp``: kernel sockets, connection files,
  the ladder's rank folders; torch's ``torchinductor_*`` compile cache excepted);
* the nbkit parent's memory is flat: its RSS sampled every second through the first pass; the last
  sample within 50 MiB of the first quarter's largest (start-up imports are not growth).

Exit 0 when every check holds, 1 otherwise. Figures go to bench/RESULTS.md by hand, with the load.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def descendants(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def sweep(
    args: list[str],
    *,
    kill_after: tuple[float, float] | None,
    rng: random.Random,
    seen: dict,
    rss: list,
    env: dict,
) -> tuple[int, str]:
    """Run one nbkit sweep; kill one notebook worker once notebooks run (after a random delay)."""
    import psutil

    proc = subprocess.Popen(
        [sys.executable, "-m", "nbkit.cli", "sweep", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    me = psutil.Process(proc.pid)
    killed = ""
    fire_at = None
    lines: list[str] = []
    import threading

    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    while proc.poll() is None:
        with _quiet():
            rss.append(me.memory_info().rss)
        kids = descendants(proc.pid)
        for p in kids:
            with _quiet():
                seen[(p.pid, p.create_time())] = " ".join(p.cmdline()[:4])
        if kill_after and not killed:
            workers = [p for p in me.children() if _is_worker(p)]
            running = [w for w in workers if w.children()]  # a worker whose kernel is up
            if running and fire_at is None:
                fire_at = time.monotonic() + rng.uniform(*kill_after)
            if running and fire_at is not None and time.monotonic() >= fire_at:
                victim = rng.choice(running)
                with _quiet():
                    victim.send_signal(signal.SIGKILL)
                    killed = f"worker {victim.pid} (SIGKILL, {time.strftime('%H:%M:%S')})"
        time.sleep(1.0)
    reader.join(timeout=10)
    return proc.returncode, killed + "\n" + "".join(lines[-15:])


def _is_worker(p) -> bool:
    try:
        return "resource_tracker" not in " ".join(p.cmdline())
    except Exception:
        return False


class _quiet:
    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        import psutil

        return kind is not None and issubclass(kind, psutil.Error)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notebook", default="02")
    ap.add_argument("--grid", action="append", default=None)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--first-round", type=int, default=0, help="number of the first round (its output folder's name)"
    )
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--kill-window", default="5,60", help="seconds after the first kernel is up: kill between LO,HI"
    )
    ap.add_argument(
        "--out", default="", help="parent folder for the sweeps (default: a new temporary folder)"
    )
    args = ap.parse_args()
    import psutil

    grid = args.grid or ["SEED=0,1,2,3,4,5", "PRECISION='bf16','fp32'"]
    n_points = 1
    for g in grid:
        n_points *= len(g.split("=", 1)[1].split(","))
    lo, hi = (float(x) for x in args.kill_window.split(","))
    rng = random.Random(args.seed)
    parent = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="soak-"))
    parent.mkdir(parents=True, exist_ok=True)
    # The sweep's own temp dir: the machine's /tmp is shared with other jobs, whose files must not count.
    tmp_root = parent / "tmp"
    tmp_root.mkdir(exist_ok=True)
    env = dict(os.environ, TMPDIR=str(tmp_root))
    ok = True
    load = os.getloadavg()
    print(
        f"soak: nbkit sweep {args.notebook} --smoke {' '.join('--grid ' + g for g in grid)} "
        f"--jobs {args.jobs}; "
        f"{args.rounds} rounds, {n_points} points each; "
        f"load average at start {load[0]:.1f} on {os.cpu_count()} cores",
        flush=True,
    )
    for rnd in range(args.first_round, args.first_round + args.rounds):
        before_tmp = {p.name for p in tmp_root.iterdir()}
        out = parent / f"round{rnd}"
        seen: dict = {}
        rss: list[int] = []
        t0 = time.monotonic()
        sweep_args = [
            args.notebook,
            "--smoke",
            *itertools.chain.from_iterable(("--grid", g) for g in grid),
            "--jobs",
            str(args.jobs),
            "--output",
            str(out),
            "-q",
        ]
        rc, tail = sweep(sweep_args, kill_after=(lo, hi), rng=rng, seen=seen, rss=rss, env=env)
        first_s = time.monotonic() - t0
        killed = tail.splitlines()[0]
        resumes = 0
        while rc != 0 and resumes < 3:
            resumes += 1
            rc, tail = sweep(
                ["--resume", str(out), "--jobs", str(args.jobs), "-q"],
                kill_after=None,
                rng=rng,
                seen=seen,
                rss=[],
                env=env,
            )
        total_s = time.monotonic() - t0
        with open(out / "comparison.csv", newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        combos = [tuple(r[g.split("=", 1)[0]] for g in grid) for r in rows]
        time.sleep(3)  # let the last kernels' process exits settle before looking for survivors
        survivors = []
        for (pid, created), cmd in seen.items():
            try:
                p = psutil.Process(pid)
                if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                    survivors.append(f"{pid} {cmd}")
            except psutil.Error:
                continue
        staging = [p.name for p in parent.iterdir() if ".tmp-" in p.name]
        # torch's compile cache (torchinductor_<user>) is a cache meant to stay, not a leak.
        leaked = sorted(
            n for n in {p.name for p in tmp_root.iterdir()} - before_tmp if not n.startswith("torchinductor_")
        )
        statuses = [r["status"] for r in rows]
        warm = max(rss[: max(1, len(rss) // 4)]) if rss else 0
        checks = {
            "every combination once": len(rows) == n_points and len(set(combos)) == n_points,
            "all ok after resume": statuses.count("ok") == n_points,
            "no process survives": not survivors,
            "no staging folder": not staging,
            "no leaked temp files": not leaked,
            # Start-up (imports) is not growth: the baseline is the largest RSS of the pass's first quarter.
            "parent memory flat (last ≤ first quarter's max + 50 MiB)": bool(rss)
            and rss[-1] <= warm + 50 * 2**20,
        }
        ok &= all(checks.values())
        print(
            f"round {rnd}: killed {killed or 'nothing (no worker was running)'}; first pass {first_s:.0f} s, "
            f"{resumes} resume(s), {total_s:.0f} s in all; rows {len(rows)} ({statuses.count('ok')} ok); "
            f"{len(seen)} descendant processes seen, {len(survivors)} alive after; "
            "first pass's parent RSS first/first-quarter max/max/last "
            f"{rss[0] / 2**20:.0f}/{warm / 2**20:.0f}/"
            f"{max(rss) / 2**20:.0f}/{rss[-1] / 2**20:.0f} MiB over {len(rss)} samples",
            flush=True,
        )
        for name, held in checks.items():
            print(f"  {'✔' if held else '✘'} {name}", flush=True)
        if survivors:
            print("  survivors: " + "; ".join(survivors[:10]))
        if leaked:
            print("  leaked in temp dir: " + ", ".join(leaked[:10]))
        if staging:
            print("  staging left: " + ", ".join(staging))
    print(
        f"soak: {'PASS' if ok else 'FAIL'}; load average at end {os.getloadavg()[0]:.1f}; output in {parent}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
