"""Executing one notebook headless: its kernel, its parameters, and what came out.

``execute`` runs a notebook with papermill into a staging folder (executed ``.ipynb``, ``.html``, the
metrics it recorded) and always returns a :class:`NotebookResult`: a failing cell, a dead kernel (the
OOM killer, ``kill -9``: ``kernel died (signal 9, SIGKILL)``) or an unwritable page is a failed
result, not an exception. Only a folder that stops taking files (:class:`~nbkit.runfolder.OutputError`)
and an interrupt propagate, since they stop the whole run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.record import read_notebook
from nbkit.report import export_html
from nbkit.runfolder import KERNEL_LOG_SUFFIX, LOG_DIR_ENV, RUN_DIR_ENV, is_disk_error, output_error


# jsonschema (under nbformat, papermill, nbconvert) imports rfc3987_syntax when it is installed, for
# two URI formats notebooks never use; that import builds a grammar and costs seconds in every
# process that reads a notebook (most of an `nbkit run` start-up, once more per --jobs worker).
# jsonschema treats it as optional. Only nbkit's own command-line processes (and their pool
# workers) make it look absent: a program that merely imports this module keeps its modules.
def skip_uri_grammar() -> None:
    """Make jsonschema's optional ``rfc3987_syntax`` look absent in this process (call before nbformat
    loads)."""
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


@dataclass
class NotebookResult:
    """One notebook's outcome in a run: where its files are, what it recorded, and why it failed."""

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


def kernel_exists(name: str) -> bool:
    """Whether the Jupyter kernel ``name`` is installed (checked before a run starts)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        return False
    return True


# Set for the kernel of every headless run: no widget frontend (live figures keep one output each,
# updated in place) and plotly's mime type only for figures a cell displays itself (no plotly.js
# embedded in the notebook; the HTML page loads it once).
HEADLESS_KERNEL_ENV = {"NBKIT_HEADLESS": "1", "PLOTLY_RENDERER": "plotly_mimetype", "PYTHONFAULTHANDLER": "1"}


def kernel_manager_with_env(extra: dict[str, str], watch: dict[str, Any] | None = None):
    """A jupyter_client kernel manager class whose kernels start with ``extra`` added to the environment.

    ``watch``: filled with the kernel's ``process`` once it starts (and its pid written to
    ``watch["pid_file"]`` when given), so a dead kernel's exit status can be reported. With
    ``watch["log_file"]`` the kernel's own stdout and stderr (not its cells' output, which reaches the
    notebook) go to that file: ipykernel's and tornado's messages, a native library writing to fd 2
    before the kernel captures it. Without it they would be interleaved with the run's own progress and
    errors, e.g. the ZMQ traceback a kernel can print while it is shut down on SIGTERM.
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
            return os.path.join(tempfile.gettempdir(), f"nbkit-kernel-{uuid.uuid4().hex[:12]}")

        # jupyter_client types this coroutine as a plain function returning None.
        async def start_kernel(self, **kw):  # type: ignore[override]
            kw["env"] = {**kw.get("env", os.environ), **extra}
            log = watch.get("log_file") if watch is not None else None
            if log is None:
                started = await super().start_kernel(**kw)
            else:
                # The child holds its own copy of the descriptor; this process's closes once it started.
                with open(log, "ab") as fh:
                    started = await super().start_kernel(**{**kw, "stdout": fh, "stderr": fh})
            process = getattr(self.provisioner, "process", None)
            if watch is not None and process is not None:
                watch["process"] = process  # its exit status names how a dead kernel died
                if watch.get("pid_file"):
                    # A worker killed with SIGKILL cannot end its kernel nor remove its files; the parent
                    # reads this to do both.
                    Path(watch["pid_file"]).write_text(
                        json.dumps(
                            {
                                "pid": process.pid,
                                "connection_file": self.connection_file,
                                "ipc": self.ip if self.transport == "ipc" else None,
                                "log": watch.get("log_file"),
                            }
                        ),
                        encoding="utf-8",
                    )
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
    run_dir: Path | None = None,
) -> NotebookResult:
    """Execute one notebook into ``out_dir`` (executed .ipynb + .html + recorded metrics).

    ``plotly_js``: where the HTML page loads plotly.js from (see ``nbkit.report.export_html``).
    ``run_dir``: the folder the notebook's files are published into once it ends; its kernel sees it as
    ``$NBKIT_RUN_DIR`` (notebook 00 reads the runs beside it). The kernel writes the logs worth keeping
    (a local LM server's) into ``out_dir`` (``$NBKIT_LOG_DIR``), so they are published with the notebook;
    the kernel's own stdout and stderr (outside its cells) become ``NAME.kernel.log`` there, if any.
    """
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    out_nb = out_dir / path.name
    env = {**HEADLESS_KERNEL_ENV, LOG_DIR_ENV: str(out_dir.resolve())}
    if run_dir is not None:
        env[RUN_DIR_ENV] = str(run_dir)
    # The kernel's own messages are written in the temp folder, not on the output's disk: a kernel must not
    # hold a file open there (a full disk would fail its writes; a disk could not be remounted read-only).
    kernel_log = Path(tempfile.gettempdir()) / f"nbkit-kernel-{uuid.uuid4().hex[:12]}.log"
    watch: dict[str, Any] = {"pid_file": str(out_dir / KERNEL_PID_FILE), "log_file": str(kernel_log)}
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
        if is_disk_error(
            exc
        ):  # the output folder stopped taking files: the whole run stops, not this notebook
            raise output_error(Path(exc.filename or out_dir), exc) from None
        error = f"{path.stem}: {type(exc).__name__}: {exc}"
    except Exception as exc:
        dead = (
            _kernel_death(path, out_nb, watch.get("process"), _last_message(kernel_log))
            if type(exc).__name__ == "DeadKernelError"
            else None
        )
        error = dead or f"{path.stem}: {type(exc).__name__}: {exc}"
    finally:
        with contextlib.suppress(OSError):  # a read-only or full disk is reported above, not here
            (out_dir / KERNEL_PID_FILE).unlink(missing_ok=True)
        keep_kernel_log(kernel_log, out_dir, path.stem)
    seconds = time.perf_counter() - start
    if not out_nb.is_file():
        return NotebookResult(
            path.stem, False, seconds, None, error=error or f"{path.stem}: no executed notebook was written"
        )
    metrics = read_notebook(out_nb)
    page = out_dir / f"{path.stem}.html"
    html_path: Path | None = page
    try:
        export_html(out_nb, page, plotly_js)
    except Exception as exc:  # a failed notebook's page is a courtesy; a finished one's is not
        if is_disk_error(exc):
            raise output_error(Path(exc.filename or page), exc) from None
        if error is None:
            raise
        html_path = None
        error += f" (and its HTML page failed: {type(exc).__name__}: {exc})"
    return NotebookResult(path.stem, error is None, seconds, out_nb, html_path, metrics, error)


KERNEL_PID_FILE = ".kernel.pid"  # in a notebook's staging folder while its kernel runs


def _kernel_death(path: Path, out_nb: Path, process, said: str = "") -> str | None:
    """``NAME: kernel died (signal 9, SIGKILL) in cell N ('…')`` when the notebook's kernel died, else
    None; ``said``: what it last wrote to its own log (``_last_message``), where a crash says why (the
    kernel's fault handler writes "Fatal Python error: …" there)."""
    if process is None:
        return None
    try:
        code = process.wait(timeout=5)
    except Exception:  # still running: the failure was something else
        return None
    if code is None or code == 0:
        return None
    if code < 0:
        try:
            how = f"signal {-code}, {signal.Signals(-code).name}"
        except ValueError:
            how = f"signal {-code}"
    else:
        how = f"exit status {code}"
    if said:
        said = f"; it last said {said!r} ({path.stem}{KERNEL_LOG_SUFFIX})"
    return f"{path.stem}: kernel died ({how}){_running_cell(out_nb)}{said}"


def keep_kernel_log(log: Path, out_dir: Path, stem: str) -> None:
    """Move the kernel's own log into ``out_dir`` as ``STEM.kernel.log`` (published with the notebook)
    when the kernel wrote anything; the temp folder keeps nothing of it either way."""
    try:
        if log.stat().st_size > 0:
            shutil.copyfile(log, out_dir / f"{stem}{KERNEL_LOG_SUFFIX}")
    except OSError:  # no log (the kernel never started), or the output's disk refused it (the run says so)
        pass
    with contextlib.suppress(OSError):
        log.unlink(missing_ok=True)


def _last_message(log: Path) -> str:
    """The line of the kernel's own log that says most about how it ended, or "" when it said nothing."""
    try:
        lines = [ln.strip() for ln in log.read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        return ""
    said = [ln for ln in lines if ln]
    if not said:
        return ""
    # The first line of the last message block: a fault handler's "Fatal Python error: …" comes before
    # its stack, which would otherwise be all that shows.
    return next((ln for ln in reversed(said) if ln.startswith("Fatal Python error")), said[-1])[:120]


def _running_cell(out_nb: Path) -> str:
    """`` in cell N ('first line')`` for the cell papermill marked running when the kernel died."""
    try:
        import nbformat

        nb = nbformat.read(out_nb, as_version=4)
    except Exception:  # no notebook saved yet: the kernel died before the first cell
        return ""
    # papermill marks every cell it reached (start_time) and completes even the one the kernel died in.
    reached = [
        c
        for c in nb.cells
        if c.cell_type == "code" and c.get("metadata", {}).get("papermill", {}).get("start_time")
    ]
    if not reached:
        return ""
    cell = reached[-1]
    first = cell.source.strip().splitlines()[:1]
    # Its place among the code cells, which is the execution count papermill's linear run gives it: the
    # count itself is missing when the kernel died before it replied.
    number = [c for c in nb.cells if c.cell_type == "code"].index(cell) + 1
    return f" in cell {number}" + (f" ({first[0][:60]!r})" if first else "")


class _NotKernelDeath(logging.Filter):
    """Drop nbclient's own "Kernel died …" log line: the run reports the death once, with its signal."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.getMessage()).startswith("Kernel died")


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
    run_dir: Path | None = None


def run_job(job: Job, progress: bool) -> NotebookResult:
    """Execute ``job`` into its own folder (created here)."""
    job.out_dir.mkdir(parents=True, exist_ok=True)
    return execute(
        job.path,
        job.out_dir,
        job.parameters,
        kernel=job.kernel,
        progress=progress,
        timeout=job.timeout,
        plotly_js=job.plotly_js,
        run_dir=job.run_dir,
    )
