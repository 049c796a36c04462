"""Start N data-parallel ranks as subprocesses, watch them, collect their JSON, never hang.

Why a small spawner instead of ``torchrun``: the notebook needs (a) every check that can fail to
fail *before* a rank starts (port in use, world size the machine cannot host, a ds_config DeepSpeed
would reject), (b) a failing rank named with its exit status and traceback tail, and (c) a hard
timeout after which every rank's whole process group is killed — torchrun's elastic agent restarts
and waits instead. The ranks are started by ``nbkit.procs.Ranks``: each in its own session (process
group), so killing it also kills anything it spawned, and each dies with its parent (a notebook
kernel or a bench stopped by SIGTERM leaves no rank running); ``launch`` always reaps every child
before it returns or raises.

The rank worker (``nbkit.zero.worker``) needs nothing from this spawner but the env:// variables
(``RANK``/``LOCAL_RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT``), so on a cluster it runs
unchanged under ``torchrun`` or DeepSpeed's launcher, from a spec written by
``nbkit.zero.ladder.write_spec`` (``hostfile_command`` writes the ``deepspeed --hostfile`` line;
``tests/unit/test_zero_torchrun.py`` runs a two-node ``torchrun`` job on loopback).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.errors import UsageError
from nbkit.procs import Ranks, exit_reason, free_port
from nbkit.zero.dsconfig import build_config


class LaunchError(UsageError):
    """A problem found before any rank started (bad port, world size, device, out_dir, config)."""


class RankFailed(RuntimeError):
    """A rank died or reported an error; ``rank``, ``reason`` and ``traceback_tail`` say which and why;
    ``ready_s`` when every rank had reported ready (None: the failure came during start-up)."""

    ready_s: float | None = None

    def __init__(self, rank: int, reason: str, traceback_tail: str = "", partial: dict | None = None):
        self.rank, self.reason, self.traceback_tail = rank, reason, traceback_tail
        self.partial = partial or {}
        tail = traceback_tail.strip().splitlines()[-1] if traceback_tail.strip() else ""
        super().__init__(
            f"rank {rank} failed: {reason}" + (f" — {tail}" if tail and tail not in reason else "")
        )


class RankTimeout(RankFailed):
    """The run exceeded its timeout; every rank was killed (the message names where each one was)."""

    def __init__(self, rank: int, reason: str, traceback_tail: str = "", partial: dict | None = None):
        super().__init__(rank, reason, traceback_tail, partial)
        self.args = (f"rank {rank} failed: {reason}",)


def check_port(port: int, host: str = "127.0.0.1") -> None:
    if isinstance(port, bool) or not isinstance(port, int):
        raise LaunchError(
            f"master port: expected an integer in 1024..65535, got {port!r} ({type(port).__name__})"
        )
    if not (1024 <= port <= 65535):
        raise LaunchError(f"master port must be in 1024..65535, got {port}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, int(port)))
        except OSError as exc:
            raise LaunchError(
                f"master port {host}:{port} is already in use ({exc.strerror}); pass port=None to pick a "
                f"free one"
            ) from None


def check_world_size(
    world_size: int, device: str, *, max_ranks_per_core: int = 4, rank_rss_bytes: int = 600 * 2**20
) -> None:
    """Refuse a world size this machine cannot host, before anything starts."""
    import psutil

    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise LaunchError(f"world_size must be a positive integer, got {world_size!r}")
    check_device(device)
    if device.startswith("cuda"):
        import torch

        n = torch.cuda.device_count()
        if world_size > n:
            raise LaunchError(
                f"world_size={world_size} ranks need {world_size} GPUs (one per rank) but this machine has "
                f"{n}"
            )
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if world_size > cores * max_ranks_per_core:
        raise LaunchError(
            f"world_size={world_size} CPU ranks on {cores} core(s) is more than {max_ranks_per_core} per "
            f"core; use ≤ {cores * max_ranks_per_core}"
        )
    need = world_size * rank_rss_bytes
    avail = psutil.virtual_memory().available
    if need > avail:
        raise LaunchError(
            f"world_size={world_size} CPU ranks need ~{need / 2**30:.1f} GiB "
            f"(≈{rank_rss_bytes / 2**20:.0f} MiB each) but only {avail / 2**30:.1f} GiB is available"
        )


def check_device(device: str) -> None:
    """The ranks run on ``cpu`` (gloo) or ``cuda`` (nccl); anything else is refused by name."""
    if not isinstance(device, str) or device not in ("cpu", "cuda"):
        raise LaunchError(f"device: expected 'cpu' or 'cuda' for the ranks, got {device!r}")


def check_out_dir(out_dir: str | Path) -> Path:
    """The run folder must be a directory (or creatable); a file or an unwritable place is named."""
    out = Path(out_dir)
    for parent in [out, *out.parents]:
        if parent.exists() and not parent.is_dir():
            raise LaunchError(f"out_dir {out}: {parent} is a file, not a directory")
        if parent.exists():
            break
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LaunchError(f"out_dir {out}: cannot create it ({exc.strerror})") from None
    if not os.access(out, os.W_OK):
        raise LaunchError(f"out_dir {out}: not writable")
    return out


def check_spec(spec: dict[str, Any], world_size: int) -> None:
    """Everything a rank would trip over, checked before one starts: rungs, steps, every rung's ds_config."""
    rungs = spec.get("rungs")
    if not isinstance(rungs, list) or not rungs:
        raise LaunchError("spec.rungs: expected a non-empty list of rungs")
    steps = spec.get("steps")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise LaunchError(f"spec.steps: expected a positive integer, got {steps!r}")
    for i, rung in enumerate(rungs):
        if not isinstance(rung, dict) or "stage" not in rung:
            raise LaunchError(f"spec.rungs[{i}]: expected an object with a 'stage', got {rung!r}")
        try:
            build_config(rung, spec, world_size)
        except KeyError as exc:
            raise LaunchError(f"spec: missing key {exc.args[0]!r}") from None


@dataclass
class LaunchResult:
    """Per-rank results (``ranks[r]`` is that rank's list of rung dicts) and run facts."""

    ranks: dict[int, list[dict[str, Any]]]
    wall_s: float
    out_dir: Path
    world_size: int
    logs: dict[int, str] = field(default_factory=dict)
    ready_s: float | None = None

    def rows(self) -> list[dict[str, Any]]:
        return [r for rank in sorted(self.ranks) for r in self.ranks[rank]]


def _tail(path: Path, n: int = 3000) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
    return text[-n:]


def _reason(code: int) -> str:
    return exit_reason(code) + (" — the OOM killer sends SIGKILL" if code == -signal.SIGKILL else "")


def launch(
    spec: dict[str, Any],
    *,
    world_size: int = 2,
    device: str = "cpu",
    port: int | None = None,
    timeout_s: float = 300.0,
    out_dir: str | Path | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    poll_s: float = 0.25,
    env: dict[str, str] | None = None,
    on_start: Callable[[dict[int, int]], None] | None = None,
    startup_timeout_s: float = 600.0,
) -> LaunchResult:
    """Run ``nbkit.zero.worker`` on ``world_size`` ranks; return their JSON, or raise naming the rank.

    ``timeout_s`` counts from the moment every rank has reported ready (imports and the process group
    up), so a start-up slowed by a loaded machine is not taken for a hang; until then
    ``startup_timeout_s`` bounds the start-up. ``on_progress`` gets every progress line (rank, rung,
    step, loss …) as ranks write them; ``on_start`` gets ``{rank: pid}`` once every rank is started
    (e.g. for a memory monitor). ``LaunchResult.ready_s`` is when the last rank reported ready.
    ``out_dir`` keeps what the ranks write (JSON, progress, logs); without one they write into a
    temporary folder removed when the launch ends (results and errors carry the logs' tails).
    """
    check_world_size(world_size, device)
    check_spec(spec, world_size)
    if port is None:
        port = free_port()
    else:
        check_port(port)
    if out_dir is None:  # a folder of its own, gone when the launch ends (its results hold the logs' tails)
        with tempfile.TemporaryDirectory(prefix="nbkit-zero-") as own:
            return launch(
                spec,
                world_size=world_size,
                device=device,
                port=port,
                timeout_s=timeout_s,
                out_dir=own,
                on_progress=on_progress,
                poll_s=poll_s,
                env=env,
                on_start=on_start,
                startup_timeout_s=startup_timeout_s,
            )
    out = check_out_dir(out_dir)
    for stale in (
        list(out.glob("rank*.json")) + list(out.glob("rank*.progress.jsonl")) + list(out.glob("rank*.log"))
    ):
        stale.unlink()
    spec = dict(spec, out_dir=str(out), device=device)
    spec_path = out / "spec.json"
    spec_path.write_text(json.dumps(spec))
    base_env = dict(os.environ, **(env or {}))
    base_env.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
    )
    base_env.setdefault("OMP_NUM_THREADS", str(spec.get("threads_per_rank", 1)))
    base_env["PYTHONUNBUFFERED"] = "1"
    if device == "cpu":
        base_env["DS_ACCELERATOR"] = "cpu"
        # glibc raises its mmap threshold after each large free (up to 32 MiB), after which freed
        # tensors stay in the heap and RSS no longer falls when memory is released; a fixed
        # threshold keeps every tensor above 128 KiB in its own mapping, so RSS follows live bytes.
        base_env.setdefault("MALLOC_MMAP_THRESHOLD_", str(128 * 1024))
    ranks = Ranks()
    procs = ranks.procs
    offsets = {r: 0 for r in range(world_size)}
    ready: set[int] = set()
    ready_at: list[float] = []
    t0 = time.perf_counter()

    def pump_progress():
        for r in range(world_size):
            p = out / f"rank{r}.progress.jsonl"
            if not p.exists():
                continue
            with open(p, encoding="utf-8") as fh:
                fh.seek(offsets[r])
                chunk = fh.read()
            complete = chunk[: chunk.rfind("\n") + 1]
            offsets[r] += len(complete.encode("utf-8"))
            for line in complete.splitlines():
                if not line.strip():
                    continue
                d = json.loads(line)
                if d.get("ready"):
                    ready.add(r)
                    if len(ready) == world_size and not ready_at:
                        ready_at.append(time.perf_counter())
                elif on_progress is not None:
                    on_progress(dict(d, rank=r))

    try:
        with ranks:  # leaving it (a result, an error, Ctrl-C) kills and reaps every rank's group
            for r in range(world_size):
                ranks.start(
                    r,
                    [sys.executable, "-m", "nbkit.zero.worker", str(spec_path)],
                    dict(base_env, RANK=str(r), LOCAL_RANK=str(r)),
                    log=out / f"rank{r}.log",
                )
            if on_start is not None:
                on_start({r: p.pid for r, p in procs.items()})
            while True:
                pump_progress()
                codes = ranks.poll()
                # The first rank to fail is the cause; the others usually die of the broken collective.
                bad = ranks.failed(first=lambda k: (_first_failure_time(out, k), k))
                if bad:
                    r = bad.rank
                    raise RankFailed(
                        r,
                        _reason(bad.code) + _reported_error(out, r),
                        _tail(out / f"rank{r}.log"),
                        _partial(out, world_size),
                    )
                if ranks.all_done():
                    break
                now = time.perf_counter()
                if (ready_at and now - ready_at[0] > timeout_s) or (
                    not ready_at and now - t0 > startup_timeout_s
                ):
                    limit = timeout_s if ready_at else startup_timeout_s
                    phase = "after every rank was ready" if ready_at else "of start-up"
                    waiting = [r for r, c in codes.items() if c is None]
                    where = _dump_stacks({r: procs[r] for r in waiting}, out)
                    stuck = [r for r in waiting if where.get(r) and not _in_collective(where[r])]
                    suspect = stuck[0] if stuck else waiting[0]
                    detail = "; ".join(f"rank {r} in {where.get(r) or '?'}" for r in waiting)
                    raise RankTimeout(
                        suspect,
                        f"timed out after {limit:.0f} s {phase}; rank(s) {waiting} still running were killed"
                        + (
                            f"; rank {suspect} was stuck outside any collective"
                            if stuck
                            else "; all waiting in collectives"
                        )
                        + f" [{detail}]",
                        _tail(out / f"rank{suspect}.log"),
                        _partial(out, world_size),
                    )
                time.sleep(poll_s)
            pump_progress()
    except RankFailed as exc:
        exc.ready_s = ready_at[0] - t0 if ready_at else None
        raise

    results: dict[int, list[dict[str, Any]]] = {}
    for r in range(world_size):
        data = json.loads((out / f"rank{r}.json").read_text())
        if not data.get("ok"):
            raise RankFailed(r, data.get("error", "reported failure"), data.get("traceback", ""))
        results[r] = data["results"]
    return LaunchResult(
        results,
        time.perf_counter() - t0,
        out,
        world_size,
        {r: _tail(out / f"rank{r}.log") for r in range(world_size)},
        ready_at[0] - t0 if ready_at else None,
    )


def _dump_stacks(procs: dict[int, subprocess.Popen], out: Path) -> dict[int, str]:
    """SIGUSR1 → each rank's faulthandler writes its stack to its log; return each innermost frame."""
    import re

    sizes = {
        r: (out / f"rank{r}.log").stat().st_size if (out / f"rank{r}.log").exists() else 0 for r in procs
    }
    for p in procs.values():
        try:
            p.send_signal(signal.SIGUSR1)
        except ProcessLookupError:
            pass
    time.sleep(1.0)
    where = {}
    for r in procs:
        try:
            with open(out / f"rank{r}.log", "rb") as fh:
                fh.seek(sizes[r])
                text = fh.read().decode(errors="replace")
        except FileNotFoundError:
            continue
        m = re.search(r'most recent call first\):\s*\n\s*File "([^"]+)", line (\d+) in (\S+)', text)
        if m:
            where[r] = f"{m.group(3)} ({m.group(1).rsplit('site-packages/', 1)[-1]}:{m.group(2)})"
    return where


def _in_collective(frame: str) -> bool:
    return any(
        k in frame
        for k in (
            "torch/distributed",
            "deepspeed/comm",
            "deepspeed/runtime/zero",
            "all_reduce",
            "barrier",
            "wait",
        )
    )


def _first_failure_time(out: Path, rank: int) -> float:
    p = out / f"rank{rank}.json"
    try:
        data = json.loads(p.read_text())
        if data.get("ok") is False:
            return p.stat().st_mtime
    except (FileNotFoundError, json.JSONDecodeError):
        pass
    # A rank killed by a signal writes nothing: treat it as the earliest failure.
    return 0.0


def _reported_error(out: Path, rank: int) -> str:
    try:
        data = json.loads((out / f"rank{rank}.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return ""
    return f": {data['error']}" if data.get("error") else ""


def _partial(out: Path, world_size: int) -> dict[int, list]:
    got = {}
    for r in range(world_size):
        try:
            got[r] = json.loads((out / f"rank{r}.json").read_text()).get("results", [])
        except (FileNotFoundError, json.JSONDecodeError):
            pass
    return got


def hostfile_command(
    hostfile: str | Path, spec_path: str | Path, *, master_addr: str, master_port: int = 29500
) -> list[str]:
    """The ``deepspeed --hostfile`` command that runs the same worker across machines.

    DeepSpeed's launcher reads ``hostname slots=N`` lines and starts ranks over pdsh/ssh with
    RANK/WORLD_SIZE/MASTER_* set, which is all ``nbkit.zero.worker`` needs.
    """
    path = Path(hostfile)
    if not path.is_file():
        raise LaunchError(f"{path}: hostfile not found")
    for i, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].startswith("slots=") or not parts[1][6:].isdigit():
            raise LaunchError(f"{path}:{i}: expected 'hostname slots=N', got {line!r}")
    return [
        "deepspeed",
        "--hostfile",
        str(path),
        "--master_addr",
        master_addr,
        "--master_port",
        str(master_port),
        "--module",
        "nbkit.zero.worker",
        str(spec_path),
    ]
