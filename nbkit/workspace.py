"""A user's own copy of the workbook: ``nbkit init DIR`` and ``nbkit lab DIR``.

``init`` copies the notebooks that came with nbkit (and ``reference_seconds.json``) into DIR, so a
user can open and edit their own copies; ``nbkit run`` started in DIR then runs those copies. The
copies are plain notebooks: the jupytext pairing the repository keeps (``formats: ipynb,py:percent``)
is left out, so opening one in JupyterLab never writes a ``.py`` twin into the user's folder. ``init``
writes a manifest (``.nbkit-init.json``: each file's SHA-256 as written, and each notebook's
fingerprint: its cells' types and sources) so a later ``init`` (after upgrading nbkit) can tell
apart a copy the user has only run (outputs, execution counts and metadata differ, the sources are
those it copied), which it updates, from one they edited, which it keeps and names.

``lab`` starts JupyterLab in DIR with this environment's Python as the notebooks' kernel: it runs
JupyterLab with the same interpreter, and prefers this environment's kernel specs over a per-user
``python3`` kernel that may name another Python (``JUPYTER_PREFER_ENV_PATH``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbkit.catalog as catalog
from nbkit.errors import UsageError, main_error
from nbkit.extras import install_line
from nbkit.runfolder import RUN_DIR_ENV

MANIFEST = ".nbkit-init.json"
COPIED = ("[0-9][0-9]_*.ipynb", "reference_seconds.json")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_files() -> list[Path]:
    """The files ``init`` copies: the packaged notebooks and their reference seconds."""
    root = catalog.packaged_notebooks_dir()
    files = sorted(p for pattern in COPIED for p in root.glob(pattern))
    if not any(p.suffix == ".ipynb" for p in files):
        raise UsageError(
            f"no notebooks came with this nbkit (looked in {root}); reinstall it: "
            f"{install_line()} --force-reinstall"
        )
    return files


def plain_copy(src: Path) -> bytes:
    """What ``init`` writes for ``src``: a notebook without jupytext's pairing (the file itself for anything
    else)."""
    return _unpaired(src.read_bytes()) if src.suffix == ".ipynb" else src.read_bytes()


def _unpaired(notebook: bytes) -> bytes:
    """A notebook's JSON (outputs and all) without jupytext's pairing metadata."""
    nb = json.loads(notebook)
    nb.get("metadata", {}).pop("jupytext", None)
    # nbformat's own layout (indent 1, sorted keys, a final newline), so the copy diffs like a notebook.
    return (json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def fingerprint(data: bytes) -> str | None:
    """A notebook's cells, their types and sources only (what running it, or JupyterLab saving it, leaves
    alone); None when ``data`` is not a notebook's JSON."""
    try:
        cells = json.loads(data)["cells"]
        shape = [
            [c["cell_type"], "".join(c["source"]) if isinstance(c["source"], list) else c["source"]]
            for c in cells
        ]
    except (ValueError, KeyError, TypeError):
        return None
    return _sha256(json.dumps(shape).encode("utf-8"))


@dataclass
class InitResult:
    target: Path
    copied: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    # Run, not edited, but still paired by an older init: the pairing is taken out, the outputs kept.
    unpaired: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # edited (or not written by init): left as they are


def init(target: Path | str) -> InitResult:
    """Copy the notebooks into ``target`` (created if missing); see the module docstring."""
    target = Path(target).expanduser().resolve()
    for folder in (target, *target.parents):
        if folder.exists() and not folder.is_dir():
            where = "is a file" if folder == target else f"is under {folder}, which is a file"
            raise UsageError(f"{target} {where}; give a folder for the notebooks")
    files = source_files()
    if files[0].parent.resolve() == target:
        raise UsageError(
            f"{target} holds the notebooks nbkit came with (edit them there, or give another DIR for your "
            "own copies)"
        )
    manifest_path = target / MANIFEST
    recorded: dict[str, str] = {}
    recorded_sources: dict[str, str] = {}
    if manifest_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            recorded = dict(manifest.get("files", {}))
            recorded_sources = dict(manifest.get("sources", {}))
        except (ValueError, AttributeError, TypeError):
            raise UsageError(
                f"{manifest_path}: not the JSON object nbkit init writes; remove it and run nbkit init again"
            ) from None
    result = InitResult(target)
    writes: dict[str, bytes] = {}
    files_now, sources_now = dict(recorded), dict(recorded_sources)
    for src in files:
        new = plain_copy(src)
        dest = target / src.name
        mine = dest.read_bytes() if dest.is_file() else None
        ours = fingerprint(mine) if mine is not None and src.suffix == ".ipynb" else None
        if not dest.exists():
            result.copied.append(src.name)
            writes[src.name] = new
        elif mine == new:
            result.unchanged.append(src.name)
        elif ours is not None and ours == fingerprint(new):
            # Only run (or saved by JupyterLab) and its sources are nbkit's current ones: the outputs stay.
            if "jupytext" in json.loads(mine or b"{}").get("metadata", {}):
                result.unpaired.append(src.name)  # copied by an older init, which kept the pairing
                writes[src.name] = _unpaired(mine or b"{}")
            else:
                result.unchanged.append(src.name)
        elif mine is not None and (
            recorded.get(src.name) == _sha256(mine)
            or (ours is not None and recorded_sources.get(src.name) == ours)
        ):
            result.updated.append(src.name)  # as init left it, or only run since: a newer nbkit replaces it
            writes[src.name] = new
        else:
            result.kept.append(src.name)
            continue
        files_now[src.name] = _sha256(writes.get(src.name, new))
        if src.suffix == ".ipynb":
            sources_now[src.name] = fingerprint(new) or ""
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name, data in writes.items():
            _write_atomically(target / name, data)
        manifest = {"written_by": "nbkit init", "files": files_now, "sources": sources_now}
        _write_atomically(manifest_path, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
    except OSError as exc:
        raise UsageError(f"{target}: cannot write the notebooks there ({exc.strerror or exc})") from None
    return result


def _write_atomically(path: Path, data: bytes) -> None:
    # A copy cut short (full disk, Ctrl-C) must not leave a half notebook that looks like the user's.
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def lab_command(
    folder: Path | str, *, port: int | None = None, browser: bool = True
) -> tuple[list[str], dict[str, str]]:
    """The command and environment ``nbkit lab`` runs: JupyterLab on ``folder`` under this Python."""
    folder = Path(folder).expanduser().resolve()
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise UsageError(f"{folder} {what}; make it with: nbkit init {folder}")
    if port is not None and not 1 <= port <= 65535:
        raise UsageError(f"--port {port}: expected a TCP port, 1..65535")
    from importlib.util import find_spec

    if find_spec("jupyterlab") is None:
        raise UsageError(
            f"JupyterLab is not installed in this environment ({sys.executable}); {install_line()} brings it"
        )
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.root_dir={folder}",
        "--MappingKernelManager.default_kernel_name=python3",
    ]
    if port is not None:
        cmd.append(f"--ServerApp.port={port}")
    if not browser:
        cmd.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # containers run as root; JupyterLab refuses to start there without it
    # This environment's kernel specs (ipykernel's python3, which jupyter_client starts with this
    # interpreter) win over a per-user python3 spec left by another installation.
    env = {**os.environ, "JUPYTER_PREFER_ENV_PATH": "1"}
    return cmd, env


def kernel_python(env: dict[str, str] | None = None) -> str | None:
    """The interpreter the ``python3`` kernel would start (``None`` without one), as seen with ``env``."""
    code = (
        "import sys\nfrom jupyter_client.kernelspec import KernelSpecManager\n"
        "try:\n    argv = KernelSpecManager().get_kernel_spec('python3').argv\nexcept Exception:\n    "
        "sys.exit(3)\n"
        "exe = argv[0]\n"
        # jupyter_client runs a spec whose argv[0] is a bare python name with the launching interpreter.
        "print(sys.executable if exe in ('python', 'python3', 'python%d.%d' % sys.version_info[:2]) else "
        "exe)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    return out.stdout.strip() if out.returncode == 0 else None


def run_folders() -> list[Path]:
    """Folders that may hold earlier ``nbkit run`` outputs (``<folder>/<stamp>/NN_name.ipynb``), for
    notebook 00's table: the folder beside the run this kernel is being written into when ``nbkit run``
    executes it (``$NBKIT_RUN_DIR``), then ``runs/`` here and beside the notebooks' folder."""
    found: list[Path] = []
    run_dir = os.environ.get(RUN_DIR_ENV)
    candidates = [Path(run_dir).resolve().parent] if run_dir else []
    candidates += [Path.cwd() / "runs", Path.cwd().parent / "runs"]
    for folder in candidates:
        if folder.is_dir() and folder.resolve() not in found:
            found.append(folder.resolve())
    return found


# -- the two commands (wired into nbkit.cli) -------------------------------------------------------


def add_commands(sub) -> None:
    """Add ``init`` and ``lab`` to ``nbkit``'s subcommand parsers."""
    init_p = sub.add_parser(
        "init", help="copy the workbook's notebooks into DIR (default ./notebooks) to open and edit"
    )
    init_p.add_argument(
        "dir",
        nargs="?",
        default="notebooks",
        metavar="DIR",
        help="the folder for your copies (created if missing; default ./notebooks, where `nbkit run` looks)",
    )
    init_p.set_defaults(func=cmd_init)
    lab = sub.add_parser(
        "lab", help="start JupyterLab in DIR (default ./notebooks, else .) with this environment's kernel"
    )
    lab.add_argument(
        "dir",
        nargs="?",
        default=None,
        metavar="DIR",
        help="the folder JupyterLab opens (default ./notebooks when it exists, else the current folder)",
    )
    lab.add_argument(
        "--port", type=int, help="the server's port (default: JupyterLab's, 8888 or the next free one)"
    )
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser")
    lab.set_defaults(func=cmd_lab)


def cmd_init(args) -> int:
    try:
        res = init(args.dir)
    except UsageError as exc:
        return main_error(str(exc))
    for verb, names in (
        ("copied", res.copied),
        ("updated", res.updated),
        ("already there", res.unchanged),
        ("already there, its JupyterLab pairing with a .py file taken out", res.unpaired),
    ):
        if names:
            print(f"{verb}: {', '.join(names)}")
    if res.kept:
        print(
            f"kept as you edited them: {', '.join(res.kept)} (this nbkit's version is not copied over yours; "
            "to get it, move yours aside and run nbkit init again)"
        )
    print(
        f"your notebooks are in {res.target}; open them with: nbkit lab {res.target}   (or run one: cd "
        f"{res.target} && nbkit run 00)"
    )
    return 0


def cmd_lab(args) -> int:
    folder = args.dir if args.dir is not None else ("notebooks" if Path("notebooks").is_dir() else ".")
    try:
        cmd, env = lab_command(folder, port=args.port, browser=not args.no_browser)
    except UsageError as exc:
        return main_error(str(exc))
    python = kernel_python(env)
    if python is None or os.path.abspath(python) != os.path.abspath(sys.executable):
        return main_error(
            f"the python3 Jupyter kernel here runs {python or 'nothing (no python3 kernel)'}, not this "
            f"environment's {sys.executable}; register this one with: {sys.executable} -m ipykernel install "
            "--sys-prefix"
        )
    print(f"JupyterLab on {Path(folder).resolve()}, kernel python3 = {sys.executable}", flush=True)
    if os.name == "posix":
        os.execve(cmd[0], cmd, env)  # Ctrl-C and the server's own shutdown prompt go straight to JupyterLab
    return subprocess.call(cmd, env=env)
