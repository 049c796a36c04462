"""Execute each notebook once per session through papermill with SMOKE=True.

``executed_notebook(name, **params)`` returns ``(path, metrics)``; a failing notebook fails the test
with the failing cell and its message.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nbkit.catalog import resolve_notebook
from nbkit.execute import execute

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def executed_notebook(tmp_path_factory):
    cache: dict[tuple, tuple[Path, dict]] = {}

    def run(name: str, **params):
        key = (name, tuple(sorted(params.items())))
        if key not in cache:
            path = resolve_notebook(name, ROOT / "notebooks")
            out_dir = tmp_path_factory.mktemp(path.stem)
            result = execute(path, out_dir, {"SMOKE": True, **params}, progress=False)
            if not result.ok:
                pytest.fail(
                    f"notebook failed: {result.error} (executed copy: {result.output})", pytrace=False
                )
            cache[key] = (result.output, result.metrics)
        return cache[key]

    return run
