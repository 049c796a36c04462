"""Every pscheck rule: its documented bad/good examples, then edge cases (positive and negative)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nbkit.pscheck import RuleRegistry, lint_paths, lint_source
from nbkit.pscheck.plugins.created_at import CreatedAtDatetimeFactory

FIXTURES = Path(__file__).parent / "pscheck_fixtures"
ALL_RULES = list(RuleRegistry.default()) + [CreatedAtDatetimeFactory()]
HEADER = (
    "from __future__ import annotations\nimport datetime\nfrom datetime import date, datetime as DT\n"
    "from typing import Annotated, ClassVar, Literal, Optional, Union\nimport uuid\n"
    "from pydantic import BaseModel, ConfigDict, Field, field_validator, validator, root_validator\n"
)
HEADER_LINES = HEADER.count("\n")


def codes(src: str, code: str | None = None, **kw) -> list[tuple[str, int]]:
    """(code, line-in-snippet) of findings for ``src`` written after HEADER."""
    text = HEADER + textwrap.dedent(src)
    if code:
        kw["select"] = [code]
    diags = lint_source(text, **kw)
    return [(d.code, d.line - HEADER_LINES) for d in diags]


def test_at_least_twelve_rules_with_docs():
    default = [r for r in RuleRegistry.default() if not r.strict_only]
    assert len(default) >= 12
    for r in ALL_RULES:
        assert (
            r.code and r.name and r.summary and r.bad.strip() and r.good.strip() and len(r.rationale) > 80
        ), r.code
        assert r.severity in ("error", "warning")
    assert len({r.code for r in ALL_RULES}) == len(ALL_RULES)
    assert len({r.name for r in ALL_RULES}) == len(ALL_RULES)


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_documented_bad_example_triggers_the_rule(rule):
    found = lint_source(
        rule.bad, select=[rule.code], plugins=[type(rule)] if rule.code.startswith("PSP") else ()
    )
    assert [d.code for d in found] == [rule.code], found
    assert all(d.severity == rule.severity and d.rule == rule.name for d in found)


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_documented_good_example_is_clean_under_every_rule(rule):
    found = lint_source(rule.good, strict=True, plugins=[CreatedAtDatetimeFactory])
    assert found == [], found


# ---- edge cases: (code, snippet, expected lines within the snippet) -----------------------------
CASES = [
    # PSC001 default-type-mismatch
    (
        "PSC001",
        """
class M(BaseModel):
    a: str = None
    b: int = "3"
    c: Optional[int] = "x"
    d: list[int] = ["a"]
    e: float = 1
    f: Optional[str] = None
    g: Union[int, str] = 2.5
    h: Annotated[str, Field(default=None)]
    i: int = Field(default=None, validate_default=True)
    j: bool = 0
    k: tuple[int, int] = (1,)
""",
        [3, 4, 5, 6, 9, 10, 12, 13],
    ),
    (
        "PSC001",
        """
class M(BaseModel):
    model_config = ConfigDict(validate_default=True)
    a: int = "3"
class Other(BaseModel):
    x: int = 1
class N(BaseModel):
    sub: Other = None
    when: DT = None
    maybe: "Optional[Other]" = None
""",
        [8, 9],
    ),
    # PSC002 optional-without-default
    (
        "PSC002",
        """
class M(BaseModel):
    a: Optional[int]
    b: int | None
    c: Union[str, None]
    d: Optional[int] = None
    e: Optional[int] = Field(...)
    f: Optional[int] = ...
    g: Optional[list[int]] = Field(default_factory=list)
    h: Annotated[Optional[int], Field(description="x")]
""",
        [3, 4, 5, 10],
    ),
    # PSC003 default-and-default-factory
    (
        "PSC003",
        """
class M(BaseModel):
    a: list = Field([], default_factory=list)
    b: list = Field(..., default_factory=list)
    c: Annotated[list, Field(default_factory=list)] = []  # measured: TypeError too
""",
        [3, 5],
    ),
    # PSC004 default-factory-called
    (
        "PSC004",
        """
from functools import partial
class Cfg(BaseModel):
    x: int = 0
class M(BaseModel):
    a: list = Field(default_factory=list())
    b: str = Field(default_factory=uuid.uuid4())
    c: Cfg = Field(default_factory=Cfg())
    d: list = Field(default_factory=[])
    e: list = Field(default_factory=partial(list, [1]))
    f: list = Field(default_factory=list)
    g: list = Field(default_factory=lambda: [1])
    h: list = Field(default_factory=make_factory())
""",
        [6, 7, 8, 9],
    ),
    # PSC005 default-violates-constraint
    (
        "PSC005",
        """
class M(BaseModel):
    a: int = Field(default=0, gt=0)
    b: str = Field(default="toolong", max_length=3)
    c: str = Field(default="ABC", pattern=r"^[a-z]+$")
    d: Annotated[int, Field(le=10)] = 11
    e: int = Field(default=5, multiple_of=2)
    f: Optional[int] = Field(default=None, gt=0)
    g: list[int] = Field(default=[], min_length=1)
    h: int = Field(default=1, gt=0)
    i: str = Field(default="ok", pattern=r"(unclosed")
""",
        [3, 4, 5, 6, 7, 9],
    ),
    # PSC006 constraint-not-applicable
    (
        "PSC006",
        """
class M(BaseModel):
    a: int = Field(max_length=3)
    b: str = Field(gt=0)
    c: Optional[int] = Field(default=None, pattern="x")
    d: Union[int, str] = Field(max_length=3)
    e: list[int] = Field(max_length=3)
    f: datetime.date = Field(gt=datetime.date(2020, 1, 1))
    g: Annotated[float, Field(decimal_places=2)] = 1.0
    h: SomeType = Field(max_length=3)
""",
        [3, 4, 5, 6, 9],
    ),
    # PSC007 literal-default-not-allowed
    (
        "PSC007",
        """
class M(BaseModel):
    a: Literal["x", "y"] = "z"
    b: Optional[Literal["x"]] = None
    c: Literal[1, 2] = True
    d: Literal["x"] | None = "y"
    e: Literal["x", "y"] = Field(default="y")
""",
        [3, 5, 6],
    ),
    # PSC008 validator-unknown-field
    (
        "PSC008",
        """
class M(BaseModel):
    a: int
    @field_validator("a", "b")
    @classmethod
    def v(cls, x):
        return x
    @field_validator("zz", check_fields=False)
    @classmethod
    def w(cls, x):
        return x
    @validator("c")
    def old(cls, x):
        return x
class N(M):
    @field_validator("a")
    @classmethod
    def inh(cls, x):
        return x
class External(SomethingNotInRun):
    @field_validator("anything")
    @classmethod
    def e(cls, x):
        return x
""",
        [4, 12],
    ),
    # PSC009 duplicate-alias
    (
        "PSC009",
        """
class M(BaseModel):
    a: int = Field(alias="b")
    b: int = 0
class N(BaseModel):
    x: int = Field(serialization_alias="out")
    y: int = Field(serialization_alias="out")
class O(BaseModel):
    p: int = Field(alias="p1")
    q: int = Field(alias="q1")
""",
        [4, 7],
    ),
    # PSC010/PSC011
    (
        "PSC010",
        """
class M(BaseModel):
    dict: int = 0
    schema: str = ""
    model_name: str = ""
    copy_: int = 0
""",
        [3, 4],
    ),
    (
        "PSC011",
        """
class M(BaseModel):
    model_dump: int = 0
    model_validate_x: int = 0
    model_name: str = ""
    model_fields: int = 0
class N(BaseModel):
    model_config = ConfigDict(protected_namespaces=())
    model_dump_path: str = ""
""",
        [3, 4, 6],
    ),
    # PSC012 override-changes-type
    (
        "PSC012",
        """
class A(BaseModel):
    a: int = 0
    b: Optional[int] = None
    c: str = ""
    d: float = 0.0
    e: str = ""
class B(A):
    a: str = ""
    b: int = 0
    c: Literal["x"] = "x"
    d: int = 0
    e: Optional[str] = None
""",
        [9, 13],
    ),
    # PSC013 import-time-default
    (
        "PSC013",
        """
class M(BaseModel):
    a: DT = DT.now()
    b: str = str(uuid.uuid4())
    c: datetime.date = Field(default=datetime.date.today())
    d: DT = Field(default_factory=DT.now)
    e: float = __import__("random").random()
""",
        [3, 4, 5],
    ),
    # PSC014/15/16
    (
        "PSC014",
        """
class M(BaseModel):
    x: int = 0
    class Config:
        extra = "forbid"
class Plain:
    class Config:
        pass
""",
        [4],
    ),
    (
        "PSC015",
        """
class M(BaseModel):
    model_config = {"allow_population_by_field_name": True, "smart_union": True}
class N(BaseModel):
    class Config:
        orm_mode = True
""",
        [3, 3, 6],
    ),
    (
        "PSC016",
        """
class M(BaseModel):
    model_config = ConfigDict(coerce_numbers=True, frozen=True, extra="forbid")
""",
        [3],
    ),
    # PSC017/PSC018
    (
        "PSC017",
        """
class M(BaseModel):
    a: int
    @validator("a")
    def v(cls, x):
        return x
    @root_validator(pre=True)
    def r(cls, values):
        return values
""",
        [4, 7],
    ),
    (
        "PSC018",
        """
import requests
class M(BaseModel):
    a: int = 0
    def dump(self):
        return self.dict()
def f(raw: str, model: type[M], obj: M, other):
    M.parse_obj({})
    model.parse_raw(raw)
    obj.json()
    m = M.model_validate({})
    m.copy()
    other.json()
    requests.get("u").json()
    M().dict()
    M.model_validate_json(raw)
""",
        [6, 8, 9, 10, 12, 15],
    ),
    # PSC019 non-annotated-attribute
    (
        "PSC019",
        """
class A(BaseModel):
    x: int = 0
class M(A):
    a = 1
    b = Field(default=2)
    x = 5
    helper = staticmethod(len)
    K: ClassVar[int] = 3
    _private = 4
    def method(self):
        return 1
""",
        [5, 6, 7],
    ),
    # PSC020 duplicate-field
    (
        "PSC020",
        """
class M(BaseModel):
    a: int = 0
    b: int = 0
    a: str = ""
""",
        [5],
    ),
    # PSC021 field-name-shadows-type
    (
        "PSC021",
        """
class M(BaseModel):
    date: Optional[date] = None
class N(BaseModel):
    int: int = 0
    y: int = 1
class O(BaseModel):
    date: date
    kind: Literal["date"] = "date"
""",
        [3, 5, 6],
    ),
    # migration rules (v1 forms a port must touch)
    (
        "PSC002",
        """
from typing import Any
class M(BaseModel):
    a: Any
    b: object
    c: Annotated[Any, Field(description="x")]
    d: Any = None
    e: Any = Field(...)
    f: Any = ...
    g: "Any"
""",
        [4, 5, 6, 10],
    ),
    (
        "PSC022",
        """
from sqlmodel import Field as SQLField
class M(BaseModel):
    a: str = Field("", regex="x")
    b: list = Field(default_factory=list, max_items=3)
    c: Annotated[str, Field(const=True)] = "c"
    d: int = Field(0, example=1, description="d", examples=[1])
    e: int = Field(0, **{"ge": 0})
    f: str = SQLField("", regex="x")
""",
        [4, 5, 6, 7],
    ),
    (
        "PSC023",
        """
import pydantic
from pydantic import BaseSettings
from pydantic.generics import GenericModel
from pydantic.typing import NoneType
from pydantic.utils import deep_update, to_lower_camel
try:
    from pydantic import BaseSettings as Fallback
except ImportError:
    from pydantic_settings import BaseSettings as Fallback
from pydantic_settings import BaseSettings as Fine
class G(GenericModel):
    a: int = 0
class S(pydantic.BaseSettings):
    a: int = 0
""",
        [3, 4, 5, 6, 6, 12, 14],
    ),
    (
        "PSC024",
        """
class M(BaseModel):
    __root__: list[int]
class N(BaseModel):
    _root: list[int] = []
""",
        [3],
    ),
    (
        "PSC025",
        """
class A(str):
    @classmethod
    def __get_validators__(cls):
        yield cls
    def __modify_schema__(cls, schema):
        pass
class Both(str):
    @classmethod
    def __get_validators__(cls):
        yield cls
    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        return handler(str)
""",
        [3, 6],
    ),
    # strict rules
    (
        "PSC101",
        """
class M(BaseModel):
    a: int = Field(1)
    b: int = Field(...)
    c: Annotated[int, Field(2)]
    d: int = Field(default=1)
""",
        [3, 5],
    ),
    (
        "PSC102",
        """
class M(BaseModel):
    a: Annotated[int, Field(default=1)]
    b: Annotated[int, Field(ge=0)] = 1
""",
        [3],
    ),
]


@pytest.mark.parametrize("code,src,lines", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule_edge_cases(code, src, lines):
    assert sorted(codes(src, code)) == sorted((code, ln) for ln in lines)


def test_v1_method_call_follows_values_derived_from_models():
    src = """
class M(BaseModel):
    a: int = 0
def f(m: M):
    clone = m.model_copy()
    again = clone.copy()
    return again.dict(), M.model_validate({}).json(), dict(a=1).copy()
"""
    assert codes(src, "PSC018") == [("PSC018", 6), ("PSC018", 7), ("PSC018", 7)]


def test_v1_method_call_skips_methods_the_project_defines():
    # openai's own BaseModel defines construct(); litellm models define dict(): not pydantic's v1 API.
    src = """
class Base(BaseModel):
    @classmethod
    def construct(cls, **kw):
        return cls.model_construct(**kw)
    def dict(self, **kw):
        return self.model_dump(**kw)
class Opts(Base):
    a: int = 0
class Plain(BaseModel):
    a: int = 0
def f(o: Opts, p: Plain):
    return Opts.construct(), o.dict(), p.dict(), Plain.construct()
"""
    assert codes(src, "PSC018") == [("PSC018", 13), ("PSC018", 13)]


def test_strict_rules_only_with_strict_or_explicit_select():
    src = "class M(BaseModel):\n    a: int = Field(1)\n"
    assert codes(src) == []
    assert codes(src, strict=True) == [("PSC101", 2)]
    assert codes(src, "PSC101") == [("PSC101", 2)]
    assert codes(src, "PSC1") == []  # a prefix does not switch strict rules on


def test_select_and_ignore_prefixes():
    src = "class M(BaseModel):\n    a: str = None\n    b: Optional[int]\n    c: str = None\n"
    mig = {"extend_select": ["migration"]}
    assert {c for c, _ in codes(src)} == {"PSC001"}  # PSC002 is in the opt-in migration group
    assert {c for c, _ in codes(src, **mig)} == {"PSC001", "PSC002"}
    assert {c for c, _ in codes(src, ignore=["PSC001"], **mig)} == {"PSC002"}
    assert {c for c, _ in codes(src, select=["psc00"], ignore=["PSC002"], **mig)} == {"PSC001"}


def test_inline_suppression():
    src = (
        "class M(BaseModel):\n    a: str = None  # pscheck: ignore[PSC001]\n"
        "    b: str = None  # noqa: PSC002\n    c: str = None  # pscheck: ignore\n"
    )
    assert codes(src) == [("PSC001", 3)]


def test_indirect_inheritance_across_files():
    diags = lint_paths([FIXTURES / "project"], extend_select=["migration"])
    got = sorted((Path(d.path).name, d.line, d.code) for d in diags)
    assert got == [
        ("user.py", 10, "PSC001"),
        ("user.py", 11, "PSC012"),
        ("user.py", 18, "PSC008"),
        ("user.py", 25, "PSC002"),
    ]


def test_indirect_inheritance_unknown_base_is_not_guessed():
    # Without base.py in the run, User's parent is unknown: no PSC008/PSC012 guesses, and User is
    # not even known to be a model.
    diags = lint_paths([FIXTURES / "project" / "pkg" / "user.py"])
    assert diags == []


def test_clean_fixture_with_every_spelling_has_no_findings():
    assert lint_paths([FIXTURES / "clean_spellings.py"], strict=True) == []


def test_pydantic_v1_models_are_skipped():
    src = (
        "from pydantic.v1 import BaseModel\nclass M(BaseModel):\n    a: str = None\n"
        "    class Config:\n        orm_mode = True\n"
    )
    assert lint_source(src) == []


def test_diagnostic_positions_are_one_based_and_point_at_the_default():
    d = lint_source("from pydantic import BaseModel\nclass M(BaseModel):\n    email: str = None\n")[0]
    assert (d.line, d.col) == (3, 18)
    assert d.format() == f"<string>:3:18: PSC001 {d.message} [error]"
