"""Child processes, in one place: free ports, usable cores, process groups, rank launch, ending them.

Everything nbkit starts that may start processes of its own (ZeRO ranks, the audit's DDP ranks,
notebook workers) goes through here, so the same three rules hold everywhere:

* each child runs in its **own session** (process group), so ending it ends whatever it started;
* each child **dies with its parent** (Linux ``PR_SET_PDEATHSIG``): a parent killed by SIGKILL, or a
  bench stopped by SIGTERM before its clean-up ran, leaves no rank behind;
* a child that died is described by **how** it died (``killed by SIGKILL (signal 9)``, ``exited with
  status 1``), the words the user sees.

Why hand-written: ``subprocess`` has no parent-death signal, and psutil ends processes but does not
start them; torchrun's elastic agent restarts failed ranks instead of reporting them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (the OS picks it; the caller binds it soon after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def usable_cores() -> list[int]:
    """The CPU ids this process may run on (its affinity mask), ascending."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


# Set by a `--jobs` run for each notebook's kernel: the cores that kernel may keep busy (its share).
CORE_SHARE_ENV = "NBKIT_CORE_SHARE"


def core_share() -> int:
    """How many cores this process may keep busy at once: its usable cores, or its share of them where a
    ``--jobs`` run gave its kernel one (threads, not a pinned core: see ``nbkit.pool``)."""
    cores = len(usable_cores())
    share = os.environ.get(CORE_SHARE_ENV, "")
    return max(1, min(cores, int(share))) if share.isdigit() else cores


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """In a child, before exec: receive ``sig`` when the parent thread exits (Linux; a no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig))


def start(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    stdout: Any = None,
    stderr: Any = None,
    text: bool = False,
) -> subprocess.Popen:
    """Start ``cmd`` in its own session, set to die with this process (see the module docstring).

    The parent-death signal is tied to the *thread* that starts the child: start children from the
    thread that waits for them (as every caller here does).
    """
    return subprocess.Popen(
        list(cmd),
        env=dict(env) if env is not None else None,
        cwd=cwd,
        stdout=stdout,
        stderr=stderr,
        stdin=subprocess.DEVNULL,
        text=text,
        start_new_session=True,
        preexec_fn=die_with_parent,
    )


def kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to the process group led by ``pid`` (a child started by :func:`start`); gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def end_group(proc: subprocess.Popen, grace_s: float = 5.0) -> int | None:
    """SIGTERM ``proc``'s group, SIGKILL it after ``grace_s``, reap ``proc``; returns its exit code."""
    if proc.poll() is None:
        kill_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    kill_group(proc.pid, signal.SIGKILL)  # what the leader left behind in its group, too
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    return proc.poll()


def exit_reason(code: int | None) -> str:
    """How a process ended, in words: ``killed by SIGKILL (signal 9)`` or ``exited with status 3``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "an unknown signal"
        return f"killed by {name} (signal {-code})"
    return f"exited with status {code}"


def end_processes(procs: Iterable[Any], grace_s: float = 5.0) -> list[int]:
    """SIGTERM the given psutil processes (only ones we started), SIGKILL those still there after
    ``grace_s``; returns the pids that survived even that."""
    import psutil

    procs = list(procs)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    _, alive = psutil.wait_procs(alive, timeout=grace_s)
    return [p.pid for p in alive]


# -- a group of ranks ------------------------------------------------------------------------------


@dataclass
class RankExit:
    """The first rank that ended badly: which one, its exit code, and that in words."""

    rank: int
    code: int
    reason: str


class Ranks:
    """``world_size`` rank processes of one job, each in its own session, ended together.

    Use as a context manager: leaving the block (normally, on an error, on Ctrl-C) kills every rank's
    group and reaps it, so no rank outlives the launch.
    """

    def __init__(self) -> None:
        self.procs: dict[int, subprocess.Popen] = {}
        self._files: list[Any] = []

    def start(
        self,
        rank: int,
        cmd: Sequence[str],
        env: Mapping[str, str],
        *,
        log: Path | None = None,
        capture: bool = False,
    ) -> subprocess.Popen:
        """Start rank ``rank``: output to ``log`` (stdout and stderr together), or captured as text."""
        if log is not None:
            fh = open(log, "wb")  # noqa: SIM115 (closed when the group ends)
            self._files.append(fh)
            proc = start(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)
        elif capture:
            proc = start(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        else:
            proc = start(cmd, env=env)
        self.procs[rank] = proc
        return proc

    @property
    def pids(self) -> dict[int, int]:
        return {r: p.pid for r, p in self.procs.items()}

    def poll(self) -> dict[int, int | None]:
        return {r: p.poll() for r, p in self.procs.items()}

    def failed(self, first=None) -> RankExit | None:
        """The failed rank to blame (``first`` picks among several by a key), or None while none failed."""
        bad = {r: c for r, c in self.poll().items() if c not in (None, 0)}
        if not bad:
            return None
        r = min(bad, key=first) if first else min(bad)
        return RankExit(r, bad[r], exit_reason(bad[r]))

    def all_done(self) -> bool:
        return all(c == 0 for c in self.poll().values())

    def end(self) -> None:
        """Kill every rank's group (SIGKILL: a rank in a broken collective ignores nothing less) and reap
        it."""
        for p in self.procs.values():
            kill_group(p.pid, signal.SIGKILL)
        for p in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
        for fh in self._files:
            with contextlib.suppress(OSError):
                fh.close()
        self._files.clear()

    def __enter__(self) -> Ranks:
        return self

    def __exit__(self, *exc) -> None:
        self.end()


def wait_gone(pids: Iterable[int], timeout_s: float = 10.0) -> list[int]:
    """Wait until none of ``pids`` is a live process (zombies count as gone); returns those still alive."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while True:
        alive = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.Error:
                continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)
