"""Run the workbook's notebooks headless with papermill, and collect what they recorded.

A run's folder (``runs/<stamp>/`` or ``--output``) is created when the run starts and kept whatever
happens: each notebook's executed ``.ipynb`` and ``.html`` are renamed into it as soon as that
notebook ends, ok or failed (a failed or interrupted notebook executed up to the cell that stopped
it), and ``index.json``/``index.html`` say which notebooks are ok, failed (the cell and the error),
interrupted or not started (``nbkit.runfolder``). An interrupted run (Ctrl-C, or SIGTERM, which
``nbkit`` turns into the same ``KeyboardInterrupt``) ends its kernels and keeps what finished;
``run_notebooks(..., resume=DIR)`` re-runs only DIR's notebooks that are not ok. A kernel that dies
(the OOM killer, ``kill -9``) fails its notebook as ``kernel died (signal 9, SIGKILL)``; a worker that
dies fails only its own notebook and its kernel is ended.

``jobs > 1`` runs notebooks in worker processes (one per notebook, ``jobs`` at a time), longest first (by the seconds each took
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
import glob
import json
import logging
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
from nbkit.procs import end_processes, usable_cores  # noqa: F401 (end_processes: the browser tier's import)
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
    # "ok", "failed", "interrupted" or "not started" (nbkit.runfolder); "" means: from ``ok``.
    status: str = ""

    def __post_init__(self) -> None:
        if not self.status:
            self.status = "ok" if self.ok else "failed"


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


def kernel_manager_with_env(extra: dict[str, str], watch: dict[str, Any] | None = None):
    """A jupyter_client kernel manager class whose kernels start with ``extra`` added to the environment.

    ``watch``: filled with the kernel's ``process`` once it starts (and its pid written to
    ``watch["pid_file"]`` when given), so a dead kernel's exit status can be reported.
    """
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
            started = await super().start_kernel(**kw)
            process = getattr(self.provisioner, "process", None)
            if watch is not None and process is not None:
                watch["process"] = process  # its exit status names how a dead kernel died
                if watch.get("pid_file"):
                    # A worker killed with SIGKILL cannot end its kernel nor remove its files; the parent
                    # reads this to do both.
                    Path(watch["pid_file"]).write_text(json.dumps({
                        "pid": process.pid, "connection_file": self.connection_file,
                        "ipc": self.ip if self.transport == "ipc" else None}), encoding="utf-8")
            return started

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

    from nbkit.runfolder import is_disk_error, output_error

    out_nb = out_dir / path.name
    sink = out_dir / f".{path.stem}.metrics.jsonl"
    env = {**HEADLESS_KERNEL_ENV, "NBKIT_RECORD_FILE": str(sink)}
    watch: dict[str, Any] = {"pid_file": str(out_dir / KERNEL_PID_FILE)}
    papermill_log = logging.getLogger("papermill")
    if not any(isinstance(f, _NotKernelDeath) for f in papermill_log.filters):
        papermill_log.addFilter(_NotKernelDeath())
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
            kernel_manager_class=kernel_manager_with_env(env, watch),
        )
    except PapermillExecutionError as exc:
        first_line = (exc.source or "").strip().splitlines()[:1]
        where = f"cell {exc.exec_count} ({first_line[0][:60]!r})" if first_line else f"cell {exc.exec_count}"
        error = f"{path.stem}: {where} raised {exc.ename}: {exc.evalue}"
    except KeyboardInterrupt:
        raise
    except OSError as exc:
        if is_disk_error(exc):  # the output folder stopped taking files: the whole run stops, not this notebook
            raise output_error(Path(exc.filename or out_dir), exc) from None
        error = f"{path.stem}: {type(exc).__name__}: {exc}"
    except Exception as exc:
        dead = _kernel_death(path, out_nb, watch.get("process")) if type(exc).__name__ == "DeadKernelError" else None
        error = dead or f"{path.stem}: {type(exc).__name__}: {exc}"
    finally:
        for scratch in (sink, out_dir / KERNEL_PID_FILE):
            with contextlib.suppress(OSError):  # a read-only or full disk is reported above, not here
                scratch.unlink(missing_ok=True)
    seconds = time.perf_counter() - start
    if not out_nb.is_file():
        return NotebookResult(path.stem, False, seconds, None, error=error or f"{path.stem}: no executed notebook was written")
    from nbkit.report import export_html

    metrics = read_notebook(out_nb)
    html_path = out_dir / f"{path.stem}.html"
    try:
        export_html(out_nb, html_path, plotly_js)
    except Exception as exc:  # a failed notebook's page is a courtesy; a finished one's is not
        if is_disk_error(exc):
            raise output_error(Path(getattr(exc, "filename", None) or html_path), exc) from None
        if error is None:
            raise
        html_path = None
        error += f" (and its HTML page failed: {type(exc).__name__}: {exc})"
    return NotebookResult(path.stem, error is None, seconds, out_nb, html_path, metrics, error)


KERNEL_PID_FILE = ".kernel.pid"  # in a notebook's staging folder while its kernel runs


def _kernel_death(path: Path, out_nb: Path, process) -> str | None:
    """``NAME: kernel died (signal 9, SIGKILL) in cell N ('…')`` when the notebook's kernel died, else None."""
    if process is None:
        return None
    try:
        code = process.wait(timeout=5)
    except Exception:  # still running: the failure was something else
        return None
    if code is None or code == 0:
        return None
    import signal

    if code < 0:
        try:
            how = f"signal {-code}, {signal.Signals(-code).name}"
        except ValueError:
            how = f"signal {-code}"
    else:
        how = f"exit status {code}"
    return f"{path.stem}: kernel died ({how}){_running_cell(out_nb)}"


def _running_cell(out_nb: Path) -> str:
    """`` in cell N ('first line')`` for the cell papermill marked running when the kernel died."""
    try:
        import nbformat

        nb = nbformat.read(out_nb, as_version=4)
    except Exception:  # no notebook saved yet: the kernel died before the first cell
        return ""
    # papermill marks every cell it reached (start_time) and completes even the one the kernel died in.
    reached = [c for c in nb.cells if c.cell_type == "code" and c.get("metadata", {}).get("papermill", {}).get("start_time")]
    if not reached:
        return ""
    cell = reached[-1]
    first = cell.source.strip().splitlines()[:1]
    number = cell.get("execution_count") or f"#{nb.cells.index(cell)}"
    return f" in cell {number}" + (f" ({first[0][:60]!r})" if first else "")


class _NotKernelDeath(logging.Filter):
    """Drop nbclient's own "Kernel died …" log line: the run reports the death once, with its signal."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.getMessage()).startswith("Kernel died")


# -- several notebooks at once ---------------------------------------------------------------------


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
    on_done: Callable[[int, NotebookResult], Any] | None = None,
    results: list[NotebookResult | None] | None = None,
) -> list[NotebookResult | None]:
    """Execute ``jobs`` one after another (``n_jobs`` 1) or ``n_jobs`` at a time, each in its own worker process.

    Returns one result per job, in the order of ``jobs``; a notebook that fails, or whose worker or
    kernel dies, is a failed result, not an exception. ``on_done(i, result)`` is called in this
    process as each job ends (the run folder publishes it then). An interrupt (or an exception from
    ``on_done``) ends the workers and their kernels before it propagates; pass ``results`` (a list
    of None, one per job) to see, afterwards, which jobs had ended.
    """
    results = [None] * len(jobs) if results is None else results
    if n_jobs <= 1 or len(jobs) <= 1:
        for i, job in enumerate(jobs):
            log(f"▶ {job.label or job.path.stem}  parameters={job.parameters}")
            r = _run_job(job, progress)
            results[i] = r
            log(_done_line(job, r))
            if on_done is not None:
                on_done(i, r)
        return results
    pool = _WorkerPool(jobs, min(n_jobs, len(jobs)), log)
    try:
        pool.run(results, on_done)
    except BaseException:
        pool.stop(results)
        raise
    return results


class _WorkerPool:
    """At most ``n`` notebooks at once, each in a fresh forked worker process that ends with it.

    Why not ``concurrent.futures.ProcessPoolExecutor``: one worker killed (the OOM killer, a user's
    ``kill -9``) breaks that pool and fails every queued notebook with ``BrokenProcessPool``; here the
    dead worker's notebook is one failed result naming the signal, its kernel is ended, and the queue
    goes on. A worker is forked (papermill and nbconvert already imported) and started per notebook.
    """

    def __init__(self, jobs: Sequence[Job], n: int, log: Callable[[str], Any]):
        import multiprocessing as mp

        self.jobs, self.n, self.log = list(jobs), n, log
        self.shares = core_shares(n)
        # fork: workers start with papermill and nbconvert already imported (4-8 s each under load
        # with spawn). This process has no kernel or thread of its own yet; spawn where fork is missing.
        self.ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        self.running: dict[int, tuple[Any, Any, int]] = {}  # job index -> (process, receiving end, core-share slot)

    def run(self, results: list[NotebookResult | None], on_done) -> None:
        from multiprocessing.connection import wait

        self.log(f"running {len(self.jobs)} notebooks, {self.n} at a time; cores per worker: {self.shares}")
        for job in self.jobs:
            self.log(f"▶ queued {job.label or job.path.stem}  parameters={job.parameters}")
        queue = list(range(len(self.jobs)))
        free = list(range(self.n))
        while queue or self.running:
            while queue and free:
                self._start(queue.pop(0), free.pop(0))
            waitables = {}
            for i, (proc, conn, _slot) in self.running.items():
                waitables[conn] = i
                waitables[proc.sentinel] = i
            for ready in wait(list(waitables), timeout=1.0):
                i = waitables[ready]
                if i not in self.running:
                    continue
                r = self._collect(i)
                if r is None:
                    continue
                free.append(self.running.pop(i)[2])
                results[i] = r
                self.log(_done_line(self.jobs[i], r))
                if on_done is not None:
                    on_done(i, r)

    def _start(self, i: int, slot: int) -> None:
        recv, send = self.ctx.Pipe(duplex=False)
        proc = self.ctx.Process(target=_worker_main, args=(self.jobs[i], self.shares[slot % len(self.shares)], send),
                                name=f"nbkit-worker-{i}")
        proc.start()
        send.close()
        self.running[i] = (proc, recv, slot)

    def _collect(self, i: int) -> NotebookResult | None:
        """The job's result once its worker sent it or died; None while it still runs."""
        proc, conn, _slot = self.running[i]
        job = self.jobs[i]
        got = None
        try:
            if conn.poll():
                got = conn.recv()
        except (EOFError, OSError):
            got = None
        if got is None:
            if proc.is_alive():
                return None
            proc.join(timeout=5)
            self._end_kernel(job)
            conn.close()
            from nbkit.procs import exit_reason

            name = job.path.stem
            return NotebookResult(name, False, 0.0, _staged(job),
                                  error=f"{name}: worker died ({exit_reason(proc.exitcode)}); its kernel was ended")
        proc.join(timeout=30)
        conn.close()
        if isinstance(got, BaseException):
            raise got  # the output folder stopped taking files (OutputError): the run stops
        return got

    def _end_kernel(self, job: Job) -> None:
        """End the kernel (and its process group) a dead worker left behind."""
        from nbkit.procs import kill_group

        pid_file = job.out_dir / KERNEL_PID_FILE
        try:
            info = json.loads(pid_file.read_text(encoding="utf-8"))
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        _interrupt_then_wait(pid)
        kill_group(pid)  # jupyter_client starts each kernel in its own session: pgid == pid
        leftovers = [info.get("connection_file")] + (glob.glob(f"{info['ipc']}-*") if info.get("ipc") else [])
        for path in filter(None, leftovers):
            Path(path).unlink(missing_ok=True)
        pid_file.unlink(missing_ok=True)

    def stop(self, results: list[NotebookResult | None], settle_s: float = 10.0, grace_s: float = 15.0) -> None:
        """End every running worker: let those whose kernel was interrupted (Ctrl-C reaches the kernels)
        send their result for ``settle_s``, SIGTERM the rest (they unwind, papermill saves the
        notebook and ends its kernel), SIGKILL what is left after ``grace_s``, then end leftover kernels."""
        import signal

        deadline = time.monotonic() + settle_s
        while self.running and time.monotonic() < deadline:
            for i in list(self.running):
                with contextlib.suppress(Exception):
                    r = self._collect(i)
                    if r is not None:
                        self.running.pop(i)
                        results[i] = r
            time.sleep(0.2)
        for proc, _conn, _slot in self.running.values():
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for i, (proc, conn, _slot) in list(self.running.items()):
            proc.join(timeout=max(0.1, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
            with contextlib.suppress(Exception):
                if conn.poll():
                    got = conn.recv()
                    if isinstance(got, NotebookResult):
                        results[i] = got
            self._end_kernel(self.jobs[i])
            conn.close()
        self.running.clear()


def _interrupt_then_wait(pid: int, settle_s: float = 5.0) -> None:
    """Interrupt an orphaned kernel's cell first, so it unwinds (ends its ranks, removes its temporary
    folders) before it is killed: wait until it has no child process left, at most ``settle_s``."""
    import signal

    import psutil

    try:
        kernel = psutil.Process(pid)
        kernel.send_signal(signal.SIGINT)
    except psutil.Error:
        return
    deadline = time.monotonic() + settle_s
    with contextlib.suppress(psutil.Error):
        while time.monotonic() < deadline and kernel.children():
            time.sleep(0.1)
        time.sleep(0.5)  # the unwinding after the last child ended (temporary folders, files)


def _staged(job: Job) -> Path | None:
    """The notebook papermill saved so far in the job's folder (after every cell), if any."""
    nb = job.out_dir / job.path.name
    return nb if nb.is_file() else None


def _worker_main(job: Job, share: list[int], conn) -> None:
    """A worker process: one notebook, its result (or the OutputError that stopped it) sent back."""
    import signal

    # The parent ends workers with SIGTERM when the run is interrupted: unwind like Ctrl-C so
    # papermill saves the notebook and shuts the kernel down. SIGINT from the terminal is the parent's.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    skip_uri_grammar()  # a spawned worker starts without the parent's sys.modules
    share_threads(share)
    from nbkit.runfolder import INTERRUPTED, OutputError, is_disk_error, output_error

    name = job.path.stem
    try:
        result: Any = _run_job(job, False)
    except KeyboardInterrupt:
        result = NotebookResult(name, False, 0.0, _staged(job), error=f"{name}: interrupted", status=INTERRUPTED)
    except OutputError as exc:
        result = exc
    except OSError as exc:
        result = output_error(Path(exc.filename or job.out_dir), exc) if is_disk_error(exc) else NotebookResult(
            name, False, 0.0, _staged(job), error=f"{name}: worker failed: {type(exc).__name__}: {exc}")
    except Exception as exc:
        result = NotebookResult(name, False, 0.0, _staged(job), error=f"{name}: worker failed: {type(exc).__name__}: {exc}")
    with contextlib.suppress(OSError, ValueError):
        conn.send(result)
        conn.close()


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


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


def _attach_screenshots(run_dir: Path, final: Path) -> None:
    """Copy the browser tier's panel screenshots (tests/browser) into the run, for its index page."""
    shots = Path(os.environ.get("NBKIT_SCREENSHOTS_DIR") or final.parent / "browser-screenshots")
    pngs = sorted(shots.glob("*.png")) if shots.is_dir() else []
    if pngs:
        (run_dir / "screenshots").mkdir(exist_ok=True)
        for png in pngs:
            shutil.copy2(png, run_dir / "screenshots" / png.name)


def _plan_new(specs: list[str], parameters: dict[str, Any] | None, smoke: bool) -> tuple[list[Path], dict[str, dict[str, Any]]]:
    """The notebooks and each one's checked parameters of a new run."""
    paths = [resolve_notebook(s) for s in specs] if specs else available_notebooks(required=True)
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
    return paths, per_nb


def _plan_resume(folder: Path | str) -> tuple[Path, list[Path], dict[str, dict[str, Any]], dict[str, Any]]:
    """(run folder, notebooks, parameters, record) of the run ``folder`` holds; ResumeError when it cannot be resumed."""
    from nbkit import runfolder as rf

    final = Path(folder).expanduser().resolve()
    record = rf.read_record(final, rf.RUN_RECORD)
    where = final / rf.RUN_RECORD
    paths = []
    for entry in record.get("notebooks", []):
        path = Path(entry["path"])
        rf.check_source(where, entry["name"], path, entry["sha256"])
        paths.append(path)
    per_nb = {p.stem: rf.params_from_literals(record["parameters"].get(p.stem, {}), str(where)) for p in paths}
    return final, paths, per_nb, record


def _write_record(final: Path, paths: Sequence[Path], per_nb: dict[str, dict[str, Any]], *, smoke: bool, kernel: str) -> None:
    from nbkit import runfolder as rf

    params = {p.stem: rf.literal_params(per_nb[p.stem]) for p in paths}
    rf.write_json(final / rf.RUN_RECORD, {
        "version": rf.RECORD_VERSION, "kind": "run", "smoke": smoke, "kernel": kernel,
        "notebooks": [{"name": p.stem, "path": str(p), "sha256": rf.source_hash(p)} for p in paths],
        "parameters": params, "parameters_sha256": rf.params_hash(params),
    })


def _kept_result(final: Path, path: Path, entry: dict[str, Any]) -> NotebookResult | None:
    """An earlier run's ok notebook, read back from its folder (None when its files are gone)."""
    nb = final / path.name
    if entry.get("status") != "ok" or not nb.is_file():
        return None
    html_path = final / f"{path.stem}.html"
    return NotebookResult(path.stem, True, float(entry.get("seconds") or 0.0), nb, html_path if html_path.is_file() else None,
                          read_notebook(nb))


def _write_state(final: Path, results: Sequence[NotebookResult], per_nb: dict[str, dict[str, Any]], date: str) -> None:
    """index.json, metrics.json and index.html of the run as it stands (each written by rename)."""
    from nbkit import runfolder as rf
    from nbkit.report import write_index

    rf.write_json(final / rf.STATUS_FILE, rf.status_entries(results))
    rf.write_json(final / "metrics.json", {r.name: r.metrics for r in results})
    write_index(final, results, per_nb, name=final.name, date=date)


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
    resume: Path | str | None = None,
) -> tuple[Path, list[NotebookResult]]:
    """Execute notebooks into ``output`` (default ``runs/<timestamp>``); returns the run folder and each result.

    The folder is created when the run starts and keeps every notebook that ended, ok or not (see
    ``nbkit.runfolder``); each result's ``status`` says ok, failed, interrupted or not started.
    ``specs`` empty means every notebook (the CLI asks for ``--all`` explicitly). ``resume``: an
    earlier run folder; only its notebooks that are not ok run again, with the parameters recorded
    there, and its index is rewritten.
    """
    from nbkit import runfolder as rf

    if jobs < 1:
        raise RunError(f"--jobs must be at least 1, got {jobs}")
    now = datetime.now()
    previous: dict[str, dict[str, Any]] = {}
    if resume is not None:
        if specs or parameters or smoke or output is not None:
            raise RunError("--resume DIR re-runs DIR's notebooks with the parameters recorded there; "
                           "do not also name notebooks or give -p, --smoke or --output")
        final, paths, per_nb, record = _plan_resume(resume)
        smoke, kernel = bool(record.get("smoke")), str(record.get("kernel") or kernel)
        previous = rf.read_status(final)
    else:
        paths, per_nb = _plan_new(specs, parameters, smoke)
    if not _kernel_exists(kernel):
        raise RunError(f"Jupyter kernel {kernel!r} is not installed; run `make setup` (it registers the python3 kernel)")
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
        log(f"resuming {final}: {len(paths) - len(todo)} notebook(s) ok, re-running {', '.join(p.stem for p in todo) or 'none'}")
    _write_state(final, ordered(), per_nb, date)
    tmp = make_tmp_beside(final)
    queue = [Job(p, tmp / p.stem, per_nb[p.stem], kernel) for p in todo]
    if jobs > 1:
        queue = longest_first(queue, previous_seconds(final, smoke) or reference_seconds(paths, smoke))
    published: set[int] = set()

    def publish_one(i: int, r: NotebookResult) -> None:
        job = queue[i]
        moved = rf.move_in(job.out_dir, final)
        r.output = moved.get(job.path.name) or (final / job.path.name if r.output and (final / job.path.name).is_file() else None)
        r.html = moved.get(f"{job.path.stem}.html")
        state[job.path.stem] = r
        published.add(i)
        _write_state(final, ordered(), per_nb, date)

    results: list[NotebookResult | None] = [None] * len(queue)
    try:
        execute_jobs(queue, n_jobs=jobs, progress=progress, log=log, on_done=publish_one, results=results)
    except BaseException as exc:
        keep_unfinished(queue, results, published, publish_one, interrupted=not isinstance(exc, rf.OutputError))
        with contextlib.suppress(rf.OutputError, OSError):
            _write_state(final, ordered(), per_nb, date)
        shutil.rmtree(tmp, ignore_errors=True)
        done = sum(r.ok for r in state.values())
        log(f"  {done} of {len(paths)} notebooks ok are kept in {final} (index.html says what happened to each); "
            f"`nbkit run --resume {final}` re-runs the others")
        raise
    shutil.rmtree(tmp, ignore_errors=True)
    final_results = ordered()
    seconds = {p.stem: float(previous[p.stem]["seconds"]) for p in paths
               if previous.get(p.stem, {}).get("status") == "ok" and state[p.stem].ok}
    seconds.update({r.name: round(r.seconds, 1) for r in final_results if r.ok and r.name in {j.path.stem for j in queue}})
    rf.write_json(final / TIMINGS, {"smoke": smoke, "jobs": jobs, "seconds": seconds})
    if all(r.ok for r in final_results):
        _attach_screenshots(final, final)
    _write_state(final, final_results, per_nb, date)
    return final, final_results


def keep_unfinished(queue: Sequence[Job], results: list[NotebookResult | None], published: set[int], publish_one,
                     *, interrupted: bool) -> None:
    """After an interrupt or a refused write: publish what the workers left (a notebook saved up to the
    cell that was running is ``interrupted``; one that never started stays ``not started``)."""
    from nbkit import runfolder as rf

    for i, job in enumerate(queue):
        if i in published:
            continue
        r = results[i]
        if r is None and (job.out_dir / job.path.name).is_file():
            name = job.path.stem
            r = NotebookResult(name, False, 0.0, job.out_dir / job.path.name,
                               error=f"{name}: interrupted" if interrupted else f"{name}: stopped (the output folder refused a write)",
                               status=rf.INTERRUPTED)
        if r is None:
            continue
        if interrupted and r.status == rf.FAILED and "KeyboardInterrupt" in (r.error or ""):
            r.status = rf.INTERRUPTED
        with contextlib.suppress(rf.OutputError, OSError):
            publish_one(i, r)
