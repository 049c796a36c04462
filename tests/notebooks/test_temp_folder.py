"""A SMOKE run of each notebook leaves nothing in the temp folder: no kernel socket or connection file,
no LM server log (kept with the run instead), no sweep, ZeRO rank or compiled-program folder."""

from pathlib import Path

import pytest

NOTEBOOKS = sorted(
    p.stem for p in (Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb")
)


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_notebook_leaves_nothing_in_the_temp_folder(executed_notebook, name):
    executed_notebook(name)
    assert executed_notebook.temp_leftovers[name] == [], f"{name} left these in its temp folder"
