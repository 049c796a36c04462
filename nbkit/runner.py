"""Run the workbook's notebooks headless with papermill, and collect what they recorded.

A run writes into a hidden temporary directory beside its destination and is renamed into place
only when every notebook succeeded, so ``runs/`` never holds a half-written run. A failed run's
executed notebooks (and its index page) are kept under the system temp dir, and the failing cell
is named. An interrupted run (Ctrl-C, or SIGTERM, which ``nbkit`` turns into the same
``KeyboardInterrupt``) removes its temporary directory.

``jobs > 1`` runs notebooks in a pool of worker processes, longest first (by the seconds each took
in the newest earlier run beside the destination, ``timings.json``; on a machine's first run, by the
reference seconds shipped beside the notebooks, ``reference_seconds.json``). Each worker, and the kernel it
starts, gets its share of the usable cores as thread-pool sizes (``OMP_NUM_THREADS`` and friends), so
two notebooks on two cores do not each start two threads. They are *not* pinned to a core: a notebook
that runs several single-threaded processes (notebook 03's one-llama.cpp-server-per-core pool,
notebook 02's ranks) uses a core the other worker leaves idle — measured on the workbook, pinning left
one core idle for the last ~20 minutes while the LM notebook queued on the other.

Parameter ranges and choices
----------------------------
Parameters are checked before anything runs: the name must exist in the notebook's ``parameters``
cell and the value must have the default's type. A parameter's trailing comment may also declare
what values it takes (papermill stores that comment as the parameter's help text)::

    EPOCHS = 200  # training epochs; range: 1..2000
    LR = 0.005  # range: 1e-6..1.0
    SEED = 0  # range: 0..
    DATASET = "umls"  # choices: umls, kinships, synthetic, hetionet, <path>

``range: LO..HI`` is inclusive and either end may be left open. ``choices: a, b, c`` lists the
accepted values; the token ``<path>`` also accepts the path of an existing file (relative paths
are taken from the notebook's folder, where its kernel runs). A value outside is a ``RunError``
(a :class:`~nbkit.errors.UsageError`: exit 2, nothing run).
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from nbkit.errors import UsageError
from nbkit.record import read_notebook


# jsonschema (under nbformat, papermill, nbconvert) imports rfc3987_syntax when it is installed, for
# two URI formats notebooks never use; that import builds a grammar and costs 2-8 s in every
# process that reads a notebook (7.5 s of a 9 s `nbkit run` start-up here, once more per --jobs
# worker). jsonschema treats it as optional. Only nbkit's own command-line processes (and their
# pool workers) make it look absent: a program that merely imports this module keeps its modules.
def skip_uri_grammar() -> None:
    """Make jsonschema's optional ``rfc3987_syntax`` look absent in this process (call before nbformat loads)."""
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


# Thread-pool sizes the numeric libraries read at start-up; a pool worker's kernel gets its share.
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


class RunError(UsageError):
    """A problem with the request itself (unknown notebook or parameter, wrong type, no kernel)."""


@dataclass
class NotebookResult:
    name: str
    ok: bool
    seconds: float
    output: Path | None = None
    html: Path | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def _holds_notebooks(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob("[0-9][0-9]_*.ipynb"))


def packaged_notebooks_dir() -> Path:
    """The notebooks that came with nbkit: the wheel's ``nbkit/notebooks/`` (package data), or the
    source checkout's ``notebooks/`` (their one copy in git) for an editable install."""
    package = Path(__file__).resolve().parent
    installed = package / "notebooks"
    return installed if _holds_notebooks(installed) else package.parent / "notebooks"


def notebooks_dir() -> Path:
    """Where the workbook's notebooks live: $NBKIT_NOTEBOOKS; ./notebooks; the current folder when it
    holds NN_name.ipynb notebooks (an ``nbkit init`` folder, or a kernel running in the notebooks'
    folder); else the notebooks that came with nbkit (:func:`packaged_notebooks_dir`)."""
    env = os.environ.get("NBKIT_NOTEBOOKS")
    if env:
        if not Path(env).is_dir():
            raise RunError(f"NBKIT_NOTEBOOKS={env}: not a folder (it should name the folder holding NN_name.ipynb notebooks)")
        return Path(env)
    for here in (Path.cwd() / "notebooks", Path.cwd()):
        if _holds_notebooks(here):
            return here
    return packaged_notebooks_dir()


def available_notebooks(root: Path | None = None, *, required: bool = False) -> list[Path]:
    """The workbook's notebooks (``NN_name.ipynb``); ``required``: none found is a RunError."""
    root = root or notebooks_dir()
    found = sorted(p for p in root.glob("[0-9][0-9]_*.ipynb") if not p.name.startswith("."))
    if required and not found:
        raise RunError(f"no notebooks (NN_name.ipynb) found in {root}")
    return found


def resolve_notebook(spec: str, root: Path | None = None) -> Path:
    """Accept a path, a full stem (``01_kg_gnn``), its number (``01``/``1``) or its theme (``kg``)."""
    path = Path(spec)
    if path.suffix == ".ipynb" and path.is_file():
        return path.resolve()
    known = available_notebooks(root)
    key = spec.strip().lower().removesuffix(".ipynb")
    matches = [
        p
        for p in known
        if key in (p.stem.lower(), p.stem[:2])
        or (key.isdigit() and int(key) == int(p.stem[:2]))
        or p.stem.lower()[3:].startswith(key)
    ]
    if len(matches) == 1:
        return matches[0].resolve()
    names = ", ".join(p.stem for p in known) or "(none found)"
    if not matches:
        raise RunError(f"unknown notebook {spec!r}; known notebooks: {names}")
    raise RunError(f"notebook {spec!r} is ambiguous ({', '.join(p.stem for p in matches)}); known: {names}")


def notebook_parameters(path: Path) -> dict[str, dict[str, Any]]:
    """The ``parameters`` cell's names, inferred types and defaults (papermill's inspection)."""
    import papermill as pm

    try:
        params = pm.inspect_notebook(str(path))
    except Exception as exc:  # papermill raises plain errors for unreadable notebooks
        raise RunError(f"{path}: cannot read its parameters ({type(exc).__name__}: {exc})") from None
    out = {}
    for name, info in params.items():
        try:
            default = ast.literal_eval(info.get("default", "None"))
        except (ValueError, SyntaxError):
            default = info.get("default")
        # papermill infers a type only from annotations; an unannotated literal's type is its value's.
        inferred = info.get("inferred_type_name", "None")
        kind = inferred if inferred not in ("None", None) else type(default).__name__
        out[name] = {"type": kind, "default": default, "help": info.get("help", "")}
    for name, entry in _parameters_papermill_skipped(path, set(out)).items():
        out[name] = entry
    return out


def _parameters_papermill_skipped(path: Path, known: set[str]) -> dict[str, dict[str, Any]]:
    """Assignments of the ``parameters`` cell that papermill's line parser dropped, read with ``ast``.

    papermill skips (with only a logged warning) any line holding more than one ``=``, so a trailing
    comment such as ``# "" = the default model`` made the parameter unknown to ``-p``, while papermill
    still injects it fine. ``ast`` reads the assignment; the line's comment, via ``tokenize``, is its help.
    """
    import io
    import tokenize

    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # already readable by papermill above; a second reader's failure only loses the fill-in
        return {}
    cell = next((c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])), None)
    if cell is None:
        return {}
    try:
        tree = ast.parse(cell.source)
        comments = {t.start[0]: t.string.lstrip("#").strip()
                    for t in tokenize.generate_tokens(io.StringIO(cell.source).readline) if t.type == tokenize.COMMENT}
    except (SyntaxError, tokenize.TokenError):
        return {}
    out = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        if name in known:
            continue
        try:
            default = ast.literal_eval(node.value)
        except ValueError:
            continue  # not a literal: papermill could not type it either
        out[name] = {"type": type(default).__name__, "default": default, "help": comments.get(node.end_lineno, "")}
    return out


def parse_value(text: str) -> Any:
    """A ``-p KEY VALUE`` value: a Python literal when it is one, else the string itself."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        lowered = text.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        value = text
    return _absolute_if_path(value)


def _absolute_if_path(value: Any) -> Any:
    """A relative path the user means from *their* directory, made absolute.

    Kernels run in the notebooks' folder, so ``-p DATASET my/triples.tsv`` would otherwise be looked
    up there. Only a string that names an existing file or folder and looks like a path (a
    separator or a suffix) is changed, so names such as ``umls`` stay names.
    """
    if not isinstance(value, str) or not value or os.path.isabs(value):
        return value
    if ("/" in value or os.sep in value or Path(value).suffix) and os.path.exists(value):
        return str(Path(value).resolve())
    return value


def check_parameters(path: Path, given: dict[str, Any], declared: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Reject unknown parameters, values whose type differs from the default's, and values outside
    a declared range or choice list (see the module docstring)."""
    declared = notebook_parameters(path) if declared is None else declared
    if not declared:
        raise RunError(f"{path.name}: has no cell tagged 'parameters'")
    checked = {}
    for key, value in given.items():
        if key not in declared:
            raise RunError(f"{path.stem}: unknown parameter {key!r}; it takes: {', '.join(sorted(declared))}")
        default = declared[key]["default"]
        if default is not None and not _same_kind(default, value):
            raise RunError(
                f"{path.stem}: parameter {key} expects {type(default).__name__} (default {default!r}), "
                f"got {value!r} ({type(value).__name__})"
            )
        problem = _outside_declared(value, declared[key].get("help", ""), path.parent)
        if problem:
            raise RunError(f"{path.stem}: parameter {key}={value!r} {problem}")
        checked[key] = value
    return checked


_RANGE = re.compile(r"\brange:\s*([^\s;,]*?)\s*\.\.\s*([^\s;,]*)")
_CHOICES = re.compile(r"\bchoices:\s*([^;#]+)")


def declared_range(help_text: str) -> tuple[float | None, float | None] | None:
    """``(lo, hi)`` from a ``range: LO..HI`` note (None for an open end), or None without one."""
    m = _RANGE.search(help_text or "")
    if not m:
        return None
    try:
        lo, hi = (float(x) if x else None for x in m.groups())
    except ValueError:
        return None
    return lo, hi


def declared_choices(help_text: str) -> list[str] | None:
    m = _CHOICES.search(help_text or "")
    return [c.strip().strip("'\"") for c in m.group(1).split(",") if c.strip()] if m else None


def _outside_declared(value: Any, help_text: str, nb_dir: Path) -> str | None:
    bounds = declared_range(help_text)
    if bounds and isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = bounds
        if math.isnan(value) or (lo is not None and value < lo) or (hi is not None and value > hi):
            shown = f"{'' if lo is None else f'{lo:g}'}..{'' if hi is None else f'{hi:g}'}"
            return f"is outside its declared range {shown}"
    choices = declared_choices(help_text)
    if choices is not None:
        names = [c for c in choices if c != "<path>"]
        if str(value) in names:
            return None
        if "<path>" in choices and isinstance(value, str) and value and (nb_dir / Path(value).expanduser()).is_file():
            return None
        takes = ", ".join(repr(c) for c in names) + (" or the path of an existing file" if "<path>" in choices else "")
        return f"is not one it takes: {takes}"
    return None


def _same_kind(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    if isinstance(default, (list, tuple)):
        return isinstance(value, (list, tuple))
    return isinstance(value, type(default))


def _kernel_exists(name: str) -> bool:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        return False
    return True


# Set for the kernel of every headless run: no widget frontend (live figures keep one output each,
# updated in place) and plotly's mime type only for figures a cell displays itself (no plotly.js
# embedded in the notebook; the HTML page loads it once).
HEADLESS_KERNEL_ENV = {"NBKIT_HEADLESS": "1", "PLOTLY_RENDERER": "plotly_mimetype"}


def kernel_manager_with_env(extra: dict[str, str]):
    """A jupyter_client kernel manager class whose kernels start with ``extra`` added to the environment."""
    from jupyter_client import AsyncKernelManager
    from traitlets import default

    class EnvKernelManager(AsyncKernelManager):
        @default("transport")
        def _default_transport(self):
            # Unix sockets, not TCP ports: kernels started at the same moment (--jobs, other jobs on
            # the machine) raced for the ports jupyter_client picked ("Address already in use").
            return "ipc" if os.name == "posix" else "tcp"

        @default("ip")
        def _default_ip(self):
            # Each kernel its own socket prefix (jupyter_client's default, "kernel-ipc" in the cwd,
            # is shared by notebooks of one folder started together).
            if self.transport != "ipc":
                return "127.0.0.1"
            import uuid

            return os.path.join(tempfile.gettempdir(), f"nbkit-kernel-{uuid.uuid4().hex[:12]}")

        async def start_kernel(self, **kw):
            kw["env"] = {**kw.get("env", os.environ), **extra}
            return await super().start_kernel(**kw)

    return EnvKernelManager


def execute(
    path: Path,
    out_dir: Path,
    parameters: dict[str, Any],
    *,
    kernel: str = "python3",
    progress: bool = True,
    timeout: int | None = None,
    plotly_js: str = "plotly.min.js",
) -> NotebookResult:
    """Execute one notebook into ``out_dir`` (executed .ipynb + .html + recorded metrics).

    ``plotly_js``: where the HTML page loads plotly.js from (see ``nbkit.report.export_html``).
    """
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    out_nb = out_dir / path.name
    sink = out_dir / f".{path.stem}.metrics.jsonl"
    env = {**HEADLESS_KERNEL_ENV, "NBKIT_RECORD_FILE": str(sink)}
    start = time.perf_counter()
    error = None
    try:
        pm.execute_notebook(
            str(path),
            str(out_nb),
            parameters=parameters,
            kernel_name=kernel,
            progress_bar=progress,
            cwd=str(path.parent),
            execution_timeout=timeout,
            report_mode=False,
            # The kernel's environment is given to its manager, not set in os.environ: notebooks run
            # from threads (a Dask worker) must not see each other's settings.
            kernel_manager_class=kernel_manager_with_env(env),
        )
    except PapermillExecutionError as exc:
        first_line = (exc.source or "").strip().splitlines()[:1]
        where = f"cell {exc.exec_count} ({first_line[0][:60]!r})" if first_line else f"cell {exc.exec_count}"
        error = f"{path.stem}: {where} raised {exc.ename}: {exc.evalue}"
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        error = f"{path.stem}: {type(exc).__name__}: {exc}"
    finally:
        sink.unlink(missing_ok=True)
    seconds = time.perf_counter() - start
    if not out_nb.is_file():
        return NotebookResult(path.stem, False, seconds, None, error=error or f"{path.stem}: no executed notebook was written")
    from nbkit.report import export_html

    metrics = read_notebook(out_nb)
    html_path = out_dir / f"{path.stem}.html"
    try:
        export_html(out_nb, html_path, plotly_js)
    except Exception as exc:  # a failed notebook's page is a courtesy; a finished one's is not
        if error is None:
            raise
        html_path = None
        error += f" (and its HTML page failed: {type(exc).__name__}: {exc})"
    return NotebookResult(path.stem, error is None, seconds, out_nb, html_path, metrics, error)


# -- several notebooks at once ---------------------------------------------------------------------


def usable_cores() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def core_shares(n_jobs: int, cores: Sequence[int] | None = None) -> list[list[int]]:
    """Split the usable cores into ``n_jobs`` disjoint shares (one core each, reused, if fewer cores)."""
    cores = list(cores if cores is not None else usable_cores())
    n = max(1, int(n_jobs))
    if n >= len(cores):
        return [[cores[i % len(cores)]] for i in range(n)]
    size, extra = divmod(len(cores), n)
    shares, at = [], 0
    for i in range(n):
        take = size + (1 if i < extra else 0)
        shares.append(cores[at : at + take])
        at += take
    return shares


def share_threads(cores: Sequence[int]) -> None:
    """Size this process's (and its kernels') thread pools to its share of the cores; no affinity."""
    for name in THREAD_ENV:
        os.environ[name] = str(len(cores))


TIMINGS = "timings.json"  # in each run folder: {"smoke": bool, "jobs": N, "seconds": {notebook: seconds}}


def _seconds_table(path: Path, pick: Callable[[dict], Any]) -> dict[str, float] | None:
    """``pick(data)`` of the JSON object in ``path`` as {notebook: seconds}; None when the file is missing or
    unreadable or holds no such table (an ordering hint lost, never an error)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    seconds = pick(data) if isinstance(data, dict) else None
    return {k: float(v) for k, v in seconds.items() if isinstance(v, (int, float))} if isinstance(seconds, dict) else None


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
    read: without it notebooks keep file order and the longest (03) starts third. Only the order is
    used, so figures from another machine still serve; a missing or unreadable file gives {}."""
    out: dict[str, float] = {}
    for folder in dict.fromkeys(p.parent for p in paths):
        out.update(_seconds_table(folder / REFERENCE_SECONDS, lambda d: d.get("smoke" if smoke else "full")) or {})
    return out


def longest_first(jobs: Sequence[Job], seconds: dict[str, float]) -> list[Job]:
    """``jobs`` by descending expected seconds (longest-processing-time-first: the longest notebook must not
    start last on a pool); notebooks without history keep their order, after those with it."""
    known = sorted((j for j in jobs if j.path.stem in seconds), key=lambda j: -seconds[j.path.stem])
    return known + [j for j in jobs if j.path.stem not in seconds]


def _pool_worker_init(counter, shares: list[list[int]]) -> None:
    import signal

    # The parent ends workers with SIGTERM when the run is interrupted: unwind like Ctrl-C so
    # papermill shuts the kernel down. SIGINT from the terminal is the parent's to handle.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    skip_uri_grammar()  # a spawned worker starts without the parent's sys.modules
    with counter.get_lock():  # each worker takes the next share of the cores
        slot = counter.value
        counter.value += 1
    share_threads(shares[slot % len(shares)])


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


@dataclass
class Job:
    """One notebook execution: what ``execute`` needs."""

    path: Path
    out_dir: Path
    parameters: dict[str, Any]
    kernel: str = "python3"
    timeout: int | None = None
    label: str = ""
    plotly_js: str = "plotly.min.js"


def _run_job(job: Job, progress: bool) -> NotebookResult:
    job.out_dir.mkdir(parents=True, exist_ok=True)
    return execute(job.path, job.out_dir, job.parameters, kernel=job.kernel, progress=progress, timeout=job.timeout,
                   plotly_js=job.plotly_js)


def execute_jobs(
    jobs: Sequence[Job],
    *,
    n_jobs: int = 1,
    progress: bool = True,
    log: Callable[[str], Any] = print,
) -> list[NotebookResult]:
    """Execute ``jobs`` one after another (``n_jobs`` 1) or in a pool of worker processes, in the order given.

    Results come back in the order of ``jobs``; a notebook that fails is a failed result, not an
    exception. An interrupt ends the workers (and through them their kernels) before it propagates.
    """
    if n_jobs <= 1 or len(jobs) <= 1:
        results = []
        for job in jobs:
            log(f"▶ {job.label or job.path.stem}  parameters={job.parameters}")
            r = _run_job(job, progress)
            results.append(r)
            log(_done_line(job, r))
        return results
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    import psutil

    n = min(n_jobs, len(jobs))
    shares = core_shares(n)
    # fork: workers start with papermill and nbconvert already imported (4-8 s each under load
    # with spawn). This process has no kernel or thread of its own yet; spawn where fork is missing.
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    counter = ctx.Value("i", 0)
    before = {p.pid for p in psutil.Process().children()}
    pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_pool_worker_init, initargs=(counter, shares))
    log(f"running {len(jobs)} notebooks, {n} at a time; cores per worker: {shares}")
    results: list[NotebookResult | None] = [None] * len(jobs)
    try:
        futures = {}
        for i, job in enumerate(jobs):
            futures[pool.submit(_run_job, job, False)] = i
            log(f"▶ queued {job.label or job.path.stem}  parameters={job.parameters}")
        for fut in as_completed(futures):
            i = futures[fut]
            job = jobs[i]
            try:
                results[i] = fut.result()
            except Exception as exc:  # the worker itself died (memory, a signal): that notebook failed
                results[i] = NotebookResult(job.path.stem, False, 0.0, error=f"{job.path.stem}: worker failed: {type(exc).__name__}: {exc}")
            log(_done_line(job, results[i]))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        _end_children(psutil.Process().children(), before)
        raise
    pool.shutdown(wait=True)
    return [r for r in results if r is not None]


def _end_children(children, keep: set[int], settle_s: float = 10.0, grace_s: float = 15.0) -> None:
    """End the pool workers this call started, and what they started.

    The pool was shut down first, so a worker whose kernel was interrupted (SIGTERM and Ctrl-C
    interrupt our kernels) finishes its notebook and exits by itself: wait ``settle_s`` for that,
    then SIGTERM the rest (they unwind, papermill shuts their kernels down), then kill leftovers.
    """
    import psutil

    workers = []
    for p in children:
        try:
            if p.pid not in keep and "resource_tracker" not in " ".join(p.cmdline()):
                workers.append(p)
        except psutil.Error:
            continue
    started = []
    for p in workers:
        with contextlib.suppress(psutil.Error):
            started.extend(p.children(recursive=True))
    _, running = psutil.wait_procs(workers, timeout=settle_s)
    end_processes(running, grace_s)
    end_processes([p for p in started if p.is_running()], grace_s=5.0)


def end_processes(procs, grace_s: float = 5.0) -> list[int]:
    """SIGTERM the given psutil processes (only ones we started), SIGKILL those still there after
    ``grace_s``; returns the pids that survived even that."""
    import psutil

    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    _, alive = psutil.wait_procs(alive, timeout=grace_s)
    return [p.pid for p in alive]


def _done_line(job: Job, r: NotebookResult) -> str:
    name = job.label or job.path.stem
    return f"  {'✔' if r.ok else '✘'} {name} in {r.seconds:.1f}s" + ("" if r.ok else f"\n    {r.error}")


# -- a run folder ----------------------------------------------------------------------------------


def prepare_output(output: Path | str | None, default: Path) -> Path:
    """The absolute destination folder, checked before anything runs (RunError when unusable)."""
    # Absolute: the kernel runs with the notebook's folder as cwd and writes its metrics sink here.
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
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    except OSError as exc:
        raise RunError(f"output {final}: cannot create it ({exc.strerror or exc})") from None


def publish(tmp: Path, final: Path) -> None:
    if final.exists():
        final.rmdir()  # checked empty by prepare_output
    tmp.rename(final)


def _attach_screenshots(run_dir: Path, final: Path) -> None:
    """Copy the browser tier's panel screenshots (tests/browser) into the run, for its index page."""
    shots = Path(os.environ.get("NBKIT_SCREENSHOTS_DIR") or final.parent / "browser-screenshots")
    pngs = sorted(shots.glob("*.png")) if shots.is_dir() else []
    if pngs:
        (run_dir / "screenshots").mkdir(exist_ok=True)
        for png in pngs:
            shutil.copy2(png, run_dir / "screenshots" / png.name)


def run_notebooks(
    specs: list[str],
    parameters: dict[str, Any] | None = None,
    *,
    smoke: bool = False,
    output: Path | None = None,
    kernel: str = "python3",
    progress: bool = True,
    jobs: int = 1,
    log=print,
) -> tuple[Path | None, list[NotebookResult]]:
    """Execute notebooks; publish ``output`` (default ``runs/<timestamp>``) only if all succeed.

    ``specs`` empty means every notebook (the CLI asks for ``--all`` explicitly).
    """
    from nbkit.report import write_index

    if jobs < 1:
        raise RunError(f"--jobs must be at least 1, got {jobs}")
    paths = [resolve_notebook(s) for s in specs] if specs else available_notebooks(required=True)
    if not _kernel_exists(kernel):
        raise RunError(f"Jupyter kernel {kernel!r} is not installed; run `make setup` (it registers the python3 kernel)")
    given = dict(parameters or {})
    per_nb: dict[str, dict[str, Any]] = {}
    for p in paths:
        wanted = dict(given)
        if smoke:
            wanted["SMOKE"] = True
        # A parameter given for several notebooks need only exist in those that declare it, but
        # must exist in at least one (checked below) — a typo must not pass silently.
        declared = notebook_parameters(p)
        per_nb[p.stem] = check_parameters(p, {k: v for k, v in wanted.items() if k in declared or len(paths) == 1}, declared)
    for key in given:
        if not any(key in per_nb[p.stem] for p in paths):
            raise RunError(f"unknown parameter {key!r}: no selected notebook declares it")
    now = datetime.now()
    stamp = now.strftime("%Y%m%d-%H%M%S")
    final = prepare_output(output, Path("runs") / stamp)
    tmp = make_tmp_beside(final)
    try:
        queue = [Job(p, tmp, per_nb[p.stem], kernel) for p in paths]
        if jobs > 1:
            queue = longest_first(queue, previous_seconds(final, smoke) or reference_seconds(paths, smoke))
        done = {r.name: r for r in execute_jobs(queue, n_jobs=jobs, progress=progress, log=log)}
        results = [done[p.stem] for p in paths if p.stem in done]
        timings = {"smoke": smoke, "jobs": jobs, "seconds": {r.name: round(r.seconds, 1) for r in results if r.ok}}
        (tmp / TIMINGS).write_text(json.dumps(timings, indent=2), encoding="utf-8")
        ok = all(r.ok for r in results)
        (tmp / "metrics.json").write_text(json.dumps({r.name: r.metrics for r in results}, indent=2), encoding="utf-8")
        if ok:
            _attach_screenshots(tmp, final)
        write_index(tmp, results, per_nb, name=final.name, date=now.strftime("%Y-%m-%d %H:%M"))
        if ok:
            publish(tmp, final)
            for r in results:
                r.output = final / r.output.name if r.output else None
                r.html = final / r.html.name if r.html else None
            return final, results
        kept = Path(tempfile.gettempdir()) / f"nbkit-failed-{stamp}"
        shutil.move(str(tmp), kept)
        log(f"  nothing written to {final}; the executed notebooks of the failed run are in {kept}")
        return None, results
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
