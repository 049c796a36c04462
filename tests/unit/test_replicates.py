"""Independent replicates run in order and stop on the same prefix in this process, in worker processes and
on a Dask cluster: the same results whichever way they ran, their CPU-seconds counted where they ran."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

from nbkit.experiment import Context
from nbkit.replicates import Where, replicate, where


def unit(seed: int) -> float:
    """A deterministic unit of work: a function of its seed alone (module-level, so it pickles)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return float(sum(math.sin(x) for x in rng.random(20_000)))


def stop_after_four(done: list[float]) -> bool:
    return len(done) >= 4


def _run(at: Where, ctx: Context) -> list[float]:
    return replicate(list(range(10)), unit, stop=stop_after_four, at=at, ctx=ctx, slug="x")


def test_in_processes_the_same_results_and_the_same_stop_as_serially():
    with Context("cpu") as ctx:
        serial = _run(Where("this process"), ctx)
        parallel = _run(Where("processes", workers=2), ctx)
    assert serial == parallel and len(serial) == 4
    assert ctx.elsewhere["x"][0] == "2 worker processes" and ctx.elsewhere["x"][1] > 0


def test_on_a_dask_cluster_the_same_results():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as c:
        with Context("cpu", scheduler=c.scheduler_address) as ctx:
            at = where(ctx)
            assert at.mode == "dask" and at.address == c.scheduler_address
            on_dask = _run(at, ctx)
    with Context("cpu") as ctx:
        assert on_dask == _run(Where("this process"), ctx)


def test_where_a_loop_runs(monkeypatch):
    ctx = Context("cpu")
    assert where(ctx, parallel=False).mode == "this process"
    assert where(Context("cpu", scheduler="tcp://h:1")).mode == "dask"
    from nbkit.procs import CORE_SHARE_ENV, usable_cores

    monkeypatch.delenv(CORE_SHARE_ENV, raising=False)
    assert where(ctx).mode == ("processes" if len(usable_cores()) > 1 else "this process")
    # A `--jobs` run's kernel with a share of one core keeps its loops in its own process.
    monkeypatch.setenv(CORE_SHARE_ENV, "1")
    assert where(ctx).mode == "this process"


def test_a_failing_unit_fails_the_loop_with_its_own_error():
    def bad(seed: int) -> float:
        raise ValueError(f"unit {seed} failed")

    with pytest.raises(ValueError, match="unit 0 failed"), Context("cpu") as ctx:
        replicate([0, 1], bad, stop=stop_after_four, at=Where("this process"), ctx=ctx, slug="x")


HEAP_PROBE = """
import resource, sys
import numpy as np
from nbkit.replicates import compute_heap

def churn():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(400):
        a = np.ones(1 << 17)  # 1 MiB: above the 128 KiB a fixed mmap threshold stays at, below a huge page
        del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

plain = churn()
with compute_heap():
    inside = churn()
after = churn()
print(plain, inside, after)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_a_unit_runs_on_glibcs_adaptive_heap_where_dasks_worker_environment_fixed_it():
    """Dask's nanny sets MALLOC_TRIM_THRESHOLD_, so each large tensor is a fresh mmap that faults in page
    by page; a unit runs with glibc's adaptive thresholds, and the worker gets Dask's back afterwards."""
    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536"}
    out = subprocess.run(
        [sys.executable, "-c", HEAP_PROBE], env=env, capture_output=True, text=True, check=True
    )
    plain, inside, after = map(int, out.stdout.split())
    assert plain > 100_000  # ~1,000 pages × 200 allocations under Dask's setting
    assert inside < plain / 20
    assert after > plain / 2  # restored
    env.pop("MALLOC_TRIM_THRESHOLD_")
    out = subprocess.run(
        [sys.executable, "-c", HEAP_PROBE], env=env, capture_output=True, text=True, check=True
    )
    assert max(map(int, out.stdout.split())) < plain / 20  # unset: glibc adapts on its own, nothing changed
