"""Independent replicates of an experiment (its seeds), in order, in parallel where there is room.

An experiment whose units are independent — each a function of its seed alone, ``one(unit)`` a
module-level function so it pickles — hands them to :func:`replicate`: they run in order and after each
unit ``stop(results so far)`` says whether the claims they feed are decided (the registry's stopper).
Where they run:

* **in this process**, one after another, when the context has one usable core (a ``--jobs`` run gives
  each kernel its share), its device is not the CPU, or the units want the live figure;
* **in worker processes**, one per usable core, when it has more: each worker builds what a unit needs
  once (its own context) and runs units with one torch thread, as a unit does in this process;
* **on a Dask cluster** when the context names a scheduler (``nbkit run --scheduler tcp://HOST:PORT``, or a
  notebook's ``DASK_SCHEDULER`` parameter): each unit is a task.

Results are taken in unit order and the stop rule sees the same prefix in every mode; units that ran past
the stopping point are dropped. Each unit is deterministic by its seed and runs one thread wherever it
runs, so the results — and the ledger — are the same serially, in processes or on Dask.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from nbkit.errors import RunError
from nbkit.extras import install_line
from nbkit.procs import core_share

U = TypeVar("U")
R = TypeVar("R")

SCHEDULER_ENV = "NBKIT_DASK_SCHEDULER"  # set by `nbkit run --scheduler`; a notebook parameter wins


@dataclass(frozen=True)
class Where:
    """Where a replicate loop runs: ``"this process"``, ``"processes"`` (``workers`` of them) or
    ``"dask"`` (at ``address``)."""

    mode: str
    workers: int = 1
    address: str = ""

    def __str__(self) -> str:
        if self.mode == "dask":
            return f"Dask at {self.address}"
        if self.mode == "processes":
            return f"{self.workers} worker processes"
        return "this process"


def where(ctx: Any, *, parallel: bool = True) -> Where:
    """Where ``ctx``'s replicate loops run (see the module docstring); ``parallel=False`` here or on the
    context keeps them in this process."""
    parallel = parallel and getattr(ctx, "parallel", True)
    address = getattr(ctx, "scheduler", "") or os.environ.get(SCHEDULER_ENV, "")
    if address and parallel:
        return Where("dask", address=address)
    cores = core_share()
    on_cpu = str(getattr(ctx, "device", "cpu")) in ("cpu", "auto") and str(ctx.torch_device) == "cpu"
    if parallel and cores > 1 and on_cpu:
        return Where("processes", workers=cores)
    return Where("this process")


def replicate(
    units: Sequence[U],
    one: Callable[[U], R],
    *,
    stop: Callable[[list[R]], bool],
    at: Where,
    ctx: Any,
    slug: str,
    worker_setup: tuple[Callable[..., None], tuple] | None = None,
) -> list[R]:
    """``one(unit)`` for the units in order until ``stop(results)`` after a unit says so (or they run out);
    the results, in unit order. Outside this process the units' own CPU-seconds are added to ``ctx``'s
    account of experiment ``slug`` (:meth:`nbkit.experiment.Context.ran_elsewhere`); ``worker_setup``
    (``initializer, initargs``) prepares each worker process once. A unit that fails fails the loop with
    its own error."""
    results: list[R] = []
    if at.mode == "this process":
        for unit in units:
            results.append(one(unit))
            if stop(results):
                break
        return results
    timed = functools.partial(_timed, one)
    with contextlib.ExitStack() as stack:
        if at.mode == "dask":
            from distributed import as_completed

            client = stack.enter_context(dask_client(at.address))  # the connection, not the cluster
            done = as_completed(loop=client.loop)  # the client's own loop: it is not the default client

            def submit(u: U) -> Any:
                future = client.submit(timed, u, pure=False)
                done.add(future)
                return future

            wait_any: Callable[[], Any] = lambda: next(done)  # noqa: E731
            width = max(1, sum(client.nthreads().values()))
        else:
            init, args = worker_setup or (_nothing, ())
            pool = stack.enter_context(worker_pool(at.workers, init, args))
            submit = lambda u: pool.submit(timed, u)  # noqa: E731
            wait_any = lambda: concurrent.futures.wait(  # noqa: E731
                list(pending.values()), return_when=concurrent.futures.FIRST_COMPLETED
            )
            width = at.workers
        pending: dict[int, Any] = {}  # submitted, not finished
        finished: dict[int, Any] = {}  # finished ahead of an earlier unit (its error raised in turn)
        nxt = 0
        try:
            while len(results) < len(units):
                # Every worker busy, at most one round of units past the first one not yet judged: a unit
                # that finishes before an earlier one waits for it, and a free worker starts the next.
                while nxt < len(units) and len(pending) < width and nxt < len(results) + 2 * width:
                    pending[nxt] = submit(units[nxt])
                    nxt += 1
                wait_any()
                for i in [i for i, future in pending.items() if future.done()]:
                    finished[i] = pending.pop(i)
                while len(results) in finished:
                    result, cpu_s = finished.pop(len(results)).result()
                    ctx.ran_elsewhere(slug, str(at), cpu_s)
                    results.append(result)
                    if stop(results):
                        return results
        finally:
            for future in pending.values():  # units past the stopping point: not needed
                future.cancel()
    return results


def _timed(one: Callable[[U], R], unit: U) -> tuple[R, float]:
    """``one(unit)`` and the CPU-seconds it took in the process that ran it."""
    with compute_heap():
        start = time.process_time()
        return one(unit), time.process_time() - start


# glibc's mallopt parameters, and the environment variables that fix them at start-up.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
HEAP_ENV = {M_TRIM_THRESHOLD: "MALLOC_TRIM_THRESHOLD_", M_MMAP_THRESHOLD: "MALLOC_MMAP_THRESHOLD_"}
GLIBC_DEFAULT = 128 * 1024  # both thresholds' starting value, and what a fixed one stays at
# What glibc's own adaptive thresholds grow to (the 64-bit maximum for mmap, twice that for trimming).
COMPUTE = {M_MMAP_THRESHOLD: 32 * 1024 * 1024, M_TRIM_THRESHOLD: 64 * 1024 * 1024}


@contextlib.contextmanager
def compute_heap() -> Iterator[None]:
    """glibc's heap as an unconfigured process has it, for one unit, where the environment fixed it.

    Dask's nanny starts every worker with ``MALLOC_TRIM_THRESHOLD_=65536`` (its
    ``distributed.nanny.pre-spawn-environ``), which also freezes glibc's mmap threshold at 128 KiB: each
    tensor above that is a fresh mmap whose pages fault in one by one, and a KG seed spends more time in
    the kernel than training (measured: 88.8 s wall, 52.3 s of it system time, 20.7M page faults for one
    ablation seed, against 33.4 s, 1.7 s and 0.24M with the variable unset). For the unit the thresholds
    are where glibc's adaptive ones settle; after it, back to what the environment set. Nothing is
    changed where neither variable is set or the C library is not glibc."""
    fixed = {param: os.environ.get(name) for param, name in HEAP_ENV.items()}
    libc = _glibc() if any(v is not None for v in fixed.values()) else None
    if libc is None:
        yield
        return
    for param, size in COMPUTE.items():
        libc.mallopt(param, size)
    try:
        yield
    finally:
        for param, value in fixed.items():
            restored = int(value) if value is not None and value.strip().isdigit() else GLIBC_DEFAULT
            libc.mallopt(param, restored)


@functools.cache
def _glibc() -> Any:
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") else None
    except OSError:
        return None


def _nothing() -> None:
    return None


@contextlib.contextmanager
def worker_pool(workers: int, initializer: Callable[..., None], initargs: tuple = ()) -> Iterator[Any]:
    """A pool of ``workers`` processes for one replicate loop, each a fresh interpreter (never inheriting
    the kernel's threads or CUDA state) set up once by ``initializer(*initargs)``.

    When the loop ends its workers are killed at once — a unit still running past the stopping point is
    not waited for — and their temp folder, one of their own, is removed with what libraries left there
    (PyG writes each message-passing class's generated module to the temp folder and never removes it).
    A pool kept past its loop would outlive a notebook's kernel: ipykernel spends half a minute
    terminating children at shutdown and the kernel is then killed before its own exit hooks run."""
    from loky import ProcessPoolExecutor

    tmp = tempfile.mkdtemp(prefix="nbkit-workers-")
    pool = ProcessPoolExecutor(
        workers, initializer=initializer, initargs=initargs, env={"TMPDIR": tmp, "TEMP": tmp, "TMP": tmp}
    )
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, kill_workers=True)
        shutil.rmtree(tmp, ignore_errors=True)


def dask_client(address: str, timeout_s: float = 20.0) -> Any:
    """A ``dask.distributed.Client`` for ``address``, or a RunError saying why there is none."""
    try:
        from distributed import Client
    except ImportError:
        raise RunError(f"a Dask scheduler needs dask.distributed: {install_line('cluster')}") from None
    try:
        return Client(address, timeout=timeout_s, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise RunError(
            f"cannot reach the Dask scheduler at {address!r} within {timeout_s:g} s ({type(exc).__name__}: "
            f"{exc})"
        ) from None
