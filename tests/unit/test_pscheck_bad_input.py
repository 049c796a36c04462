"""pscheck on hostile or odd input: one table, each row one class of bad input.

Every row runs the command line on inputs generated in ``tmp_path`` and checks the exit status,
what it says, and that no traceback escapes. Deep inheritance is tested for both correctness
(rules still see inherited fields) and cost (CPU time, robust to a loaded machine).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from nbkit.pscheck import engine, hierarchy, lint_paths_report, model
from nbkit.pscheck.cli import main

HEAD = "from pydantic import BaseModel, field_validator\n\n"


def chain(n: int, *, reverse: bool = False, leaf_extra: str = "") -> str:
    """``C0(BaseModel)``, ``C1(C0)`` ... ``C{n-1}``, each with one field; children first if ``reverse``."""
    blocks = [
        f"class C{i}({'BaseModel' if i == 0 else f'C{i - 1}'}):\n    f{i}: int = {i}\n"
        + (leaf_extra if i == n - 1 else "")
        for i in range(n)
    ]
    if reverse:
        blocks.reverse()
    return "from __future__ import annotations\n" + HEAD + "\n".join(blocks)


def _file(name: str, text: str) -> Callable[[Path], list[Path]]:
    def build(tmp: Path) -> list[Path]:
        p = tmp / name
        p.write_text(text, encoding="utf-8")
        return [p]

    return build


def _empty_dir(tmp: Path) -> list[Path]:
    (tmp / "pkg" / "sub").mkdir(parents=True)
    (tmp / "pkg" / "README.txt").write_text("no code here\n")
    return [tmp / "pkg"]


def _fifo_in_dir(tmp: Path) -> list[Path]:
    (tmp / "pkg").mkdir()
    (tmp / "pkg" / "ok.py").write_text(HEAD + "class U(BaseModel):\n    x: int = 1\n")
    os.mkfifo(tmp / "pkg" / "pipe.py")  # opening it would block forever
    return [tmp / "pkg"]


def _fifo_named(tmp: Path) -> list[Path]:
    os.mkfifo(tmp / "pipe.py")
    return [tmp / "pipe.py"]


def _over_default_limit(tmp: Path) -> list[Path]:
    p = tmp / "generated.py"
    p.write_bytes(b"# " + b"x" * engine.DEFAULT_MAX_BYTES + b"\n")  # never parsed, so cheap
    return [p]


CYCLE = HEAD + (
    "class A(B, BaseModel):\n    a: int = 0\n\n"
    "class B(A):\n    b: int = 0\n\n    @field_validator('nope')\n    @classmethod\n"
    "    def v(cls, v):\n        return v\n"
)
OVERRIDE = "    f0: str = 'x'\n"  # on the leaf: changes the root's int field (PSC012, a warning)

# (id, build inputs, extra args, exit status, text that must appear in stdout+stderr, text that must not)
CASES = [
    ("chain-1200-deep", _file("deep.py", chain(1200)), [], 0, "1200 model(s)", "PSC"),
    (
        "chain-children-first",
        _file("rev.py", chain(600, reverse=True, leaf_extra=OVERRIDE)),
        [],
        0,
        "changes the type of C0.f0",
        "PSC999",
    ),
    ("circular-inheritance", _file("cycle.py", CYCLE), [], 0, "2 model(s)", "PSC"),
    ("dir-without-py-files", _empty_dir, [], 0, "no Python files found under", "PSC"),
    ("fifo-inside-walked-dir", _fifo_in_dir, [], 0, "skipped", "PSC"),
    ("fifo-named-explicitly", _fifo_named, [], 2, "not a regular file or directory (a FIFO)", "Traceback"),
    (
        "file-over-default-limit",
        _over_default_limit,
        [],
        2,
        "over the 2.0 MiB limit (pscheck needs about",
        "Traceback",
    ),
    (
        "file-over-given-limit",
        _file("m.py", HEAD + "# " + "y" * 3000 + "\n"),
        ["--max-bytes", "1000"],
        2,
        "raise it with --max-bytes N",
        "Traceback",
    ),
]


@pytest.mark.parametrize(
    ("build", "args", "status", "says", "never"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input(tmp_path, capsys, build, args, status, says, never):
    paths = build(tmp_path)
    code = main([*map(str, paths), *args])
    out, err = capsys.readouterr()
    text = out + err
    assert "Traceback" not in text
    assert code == status, text
    assert says in text
    assert never not in out  # stdout holds the diagnostics


def test_fifo_note_names_the_file_and_its_kind(tmp_path, capsys):
    (path,) = _fifo_in_dir(tmp_path)
    assert main([str(path)]) == 0
    err = capsys.readouterr().err
    assert f"note: skipped {path / 'pipe.py'}: not a regular file (a FIFO)" in err
    assert "1 file(s)" in err


def test_hierarchy_over_the_depth_limit_is_one_clear_diagnostic(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(hierarchy, "MAX_ANCESTORS", 20)
    monkeypatch.setattr(engine, "MAX_ANCESTORS", 20)
    p = tmp_path / "gen.py"
    p.write_text(chain(30))
    assert main([str(p)]) == 2
    out, err = capsys.readouterr()
    # C21 is the first class with 21 classes above it; C21..C29 are not checked, C0..C20 are.
    assert out.count("PSC000") == 1 and "9 model(s) from C21 on inherit from more than 20 classes" in out
    assert "21 model(s)" in err


def test_deep_chain_costs_seconds_not_minutes(tmp_path):
    """A 3,000-class chain took over a minute before the MRO was memoised (cubic in depth)."""
    p = tmp_path / "deep.py"
    p.write_text(
        chain(
            3000,
            leaf_extra="    @field_validator('f0', 'missing')\n    @classmethod\n"
            "    def v(cls, v):\n        return v\n",
        )
    )
    start = time.process_time()
    report = lint_paths_report([p])
    cpu = time.process_time() - start
    assert report.models_checked == 3000
    # The leaf's validator sees the root's field 3,000 levels up and flags only the missing one.
    assert [d.code for d in report.diagnostics] == ["PSC008"] and "'missing'" in report.diagnostics[0].message
    assert cpu < 10, f"{cpu:.1f} CPU-s for a 3000-class chain"


def _reference_mro(m: model.ModelInfo) -> list[model.ModelInfo]:
    """The recursive walk the memoised, iterative one replaced (fine at small depth)."""
    seen: list[model.ModelInfo] = []

    def walk(x: model.ModelInfo) -> None:
        if any(x is s for s in seen):
            return
        seen.append(x)
        for p in x.parents:
            walk(p)

    walk(m)
    return seen


@pytest.mark.parametrize("seed", range(6))
def test_memoised_ancestry_matches_the_plain_walk(tmp_path, seed):
    """Random diamonds and multiple inheritance, classes in random file order: the MRO, the nearest
    definition of each field/config key, and the inherited fields equal the plain recursive walk."""
    from nbkit.pscheck.engine import parse_source
    from nbkit.pscheck.hierarchy import resolve_models
    from nbkit.pscheck.reader import describe_module

    rng = random.Random(seed)
    n = 40
    blocks = []
    for i in range(n):
        bases = rng.sample([f"K{j}" for j in range(i)], min(i, rng.choice([1, 1, 2, 3]))) or ["BaseModel"]
        body = [f"    {rng.choice('abcdef')}: int = {i}" for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.3:
            body.append(f"    model_config = {{'{rng.choice(['frozen', 'extra'])}': {i}}}")
        blocks.append(f"class K{i}({', '.join(bases)}):\n" + ("\n".join(body) or "    pass") + "\n")
    rng.shuffle(blocks)  # subclasses before their bases, as in files that use forward references
    text = "from pydantic import BaseModel\n\n" + "\n".join(blocks)
    tree, err = parse_source("r.py", text)
    assert err is None
    models = resolve_models([describe_module("r.py", text, tree)])
    assert len(models) == n
    for m in models:
        ref = _reference_mro(m)
        assert list(m.mro()) == ref
        for name in "abcdef":
            want = next((x for x in ref[1:] if name in x.fields), None)
            got = m.inherited_field(name)
            assert (got[0] if got else None) is want
        for key in ("frozen", "extra"):
            want = next((x for x in ref if key in x.config), None)
            assert m.nearest("config", key) is want
        assert set(m.inherited_fields()) == {f for x in ref[1:] for f in x.fields}
