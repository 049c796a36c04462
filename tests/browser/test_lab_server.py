"""The tier's own bad-input behaviour: busy port, missing browser, leftover processes."""

from __future__ import annotations

import socket
import time

import pytest
from labdriver import LabServer, missing_prerequisites

pytestmark = pytest.mark.browser


def test_missing_chromium_names_the_cause_and_the_install_command(monkeypatch):
    monkeypatch.setenv("NBKIT_CHROMIUM", "/nonexistent/chromium")
    reason = missing_prerequisites()
    assert reason is not None and "chromium is missing" in reason
    assert "/nonexistent/chromium" in reason
    assert "apt-get update && apt-get install -y chromium" in reason
    assert "tests/browser/install_browser.sh" in reason


def test_missing_playwright_names_pip(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "playwright" else real(name, *a)
    )
    reason = missing_prerequisites()
    assert reason is not None and "'playwright' is not installed" in reason and "pip install" in reason


@pytest.mark.timeout(180)
def test_busy_port_is_avoided_and_nothing_survives_shutdown(tmp_path):
    pytest.importorskip("jupyterlab")
    psutil = pytest.importorskip("psutil")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(1)
        busy = squatter.getsockname()[1]
        server = LabServer(root_dir=tmp_path / "root", state_dir=tmp_path / "state", port=busy)
        try:
            server.start()
            assert server.port != busy
            assert server.api("GET", "status")["started"]
            kernel = server.api("POST", "kernels", {"name": "python3"}, timeout=60)
            deadline = time.monotonic() + 60
            while not server.kernel_pids() and time.monotonic() < deadline:
                time.sleep(0.2)
            tree = [server.proc.pid, *server.kernel_pids()]
            assert len(tree) >= 2, f"kernel {kernel['id']} has no process"
        finally:
            survivors = server.stop()
    assert survivors == []
    time.sleep(0.5)
    alive = [p for p in tree if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert alive == [], f"still running after stop(): {alive}"
