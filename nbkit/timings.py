"""How long each notebook took, kept to start the longest first on a pool.

Each run folder holds ``timings.json`` (the seconds of each notebook that ended ok); the notebooks'
folder ships ``reference_seconds.json`` for a machine's first run. Only the order these give is used,
so figures from another machine still serve, and a missing or unreadable file is an ordering hint
lost, never an error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbkit.execute import Job


TIMINGS = "timings.json"  # in each run folder: {"smoke": bool, "jobs": N, "seconds": {notebook: seconds}}


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


def longest_first(jobs: Sequence[Job], seconds: dict[str, float]) -> list[Job]:
    """``jobs`` by descending expected seconds (longest-processing-time-first: the longest notebook must not
    start last on a pool); notebooks without history keep their order, after those with it."""
    known = sorted((j for j in jobs if j.path.stem in seconds), key=lambda j: -seconds[j.path.stem])
    return known + [j for j in jobs if j.path.stem not in seconds]
