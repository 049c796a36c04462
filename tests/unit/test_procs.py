"""nbkit.procs: ports, cores, and rank groups that say how a rank died and never outlive their parent."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from nbkit import procs

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def test_free_port_can_be_bound_and_cores_are_ids():
    port = procs.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
    cores = procs.usable_cores()
    assert cores and all(isinstance(c, int) for c in cores) and cores == sorted(cores)


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (-9, "killed by SIGKILL (signal 9)"),
        (-15, "killed by SIGTERM (signal 15)"),
        (3, "exited with status 3"),
        (0, "exited with status 0"),
        (None, "still running"),
        (-200, "killed by an unknown signal (signal 200)"),
    ],
)
def test_exit_reason_words(code, words):
    assert procs.exit_reason(code) == words


def test_a_killed_rank_is_named_within_a_second_and_the_others_end_with_the_group():
    with procs.Ranks() as ranks:
        for r in range(2):
            ranks.start(r, SLEEPER, {})
        pids = ranks.pids
        assert ranks.failed() is None
        psutil.Process(pids[1]).kill()
        t0 = time.monotonic()
        while (bad := ranks.failed()) is None:
            assert time.monotonic() - t0 < 5
            time.sleep(0.05)
        assert time.monotonic() - t0 < 1.0
        assert (bad.rank, bad.code, bad.reason) == (1, -9, "killed by SIGKILL (signal 9)")
    assert procs.wait_gone(pids.values(), timeout_s=5) == []


def test_each_rank_runs_in_its_own_session_with_what_it_started():
    with procs.Ranks() as ranks:
        rank = ranks.start(
            0,
            [
                sys.executable,
                "-c",
                "import subprocess, sys, time; "
                "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); time.sleep(120)",
            ],
            {},
        )
        deadline = time.monotonic() + 30
        while not psutil.Process(rank.pid).children() and time.monotonic() < deadline:
            time.sleep(0.1)
        (grandchild,) = psutil.Process(rank.pid).children()
        assert os.getpgid(rank.pid) == rank.pid and os.getpgid(grandchild.pid) == rank.pid
    assert procs.wait_gone([rank.pid, grandchild.pid], timeout_s=5) == []


PARENT = textwrap.dedent("""
    import sys, time
    from nbkit import procs
    ranks = procs.Ranks()
    for r in range(2):
        ranks.start(r, [sys.executable, "-c", "import time; time.sleep(120)"], {})
    print(" ".join(str(p) for p in ranks.pids.values()), flush=True)
    time.sleep(120)
""")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_no_rank_survives_its_parent(sig):
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(psutil.pid_exists(p) for p in pids)
        parent.send_signal(
            sig
        )  # no handler, no clean-up code runs: only the parent-death signal can end them
        parent.wait(timeout=30)
        assert procs.wait_gone(pids, timeout_s=5) == [], "a rank outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
