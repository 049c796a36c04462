"""Interrupting a panel's experiment from JupyterLab (the toolbar's stop button) in headless Chromium:
the experiment stops within seconds, the processes it started end, and the panel runs again."""

from __future__ import annotations

import textwrap
import time

import pytest
from labdriver import prepare_notebook
from test_lab_panels import CELL_TIMEOUT_S, write_synthetic_notebook

pytestmark = pytest.mark.browser

RANKS_PANEL = textwrap.dedent(
    """
    import dataclasses, sys, time
    from pathlib import Path

    from nbkit import procs
    from nbkit.panels import Panel


    @dataclasses.dataclass
    class Params:
        seconds: int = dataclasses.field(default=120, metadata={"min": 0, "max": 600})


    def experiment(p):
        # Two processes started as every nbkit experiment starts its ranks, watched by a polling loop.
        with procs.Ranks() as group:
            for r in range(2):
                group.start(r, [sys.executable, "-c", f"import time; time.sleep({p.seconds})"], {})
            Path(PIDS).write_text(" ".join(map(str, group.pids.values())))
            while not group.all_done():
                time.sleep(0.1)
        return {"seconds": p.seconds}


    panel = Panel(Params(), experiment, title="ranks")
    panel.display()
    """
)


@pytest.mark.timeout(300)
def test_stop_button_stops_a_panels_experiment_and_the_panel_runs_again(open_notebook, lab_root, tmp_path):
    from nbkit.procs import wait_gone

    pids_file = tmp_path / "pids.txt"
    src = write_synthetic_notebook(
        lab_root / "src" / "interrupt.ipynb", body=f"PIDS = {str(pids_file)!r}\n" + RANKS_PANEL
    )
    prepare_notebook(src, lab_root / "interrupt", {"SMOKE": True})
    nb = open_notebook("interrupt/interrupt.ipynb")
    nb.run_until_first_panel(CELL_TIMEOUT_S)
    view = nb.panel(0)
    view.root.locator(".widget-button", has_text="Run").first.click()
    deadline = time.monotonic() + 60
    while not pids_file.is_file() and time.monotonic() < deadline:
        nb.page.wait_for_timeout(200)
    pids = [int(p) for p in pids_file.read_text().split()]
    assert view.describe()["run_disabled"], "the panel is not running"
    t0 = time.monotonic()  # from the click (playwright returns once the click is done)
    nb.page.locator(
        ".jp-NotebookPanel-toolbar [data-jp-item-name='interrupt'] button, "
        ".jp-NotebookPanel-toolbar jp-button[data-command='notebook:interrupt-kernel']"
    ).first.click()
    while time.monotonic() - t0 < 30:
        d = view.describe()
        if not d["run_disabled"] and "failed" in d["status"]:
            break
        nb.page.wait_for_timeout(100)
    stopped_s = time.monotonic() - t0
    print(f"FIGURE browser stop button: panel stopped {stopped_s:.1f} s after the click")
    assert stopped_s < 10, d
    assert "interrupted" in d["output_text"] and "Traceback" not in d["output_text"], d["output_text"]
    assert wait_gone(pids, timeout_s=5) == [], "a process of the interrupted experiment survived"
    pids_file.unlink()
    view.set_control(0, "slider", 0)
    assert view.click_run(120).startswith("done")
    assert wait_gone([int(p) for p in pids_file.read_text().split()], timeout_s=5) == []
