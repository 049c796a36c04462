"""The migration group on the v1 and v2 forms of each kind of site a v1-to-v2 port rewrites.

``pscheck_fixtures/v1_forms.py`` is run under ``pydantic.v1`` (what the code meant when it was
written) and ``v2_forms.py`` under the installed pydantic 2 with every warning an error (the port):
the same inputs give the same results, so each v2 form is the faithful port of its v1 form. Linted,
the v1 forms are reported exactly on their labelled lines and the v2 forms are clean under every group.
"""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import pytest
from script_module import load_script

pydantic = pytest.importorskip("pydantic")
pytest.importorskip("pydantic_settings")
from pydantic import ValidationError  # noqa: E402

from nbkit.pscheck import lint_paths, lint_source  # noqa: E402
from nbkit.pscheck.rules.pydantic_api import (  # noqa: E402
    DEPRECATED_MOVED_IN_V2,
    FIELD_PARAMS,
    MOVED_IN_V2,
    MOVED_TO_PYDANTIC_EXTRA_TYPES,
    REDIRECT_TO_V1,
    REMOVED_IN_V2,
    V1_FIELD_REMOVED,
    V1_FIELD_RENAMED,
)

FIXTURES = Path(__file__).parent / "pscheck_fixtures"
V1_FORMS, V2_FORMS = FIXTURES / "v1_forms.py", FIXTURES / "v2_forms.py"
FIELD_MODEL = (
    "from typing import Any\nfrom pydantic import BaseModel, Field\nclass Q(BaseModel):\n    x: Any = {}\n"
)
LABEL = re.compile(r"# MIGRATION: (PSC\d+)")


def _v1_module():
    """v1_forms.py executed under pydantic.v1, as a Pydantic 1.10 install would run it."""
    if sys.version_info >= (3, 14):
        pytest.skip("pydantic.v1 does not support Python 3.14+")
    src = V1_FORMS.read_text(encoding="utf-8")
    src = src.replace("from pydantic import", "from pydantic.v1 import").replace(
        "from pydantic.generics import", "from pydantic.v1.generics import"
    )
    ns: dict = {"__name__": "pscheck_v1_forms"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic.v1 itself warns on import under Python 3.13+
        exec(compile(src, str(V1_FORMS), "exec", dont_inherit=True), ns)  # no __future__ from here
    return ns


def run(src: str) -> dict:
    ns: dict = {"__name__": "pscheck_example"}
    exec(compile(src, "<example>", "exec", dont_inherit=True), ns)
    return ns


def _v2_module():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a deprecated v1 spelling left in the port would raise here
        return vars(load_script(V2_FORMS, "pscheck_v2_forms"))


@pytest.fixture(scope="module")
def forms():
    return _v1_module(), _v2_module()


def test_fields_that_admit_none_defaulted_to_none_in_v1_and_are_none_in_the_port(forms):
    v1, v2 = forms
    for ns in (v1, v2):
        e = ns["Event"]()
        assert (e.payload, e.meta, e.note) == (None, None, None)


def test_the_v1_forms_break_or_change_under_pydantic_2():
    """What each v1 form does under the installed pydantic 2: the reason each is a site."""
    v1 = V1_FORMS.read_text(encoding="utf-8")
    with pytest.raises(pydantic.errors.PydanticImportError, match="pydantic-settings"):
        run("from pydantic import BaseSettings")
    required = lint_source(v1, select=["PSC002"])
    assert len(required) == 3
    src = "from typing import Any\nfrom pydantic import BaseModel\nclass E(BaseModel):\n    payload: Any\n"
    with pytest.raises(ValidationError, match="Field required"):
        run(src)["E"]()
    for kwarg in V1_FIELD_REMOVED:
        with pytest.raises(pydantic.errors.PydanticUserError, match=kwarg):
            run(FIELD_MODEL.format(f"Field('', {kwarg}=1)"))
    for kwarg in (*V1_FIELD_RENAMED, "example"):
        with pytest.warns(pydantic.warnings.PydanticDeprecatedSince20):
            run(FIELD_MODEL.format(f"Field(0, {kwarg}=1)"))
    with pytest.raises(pydantic.errors.PydanticUserError, match="RootModel"):
        run("from pydantic import BaseModel\nclass T(BaseModel):\n    __root__: list\n")
    validators = "    @classmethod\n    def __get_validators__(cls):\n        yield lambda v, info: v\n"
    schema = "    @classmethod\n    def __modify_schema__(cls, s):\n        pass\n"
    hooks = run(f"class G(str):\n{validators}\nclass S(str):\n{validators}{schema}")
    with pytest.warns(pydantic.warnings.PydanticDeprecatedSince20, match="__get_validators__"):
        assert pydantic.TypeAdapter(hooks["G"]).validate_python("a") == "a"
    with (
        warnings.catch_warnings(),
        pytest.raises(pydantic.errors.PydanticUserError, match="__modify_schema__"),
    ):
        warnings.simplefilter("ignore")  # its __get_validators__ warns first, as G's did
        pydantic.TypeAdapter(hooks["S"])


def test_field_arguments_behave_alike(forms):
    for ns in forms:
        q = ns["Query"]
        assert q(text="abc", tags=["a"], kind="q").text == "abc"
        for bad in ({"text": "a b"}, {"tags": ["a", "b", "c"]}, {"kind": "x"}):
            with pytest.raises(ValueError):  # v1's and v2's ValidationError both derive from it
                q(**bad)
    v1, v2 = forms
    assert v1["Query"].schema()["properties"]["size"]["example"] == 3
    assert v2["Query"].model_json_schema()["properties"]["size"]["examples"] == [3]


def test_root_types_custom_types_validators_and_generics_behave_alike(forms):
    v1, v2 = forms
    assert v1["Tags"].parse_obj(["a"]).__root__ == v2["Tags"](["a"]).root == ["a"]
    p1, p2 = v1["Post"](slug="AB"), v2["Post"](slug="AB")
    assert (p1.slug, p1.title) == (p2.slug, p2.title) == ("ab", "AB")
    assert v1["Post"](slug="a", title=" t ").title == v2["Post"](slug="a", title=" t ").title == "t"
    assert v1["Post"].schema()["properties"]["slug"]["format"] == "slug"
    assert v2["Post"].model_json_schema()["properties"]["slug"]["format"] == "slug"
    assert v1["Page"][int](items=["1"]).items == v2["Page"][int](items=["1"]).items == [1]


def test_settings_read_the_same_variable_and_are_frozen(forms, monkeypatch):
    monkeypatch.setenv("NBKIT_FIXTURE_DB_URL", "postgres://db")
    for ns in forms:
        s = ns["Settings"]()
        assert s.db_url == "postgres://db"
        with pytest.raises((TypeError, ValueError)):  # v1: TypeError; v2: ValidationError
            s.db_url = "other"


def _labels(path: Path) -> list[tuple[str, int]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return sorted((m.group(1), n) for n, line in enumerate(lines, 1) for m in [LABEL.search(line)] if m)


def test_migration_group_reports_every_v1_form_on_its_line_and_nothing_else():
    found = sorted((d.code, d.line) for d in lint_paths([V1_FORMS], select=["migration"]))
    assert found == _labels(V1_FORMS)
    assert {c for c, _ in found} >= {
        "PSC002",
        "PSC014",
        "PSC015",
        "PSC017",
        "PSC022",
        "PSC023",
        "PSC024",
        "PSC025",
    }


def test_the_v2_forms_are_clean_under_every_group():
    assert lint_paths([V2_FORMS], select=["all"]) == []


def test_migration_rules_stay_out_of_the_default_group_on_v2_code():
    """The v2 forms and the v1 forms alike: the default group never runs a migration-only rule."""
    default = {d.code for d in lint_paths([V1_FORMS, V2_FORMS])}
    assert default.isdisjoint({"PSC002", "PSC022", "PSC023", "PSC024", "PSC025"})


def test_hardcoded_migration_tables_match_installed_pydantic():
    import inspect

    import pydantic._migration as migration

    params = inspect.signature(pydantic.Field).parameters
    assert {k for k, p in params.items() if p.kind is not p.VAR_KEYWORD} == FIELD_PARAMS
    assert migration.MOVED_IN_V2 == MOVED_IN_V2
    assert migration.DEPRECATED_MOVED_IN_V2 == DEPRECATED_MOVED_IN_V2
    assert migration.REDIRECT_TO_V1 == REDIRECT_TO_V1
    assert set(migration.REMOVED_IN_V2) == REMOVED_IN_V2


@pytest.mark.parametrize("key,fate", sorted(MOVED_TO_PYDANTIC_EXTRA_TYPES.items()))
def test_names_moved_to_pydantic_extra_types_are_refused_or_deprecated_as_the_table_says(key, fate):
    module, name = key.split(":")
    if fate == "refused":
        with pytest.raises(ImportError):
            run(f"from {module} import {name}")
        return
    cls = run(f"from {module} import {name}")[name]
    value = "red" if name == "Color" else "4000000000000002"
    with pytest.warns(pydantic.warnings.PydanticDeprecatedSince20, match="pydantic_extra_types"):
        pydantic.TypeAdapter(cls).validate_python(value)


def test_a_class_whose_model_base_is_outside_the_run_is_a_model_when_it_uses_v1_validators():
    """beanie's Document(LazyModel, ...): LazyModel is a model of another package."""
    src = (
        "from lazy_model import LazyModel\nfrom pydantic import root_validator, field_validator\n"
        "class Document(LazyModel):\n    @root_validator(pre=True)\n    def fill(cls, values):\n"
        "        return values\n\n    class Config:\n        orm_mode = True\n"
        "class V2(LazyModel):\n    @field_validator('x')\n    def ok(cls, v):\n        return v\n\n"
        "    class Config:\n        orm_mode = True\n"
    )
    found = sorted((d.code, d.line) for d in lint_source(src, select=["migration"]))
    assert found == [("PSC014", 8), ("PSC015", 9), ("PSC017", 4)]
