"""Every notebook runs headless with SMOKE=True and records what the workbook promises."""

from pathlib import Path

import pytest

NOTEBOOKS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_headless_and_records_its_device(executed_notebook, name):
    path, metrics = executed_notebook(name)
    assert path.is_file()
    assert metrics.get("device") in ("cpu", "cuda", "cuda:0"), f"{name} records the device it ran on"
