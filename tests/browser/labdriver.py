"""Drive JupyterLab in headless Chromium: a throwaway Lab server, notebook copies with injected
parameters, and the DOM queries that find nbkit widget panels generically.

Why hand-written rather than Galata: Galata is a TypeScript/Node test harness that downloads its own
browser; here the browser must be Debian's ``chromium`` driven from Python (pytest), so this is a
small Python equivalent of the few Galata helpers we need (run a cell, wait for idle, read outputs).

Nothing here knows what a notebook contains. A panel is found by the DOM: a ``.widget-button``
labelled "Run" inside a widget VBox, its controls in that box's grid, its plotly graph a
``.js-plotly-plot`` in the same box.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.procs import die_with_parent, free_port

ROOT = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = "tests/browser/install_browser.sh"
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Texts ipywidgets / anywidget / JupyterLab show when a widget cannot be rendered.
WIDGET_ERROR_PATTERNS = [
    r"Error displaying widget",
    r"Error creating widget",
    r"Error rendering widget",
    r"Failed to load (?:model|view) class",
    r"Could not create (?:a )?(?:model|view)",
    r"No renderer could be found",
    r"Javascript Error",
    r"anywidget.*(?:error|failed)",
]


class LabError(RuntimeError):
    """The Lab server or a notebook in it did not do what the tier needs (message names the cause)."""


# -- prerequisites ---------------------------------------------------------------------------
def find_chromium() -> str | None:
    """Debian's chromium: $NBKIT_CHROMIUM, /usr/bin/chromium, or chromium on $PATH."""
    env = os.environ.get("NBKIT_CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else None
    for cand in CHROMIUM_CANDIDATES:
        if os.access(cand, os.X_OK):
            return cand
    return shutil.which("chromium") or shutil.which("chromium-browser")


def missing_prerequisites() -> str | None:
    """Why the browser tier cannot run here, with the command that fixes it; None when it can."""
    from importlib.util import find_spec

    if find_spec("playwright") is None:
        return (
            "the Python package 'playwright' is not installed; install it with "
            "`.venv/bin/pip install -e '.[dev]'` (the browser itself comes from apt, no `playwright install`)"
        )
    if find_spec("jupyterlab") is None:
        return "JupyterLab is not installed; install it with `.venv/bin/pip install -e .` (or `make setup`)"
    if find_chromium() is None:
        wanted = os.environ.get("NBKIT_CHROMIUM")
        where = (
            f"$NBKIT_CHROMIUM={wanted} is not executable"
            if wanted
            else "no chromium at /usr/bin/chromium or on $PATH"
        )
        return (
            f"chromium is missing ({where}); install it with "
            f"`apt-get update && apt-get install -y chromium` (or `bash {INSTALL_SCRIPT}`)"
        )
    return None


# -- ports and processes -----------------------------------------------------------------------


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM if pytest dies (Linux), so no server outlives the tier."""
    die_with_parent(signal.SIGTERM)


def descendants(pid: int) -> list[int]:
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def kill_pids(pids, grace_s: float = 5.0) -> list[int]:
    """SIGTERM then SIGKILL the given pids (only those we started); returns the ones that survived."""
    import psutil

    from nbkit.procs import end_processes

    procs = []
    for pid in set(pids):
        with contextlib.suppress(psutil.NoSuchProcess):
            procs.append(psutil.Process(pid))
    return end_processes(procs, grace_s)


# -- the Lab server ------------------------------------------------------------------------------
@dataclass
class LabServer:
    """``jupyter lab`` on 127.0.0.1 with a token, isolated config/settings/runtime dirs, no autosave.

    ``stop()`` shuts kernels down through the REST API, then the server, then kills whatever of
    the process tree is left (kernels run in their own sessions, so a process-group kill alone
    would miss them).
    """

    root_dir: Path
    state_dir: Path
    port: int = 0
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    startup_timeout_s: float = 90.0
    proc: subprocess.Popen | None = None
    log_path: Path | None = None
    _known_pids: set = field(default_factory=set)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "lab") -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}/{path.lstrip('/')}{sep}token={self.token}"

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        # A real frontend is attached: panels must build widgets, and no run folder is being written.
        for key in ("NBKIT_HEADLESS", "NBKIT_RUN_DIR", "JUPYTER_TOKEN"):
            env.pop(key, None)
        dirs = {
            "JUPYTER_CONFIG_DIR": "config",
            "JUPYTER_RUNTIME_DIR": "runtime",
            "JUPYTER_DATA_DIR": "data",
            "JUPYTERLAB_SETTINGS_DIR": "settings",
            "JUPYTERLAB_WORKSPACES_DIR": "workspaces",
            "IPYTHONDIR": "ipython",
        }
        for key, sub in dirs.items():
            path = self.state_dir / sub
            path.mkdir(parents=True, exist_ok=True)
            env[key] = str(path)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def _write_settings(self) -> None:
        settings = self.state_dir / "settings"
        # Render every cell (no virtual scrolling: widgets below the fold must exist in the DOM),
        # never autosave the temp copies, no "news" toast over the panels in screenshots.
        user = {
            "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
            "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
            "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
                "fetchNews": "false",
                "checkForUpdates": False,
            },
        }
        for rel, content in user.items():
            path = settings / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(content), encoding="utf-8")
        labconfig = self.state_dir / "config" / "labconfig"
        labconfig.mkdir(parents=True, exist_ok=True)
        (labconfig / "page_config.json").write_text(
            json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}),
            encoding="utf-8",
        )

    def start(self) -> LabServer:
        self.root_dir.mkdir(parents=True, exist_ok=True)
        self._write_settings()
        env = self._environment()
        for attempt in range(5):
            if not self.port or not port_is_free(self.port):
                self.port = free_port()
            self.log_path = self.state_dir / f"lab-{attempt}.log"
            cmd = [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}",
                "--ServerApp.port_retries=0",  # we pick the port; a clash is retried below, visibly
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={self.root_dir}",
                "--ServerApp.open_browser=False",
                "--ServerApp.terminals_enabled=False",
                # Plain contents manager: jupytext pairing must never write .py files next to the copies.
                "--ServerApp.contents_manager_class=jupyter_server.services.contents.largefilemanager.AsyncLargeFileManager",
                # window.jupyterapp: run cells through Lab's own commands
                "--LabApp.expose_app_in_browser=True",
                "--LabApp.news_url=",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                "--LabServerApp.open_browser=False",
            ]
            if hasattr(os, "geteuid") and os.geteuid() == 0:
                cmd.append("--ServerApp.allow_root=True")
            log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
            self.proc = subprocess.Popen(
                cmd,
                env=env,
                cwd=str(self.root_dir),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
            self._log_file = log
            self._known_pids.add(self.proc.pid)
            state = self._wait_until_up()
            if state == "up":
                return self
            if state == "port":
                self._terminate_tree()
                self.port = 0
                continue
            tail = self.log_tail()
            self.stop()
            raise LabError(f"JupyterLab did not start ({state}); last log lines:\n{tail}")
        raise LabError("JupyterLab could not bind a free port after 5 attempts")

    def _wait_until_up(self) -> str:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                text = self.log_tail()
                if re.search(r"already in use|Address already|could not bind", text, re.I):
                    return "port"
                return f"exited with code {self.proc.returncode}"
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=2) as r:
                    if r.status == 200:
                        return "up"
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.3)
        return f"no answer on {self.base_url} within {self.startup_timeout_s:.0f}s"

    def log_tail(self, n: int = 25) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    # -- REST --------------------------------------------------------------------------------
    def api(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url(f"api/{path.lstrip('/')}"), data=data, method=method)
        req.add_header("Content-Type", "application/json")
        req.add_header("Authorization", f"token {self.token}")
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
        return json.loads(raw) if raw else None

    def kernels(self) -> list[dict]:
        return self.api("GET", "kernels")

    def kernel_pids(self) -> list[int]:
        """Kernel processes started by this server (children in their own sessions)."""
        if self.proc is None:
            return []
        return descendants(self.proc.pid)

    def shutdown_kernels(self) -> list[int]:
        """Stop every kernel (and its session) this server runs, and whatever those kernels started
        (a local LM server, a launcher's workers); returns pids that could not be killed."""
        started = self.kernel_pids()
        self._known_pids.update(started)
        with contextlib.suppress(Exception):
            for sess in self.api("GET", "sessions"):
                with contextlib.suppress(Exception):
                    self.api("DELETE", f"sessions/{sess['id']}", timeout=20)
        with contextlib.suppress(Exception):
            for k in self.kernels():
                with contextlib.suppress(Exception):
                    self.api("DELETE", f"kernels/{k['id']}", timeout=20)
        return kill_pids(started)

    def _terminate_tree(self) -> list[int]:
        if self.proc is None:
            return []
        self._known_pids.update(descendants(self.proc.pid))
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        return kill_pids(self._known_pids)

    def stop(self) -> list[int]:
        """Shut everything down; returns pids that could not be killed (should be empty)."""
        if self.proc is None:
            return []
        if self.proc.poll() is None:
            self.shutdown_kernels()
            with contextlib.suppress(Exception):
                self.api("POST", "shutdown", timeout=10)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=15)
        survivors = self._terminate_tree()
        with contextlib.suppress(Exception):
            self._log_file.close()
        return survivors


# -- notebook copies --------------------------------------------------------------------------
def prepare_notebook(src: Path, dest_dir: Path, parameters: dict[str, Any]) -> Path:
    """A copy of ``src`` in ``dest_dir`` with ``parameters`` injected after its parameters cell
    (papermill --prepare-only), jupytext pairing removed. Other files next to the notebook (data
    folders, helper files) are linked in, so relative paths resolve as they do in notebooks/."""
    import nbformat
    import papermill as pm

    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / src.name
    pm.execute_notebook(
        str(src), str(dest), parameters=parameters, prepare_only=True, progress_bar=False, log_output=False
    )
    nb = nbformat.read(dest, as_version=4)
    nb.metadata.pop("jupytext", None)
    nb.metadata.pop("papermill", None)
    nbformat.write(nb, dest)
    for entry in src.parent.iterdir():
        if entry.suffix in (".ipynb", ".py") or entry.name.startswith(".") or entry.name == "__pycache__":
            continue
        link = dest_dir / entry.name
        if not link.exists():
            link.symlink_to(entry)
    return dest


# -- the page ---------------------------------------------------------------------------------
_JS_HELPERS = (
    r"""
() => {
  if (window.__nbkit) return;
  const app = () => window.jupyterapp;
  const notebook = () => {
    const w = app().shell.currentWidget;
    return (w && w.content && w.sessionContext) ? w : null;
  };
  const panelRoots = () => {
    const buttons = [...document.querySelectorAll('.jp-Notebook .widget-button')]
      .filter(b => b.textContent.trim() === 'Run');
    return buttons.map(b => {
      const row = b.closest('.widget-hbox') || b.parentElement;
      return row.closest('.widget-vbox') || row.parentElement;
    });
  };
  const plotOf = (root) => root.querySelector(':scope > .js-plotly-plot') """
    r"""|| root.querySelector('.js-plotly-plot');
  const plain = (v) => {
    if (v == null) return null;
    if (ArrayBuffer.isView(v)) return Array.from(v);
    if (Array.isArray(v)) return v.map(plain);
    if (typeof v === 'object') return null;  // undecoded blobs are read from _fullData instead
    return v;
  };
  const traces = (gd) => {
    if (!gd) return null;
    const full = gd._fullData || [];
    return (gd.data || []).map((t, i) => {
      const out = {type: t.type || 'scatter', name: t.name ?? null};
      for (const k of ['x', 'y', 'z', 'values', 'labels', 'text']) {
        let v = plain(t[k]);
        if (v === null && t[k] != null && full[i]) v = plain(full[i][k]);
        if (v !== null && v !== undefined) out[k] = v;
      }
      return out;
    });
  };
  window.__nbkit = {app, notebook, panelRoots, plotOf, traces};
}
"""
)


@dataclass
class CellResult:
    index: int
    ok: bool
    error: str | None = None
    seconds: float = 0.0


class NotebookPage:
    """One notebook open in JupyterLab, driven through ``window.jupyterapp`` and the DOM."""

    def __init__(self, page, server: LabServer, name: str, *, timeout_s: float = 60.0):
        self.page = page
        self.server = server
        self.name = name
        self.timeout_ms = int(timeout_s * 1000)
        self.console: list[str] = []
        page.on(
            "console",
            lambda m: self.console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None,
        )
        page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))

    # -- opening --------------------------------------------------------------------------
    def open(self) -> NotebookPage:
        """Open the notebook and wait for its kernel to be idle; LabError names what went wrong."""
        self.page.set_default_timeout(self.timeout_ms)
        try:
            self.page.goto(self.server.url(f"lab/tree/{self.name}") + "&reset", wait_until="domcontentloaded")
            self.page.wait_for_function(
                "() => !!(window.jupyterapp && window.jupyterapp.shell)", timeout=self.timeout_ms
            )
        except Exception as exc:
            raise LabError(
                f"{self.name}: JupyterLab did not load ({type(exc).__name__}: {_first_line(exc)})"
            ) from None
        self.page.evaluate(_JS_HELPERS)
        state = self._wait_for_open_notebook()
        if state != "open":
            raise LabError(f"{self.name}: the notebook did not open in JupyterLab: {state}")
        try:
            self.page.wait_for_function(
                "() => { const w = window.__nbkit.notebook();"
                " const k = w && w.sessionContext.session && w.sessionContext.session.kernel;"
                " return !!k && k.status === 'idle'; }",
                timeout=self.timeout_ms,
            )
        except Exception:
            status = self.page.evaluate(
                "() => { const w = window.__nbkit.notebook(); const s = w && w.sessionContext;"
                " return s ? `${s.kernelDisplayName} / ${s.kernelDisplayStatus}` : 'no session'; }"
            )
            raise LabError(
                f"{self.name}: kernel not idle within {self.timeout_ms // 1000}s (kernel: {status})"
            ) from None
        return self

    def _wait_for_open_notebook(self) -> str:
        """'open', or what JupyterLab showed instead (an error dialog, nothing)."""
        deadline = time.monotonic() + self.timeout_ms / 1000
        while time.monotonic() < deadline:
            state = self.page.evaluate(
                """(name) => {
                  const dlg = document.querySelector('.jp-Dialog');
                  if (dlg) return 'dialog: ' + dlg.innerText.replace(/\\s+/g, ' ').trim().slice(0, 300);
                  const w = window.__nbkit.notebook();
                  if (w && w.context && w.context.path.endsWith(name) && w.context.isReady) return 'open';
                  return '';
                }""",
                self.name,
            )
            if state:
                return state
            self.page.wait_for_timeout(200)
        return f"nothing opened within {self.timeout_ms // 1000}s"

    # -- cells ------------------------------------------------------------------------------
    def cell_count(self) -> int:
        return self.page.evaluate("() => window.__nbkit.notebook().content.widgets.length")

    def cell_info(self, i: int) -> dict:
        return self.page.evaluate(
            """(i) => { const c = window.__nbkit.notebook().content.widgets[i];
                 return {type: c.model.type, """
            """first: (c.model.sharedModel.getSource().split('\\n')[0] || '').slice(0, 80)}; }""",
            i,
        )

    def run_cell(self, i: int, timeout_s: float) -> CellResult:
        """Run cell ``i`` with Lab's own command; wait for it; report an error output as one line."""
        start = time.monotonic()
        self.page.evaluate(
            """async (i) => {
                 const w = window.__nbkit.notebook();
                 window.__nbkitCell = null;
                 w.content.activeCellIndex = i;
                 w.content.deselectAll();
                 window.jupyterapp.commands.execute('notebook:run-cell').then(
                   ok => { window.__nbkitCell = {done: true, ok: !!ok}; },
                   e => { window.__nbkitCell = {done: true, ok: false, err: String(e)}; });
               }""",
            i,
        )
        try:
            self.page.wait_for_function(
                "() => window.__nbkitCell && window.__nbkitCell.done",
                timeout=int(timeout_s * 1000),
                polling=250,
            )
        except Exception:
            info = self.cell_info(i)
            with contextlib.suppress(Exception):
                self.page.evaluate("() => window.jupyterapp.commands.execute('notebook:interrupt-kernel')")
            raise LabError(
                f"{self.name}: cell {i} ({info['first']!r}) still running after {timeout_s:.0f}s"
            ) from None
        error = self.page.evaluate(
            """(i) => { const c = window.__nbkit.notebook().content.widgets[i];
                 if (c.model.type !== 'code') return null;
                 const outs = c.model.outputs;
                 for (let j = 0; j < outs.length; j++) { const o = outs.get(j).toJSON();
                   if (o.output_type === 'error') return `${o.ename}: ${String(o.evalue).split('\\n')[0]}`; }
                 return window.__nbkitCell.ok ? null : (window.__nbkitCell.err || 'execution failed'); }""",
            i,
        )
        return CellResult(i, error is None, error, time.monotonic() - start)

    def run_until_first_panel(
        self, timeout_s: float, *, all_cells: bool = False, drawn: bool = False
    ) -> list[CellResult]:
        """Run code cells top to bottom until one shows a panel (with ``drawn``: a panel whose figure has
        points; a panel that only shows a table does not count), or all cells with ``all_cells``.

        A cell that raises stops the run with LabError naming the cell and the error.
        """
        results = []
        for i in range(self.cell_count()):
            if self.cell_info(i)["type"] != "code":
                continue
            r = self.run_cell(i, timeout_s)
            results.append(r)
            if not r.ok:
                raise LabError(f"{self.name}: cell {i} ({self.cell_info(i)['first']!r}) raised {r.error}")
            if not all_cells and self.panel_count() > 0:
                if not drawn or any(has_points(self.panel(k).traces()) for k in range(self.panel_count())):
                    break
        return results

    def widgets_shown_as_text(self) -> list[str]:
        """Widget reprs rendered as plain text ('VBox(...)'): no widget manager drew them."""
        return self.page.evaluate(
            r"""() => [...document.querySelectorAll("""
            r"""'.jp-Notebook .jp-OutputArea-output[data-mime-type="text/plain"]')]
                 .map(el => el.innerText.trim())"""
            r""".filter(t => /^[A-Z]\w*(Box|Widget|Button|Slider|Output)\(/.test(t))
                 .map(t => t.slice(0, 80))"""
        )

    # -- panels -----------------------------------------------------------------------------
    def panel_count(self) -> int:
        return self.page.evaluate("() => window.__nbkit.panelRoots().length")

    def panel(self, k: int) -> PanelView:
        return PanelView(self, k)

    def widget_errors(self) -> list[str]:
        """Widget rendering failures visible in the notebook (and in the browser console)."""
        text = self.page.evaluate(
            "() => document.querySelector('.jp-Notebook') ? "
            "document.querySelector('.jp-Notebook').innerText : ''"
        )
        found = []
        for pat in WIDGET_ERROR_PATTERNS:
            for m in re.finditer(pat + r"[^\n]{0,160}", text, re.I):
                found.append(m.group(0))
        for line in self.console:
            if re.search(r"widget|anywidget|plotly", line, re.I) and re.search(r"error|fail", line, re.I):
                found.append("console " + line[:240])
        return found

    def execute_silently(self, code: str, timeout_s: float = 30.0) -> None:
        """Run code in the notebook's kernel without adding a cell (test set-up, e.g. fault injection)."""
        self.page.evaluate(
            """async (code) => {
                 window.__nbkitExec = null;
                 const k = window.__nbkit.notebook().sessionContext.session.kernel;
                 const f = k.requestExecute({code, silent: false, store_history: false});
                 f.onIOPub = (msg) => { if (msg.header.msg_type === 'error') """
            """window.__nbkitExecErr = msg.content.ename + ': ' + msg.content.evalue; };
                 window.__nbkitExecErr = null;
                 f.done.then(() => { window.__nbkitExec = true; }, () => { window.__nbkitExec = true; });
               }""",
            code,
        )
        self.page.wait_for_function("() => window.__nbkitExec === true", timeout=int(timeout_s * 1000))
        err = self.page.evaluate("() => window.__nbkitExecErr")
        if err:
            raise LabError(f"{self.name}: set-up code failed in the kernel: {err}")


class PanelView:
    """The k-th panel (by its Run button) on a NotebookPage."""

    def __init__(self, nb: NotebookPage, k: int):
        self.nb = nb
        self.page = nb.page
        self.k = k
        self.root = self.page.locator(
            ".jp-Notebook .widget-vbox:has(> .widget-hbox > .widget-button:text-is('Run'))"
        ).nth(k)

    def _eval(self, body: str, arg: Any = None):
        return self.page.evaluate(
            f"([k, arg]) => {{ const root = window.__nbkit.panelRoots()[k]; "
            f"if (!root) return null; {body} }}",
            [self.k, arg],
        )

    def describe(self) -> dict:
        """What is visible: title, controls (kind, label, value), Run button, graph, output text."""
        return self._eval(
            r"""
            const vis = (el) => !!el && el.getClientRects().length > 0 """
            r"""&& el.offsetWidth > 0 && el.offsetHeight > 0;
            const controls = [...root.querySelectorAll("""
            r"""'.widget-gridbox > .widget-inline-hbox, .widget-gridbox > .widget-box')].map(el => {
              const label = [...el.querySelectorAll('.widget-label, .widget-label-basic')]
                .map(l => (l.innerText || '').replace(/\u200b/g, '').trim()).find(t => t) || '';
              let kind = 'other', value = null;
              if (el.classList.contains('widget-slider')) { kind = 'slider'; """
            r"""value = (el.querySelector('.widget-readout') || {}).innerText; }
              else if (el.classList.contains('widget-dropdown')) { kind = 'dropdown'; """
            r"""value = el.querySelector('select').value; }
              else if (el.classList.contains('widget-checkbox')) { kind = 'checkbox'; """
            r"""value = el.querySelector('input').checked; }
              else if (el.classList.contains('widget-select-multiple')) { kind = 'multiselect'; """
            r"""value = [...el.querySelector('select').selectedOptions].map(o => o.textContent); }
              else if (el.classList.contains('widget-text')) { kind = 'text'; """
            r"""value = el.querySelector('input').value; }
              return {kind, label: label.trim(), value, visible: vis(el),
                      advanced: !!el.closest('.nbkit-advanced')};
            });
            const folded = root.querySelector('.nbkit-advanced');
            const btn = [...root.querySelectorAll('.widget-button')]"""
            r""".find(b => b.textContent.trim() === 'Run');
            const gd = window.__nbkit.plotOf(root);
            const status = btn && btn.parentElement """
            r"""? btn.parentElement.innerText.replace('Run', '').trim() : '';
            const out = root.querySelector('.widget-output');
            return {
              title: (root.querySelector(':scope > .widget-html') || {}).innerText || '',
              controls, run_visible: vis(btn), run_disabled: btn ? btn.disabled : null, status,
              advanced_title: folded ? folded.innerText.split('\n')[0].trim() : null,
              graph_visible: vis(gd) && !!(gd && gd.querySelector('.main-svg')),
              traces: window.__nbkit.traces(gd),
              output_text: out ? out.innerText : '',
              output_html: out ? out.innerHTML.slice(0, 4000) : '',
            };
            """
        )

    def traces(self):
        return self._eval("return window.__nbkit.traces(window.__nbkit.plotOf(root));")

    def status(self) -> str:
        return self.describe()["status"]

    def control_locator(self, idx: int):
        return self.root.locator(".widget-gridbox > .widget-inline-hbox, .widget-gridbox > .widget-box").nth(
            idx
        )

    def set_control(self, idx: int, kind: str, value: Any) -> None:
        """Change a control the way a user does (type into the slider readout, pick, tick)."""
        loc = self.control_locator(idx)
        if kind == "slider":
            readout = loc.locator(".widget-readout")
            readout.click()
            self.page.keyboard.press("Control+A")
            self.page.keyboard.type(str(value))
            self.page.keyboard.press("Enter")
        elif kind == "dropdown":
            loc.locator("select").select_option(value=str(value))
        elif kind == "multiselect":
            loc.locator("select").select_option(label=list(value))
        elif kind == "checkbox":
            box = loc.locator("input[type=checkbox]")
            if box.is_checked() != bool(value):
                box.click()
        elif kind == "text":
            inp = loc.locator("input")
            inp.fill(str(value))
            inp.press("Enter")
        else:
            raise LabError(f"{self.nb.name}: panel {self.k}: cannot set a {kind} control")
        # The widget model syncs to the kernel asynchronously; give the comm message a moment.
        self.page.wait_for_timeout(300)

    def open_advanced(self) -> None:
        """Open the panel's closed "advanced" section the way a user does: click its title."""
        self.root.locator(".nbkit-advanced").get_by_text(re.compile(r"^advanced \(")).first.click()
        self.page.wait_for_timeout(300)

    def options(self, idx: int) -> list[str]:
        return self.control_locator(idx).locator("select option").evaluate_all("os => os.map(o => o.value)")

    def click_run(self, timeout_s: float) -> str:
        """Press Run; wait until the panel reports done/failed (button enabled again); return the status."""
        before = self.status()
        self.root.locator(".widget-button", has_text="Run").first.click()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            d = self.describe()
            st = d["status"]
            if not d["run_disabled"] and st != before and re.search(r"done|failed", st):
                return st
            self.page.wait_for_timeout(250)
        raise LabError(
            f"{self.nb.name}: panel {self.k}: run did not finish within {timeout_s:.0f}s "
            f"(status {self.status()!r})"
        )

    def wait_for_traces_change(self, before, timeout_s: float = 10.0):
        """Plotly redraws asynchronously after the kernel's last message: poll until the data differs."""
        deadline = time.monotonic() + timeout_s
        now = self.traces()
        while time.monotonic() < deadline:
            now = self.traces()
            if now != before:
                return now
            self.page.wait_for_timeout(200)
        return now

    def screenshot(self, path: Path) -> Path:
        """The panel from its title to the bottom of its graph (its output area may be long)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        box = self._eval(
            """root.scrollIntoView({block: 'start'});
               const r = root.getBoundingClientRect();
               const gd = window.__nbkit.plotOf(root);
               const g = gd ? gd.getBoundingClientRect() : r;
               return {x: r.left, y: r.top, width: r.width, """
            """bottom: Math.max(g.bottom, r.top + 40), rootBottom: r.bottom};"""
        )
        viewport = self.page.viewport_size or {"height": 1000}
        self.page.wait_for_timeout(200)  # let the scroll settle before capturing
        bottom = min(box["bottom"] + 8, box["rootBottom"], viewport["height"])
        clip = {
            "x": max(box["x"], 0),
            "y": max(box["y"], 0),
            "width": box["width"],
            "height": max(bottom - max(box["y"], 0), 40),
        }
        self.page.screenshot(path=str(path), clip=clip, animations="disabled")
        return path


def has_points(traces) -> bool:
    """Whether any of a figure's traces holds data (what a panel's run drew)."""
    return any(len(t.get(k) or []) for t in traces or [] for k in ("x", "y", "z", "values"))


def candidate_changes(controls: list[dict]) -> list[tuple[int, str, Any, Any]]:
    """(index, kind, new value, old value) to try, cheapest first.

    Runs are real experiments, so a change should make the rerun cheaper, not dearer: first keep
    only the first item of a multi-selection (fewer rungs/modules), then halve sliders (epochs,
    steps, width; the widget clamps to its minimum), then the next dropdown option, then flip
    checkboxes (a flag may switch on something expensive); raising a slider that sits at 0/1 last.
    """
    fewer, smaller, other, raised = [], [], [], []
    for idx, c in enumerate(controls):
        if not c["visible"]:
            continue
        kind, value = c["kind"], c["value"]
        if kind == "multiselect" and isinstance(value, list) and len(value) > 1:
            fewer.append((idx, kind, value[:1], value))
        elif kind == "slider":
            try:
                v = float(str(value).replace(",", ""))
            except ValueError:
                continue
            if re.fullmatch(r"-?\d+", str(value).strip()):
                (smaller if v >= 2 else raised).append(
                    (idx, kind, int(v) // 2 if v >= 2 else int(v) + 1, value)
                )
            else:
                (smaller if v > 0 else raised).append(
                    (idx, kind, f"{v / 2:.4g}" if v > 0 else f"{v + 1:.4g}", value)
                )
        elif kind == "dropdown":
            other.append((idx, kind, None, value))  # the next option is read at change time
        elif kind == "checkbox":
            other.append((idx, kind, not value, value))
    return fewer + smaller + other + raised


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
