"""The labelled benchmark corpus, as a regression test, and the bench script without its peers."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_module import load_script

from nbkit.pscheck import RuleRegistry, lint_paths

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "pscheck"


@pytest.fixture(scope="module")
def bench():
    return load_script(BENCH / "run_bench.py", "pscheck_run_bench")


def test_corpus_every_labelled_defect_found_with_its_rule_and_clean_files_clean(bench):
    defects, files = bench.load_labels(BENCH / "corpus")
    assert len(defects) >= 60 and any(f.startswith("clean_") for f in files)
    names = {r.code: r.name for r in RuleRegistry.default()}
    labels = {r.name for r in RuleRegistry.default()}
    assert {d.rule for d in defects} <= labels, "labels must be pscheck rule names"
    diags = lint_paths([BENCH / "corpus"], strict=True, extend_select=["migration"])
    got = {(Path(d.path).name, d.line, names[d.code]) for d in diags}
    want = {(d.file, d.line, d.rule) for d in defects}
    assert got == want, {"missed": sorted(want - got), "unexpected": sorted(got - want)}


def test_bench_runs_with_peers_absent(bench, capsys, monkeypatch):
    monkeypatch.setattr(
        bench,
        "availability",
        lambda: {
            "pscheck": "",
            "mypy": "mypy is not installed (pip install mypy)",
            "flake8-pydantic": "flake8-pydantic is not installed (pip install flake8-pydantic)",
        },
    )
    assert bench.main(["--copies", "1", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "[mypy] not run: mypy is not installed" in out
    assert "[flake8-pydantic] not run: flake8-pydantic is not installed" in out
    assert "Defects a peer found and pscheck missed: none" in out
    assert "files/s" in out and "mypy: absent" in out


def test_bench_output_parsers(bench):
    mypy_out = (
        "a.py:3:5: error: Incompatible types in assignment  [assignment]\n"
        'a.py:3:5: note: See https://x\nb.py:7: error: Name "id" already defined  [no-redef]\n'
    )
    assert bench.parse_output("mypy", mypy_out) == [
        ("a.py", 3, "assignment", "Incompatible types in assignment  [assignment]"),
        ("b.py", 7, "no-redef", 'Name "id" already defined  [no-redef]'),
    ]
    assert bench.parse_output("flake8-pydantic", "x/c.py:2:5: PYD002 Non-annotated attribute\n") == [
        ("c.py", 2, "PYD002", "PYD002 Non-annotated attribute")
    ]


@pytest.fixture(scope="module")
def recall():
    return load_script(BENCH / "recall.py", "pscheck_recall")


RECALL_OLD = """\
from typing import Any, Optional
from pydantic import BaseModel, Extra, validator


class A(BaseModel):
    x: Any
    y: Optional[
        int
    ]
    z: int = 0

    @validator("z")
    def pos(cls, v):
        return v

    class Config:
        extra = Extra.forbid
        schema_extra = {
            "examples": [
                {"x": 1},
            ]
        }
"""
# The diff bump-pydantic writes for RECALL_OLD (blank context lines spelt \x20): imports, two field
# defaults, the validator, and the Config block whose re-indented dict comes out as several runs.
RECALL_DIFF = """\
--- pkg/m.py
+++ pkg/m.py
@@ -1,5 +1,5 @@
 from typing import Any, Optional
-from pydantic import BaseModel, Extra, validator
+from pydantic import ConfigDict, field_validator, BaseModel
\x20
\x20
 class A(BaseModel):
@@ -6,17 +6,16 @@
-    x: Any
+    x: Any = None
     y: Optional[
         int
-    ]
+    ] = None
     z: int = 0
\x20
-    @validator("z")
+    @field_validator("z")
+    @classmethod
     def pos(cls, v):
         return v
-
-    class Config:
-        extra = Extra.forbid
-        schema_extra = {
-            "examples": [
+    model_config = ConfigDict(extra="forbid", json_schema_extra={
+        "examples": [
                 {"x": 1},
-            ]
-        }
+        ]
+    })
"""


def test_recall_sites_from_a_diff(recall, tmp_path):
    """Imports left out, one site per rewrite (the fragmented Config block joined), kinds right,
    a multi-line field's site covering its first line, and a finding there counted as flagged."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(RECALL_OLD)
    diff = tmp_path / "m.diff"
    # The hunk header above says line 3 for the second hunk; bump-pydantic's says 6: fix it here.
    diff.write_text(RECALL_DIFF)
    lib = recall.Library("t", "t", "0", "test", tmp_path, ["pkg"])
    sites, dropped = recall.sites_of(lib, diff)
    assert dropped == 1
    assert [s.kind for s in sites] == ["field defaults", "field defaults", "validators", "class Config"]
    assert 7 in sites[1].lines and 9 in sites[1].lines  # the statement's first and last line
    assert {16, 17, 18, 22} <= sites[3].lines
    doc = {"diagnostics": [{"path": str(tmp_path / "pkg" / "m.py"), "line": 7, "code": "PSC002"}]}
    recall.mark(sites, doc, lib, "migration")
    assert [bool(s.flagged) for s in sites] == [False, True, False, False]


def test_recall_kinds_of_other_sites(recall):
    site = recall.Site("t", "m.py", 1, removed=[(1, "class A(GenericModel, Generic[T]):")], added=["x"])
    assert recall.kind_of(site) == "other" and recall.other_kind(site) == "GenericModel base"
    moved = recall.Site("t", "m.py", 1, removed=[(1, "from pydantic import BaseModel, BaseSettings")])
    moved.added = ["from pydantic import BaseModel"]
    assert recall.moves_a_name(moved)
    kept = recall.Site("t", "m.py", 1, removed=[(1, "from pydantic import BaseSettings, validator")])
    kept.added = ["from pydantic import BaseSettings, field_validator"]
    assert not recall.moves_a_name(kept)
    insertion = recall.Site("t", "m.py", 9, added=["from pydantic_settings import BaseSettings"])
    assert not recall.moves_a_name(insertion)


def test_recall_joins_an_inserted_model_config_to_its_config_class(recall, tmp_path):
    """bump-pydantic adds ``model_config`` after the fields and deletes ``class Config`` below a blank
    line: one rewrite, one site, flagged where pscheck reports the Config class."""
    old = "class A(BaseModel):\n    x: int = 0\n\n    class Config:\n        extra = Extra.forbid\n"
    diff = (
        "--- pkg/m.py\n+++ pkg/m.py\n@@ -1,5 +1,3 @@\n class A(BaseModel):\n     x: int = 0\n"
        '+    model_config = ConfigDict(extra="forbid")\n\x20\n'
        "-    class Config:\n-        extra = Extra.forbid\n"
    )
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(old)
    (tmp_path / "m.diff").write_text(diff)
    lib = recall.Library("t", "t", "0", "test", tmp_path, ["pkg"])
    sites, _ = recall.sites_of(lib, tmp_path / "m.diff")
    assert [(s.kind, s.anchor) for s in sites] == [("class Config", 4)]
    recall.mark(
        sites, {"diagnostics": [{"path": str(tmp_path / "pkg/m.py"), "line": 4, "code": "PSC014"}]}, lib, "m"
    )
    assert sites[0].flagged == {"m": ["PSC014"]}
