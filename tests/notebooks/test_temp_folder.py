"""A SMOKE run of each notebook leaves nothing in the temp folder: no kernel socket or connection file,
no LM server log (kept with the run instead), no sweep, ZeRO rank or compiled-program folder, no module PyG
generated. torch's compile cache (``torchinductor_<user>``) is torch's own, meant to outlive a run and be
shared by the next (``TORCHINDUCTOR_CACHE_DIR`` moves it), so it is not counted."""

from pathlib import Path

import pytest

NOTEBOOKS = sorted(
    p.stem for p in (Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb")
)


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_notebook_leaves_nothing_in_the_temp_folder(executed_notebook, name):
    executed_notebook(name)
    left = [n for n in executed_notebook.temp_leftovers[name] if not n.startswith("torchinductor_")]
    assert left == [], f"{name} left these in its temp folder"
