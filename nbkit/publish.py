"""A run folder as notebooks end: its destination checked up front, each notebook published as it ends.

The folder is created when the run starts and kept whatever happens: each notebook's executed
``.ipynb`` and ``.html`` are moved into it from a staging folder beside it as soon as that notebook
ends, ok or failed, and ``index.json``/``metrics.json``/``index.html`` are rewritten (each by rename)
so they always say which notebooks are ok, failed, interrupted or not started (``nbkit.runfolder``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import nbkit.runfolder as rf
from nbkit.errors import RunError
from nbkit.execute import Job, NotebookResult
from nbkit.report import write_index


def prepare_output(output: Path | str | None, default: Path) -> Path:
    """The absolute destination folder, checked before anything runs (RunError when unusable)."""
    # Absolute: the kernel runs with the notebook's folder as cwd, and is told the run folder by path.
    final = Path(output if output is not None else default).expanduser().resolve()
    for folder in (final, *final.parents):
        if folder.exists() and not folder.is_dir():
            where = "is a file" if folder == final else f"is under {folder}, which is a file"
            raise RunError(f"output {final} {where}; give a folder path")
    if final.exists() and any(final.iterdir()):
        raise RunError(f"output directory {final} exists and is not empty")
    existing = next(f for f in (final, *final.parents) if f.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RunError(f"output {final}: cannot create it ({existing} is not writable)")
    return final


def make_tmp_beside(final: Path) -> Path:
    """A fresh staging folder beside ``final`` (same file system, so publishing is a rename)."""
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    except OSError as exc:
        raise RunError(f"output {final}: cannot create it ({exc.strerror or exc})") from None


def write_state(
    final: Path, results: Sequence[NotebookResult], per_nb: dict[str, dict[str, Any]], date: str
) -> None:
    """index.json, metrics.json and index.html of the run as it stands (each written by rename)."""
    rf.write_json(final / rf.STATUS_FILE, rf.status_entries(results))
    rf.write_json(final / "metrics.json", {r.name: r.metrics for r in results})
    write_index(final, results, per_nb, name=final.name, date=date)


def keep_unfinished(
    queue: Sequence[Job],
    results: list[NotebookResult | None],
    published: set[int],
    publish_one: Callable[[int, NotebookResult], Any],
    *,
    interrupted: bool,
) -> None:
    """After an interrupt or a refused write: publish what the workers left (a notebook saved up to the
    cell that was running is ``interrupted``; one that never started stays ``not started``)."""
    for i, job in enumerate(queue):
        if i in published:
            continue
        r = results[i]
        if r is None and (job.out_dir / job.path.name).is_file():
            name = job.path.stem
            r = NotebookResult(
                name,
                False,
                0.0,
                job.out_dir / job.path.name,
                error=f"{name}: interrupted"
                if interrupted
                else f"{name}: stopped (the output folder refused a write)",
                status=rf.INTERRUPTED,
            )
        if r is None:
            continue
        if interrupted and r.status == rf.FAILED and "KeyboardInterrupt" in (r.error or ""):
            r.status = rf.INTERRUPTED
        with contextlib.suppress(rf.OutputError, OSError):
            publish_one(i, r)
