"""nbkit's import graph: no cycles among its modules, and its own modules imported at module level.

An import of an nbkit module inside a function is how cycles hid (a module that needs another at
run time but cannot import it at load time); heavy third-party libraries (torch, deepspeed, dspy,
transformers, torch_geometric) stay lazy, behind ``TYPE_CHECKING`` for hints, except that a theme
module defining torch classes may import torch at its top (``import nbkit`` stays instant:
``tests/unit/test_packaging.py`` holds that).
"""

from __future__ import annotations

from pathlib import Path

from script_module import load_script

ROOT = Path(__file__).resolve().parents[2]


def _graph():
    return load_script(ROOT / "scripts" / "import_graph.py", "import_graph")


def test_no_import_cycles_among_nbkit_modules():
    """No circle, counting the imports made for type checking as edges."""
    g = _graph()
    edges, _ = g.scan()
    assert g.cycles(edges) == []


def test_nbkit_modules_are_imported_at_module_level():
    g = _graph()
    _, inner = g.scan()
    assert [f"{f}:{line} imports {m}" for f, line, m in inner] == []


def test_the_scanner_finds_a_cycle_and_an_inner_import(tmp_path):
    """The scanner itself can fail: a two-module cycle and an in-function import are both reported."""
    g = _graph()
    pkg = tmp_path / "nbkit"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from nbkit.b import x\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from nbkit.c import y\n"
        "x = 1\ndef f():\n    from nbkit.a import x\n"
    )
    (pkg / "c.py").write_text("from nbkit.b import x\n")
    edges, inner = g.scan(pkg, type_edges=False)
    assert g.cycles(edges) == []  # b -> c is for type checking only
    edges, _ = g.scan(pkg)
    assert g.cycles(edges) == [["nbkit.b", "nbkit.c"]]  # ... and still a circle
    assert [(m) for _, _, m in inner] == ["nbkit.a"]
    (pkg / "b.py").write_text("from nbkit.a import z\nx = 1\n")
    edges, _ = g.scan(pkg)
    assert g.cycles(edges) == [["nbkit.a", "nbkit.b"]]
