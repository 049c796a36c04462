"""The browser tier: one JupyterLab server and one headless Chromium per session.

Skips (with the cause and the install command) when playwright, JupyterLab or chromium is
missing. Every process it starts is shut down by the fixtures' finalizers: kernels through the
REST API, the server's process group, then any leftover pid of the recorded process tree.

Screenshots go under each test's output dir (``tmp_path/screenshots``) and are mirrored to
``$NBKIT_SCREENSHOTS_DIR`` (default ``runs/browser-screenshots/``, emptied at session start) for a
person to look at.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from labdriver import (
    CHROMIUM_ARGS,
    ROOT,
    LabServer,
    NotebookPage,
    find_chromium,
    kill_pids,
    missing_prerequisites,
)

# Per-wait limits inside a test; pytest-timeout (marks in the tests) is the outer bound.
PAGE_TIMEOUT_S = float(os.environ.get("NBKIT_BROWSER_PAGE_TIMEOUT", "90"))


def pytest_addoption(parser):
    group = parser.getgroup("nbkit browser tier")
    group.addoption(
        "--browser-all-cells",
        action="store_true",
        default=False,
        help="run every cell of each notebook in the browser (default: up to its first panel); "
        "or NBKIT_BROWSER_ALL_CELLS=1",
    )
    group.addoption(
        "--screenshots-dir",
        default=None,
        help="also copy panel screenshots here (default $NBKIT_SCREENSHOTS_DIR or runs/browser-screenshots)",
    )


@pytest.fixture(scope="session")
def prerequisites():
    reason = missing_prerequisites()
    if reason:
        pytest.skip(f"browser tier skipped: {reason}")


@pytest.fixture(scope="session")
def lab_root(tmp_path_factory) -> Path:
    """The server's root: each test puts its notebook copy in its own sub-folder here."""
    return tmp_path_factory.mktemp("lab-root")


@pytest.fixture(scope="session")
def lab_server(prerequisites, lab_root, tmp_path_factory):
    server = LabServer(root_dir=lab_root, state_dir=tmp_path_factory.mktemp("lab-state"))
    server.start()
    yield server
    survivors = server.stop()
    assert not survivors, f"processes survived the Lab server's shutdown: {survivors}"


@pytest.fixture(scope="session")
def chromium(prerequisites, tmp_path_factory):
    """A headless Debian chromium launched by Playwright (no browser download)."""
    import psutil
    from playwright.sync_api import sync_playwright

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    pw = sync_playwright().start()
    try:
        browser = pw.chromium.launch(
            executable_path=find_chromium(),
            headless=True,
            # Playwright gives every launch a fresh temporary --user-data-dir (and refuses one in args).
            args=CHROMIUM_ARGS,
            timeout=60_000,
        )
    except Exception:
        pw.stop()
        raise
    yield browser
    try:
        browser.close()
    finally:
        pw.stop()
        # Playwright's driver and chromium are our children; anything of them still alive is killed by pid.
        started = {p.pid for p in psutil.Process().children(recursive=True)} - before
        kill_pids(started)


@pytest.fixture
def lab_page(chromium, tmp_path):
    """A fresh browser context (own storage) per test, closed afterwards."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1200}, device_scale_factor=1)
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_S * 1000)
    yield page
    context.close()


@pytest.fixture
def open_notebook(lab_server, lab_page, lab_root):
    """open_notebook(relative_path) -> NotebookPage with an idle kernel; its kernel is shut down after."""
    opened: list[NotebookPage] = []

    def _open(rel_path: str) -> NotebookPage:
        nb = NotebookPage(lab_page, lab_server, rel_path, timeout_s=PAGE_TIMEOUT_S)
        opened.append(nb)
        return nb.open()

    yield _open
    # Free the kernel (memory, CPU) for the next notebook; the session fixture stops the server.
    lab_server.shutdown_kernels()


@pytest.fixture(scope="session")
def screenshots_mirror(request) -> Path:
    opt = request.config.getoption("--screenshots-dir", default=None)
    target = Path(opt or os.environ.get("NBKIT_SCREENSHOTS_DIR") or ROOT / "runs" / "browser-screenshots")
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True, exist_ok=True)
    return target


@pytest.fixture
def save_screenshot(tmp_path, screenshots_mirror):
    """save_screenshot(panel_view, name) -> path under tmp_path/screenshots, mirrored for a person to see."""

    def _save(panel_view, name: str, mirror: bool = True) -> Path:
        path = panel_view.screenshot(tmp_path / "screenshots" / f"{name}.png")
        if mirror:
            shutil.copy2(path, screenshots_mirror / path.name)
        return path

    return _save
