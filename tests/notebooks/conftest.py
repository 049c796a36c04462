"""Execute each notebook once per session through papermill with SMOKE=True.

``executed_notebook(name, **params)`` returns ``(path, metrics)``; a failing notebook fails the test
with the failing cell and its message. Each notebook runs with a temp folder of its own (``$TMPDIR`` for
its kernel and what that starts, ``tempfile.tempdir`` here); ``executed_notebook.temp_leftovers[name]``
lists what it left there.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import pytest

from nbkit.catalog import resolve_notebook
from nbkit.execute import execute

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def temp_folder(folder: Path):
    """``folder`` as the temp folder of this process and of every process it starts, for the block."""
    saved_env, saved_dir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = str(folder), str(folder)
    try:
        yield folder
    finally:
        tempfile.tempdir = saved_dir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env


@pytest.fixture(scope="session")
def executed_notebook(tmp_path_factory):
    cache: dict[tuple, tuple[Path, dict]] = {}

    def run(name: str, **params):
        key = (name, tuple(sorted(params.items())))
        if key not in cache:
            path = resolve_notebook(name, ROOT / "notebooks")
            out_dir = tmp_path_factory.mktemp(path.stem)
            with temp_folder(tmp_path_factory.mktemp(f"{path.stem}-tmp")) as own_tmp:
                result = execute(path, out_dir, {"SMOKE": True, **params}, progress=False)
            if not params:
                run.temp_leftovers[path.stem] = sorted(p.name for p in own_tmp.iterdir())
            if not result.ok:
                pytest.fail(
                    f"notebook failed: {result.error} (executed copy: {result.output})", pytrace=False
                )
            cache[key] = (result.output, result.metrics)
        return cache[key]

    run.temp_leftovers = {}
    return run
