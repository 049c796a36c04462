"""The repo's promises about itself: environment.yml agrees with pyproject, notebooks follow the rules."""

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
STANDARD_KEYS = {"SMOKE", "DEVICE", "SEED"}


def test_environment_yml_agrees_with_pyproject():
    rc = subprocess.run([sys.executable, str(ROOT / "scripts" / "sync_environment.py"), "--check"], capture_output=True, text=True)
    assert rc.returncode == 0, rc.stderr


def test_four_themed_notebooks_exist():
    stems = [p.stem for p in NOTEBOOKS]
    for prefix in ("01_kg_gnn", "02_zero_ladder", "03_dspy_signatures", "04_finetune_audit"):
        assert prefix in stems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_has_one_literal_parameters_cell_with_standard_keys(path):
    import ast

    nb = nbformat.read(path, as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    tree = ast.parse(tagged[0].source)
    names = set()
    for node in tree.body:
        assert isinstance(node, ast.Assign), f"parameters cell holds assignments only, got {ast.dump(node)[:60]}"
        ast.literal_eval(node.value)  # literals only
        names.update(t.id for t in node.targets)
    assert STANDARD_KEYS <= names
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.lstrip().startswith("# "), "title first"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_stripped_and_paired(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "store notebooks stripped (nbstripout)"
    paired = path.with_suffix(".py")
    assert paired.is_file(), "paired py:percent file (jupytext)"
    import jupytext

    from_py = jupytext.read(paired)
    assert [c.source for c in from_py.cells] == [c.source for c in nb.cells], f"{path.name} and {paired.name} out of sync: make sync"


def test_import_nbkit_is_instant_and_light():
    code = "import time, sys; t=time.perf_counter(); import nbkit, nbkit.kg, nbkit.zero, nbkit.signatures, nbkit.audit, nbkit.pscheck; " \
           "heavy=[m for m in ('torch','torch_geometric','deepspeed','dspy','peft','transformers','pykeen') if m in sys.modules]; " \
           "print(time.perf_counter()-t, heavy)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    seconds, heavy = out.stdout.split(" ", 1)
    assert heavy.strip() == "[]", f"import nbkit pulled in heavy modules: {heavy}"
