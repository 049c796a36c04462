"""pscheck on the patterns real pydantic-v2 libraries use: compatibility branches, rule groups,
the false positives the real-code bench found (bench/pscheck/real_code.py), and its labels."""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest
from script_module import load_script

from nbkit.pscheck import RuleRegistry, lint_paths, lint_source
from nbkit.pscheck.cli import main
from nbkit.pscheck.compat import UNKNOWN, V2World
from nbkit.pscheck.resolver import Resolver

FIXTURES = Path(__file__).parent / "pscheck_fixtures"
BENCH = Path(__file__).resolve().parents[2] / "bench" / "pscheck"
HEAD = (
    "import importlib.metadata\nimport pydantic\nfrom pydantic import BaseModel, VERSION\n"
    "from pydantic.version import VERSION as PYDANTIC_VERSION\n"
    "from ._compat import PYDANTIC_V1, IS_PYDANTIC_V2\n"
    "class M(BaseModel):\n    x: int = 0\n"
)


def psc018_lines(body: str) -> list[int]:
    src = HEAD + textwrap.dedent(body)
    return [d.line - HEAD.count("\n") for d in lint_source(src) if d.code == "PSC018"]


# ---- the evaluator: every version test, each outcome ---------------------------------------------
@pytest.mark.parametrize(
    "expr,want",
    [
        ("PYDANTIC_V1", False),
        ("not PYDANTIC_V1", True),
        ("IS_PYDANTIC_V2", True),
        ("_PYDANTIC_V2", True),
        ("compat.PYDANTIC_V1", False),
        ("pydantic_v2 and other", UNKNOWN),
        ("PYDANTIC_V1 and other", False),
        ("PYDANTIC_V1 or other", UNKNOWN),
        ("IS_PYDANTIC_V2 or other", True),
        ('pydantic.VERSION.startswith("1.")', False),
        ('VERSION.startswith("2")', True),
        ('VERSION.startswith(("1", "2"))', True),
        ('VERSION.startswith("2.5")', UNKNOWN),
        ('PYDANTIC_VERSION >= "2"', True),
        ('PYDANTIC_VERSION < "2.0.0"', False),
        ('PYDANTIC_VERSION >= "2.5"', UNKNOWN),
        ("pydantic.version.VERSION < (2, 0)", False),
        ('"2" <= pydantic.VERSION', True),
        ('int(VERSION.split(".")[0]) >= 2', True),
        ('VERSION.split(".")[0] == "1"', False),
        ('VERSION[0] == "2"', True),
        ("PYDANTIC_MAJOR_VERSION == 1", False),
        ("PYDANTIC_MAJOR_VERSION >= 2", True),
        ('Version(pydantic.__version__) >= Version("2.0")', True),
        ('parse(VERSION) < parse("2")', False),
        ('importlib.metadata.version("pydantic").startswith("1")', False),
        ('importlib.metadata.version("numpy").startswith("1")', UNKNOWN),
        ('hasattr(m, "model_dump")', True),
        ('not hasattr(BaseModel, "model_fields")', False),
        ('hasattr(m, "dict")', UNKNOWN),
        ("pydantic.v1", UNKNOWN),
        ('VERSION == "2.5.0"', UNKNOWN),
        ('VERSION == "1.10.0"', False),
        ('VERSION != "1.10.0"', True),
        ("some_flag", UNKNOWN),
    ],
)
def test_version_tests_are_evaluated_in_a_v2_world(expr, want):
    tree = ast.parse(HEAD)
    r = Resolver(module="m")
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                r.imports[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                r.imports[a.asname or a.name] = f"{node.module}.{a.name}"
    r.imports.update({"Version": "packaging.version.Version", "parse": "packaging.version.parse"})
    got = V2World(r, tree).truth(ast.parse(expr, mode="eval").body)
    assert got is want


def test_module_level_names_assigned_from_a_version_test_are_flags():
    src = (
        HEAD
        + 'IS_NEW = int(VERSION.split(".")[0]) >= 2\n'
        + "def f(m: M):\n    if not IS_NEW:\n        return m.dict()\n"
    )
    assert [d.code for d in lint_source(src)] == []


# ---- compatibility branches: what is dropped and what is not ------------------------------------
@pytest.mark.parametrize(
    "body,lines",
    [
        ("def f(m: M):\n    if PYDANTIC_V1:\n        return m.dict()\n    return m.model_dump()\n", []),
        ("def f(m: M):\n    if IS_PYDANTIC_V2:\n        return m.model_dump()\n    return m.dict()\n", []),
        (
            "def f(m: M):\n    if IS_PYDANTIC_V2:\n        x = m.model_dump()\n    return m.dict()\n",
            [4],
        ),  # no return
        ("def f(m: M):\n    if IS_PYDANTIC_V2:\n        pass\n    else:\n        m.copy()\n", []),
        ("def f(m: M):\n    if PYDANTIC_V1:\n        pass\n    elif other:\n        m.copy()\n", [5]),
        (
            "def f(m: M):\n    if PYDANTIC_VERSION >= '2.5':\n        m.copy()\n",
            [3],
        ),  # minor version: unknown
        (
            "def f(m: M):\n    try:\n        return m.model_dump()\n"
            "    except Exception:\n        return m.dict()\n",
            [],
        ),
        (
            "def f(m: M):\n    try:\n        from pydantic import field_validator\n    except ImportError:\n"
            "        m.dict()\n",
            [],
        ),
        (
            "def f(m: M):\n    try:\n        return m.other()\n"
            "    except Exception:\n        return m.dict()\n",
            [5],
        ),
        (
            "def f(m: M):\n    try:\n        return m.dict()\n"
            "    except Exception:\n        return m.model_dump()\n",
            [3],
        ),
        ("def f(m: M):\n    return m.model_dump() if not PYDANTIC_V1 else m.dict()\n", []),
        ("def f(m: M):\n    return m.dict() if PYDANTIC_V1 else m.model_dump()\n", []),
        ("def f(m: M):\n    return m.dict() if cond else m.model_dump()\n", [2]),
        (
            "def f(m: M):\n    if hasattr(m, 'model_dump'):\n"
            "        return m.model_dump()\n    return m.dict()\n",
            [],
        ),
        ("def f(m: M):\n    m.dict()\n", [2]),
        (
            "class N(M):\n    def f(self):\n        if PYDANTIC_V1:\n            return self.dict()\n"
            "        return self.dict()\n",
            [5],
        ),
    ],
)
def test_calls_in_v1_only_code_are_not_findings(body, lines):
    assert psc018_lines(body) == lines


def test_models_and_config_in_v1_branches_are_not_findings():
    src = HEAD + textwrap.dedent("""
        if PYDANTIC_V1:
            class Old(BaseModel):
                a: int = "x"
                class Config:
                    orm_mode = True
        else:
            class Old(BaseModel):
                a: int = "x"
        """)
    assert [(d.code, d.line - HEAD.count("\n")) for d in lint_source(src)] == [("PSC001", 9)]


def test_real_code_false_positive_fixture_is_clean_under_every_group():
    path = FIXTURES / "real_code_false_positives.py"
    assert lint_paths([path], select=["all"]) == []
    # The fixture is not vacuous: stripped of its guards, the same calls are findings.
    text = path.read_text(encoding="utf-8")
    unguarded = text.replace("if PYDANTIC_V1:", "if cond:").replace("if not IS_V2:", "if cond:")
    assert {d.code for d in lint_source(unguarded, select=["all"])} == {"PSC018"}


# ---- rule groups -------------------------------------------------------------------------------
SRC_GROUPS = (
    "from typing import Optional\nfrom pydantic import BaseModel, Field\nclass M(BaseModel):\n"
    "    a: str = None\n    b: Optional[int]\n    c: int = Field(1)\n"
)


@pytest.mark.parametrize(
    "kw,want",
    [
        ({}, {"PSC001"}),
        ({"extend_select": ["migration"]}, {"PSC001", "PSC002"}),
        ({"select": ["migration"]}, {"PSC002"}),
        ({"select": ["MIGRATION", "strict"]}, {"PSC002", "PSC101"}),
        ({"select": ["all"]}, {"PSC001", "PSC002", "PSC101"}),
        ({"select": ["PSC0"]}, {"PSC001"}),  # a prefix never switches an opt-in rule on
        ({"select": ["PSC002"]}, {"PSC002"}),  # its exact code does
        ({"extend_select": ["PSC002"]}, {"PSC001", "PSC002"}),
        ({"select": ["all"], "ignore": ["migration"]}, {"PSC001", "PSC101"}),
        ({"select": ["all"], "ignore": ["PSC0"]}, {"PSC101"}),  # ignore prefixes reach every group
        ({"strict": True}, {"PSC001", "PSC101"}),
    ],
)
def test_rule_groups_select_like_ruff(kw, want):
    assert {d.code for d in lint_source(SRC_GROUPS, **kw)} == want


def test_default_group_holds_only_non_advice_rules():
    groups = {r.code: ("strict" if r.strict_only else r.group) for r in RuleRegistry.default()}
    assert groups["PSC002"] == "migration"
    own = {c for c, g in groups.items() if g == "migration"}
    assert own == {"PSC002", "PSC022", "PSC023", "PSC024", "PSC025"}
    # The default group's v1-API rules are selected by "migration" too, and stay default rules.
    also = {r.code for r in RuleRegistry.default() if "migration" in r.also_in}
    assert also == {"PSC014", "PSC015", "PSC017", "PSC018", "PSC019"}
    assert all(groups[c] == "default" for c in also)
    selected = {r.code for r in RuleRegistry.default().select(["migration"])}
    assert selected == own | also
    assert {r.code for r in RuleRegistry.default().select()}.isdisjoint(own)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--select", "migrate"], "--select: unknown rule code or group: migrate"),
        (["--extend-select", "PSC9X"], "--extend-select: unknown rule code or group: PSC9X"),
        (["--ignore", "defaults"], "--ignore: unknown rule code or group: defaults"),
        (["--select", "PSC001,nope"], "--select: unknown rule code or group: nope"),
        (["--extend-select"], "expected one argument"),
    ],
)
def test_selection_options_bad_input(tmp_path, capsys, args, needle):
    p = tmp_path / "a.py"
    p.write_text(SRC_GROUPS, encoding="utf-8")
    code = main([str(p), *args])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "Traceback" not in err
    assert needle in err
    if "unknown" in needle:
        assert len(err.strip().splitlines()) == 1 and "groups: default, migration, strict, all" in err


def test_list_rules_names_the_opt_in_groups(capsys):
    assert main(["--list-rules", "--no-entry-points"]) == 0
    out = capsys.readouterr().out
    assert "PSC002  warning  optional-without-default (migration, opt-in):" in out
    assert "PSC101  warning  field-positional-default (strict, opt-in):" in out


# ---- the real-code bench's own logic -------------------------------------------------------------
@pytest.fixture(scope="module")
def real():
    return load_script(BENCH / "real_code.py", "pscheck_real_code")


def test_labels_file_is_well_formed_and_explained(real):
    labels = real.load_labels(real.LABELS)
    assert len(labels) >= 50
    for key, row in labels.items():
        assert row["label"] in (True, False) and len(row["why"]) >= 15, key
        assert key.split(":")[2] == row["code"], key


def test_keys_survive_line_shifts_and_sampling_is_deterministic(real, tmp_path):
    src = "class A:\n    def f(self):\n        return x.dict()\n"
    p = tmp_path / "pkg" / "m.py"
    p.parent.mkdir()
    p.write_text(src)
    pkg = real.Package("pkg", "1", "wheel", tmp_path, [p.parent])
    doc = {
        "diagnostics": [{"path": str(p), "line": 3, "code": "PSC018", "severity": "warning", "message": "m"}]
    }
    k1 = real.findings_of(pkg, doc)[0].key
    p.write_text("# a new first line\n\n" + src)
    real._FILE_CACHE.clear()
    doc["diagnostics"][0]["line"] = 5
    assert real.findings_of(pkg, doc)[0].key == k1 == "pkg:pkg/m.py:PSC018:A.f:return x.dict()#0"
    many = [
        real.Finding("p", f"f{i}.py", 1, "PSC002", "warning", "m", "t", "s", key=f"k{i}") for i in range(45)
    ]
    few = many[:12]
    s1, s2 = real.sample(many), real.sample(list(reversed(many)))
    assert len(s1["PSC002"]) == 30 and [f.key for f in s1["PSC002"]] == [f.key for f in s2["PSC002"]]
    assert len(real.sample(few)["PSC002"]) == 12


def test_bad_labels_file_is_one_clear_error(real, tmp_path):
    bad = tmp_path / "labels.jsonl"
    bad.write_text('{"key": "a", "label": true, "why": "x"}\nnot json\n')
    with pytest.raises(SystemExit, match=r"labels.jsonl:2: not JSON"):
        real.load_labels(bad)
    bad.write_text(json.dumps({"key": "a", "label": "yes"}) + "\n")
    with pytest.raises(SystemExit, match=r"labels.jsonl:1: expected an object with 'key' and 'label'"):
        real.load_labels(bad)


def test_wilson_interval(real):
    lo, hi = real.wilson(30, 30)
    assert 0.88 < lo < 0.89 and hi == 1.0
    assert real.wilson(0, 0) == (0.0, 1.0)


def test_pydantic_base_reexported_by_a_project_module_is_recognised(tmp_path):
    """llama-index style: ``from .bridge.pydantic import BaseModel`` where that module re-exports
    pydantic's; without the bridge in the run the base stays unknown (no guess)."""
    (tmp_path / "pkg" / "bridge").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "bridge" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "bridge" / "pydantic.py").write_text("from pydantic import BaseModel, Field\n")
    user = tmp_path / "pkg" / "user.py"
    user.write_text("from .bridge.pydantic import BaseModel\n\nclass U(BaseModel):\n    email: str = None\n")
    assert [(d.code, d.line) for d in lint_paths([tmp_path / "pkg"])] == [("PSC001", 4)]
    assert lint_paths([user]) == []
