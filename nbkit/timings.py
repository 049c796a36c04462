"""How long each notebook took, kept to start the longest first on a pool.

Each run folder holds ``timings.json`` (the seconds of each notebook that ended ok, and the run's wall
time, CPU seconds and cores: :class:`RunClock`); the notebooks' folder ships ``reference_seconds.json``
for a machine's first run. Only the order these give is used, so figures from another machine still
serve, and a missing or unreadable file is an ordering hint lost, never an error.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbkit.procs import usable_cores

if TYPE_CHECKING:
    from nbkit.execute import Job


# in each run folder: {"smoke": bool, "jobs": N, "seconds": {notebook: seconds}, "wall_s", "cpu_s", "cores",
# "core_utilisation"} (the last four: RunClock.figures)
TIMINGS = "timings.json"


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and of every child it has waited for, theirs included
    (the kernels, their LM servers and ranks, the pool's workers: each is reaped by whatever started it)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class RunClock:
    """Wall time, CPU seconds and cores of a run, from when it is made to :meth:`figures`.

    The core utilisation is CPU seconds ÷ (wall seconds × usable cores): 1.0 keeps every core busy the
    whole run; a run that leaves a core idle while one notebook finishes reads lower. A process that
    outlived its parent without being waited for is not counted (the runner ends and reaps what it starts).
    """

    def __init__(self) -> None:
        self.cores = len(usable_cores())
        self.wall0, self.cpu0 = time.perf_counter(), cpu_seconds()

    def figures(self) -> dict[str, float | int]:
        wall, cpu = time.perf_counter() - self.wall0, cpu_seconds() - self.cpu0
        return {
            "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1),
            "cores": self.cores,
            "core_utilisation": round(cpu / (wall * self.cores), 3) if wall > 0 else 0.0,
        }


def utilisation_line(figures: dict[str, Any]) -> str:
    """The one line ``nbkit run`` prints about a run's use of the cores."""
    return (
        f"core utilisation {figures['core_utilisation']:.2f}: {figures['cpu_s']:,.0f} CPU-s over "
        f"{figures['wall_s']:,.0f} s wall × {figures['cores']} cores"
    )


def _seconds_table(path: Path, pick: Callable[[dict], Any]) -> dict[str, float] | None:
    """``pick(data)`` of the JSON object in ``path`` as {notebook: seconds}; None when the file is missing or
    unreadable or holds no such table (an ordering hint lost, never an error)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    seconds = pick(data) if isinstance(data, dict) else None
    return (
        {k: float(v) for k, v in seconds.items() if isinstance(v, (int, float))}
        if isinstance(seconds, dict)
        else None
    )


def previous_seconds(final: Path, smoke: bool) -> dict[str, float]:
    """Per-notebook seconds of the newest earlier run beside ``final`` with the same ``smoke``; {} if none."""
    best: tuple[float, dict[str, float]] = (-1.0, {})
    for path in final.parent.glob(f"*/{TIMINGS}"):
        seconds = _seconds_table(path, lambda d: d.get("seconds") if d.get("smoke") == smoke else None)
        if seconds is None:
            continue
        try:
            mtime = path.stat().st_mtime
        except OSError:
            continue  # removed since it was read
        if mtime > best[0]:
            best = (mtime, seconds)
    return best[1]


REFERENCE_SECONDS = "reference_seconds.json"  # beside the notebooks: {"full": {notebook: s}, "smoke": {...}}


def reference_seconds(paths: Sequence[Path], smoke: bool) -> dict[str, float]:
    """Per-notebook seconds of the reference runs shipped beside the notebooks (``reference_seconds.json``).

    The ordering hint for a machine's first ``--jobs`` run, which has no ``timings.json`` of its own to
    read: without it notebooks keep file order and the longest may start last. Only the order is
    used, so figures from another machine still serve; a missing or unreadable file gives {}."""
    out: dict[str, float] = {}
    for folder in dict.fromkeys(p.parent for p in paths):
        out.update(
            _seconds_table(folder / REFERENCE_SECONDS, lambda d: d.get("smoke" if smoke else "full")) or {}
        )
    return out


def expected_seconds(final: Path, paths: Sequence[Path], smoke: bool) -> dict[str, float]:
    """How long each notebook of ``paths`` is expected to take, for the order of a ``--jobs`` run: the newest
    earlier run's seconds beside ``final`` (:func:`previous_seconds`), and for a notebook that run did not
    time (a partial run) the reference seconds, scaled by how this machine compared with the reference on
    the notebooks both timed (the median ratio), so the two kinds of figure order together."""
    previous = previous_seconds(final, smoke)
    reference = reference_seconds(paths, smoke)
    ratios = [previous[k] / reference[k] for k in previous.keys() & reference.keys() if reference[k] > 0]
    scale = statistics.median(ratios) if ratios else 1.0
    return {**{k: v * scale for k, v in reference.items()}, **previous}


def longest_first(jobs: Sequence[Job], seconds: dict[str, float]) -> list[Job]:
    """``jobs`` by descending expected seconds (longest-processing-time-first: the longest notebook must not
    start last on a pool); notebooks without history keep their order, after those with it."""
    known = sorted((j for j in jobs if j.path.stem in seconds), key=lambda j: -seconds[j.path.stem])
    return known + [j for j in jobs if j.path.stem not in seconds]
