"""Several notebooks at once: a pool of worker processes, one per notebook, ``jobs`` at a time.

Each worker, and the kernel it starts, gets its share of the usable cores as thread-pool sizes
(``OMP_NUM_THREADS`` and friends), so two notebooks on two cores do not each start two threads. They
are *not* pinned to a core: a notebook that runs several single-threaded processes (notebook 03's
one-llama.cpp-server-per-core pool, notebook 02's ranks) then uses a core the other worker leaves
idle, where pinning would leave it idle while a long notebook queues on the other. A worker that
dies fails only its own notebook, and its kernel is ended. While notebooks run, a progress line per
running notebook (its cell, section and elapsed time) is printed every ``PROGRESS_EVERY_S`` seconds.
"""

from __future__ import annotations

import contextlib
import glob
import json
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from nbkit.execute import KERNEL_PID_FILE, Job, NotebookResult, keep_kernel_log, run_job, skip_uri_grammar
from nbkit.procs import CORE_SHARE_ENV, exit_reason, kill_group, usable_cores
from nbkit.runfolder import INTERRUPTED, OutputError, is_disk_error, output_error

# A pool's workers run with no progress bar of their own (their bars would interleave): the pool says
# where each running notebook is, at least this often.
PROGRESS_EVERY_S = 10.0

# Thread-pool sizes the numeric libraries read at start-up; a pool worker's kernel gets its share.
THREAD_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)


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
    """Size this process's (and its kernels') thread pools to its share of the cores; no affinity. The share
    is also what a kernel's replicate loops take as their cores (``nbkit.procs.core_share``)."""
    for name in (*THREAD_ENV, CORE_SHARE_ENV):
        os.environ[name] = str(len(cores))


def execute_jobs(
    jobs: Sequence[Job],
    *,
    n_jobs: int = 1,
    progress: bool = True,
    log: Callable[[str], Any] = print,
    on_done: Callable[[int, NotebookResult], Any] | None = None,
    results: list[NotebookResult | None] | None = None,
    progress_every: float = PROGRESS_EVERY_S,
) -> list[NotebookResult | None]:
    """Execute ``jobs`` one after another (``n_jobs`` 1) or ``n_jobs`` at a time, each in its own
    worker process.

    Returns one result per job, in the order of ``jobs``; a notebook that fails, or whose worker or
    kernel dies, is a failed result, not an exception. ``on_done(i, result)`` is called in this
    process as each job ends (the run folder publishes it then). An interrupt (or an exception from
    ``on_done``) ends the workers and their kernels before it propagates; pass ``results`` (a list
    of None, one per job) to see, afterwards, which jobs had ended. ``progress``: one notebook at a time
    shows papermill's bar; several log a line per running notebook every ``progress_every`` seconds.
    """
    results = [None] * len(jobs) if results is None else results
    if n_jobs <= 1 or len(jobs) <= 1:
        for i, job in enumerate(jobs):
            log(f"▶ {job.label or job.path.stem}  parameters={job.parameters}")
            r = run_job(job, progress)
            results[i] = r
            log(_done_line(job, r))
            if on_done is not None:
                on_done(i, r)
        return results
    pool = _WorkerPool(jobs, min(n_jobs, len(jobs)), log, progress_every if progress else None)
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

    def __init__(
        self, jobs: Sequence[Job], n: int, log: Callable[[str], Any], progress_every: float | None = None
    ):
        self.jobs, self.n, self.log, self.progress_every = list(jobs), n, log, progress_every
        self.started: dict[int, float] = {}  # job index -> when its worker started (monotonic)
        self.shares = core_shares(n)
        # fork: workers start with papermill and nbconvert already imported (importing them costs
        # seconds per worker with spawn). This process has no kernel or thread of its own yet; spawn where
        # fork is missing.
        self.ctx: Any = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        self.running: dict[
            int, tuple[Any, Any, int]
        ] = {}  # job index -> (process, receiving end, core-share slot)

    def run(self, results: list[NotebookResult | None], on_done) -> None:
        self.log(f"running {len(self.jobs)} notebooks, {self.n} at a time; cores per worker: {self.shares}")
        for job in self.jobs:
            self.log(f"▶ queued {job.label or job.path.stem}  parameters={job.parameters}")
        queue = list(range(len(self.jobs)))
        free = list(range(self.n))
        next_report = time.monotonic() + (self.progress_every or 0.0)
        while queue or self.running:
            while queue and free:
                self._start(queue.pop(0), free.pop(0))
            if self.progress_every is not None and time.monotonic() >= next_report:
                for i in sorted(self.running):
                    self.log(self._progress_line(i))
                next_report = time.monotonic() + self.progress_every
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
        proc = self.ctx.Process(
            target=_worker_main,
            args=(self.jobs[i], self.shares[slot % len(self.shares)], send),
            name=f"nbkit-worker-{i}",
        )
        proc.start()
        send.close()
        self.running[i] = (proc, recv, slot)
        self.started[i] = time.monotonic()

    def _progress_line(self, i: int) -> str:
        """``  … NAME 1:05: cell 7 of 22 (3. The ladder)``: where job ``i``'s notebook is, from the notebook
        papermill saves as each cell starts (it marks that cell running)."""
        job = self.jobs[i]
        elapsed = int(time.monotonic() - self.started.get(i, time.monotonic()))
        where = running_cell(job.out_dir / job.path.name) or "starting its kernel"
        return f"  … {job.label or job.path.stem} {elapsed // 60}:{elapsed % 60:02d}: {where}"

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
            name = job.path.stem
            return NotebookResult(
                name,
                False,
                0.0,
                _staged(job),
                error=f"{name}: worker died ({exit_reason(proc.exitcode)}); its kernel was ended",
            )
        proc.join(timeout=30)
        conn.close()
        if isinstance(got, BaseException):
            raise got  # the output folder stopped taking files (OutputError): the run stops
        return got

    def _end_kernel(self, job: Job) -> None:
        """End the kernel (and its process group) a dead worker left behind."""
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
        if info.get("log"):
            keep_kernel_log(Path(info["log"]), job.out_dir, job.path.stem)
        pid_file.unlink(missing_ok=True)

    def stop(
        self, results: list[NotebookResult | None], settle_s: float = 10.0, grace_s: float = 15.0
    ) -> None:
        """End every running worker: let those whose kernel was interrupted (Ctrl-C reaches the kernels)
        send their result for ``settle_s``, SIGTERM the rest (they unwind, papermill saves the
        notebook and ends its kernel), SIGKILL what is left after ``grace_s``, then end leftover kernels."""
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


def running_cell(notebook: Path) -> str:
    """``cell N of M (section)`` for the cell papermill marked running in ``notebook`` (the section: the
    last heading above it); once every code cell is done, that its page is being written; "" before the
    first cell starts (or while the file is being saved)."""
    try:
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    code, section, done = 0, "", 0
    total = sum(c.get("cell_type") == "code" for c in cells)
    for cell in cells:
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        if cell.get("cell_type") == "markdown":
            headings = [ln.lstrip("#").strip() for ln in text.splitlines() if ln.startswith("#")]
            section = headings[-1] if headings else section
        elif cell.get("cell_type") == "code":
            code += 1
            status = cell.get("metadata", {}).get("papermill", {}).get("status")
            if status == "running":
                shown = section if len(section) <= 60 else section[:59] + "…"
                return f"cell {code} of {total}" + (f" ({shown})" if shown else "")
            done += status == "completed"
    return f"all {total} cells done, writing its page" if total and done == total else ""


def _staged(job: Job) -> Path | None:
    """The notebook papermill saved so far in the job's folder (after every cell), if any."""
    nb = job.out_dir / job.path.name
    return nb if nb.is_file() else None


def _worker_main(job: Job, share: list[int], conn) -> None:
    """A worker process: one notebook, its result (or the OutputError that stopped it) sent back."""
    # The parent ends workers with SIGTERM when the run is interrupted: unwind like Ctrl-C so
    # papermill saves the notebook and shuts the kernel down. SIGINT from the terminal is the parent's.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    skip_uri_grammar()  # a spawned worker starts without the parent's sys.modules
    share_threads(share)
    name = job.path.stem
    try:
        result: Any = run_job(job, False)
    except KeyboardInterrupt:
        result = NotebookResult(
            name, False, 0.0, _staged(job), error=f"{name}: interrupted", status=INTERRUPTED
        )
    except OutputError as exc:
        result = exc
    except OSError as exc:
        result = (
            output_error(Path(exc.filename or job.out_dir), exc)
            if is_disk_error(exc)
            else NotebookResult(
                name, False, 0.0, _staged(job), error=f"{name}: worker failed: {type(exc).__name__}: {exc}"
            )
        )
    except Exception as exc:
        result = NotebookResult(
            name, False, 0.0, _staged(job), error=f"{name}: worker failed: {type(exc).__name__}: {exc}"
        )
    with contextlib.suppress(OSError, ValueError):
        conn.send(result)
        conn.close()


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _done_line(job: Job, r: NotebookResult) -> str:
    name = job.label or job.path.stem
    return f"  {'✔' if r.ok else '✘'} {name} in {r.seconds:.1f}s" + ("" if r.ok else f"\n    {r.error}")
