"""Bench: how long the workbook takes — per notebook, per section, one at a time and with --jobs.

Runs ``nbkit run`` twice on the same notebooks (default: ``--all``): once one notebook at a time,
once with ``--jobs N`` (default: the usable cores, at most 4). Prints

* per notebook: seconds in each mode (papermill's own per-notebook duration);
* per section (a notebook's markdown headings ``#``/``##``/``###``): the seconds of the code
  cells under it, from the sequential run (papermill records each cell's duration);
* the wall time of each whole run, its CPU seconds and core utilisation (the run's ``timings.json``:
  CPU-s ÷ (wall × cores)), and the ratio sequential ÷ parallel (the speed-up).

Goal: ``nbkit run --all`` at default parameters ≤ 600 s on 2 cores (``GOAL_S``).

    .venv/bin/python bench/workbook_time.py [NOTEBOOK ...] [--smoke] [--jobs N] [--only sequential|parallel]
        [-p KEY VALUE] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_S = 600.0


def run_once(names: list[str], out: Path, *, smoke: bool, jobs: int, params: list[list[str]]) -> float:
    """``nbkit run`` in a child process into ``out``; its wall time (raises on failure)."""
    cmd = [
        sys.executable,
        "-m",
        "nbkit.cli",
        "run",
        *(names or ["--all"]),
        "--output",
        str(out),
        "-q",
        "--jobs",
        str(jobs),
    ]
    if smoke:
        cmd.append("--smoke")
    for key, value in params:
        cmd += ["-p", key, value]
    print("$", " ".join(cmd), flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-15:])
        raise SystemExit(
            f"workbook_time: `nbkit run` failed (exit {proc.returncode}) after {wall:.0f} s:\n{tail}"
        )
    return wall


def notebook_times(run_dir: Path) -> dict[str, float]:
    import nbformat

    out = {}
    for nb_path in sorted(run_dir.glob("[0-9][0-9]_*.ipynb")):
        meta = nbformat.read(nb_path, as_version=4).metadata.get("papermill", {})
        out[nb_path.stem] = float(meta.get("duration") or 0.0)
    return out


def section_times(nb_path: Path) -> list[tuple[str, float]]:
    """(heading, seconds of the code cells under it) in notebook order; cells before any heading: "(top)"."""
    import nbformat

    sections: list[tuple[str, float]] = [("(top)", 0.0)]
    for cell in nbformat.read(nb_path, as_version=4).cells:
        if cell.cell_type == "markdown":
            heading = next(
                (ln.lstrip("#").strip() for ln in cell.source.splitlines() if ln.startswith("#")), None
            )
            if heading:
                sections.append((heading[:70], 0.0))
            continue
        duration = cell.metadata.get("papermill", {}).get("duration")
        if duration is not None:
            name, total = sections[-1]
            sections[-1] = (name, total + float(duration))
    return [(n, s) for n, s in sections if s > 0 or n != "(top)"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebooks", nargs="*", help="notebooks to run (default: all)")
    ap.add_argument("--smoke", action="store_true", help="SMOKE=True (fast)")
    ap.add_argument(
        "--jobs",
        type=int,
        default=min(
            4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        ),
    )
    ap.add_argument("--only", choices=["sequential", "parallel"], help="time one mode only")
    ap.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"))
    ap.add_argument("--keep", type=Path, help="keep the two run folders under DIR (default: removed)")
    args = ap.parse_args()

    base = args.keep or Path(tempfile.mkdtemp(prefix="nbkit-workbook-time-"))
    modes = [("sequential", 1), ("parallel", args.jobs)]
    if args.only:
        modes = [m for m in modes if m[0] == args.only]
    walls, per_nb, dirs, usage = {}, {}, {}, {}
    try:
        for mode, jobs in modes:
            dirs[mode] = base / mode
            walls[mode] = run_once(args.notebooks, dirs[mode], smoke=args.smoke, jobs=jobs, params=args.param)
            per_nb[mode] = notebook_times(dirs[mode])
            usage[mode] = json.loads((dirs[mode] / "timings.json").read_text(encoding="utf-8"))
        names = sorted({n for times in per_nb.values() for n in times})
        header = f"{'notebook':<24}" + "".join(
            f"{m + (f' (--jobs {j})' if j > 1 else ''):>24}" for m, j in modes
        )
        print("\n" + header)
        for name in names:
            print(f"{name:<24}" + "".join(f"{per_nb[m].get(name, float('nan')):>23.1f}s" for m, _ in modes))
        print(f"{'sum of notebooks':<24}" + "".join(f"{sum(per_nb[m].values()):>23.1f}s" for m, _ in modes))
        print(f"{'wall time of the run':<24}" + "".join(f"{walls[m]:>23.1f}s" for m, _ in modes))
        print(f"{'CPU seconds':<24}" + "".join(f"{usage[m]['cpu_s']:>23.1f}s" for m, _ in modes))
        print(
            f"{'core utilisation':<24}"
            + "".join(f"{usage[m]['core_utilisation']:>24.2f}" for m, _ in modes)
            + f"  (CPU-s ÷ (wall × {usage[modes[0][0]]['cores']} cores))"
        )

        first = modes[0][0]
        print(f"\nper section ({first} run; seconds of the cells under each heading)")
        for nb_path in sorted(dirs[first].glob("[0-9][0-9]_*.ipynb")):
            print(f"  {nb_path.stem}")
            for heading, seconds in section_times(nb_path):
                print(f"    {seconds:8.1f}s  {heading}")

        if len(modes) == 2:
            ratio = walls["sequential"] / walls["parallel"]
            print(
                f"\nspeed-up sequential ÷ --jobs {args.jobs}: {ratio:.2f}×  "
                f"({walls['sequential']:.0f} s → {walls['parallel']:.0f} s; {len(os.sched_getaffinity(0))} "
                "usable cores)"
            )
        best = min(walls.values())
        label = "SMOKE" if args.smoke else "default parameters"
        print(
            f"best wall time at {label}: {best:.0f} s; goal ≤ {GOAL_S:.0f} s at default parameters → "
            f"{best / GOAL_S:.2f} of it"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"run folders kept in {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
