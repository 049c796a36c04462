"""Notebooks narrate and call: no function or class defined in a cell, no control flow (``if``,
``for``, ``while``, a comprehension or a conditional expression), nbkit reached only through the
modules a notebook is meant to use (a theme's ``context``, ``panels``, ``experiments`` and ``claims``,
nbkit's ``claims`` and ``record``, and ``nbkit`` itself for ``nbkit.record``/``nbkit.require``), and
every theme notebook ends its ledger with the same two calls on its context."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.py"))
ALLOWED = {"context", "panels", "experiments", "claims", "record"}
CONTROL_FLOW = {
    ast.If: "an if",
    ast.For: "a for loop",
    ast.AsyncFor: "a for loop",
    ast.While: "a while loop",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a comprehension",
    ast.IfExp: "a conditional expression",
}


def offences(source: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            out.append(f"line {node.lineno}: defines {getattr(node, 'name', 'a lambda')}")
        elif type(node) in CONTROL_FLOW:
            out.append(f"line {node.lineno}: {CONTROL_FLOW[type(node)]}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("nbkit.") and a.name.split(".")[-1] not in ALLOWED:
                    out.append(f"line {node.lineno}: import {a.name}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "nbkit":
            mod = node.module or ""
            for a in node.names:
                target = f"{mod}.{a.name}"
                ok = mod.split(".")[-1] in ALLOWED or (a.name in ALLOWED and mod.count(".") <= 1)
                if not ok:
                    out.append(
                        f"line {node.lineno}: from {mod} import {a.name} "
                        f"({target} is not a notebook-facing module)"
                    )
    return sorted(out, key=lambda o: int(o.split(":")[0].split()[1]))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_cells_only_narrate_and_call(path):
    assert offences(path.read_text(encoding="utf-8")) == []


THEME_NOTEBOOKS = [p for p in NOTEBOOKS if not p.name.startswith("00_")]


@pytest.mark.parametrize("path", THEME_NOTEBOOKS, ids=lambda p: p.name)
def test_theme_notebook_ends_with_headline_and_judge_on_its_context(path):
    """The last code cell of every theme notebook is ``claims.headline(ctx)`` then
    ``claims.judge(ctx)``: the same ledger call on the context the notebook opened."""
    cells = [
        c
        for c in path.read_text(encoding="utf-8").split("# %%")
        if c.strip() and not c.lstrip().startswith("[markdown]")
    ]
    last = [ln for ln in cells[-1].splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert last == ["claims.headline(ctx)", "claims.judge(ctx)"], last


def test_the_rule_catches_control_flow():
    src = (
        "a = 1\n"
        "if a:\n    a = 2\n"
        "for x in [1]:\n    pass\n"
        "while False:\n    pass\n"
        "b = [x for x in [1]]\n"
        "c = {x: x for x in [1]}\n"
        "d = sum(x for x in [1])\n"
        "e = 1 if a else 2\n"
    )
    assert [o.split(": ", 1)[1] for o in offences(src)] == [
        "an if",
        "a for loop",
        "a while loop",
        "a comprehension",
        "a comprehension",
        "a comprehension",
        "a conditional expression",
    ]


def test_the_rule_catches_a_definition_and_a_deep_import():
    src = "import nbkit\nfrom nbkit.kg import panels, claims\nfrom nbkit.claims import claims_frame\n"
    assert offences(src) == []
    bad = src + (
        "def show(x):\n    return x\nfrom nbkit.kg.config import preset\nimport nbkit.device\nf = lambda: 1\n"
    )
    assert [o.split(":")[0] for o in offences(bad)] == ["line 4", "line 6", "line 7", "line 8"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_code_cell_checks_the_notebooks_own_parameters(path):
    """Right after the parameters cell, before any work: `nbkit.check_parameters(globals(), "<its stem>")`,
    so papermill and JupyterLab users meet a bad value as the same one line `nbkit run` prints."""
    import nbformat

    code = [c for c in nbformat.read(path.with_suffix(".ipynb"), as_version=4).cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", []), "the parameters cell is the first code cell"
    calls = [ast.unparse(s) for s in ast.parse(code[1].source).body]
    assert calls[:2] == ["import nbkit", f"nbkit.check_parameters(globals(), '{path.stem}')"], calls[:3]
