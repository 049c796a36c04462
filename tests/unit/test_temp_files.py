"""What a process of nbkit's leaves in the temp folder when it exits: nothing of PyG's generated modules."""

from __future__ import annotations

import os
import subprocess
import sys


def test_a_process_that_built_pyg_layers_removes_their_generated_modules_at_exit(tmp_path):
    code = (
        "import tempfile, pathlib\n"
        "from nbkit.kg import models\n"
        "from torch_geometric.nn import GCNConv, RGCNConv\n"
        "models.RGCNEncoder\n"  # the clean-up is registered when models is imported
        "models.StackedRGCNConv(4, 4, 2)\n"
        "GCNConv(4, 4); RGCNConv(4, 4, 2)\n"
        "print(sorted(p.name for p in pathlib.Path(tempfile.gettempdir()).iterdir()))\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    during = [n for n in eval(out.stdout.strip().splitlines()[-1]) if n.endswith(".py")]
    assert any(n.startswith("nbkit.kg.models_StackedRGCNConv_propagate_") for n in during), during
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".py"] == []
