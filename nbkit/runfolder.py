"""A run folder, written file by file, so a failed or interrupted run keeps everything that finished.

``nbkit run`` and ``nbkit sweep`` create their output folder when the run starts and keep it,
whatever happens next:

* ``run.json`` (``sweep.json`` for a sweep) records what was asked — each notebook's path and the
  SHA-256 of its source, the parameters (as Python literals) and a SHA-256 over them — so
  ``--resume`` re-runs exactly that, and refuses when a notebook or the record changed since; and the
  versions of Python and the packages nbkit declares (``nbkit compare`` names those that differ);
* ``index.json`` holds each notebook's status (``ok``, ``failed``, ``interrupted`` or ``not started``);
  ``index.html`` shows it;
* each notebook runs into a hidden staging folder beside the run and its files are renamed into the
  run as soon as it ends, ok or failed (papermill keeps a failed or interrupted notebook executed up
  to the cell that stopped it); every file the runner writes itself is written under a temporary
  name and renamed, so the folder never holds a half-written file.

A write refused by the file system (disk full, read-only folder, quota) stops the run with one
:class:`OutputError`; what was already renamed into the folder stays intact.
"""

from __future__ import annotations

import ast
import errno
import hashlib
import json
import os
import platform
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeGuard

from nbkit.errors import UsageError
from nbkit.extras import DIST

RUN_RECORD = "run.json"
SWEEP_RECORD = "sweep.json"
STATUS_FILE = "index.json"
RECORD_VERSION = 1
# The run folder a notebook's files are published into, as its kernel sees it (nbkit run, nbkit sweep).
RUN_DIR_ENV = "NBKIT_RUN_DIR"
# The folder a kernel of nbkit run/sweep writes the logs worth keeping into (its notebook's staging folder:
# they are published into the run with the notebook); without it a log lives in the temp folder only as
# long as what writes it.
LOG_DIR_ENV = "NBKIT_LOG_DIR"
# NAME.kernel.log: what a notebook's kernel wrote outside its cells, published with the notebook when there
# was anything.
KERNEL_LOG_SUFFIX = ".kernel.log"

OK, FAILED, INTERRUPTED, NOT_STARTED = "ok", "failed", "interrupted", "not started"

# The file system refusing a write: the run cannot go on, and retrying the next notebook would only fail
# again.
DISK_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EFBIG}


class OutputError(Exception):
    """The output folder stopped taking files (disk full, read-only, quota); the run stops there."""


class ResumeError(UsageError):
    """``--resume DIR`` cannot resume DIR (not a run folder, or its notebooks or record changed)."""


def is_disk_error(exc: BaseException) -> TypeGuard[OSError]:
    return isinstance(exc, OSError) and exc.errno in DISK_ERRNOS


def output_error(where: Path, exc: OSError) -> OutputError:
    return OutputError(f"cannot write {where}: {exc.strerror or exc} (errno {exc.errno})")


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``path`` under a temporary name beside it, then rename: readers see the old file or the new
    one."""
    part = path.with_name(f".{path.name}.part-{os.getpid()}")
    try:
        if isinstance(data, str):
            part.write_text(data, encoding="utf-8")
        else:
            part.write_bytes(data)
        os.replace(part, path)
    except OSError as exc:
        part.unlink(missing_ok=True)
        if is_disk_error(exc):
            raise output_error(path, exc) from None
        raise


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, default=str))


def move_in(staging: Path, dest: Path) -> dict[str, Path]:
    """Rename every file of ``staging`` into ``dest`` (same file system: each rename is atomic).

    A file ``dest`` already has with the same content is left as it is (``plotly.min.js`` once per run).
    Returns {name: new path}.
    """
    moved: dict[str, Path] = {}
    if not staging.is_dir():
        return moved
    for src in sorted(staging.iterdir()):
        if not src.is_file() or src.name.startswith("."):
            continue
        target = dest / src.name
        try:
            if src.name == "plotly.min.js" and target.is_file():
                src.unlink()
                continue
            os.replace(src, target)
        except OSError as exc:
            if is_disk_error(exc):
                raise output_error(target, exc) from None
            raise
        moved[src.name] = target
    return moved


def move_dir_in(staging: Path, dest: Path) -> None:
    """Rename the folder ``staging`` to ``dest`` (replacing an earlier ``dest`` of the same name)."""
    try:
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(staging, dest)
    except OSError as exc:
        if is_disk_error(exc):
            raise output_error(dest, exc) from None
        raise


# -- what was asked ---------------------------------------------------------------------------------


def source_hash(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def literal_params(params: Mapping[str, Any]) -> dict[str, str]:
    """Parameters as Python literals (``repr``): tuples, floats and paths come back exactly."""
    return {k: repr(v) for k, v in params.items()}


def params_from_literals(literals: Mapping[str, str], where: str) -> dict[str, Any]:
    out = {}
    for key, text in literals.items():
        try:
            out[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise ResumeError(f"{where}: parameter {key} = {text!r} is not a Python literal") from None
    return out


def package_versions() -> dict[str, str]:
    """Python's version, nbkit's and that of every package nbkit declares (its core and every extra; not
    its development tools): what a run's figures may depend on, recorded so two runs can be compared.
    A declared package that is absent reads "not installed"."""
    from importlib import metadata

    out = {"python": platform.python_version()}
    try:
        out["nbkit"] = metadata.version(DIST)
        declared = metadata.requires(DIST) or []
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        declared = []
    for requirement in declared:
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
        if name is None or 'extra == "dev"' in requirement or name.group(0) == DIST:
            continue
        try:
            out[name.group(0)] = metadata.version(name.group(0))
        except metadata.PackageNotFoundError:
            out[name.group(0)] = "not installed"
    return out


def params_hash(blob: Any) -> str:
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode("utf-8")).hexdigest()


def read_record(folder: Path, name: str) -> dict[str, Any]:
    """The record ``name`` of a run folder, checked against the SHA-256 it carries (ResumeError when
    unusable)."""
    folder = Path(folder).expanduser()
    path = folder / name
    if not folder.is_dir():
        raise ResumeError(f"--resume {folder}: not a folder")
    if not path.is_file():
        raise ResumeError(
            f"--resume {folder}: no {name} in it (not a folder written by this command, or written before "
            "resume existed)"
        )
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ResumeError(f"{path}: unreadable ({exc})") from None
    if not isinstance(record, dict) or record.get("version") != RECORD_VERSION:
        raise ResumeError(f"{path}: expected a version {RECORD_VERSION} record")
    if params_hash(record.get("parameters")) != record.get("parameters_sha256"):
        raise ResumeError(
            f"{path}: its parameters were edited since the run (their SHA-256 differs); start a new run"
        )
    return record


def check_source(record_path: Path, name: str, path: Path, sha256: str) -> None:
    """Refuse a resume whose notebook is gone or changed since the recorded run."""
    if not path.is_file():
        raise ResumeError(f"{record_path}: notebook {name} ({path}) no longer exists; start a new run")
    if source_hash(path) != sha256:
        raise ResumeError(
            f"{record_path}: notebook {name} ({path}) changed since the run (its SHA-256 differs); "
            "start a new run to run the changed notebook"
        )


def read_status(folder: Path) -> dict[str, dict[str, Any]]:
    """{notebook: its index.json entry} of an earlier run ({} when there is none)."""
    try:
        data = json.loads((Path(folder) / STATUS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {e["name"]: e for e in data.get("notebooks", []) if isinstance(e, dict) and "name" in e}


def status_entries(results: Iterable[Any]) -> dict[str, Any]:
    return {
        "notebooks": [
            {
                "name": r.name,
                "status": r.status,
                "seconds": round(r.seconds, 2),
                "error": r.error,
                "ipynb": r.output.name if r.output else None,
                "html": r.html.name if r.html else None,
            }
            for r in results
        ]
    }
