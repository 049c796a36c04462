"""Interrupting a panel's experiment in a live kernel (what JupyterLab's stop button / `I, I` does):
the experiment stops within seconds, the processes it started end, and the panel runs again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

SETUP = """
import dataclasses, sys, time
from pathlib import Path
from nbkit import procs
from nbkit.panels import Panel

@dataclasses.dataclass
class Params:
    seconds: int = dataclasses.field(default=120, metadata={"min": 0, "max": 600})

def experiment(p):
    # Two rank processes started the way every nbkit experiment starts them (nbkit.procs), watched
    # by a polling loop as nbkit.zero.launch watches its ranks.
    with procs.Ranks() as group:
        for r in range(2):
            group.start(r, [sys.executable, "-c", f"import time; time.sleep({p.seconds})"], {})
        Path(PIDS).write_text(" ".join(map(str, group.pids.values())))
        while not group.all_done():
            if group.failed():
                raise RuntimeError(group.failed().reason)
            time.sleep(0.1)
    return {"seconds": p.seconds}

panel = Panel(Params(), experiment, title="ranks", widget=True)
"""


def _reply(kc, msg_id: str, timeout: float) -> dict:
    """The shell reply to ``msg_id`` (replies to earlier requests, e.g. kernel_info at start-up, skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        msg = kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg


def _execute(kc, code: str, timeout: float) -> dict:
    return _reply(kc, kc.execute(code), timeout)


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    from jupyter_client.manager import start_new_kernel

    monkeypatch.delenv("NBKIT_HEADLESS", raising=False)
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_interrupt_stops_the_experiment_ends_its_processes_and_the_panel_runs_again(kernel, tmp_path):
    from nbkit.procs import wait_gone

    km, kc = kernel
    pids_file = tmp_path / "pids.txt"
    reply = _execute(kc, f"PIDS = {str(pids_file)!r}\n" + SETUP, timeout=120)
    assert reply["content"]["status"] == "ok", reply["content"]
    click = kc.execute("panel.click()")  # what the Run button's click runs
    deadline = time.monotonic() + 60
    while not pids_file.is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    pids = [int(p) for p in pids_file.read_text().split()]
    km.interrupt_kernel()
    t0 = time.monotonic()
    reply = _reply(kc, click, timeout=30)
    stopped_s = time.monotonic() - t0
    assert reply["content"]["status"] == "ok", reply["content"]  # the click shows "interrupted", no traceback
    print(f"FIGURE panel interrupt: click returned {stopped_s:.2f} s after the interrupt")
    assert stopped_s < 5, stopped_s
    assert wait_gone(pids, timeout_s=5) == [], "a process of the interrupted experiment survived"
    Path(pids_file).unlink()
    check = (
        "assert panel.error == 'interrupted' and not panel.run_button.disabled, "
        "(panel.error, panel.run_button.disabled)\n"
        "panel.controls['seconds'].value = 0\npanel.click()\n"
        "assert panel.error is None and panel.runs == 1 and panel.result == {'seconds': 0}, "
        "(panel.error, panel.runs)\n"
    )
    reply = _execute(kc, check, timeout=60)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert wait_gone([int(p) for p in pids_file.read_text().split()], timeout_s=5) == []
