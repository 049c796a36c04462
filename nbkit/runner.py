"""Run the workbook's notebooks headless with papermill, and collect what they recorded.

A run's folder (``runs/<stamp>/`` or ``--output``) is created when the run starts and kept whatever
happens (``nbkit.publish``): each notebook's executed ``.ipynb`` and ``.html`` are moved into it as
soon as that notebook ends, ok or failed (a failed or interrupted notebook executed up to the cell
that stopped it), and ``index.json``/``index.html`` say which notebooks are ok, failed (the cell and
the error), interrupted or not started (``nbkit.runfolder``). An interrupted run (Ctrl-C, or SIGTERM,
which ``nbkit`` turns into the same ``KeyboardInterrupt``) ends its kernels and keeps what finished;
``run_notebooks(..., resume=DIR)`` re-runs only DIR's notebooks that are not ok.

``jobs > 1`` runs notebooks in worker processes (``nbkit.pool``), longest first (``nbkit.timings``).
The run's parts, each in its own module: finding notebooks (``nbkit.catalog``), checking parameters
(``nbkit.params``), executing one notebook (``nbkit.execute``), the worker pool (``nbkit.pool``) and
publishing into the run folder (``nbkit.publish``). This module plans a run and drives them; import
each part's names from its own module.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import nbkit.runfolder as rf
from nbkit.catalog import available_notebooks, notebooks_dir, packaged_notebooks_dir, resolve_notebook
from nbkit.errors import RunError
from nbkit.execute import Job, NotebookResult, kernel_exists
from nbkit.params import ParameterError, check_given, notebook_parameters
from nbkit.pool import execute_jobs
from nbkit.publish import keep_unfinished, make_tmp_beside, prepare_output, write_state
from nbkit.record import read_notebook
from nbkit.timings import TIMINGS, RunClock, expected_seconds, longest_first, utilisation_line

__all__ = ["run_notebooks"]


def say(line: str) -> None:
    """A line of a run's progress, flushed: a run's output is often a pipe or a log file (``make smoke |
    tee``), where a buffered line would arrive minutes late."""
    print(line, flush=True)


def _plan_new(
    specs: list[str], parameters: dict[str, Any] | None, smoke: bool, profile: str = "default"
) -> tuple[list[Path], dict[str, dict[str, Any]]]:
    """The notebooks and each one's checked parameters of a new run. ``--smoke`` sets ``SMOKE``;
    ``--profile full`` sets ``PROFILE`` in each notebook that declares it (the theme notebooks)."""
    paths = [resolve_notebook(s) for s in specs] if specs else available_notebooks(required=True)
    given = dict(parameters or {})
    per_nb: dict[str, dict[str, Any]] = {}
    for p in paths:
        wanted = dict(given)
        if smoke:
            wanted["SMOKE"] = True
        declared = notebook_parameters(p)
        if profile != "default" and "PROFILE" in declared:
            wanted["PROFILE"] = profile
        # A parameter given for several notebooks need only exist in those that declare it, but
        # must exist in at least one (checked below) — a typo must not pass silently.
        per_nb[p.stem] = check_given(
            p, {k: v for k, v in wanted.items() if k in declared or len(paths) == 1}, declared
        )
        # The values its parameters cell sets itself (a user's copy may have been edited) are checked too:
        # the notebook's first cell would stop on them, after its kernel started.
        try:
            check_given(p, {k: d["default"] for k, d in declared.items() if k not in wanted}, declared)
        except ParameterError as exc:
            raise ParameterError(
                f"{exc} (the value its parameters cell sets; give another with -p)"
            ) from None
    for key in given:
        if not any(key in per_nb[p.stem] for p in paths):
            raise RunError(f"unknown parameter {key!r}: no selected notebook declares it")
    return paths, per_nb


def packaged_fallback(paths: Sequence[Path]) -> Path | None:
    """The folder of the notebooks nbkit came with, when ``paths`` are those because no notebooks were found
    here (no ``$NBKIT_NOTEBOOKS``, none in ./notebooks or .): a run from the wrong folder says which copies it
    ran. None otherwise."""
    packaged = packaged_notebooks_dir().resolve()
    if os.environ.get("NBKIT_NOTEBOOKS") or notebooks_dir().resolve() != packaged:
        return None
    here = {Path.cwd().resolve(), (Path.cwd() / "notebooks").resolve()}
    return packaged if packaged not in here and any(p.parent.resolve() == packaged for p in paths) else None


def _plan_resume(folder: Path | str) -> tuple[Path, list[Path], dict[str, dict[str, Any]], dict[str, Any]]:
    """(run folder, notebooks, parameters, record) of the run ``folder`` holds; ResumeError when it cannot be
    resumed."""
    final = Path(folder).expanduser().resolve()
    record = rf.read_record(final, rf.RUN_RECORD)
    where = final / rf.RUN_RECORD
    paths = []
    for entry in record.get("notebooks", []):
        path = Path(entry["path"])
        rf.check_source(where, entry["name"], path, entry["sha256"])
        paths.append(path)
    per_nb = {
        p.stem: rf.params_from_literals(record["parameters"].get(p.stem, {}), str(where)) for p in paths
    }
    return final, paths, per_nb, record


def _write_record(
    final: Path, paths: Sequence[Path], per_nb: dict[str, dict[str, Any]], *, smoke: bool, kernel: str
) -> None:
    params = {p.stem: rf.literal_params(per_nb[p.stem]) for p in paths}
    rf.write_json(
        final / rf.RUN_RECORD,
        {
            "version": rf.RECORD_VERSION,
            "kind": "run",
            "smoke": smoke,
            "kernel": kernel,
            "notebooks": [{"name": p.stem, "path": str(p), "sha256": rf.source_hash(p)} for p in paths],
            "parameters": params,
            "parameters_sha256": rf.params_hash(params),
            "packages": rf.package_versions(),
        },
    )


def _kept_result(final: Path, path: Path, entry: dict[str, Any]) -> NotebookResult | None:
    """An earlier run's ok notebook, read back from its folder (None when its files are gone)."""
    nb = final / path.name
    if entry.get("status") != "ok" or not nb.is_file():
        return None
    html_path = final / f"{path.stem}.html"
    return NotebookResult(
        path.stem,
        True,
        float(entry.get("seconds") or 0.0),
        nb,
        html_path if html_path.is_file() else None,
        read_notebook(nb),
    )


def run_notebooks(
    specs: list[str],
    parameters: dict[str, Any] | None = None,
    *,
    smoke: bool = False,
    profile: str = "default",
    output: Path | None = None,
    kernel: str = "python3",
    progress: bool = True,
    jobs: int = 1,
    log=say,
    resume: Path | str | None = None,
) -> tuple[Path, list[NotebookResult]]:
    """Execute notebooks into ``output`` (default ``runs/<timestamp>``); returns the run folder and
    each result.

    The folder is created when the run starts and keeps every notebook that ended, ok or not (see
    ``nbkit.runfolder``); each result's ``status`` says ok, failed, interrupted or not started.
    ``specs`` empty means every notebook (the CLI asks for ``--all`` explicitly). ``resume``: an
    earlier run folder; only its notebooks that are not ok run again, with the parameters recorded
    there, and its index is rewritten. ``profile`` ``"full"`` runs each theme notebook's full
    profile: the n every claim needs to decide (``PROFILE="full"``).
    """
    if profile not in ("default", "full"):
        raise RunError(f"--profile must be default or full, got {profile!r}")
    if jobs < 1:
        raise RunError(f"--jobs must be at least 1, got {jobs}")
    clock = RunClock()
    now = datetime.now()
    previous: dict[str, dict[str, Any]] = {}
    if resume is not None:
        if specs or parameters or smoke or profile != "default" or output is not None:
            raise RunError(
                "--resume DIR re-runs DIR's notebooks with the parameters recorded there; "
                "do not also name notebooks or give -p, --smoke, --profile or --output"
            )
        final, paths, per_nb, record = _plan_resume(resume)
        smoke, kernel = bool(record.get("smoke")), str(record.get("kernel") or kernel)
        previous = rf.read_status(final)
    else:
        paths, per_nb = _plan_new(specs, parameters, smoke, profile)
        packaged = packaged_fallback(paths)
        if packaged is not None:
            log(
                f"notebooks: the ones nbkit came with, in {packaged} (none in this folder; `nbkit init` "
                "copies them here to open and edit)"
            )
    if not kernel_exists(kernel):
        raise RunError(
            f"Jupyter kernel {kernel!r} is not installed; run `make setup` (it registers the python3 kernel)"
        )
    if resume is None:
        final = prepare_output(output, Path("runs") / now.strftime("%Y%m%d-%H%M%S"))
        try:
            final.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunError(f"output {final}: cannot create it ({exc.strerror or exc})") from None
        _write_record(final, paths, per_nb, smoke=smoke, kernel=kernel)
    date = now.strftime("%Y-%m-%d %H:%M")
    state: dict[str, NotebookResult] = {}
    for p in paths:
        kept = _kept_result(final, p, previous.get(p.stem, {}))
        state[p.stem] = kept or NotebookResult(p.stem, False, 0.0, status=rf.NOT_STARTED)
    todo = [p for p in paths if not state[p.stem].ok]
    ordered = lambda: [state[p.stem] for p in paths]  # noqa: E731
    if resume is not None:
        log(
            f"resuming {final}: {len(paths) - len(todo)} notebook(s) ok, re-running "
            f"{', '.join(p.stem for p in todo) or 'none'}"
        )
    write_state(final, ordered(), per_nb, date)
    tmp = make_tmp_beside(final)
    queue = [Job(p, tmp / p.stem, per_nb[p.stem], kernel, run_dir=final) for p in todo]
    if jobs > 1:
        queue = longest_first(queue, expected_seconds(final, paths, smoke))
    published: set[int] = set()

    def publish_one(i: int, r: NotebookResult) -> None:
        job = queue[i]
        moved = rf.move_in(job.out_dir, final)
        kernel_log = f"{job.path.stem}{rf.KERNEL_LOG_SUFFIX}"
        if kernel_log not in moved:  # an earlier attempt's (before --resume) does not describe this one
            with contextlib.suppress(OSError):
                (final / kernel_log).unlink(missing_ok=True)
        r.output = moved.get(job.path.name) or (
            final / job.path.name if r.output and (final / job.path.name).is_file() else None
        )
        r.html = moved.get(f"{job.path.stem}.html")
        state[job.path.stem] = r
        published.add(i)
        write_state(final, ordered(), per_nb, date)

    results: list[NotebookResult | None] = [None] * len(queue)
    try:
        execute_jobs(queue, n_jobs=jobs, progress=progress, log=log, on_done=publish_one, results=results)
    except BaseException as exc:
        keep_unfinished(
            queue, results, published, publish_one, interrupted=not isinstance(exc, rf.OutputError)
        )
        with contextlib.suppress(rf.OutputError, OSError):
            write_state(final, ordered(), per_nb, date)
        shutil.rmtree(tmp, ignore_errors=True)
        done = sum(r.ok for r in state.values())
        log(
            f"  {done} of {len(paths)} notebooks ok are kept in {final} (index.html says what happened to "
            "each); "
            f"`nbkit run --resume {final}` re-runs the others"
        )
        raise
    shutil.rmtree(tmp, ignore_errors=True)
    final_results = ordered()
    seconds = {
        p.stem: float(previous[p.stem]["seconds"])
        for p in paths
        if previous.get(p.stem, {}).get("status") == "ok" and state[p.stem].ok
    }
    seconds.update(
        {
            r.name: round(r.seconds, 1)
            for r in final_results
            if r.ok and r.name in {j.path.stem for j in queue}
        }
    )
    usage = clock.figures()
    rf.write_json(final / TIMINGS, {"smoke": smoke, "jobs": jobs, "seconds": seconds, **usage})
    log(utilisation_line(usage))
    write_state(final, final_results, per_nb, date)
    return final, final_results
