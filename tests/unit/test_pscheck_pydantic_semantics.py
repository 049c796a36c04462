"""The justifications in docs/pscheck.md, checked against the installed pydantic.

Each rule's *bad* example is executed and the behaviour its rationale claims is asserted (so a
rule whose premise stops being true fails here), and each *good* example must run without any
warning. pscheck itself never imports pydantic; these tests do, on purpose.
"""

from __future__ import annotations

import warnings

import pytest
from script_module import load_script

pydantic = pytest.importorskip("pydantic")
from pydantic import ValidationError  # noqa: E402

from nbkit.pscheck import RuleRegistry, lint_source  # noqa: E402
from nbkit.pscheck.plugins.created_at import CreatedAtDatetimeFactory  # noqa: E402
from nbkit.pscheck.rules import BASEMODEL_ATTRS, CONFIG_KEYS, V1_REMOVED_KEYS, V1_RENAMED_KEYS  # noqa: E402

RULES = {r.code: r for r in RuleRegistry.default()} | {"PSP001": CreatedAtDatetimeFactory()}
PYDANTIC_VERSION = tuple(int(x) for x in pydantic.VERSION.split(".")[:2])


def run(src: str) -> dict:
    ns: dict = {"__name__": "pscheck_example"}
    exec(compile(src, "<example>", "exec", dont_inherit=True), ns)  # no __future__ from here
    return ns


def define(code: str, which: str = "bad") -> tuple[dict, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ns = run(getattr(RULES[code], which))
    return ns, list(caught)


@pytest.mark.parametrize("code", sorted(RULES))
def test_good_examples_run_without_warnings(code):
    if code == "PSC011" and PYDANTIC_VERSION < (2, 10):
        pytest.skip("model_* names warn before pydantic 2.10")
    ns, caught = define(code, "good")
    assert [str(w.message) for w in caught] == []
    if code == "PSC018":
        assert ns["load"]('{"text": "a"}').text == "a"


def test_psc001_default_is_not_validated():
    ns, _ = define("PSC001")
    assert ns["User"]().email is None  # a str field holding None


def test_psc002_optional_without_default_is_required():
    ns, _ = define("PSC002")
    with pytest.raises(ValidationError, match="Field required"):
        ns["Job"]()
    assert ns["Job"](note=None).note is None


def test_psc003_both_defaults_fail_at_class_creation():
    with pytest.raises(TypeError, match="both default and default_factory"):
        define("PSC003")


def test_psc004_called_factory_fails_at_instantiation():
    ns, _ = define("PSC004")
    with pytest.raises((TypeError, ValidationError)):
        ns["Event"]()


def test_psc005_constraint_bypassed_by_default():
    ns, _ = define("PSC005")
    assert ns["Train"]().lr == 0.0
    with pytest.raises(ValidationError):
        ns["Train"](lr=0.0)


def test_psc006_constraint_fails_only_at_validation():
    ns, _ = define("PSC006")  # class creation succeeds...
    with pytest.raises(TypeError, match="Unable to apply constraint"):
        ns["Item"](qty=1)  # ...the first validation does not


def test_psc007_literal_default_escapes_the_set():
    ns, _ = define("PSC007")
    assert ns["Opt"]().mode == "test"
    with pytest.raises(ValidationError):
        ns["Opt"](mode="test")


def test_psc008_unknown_validator_field_fails_at_class_creation():
    with pytest.raises(pydantic.PydanticUserError, match="incorrect fields"):
        define("PSC008")


def test_psc009_duplicate_alias_fills_both_and_loses_one_on_dump():
    ns, _ = define("PSC009")
    row = ns["Row"](id=1)
    assert (row.user_id, row.item_id) == (1, 1)
    assert row.model_dump(by_alias=True) == {"id": 1}


def test_psc010_shadowing_warns():
    _, caught = define("PSC010")
    assert any("shadows an attribute" in str(w.message) for w in caught)


def test_psc011_protected_namespace():
    if PYDANTIC_VERSION < (2, 10):
        pytest.skip("protected namespaces changed in 2.10")
    try:
        _, caught = define("PSC011")
    except (ValueError, NameError):
        return
    assert any("protected namespace" in str(w.message) for w in caught)
    with pytest.raises(ValueError, match="protected namespace"):
        run("from pydantic import BaseModel\nclass M(BaseModel):\n    model_dump: int = 0\n")


def test_psc012_override_is_accepted_silently():
    ns, caught = define("PSC012")
    child = ns["Child"]()
    assert isinstance(child, ns["Base"]) and child.seed == "0"  # a "Base" whose seed is a str
    assert caught == []


def test_psc013_import_time_default_is_shared():
    ns, _ = define("PSC013")
    assert ns["Record"]().created_at == ns["Record"]().created_at
    ns2, _ = define("PSC013", "good")
    a = ns2["Record"]().created_at
    assert ns2["Record"]().created_at >= a


def test_psc014_config_class_deprecated():
    _, caught = define("PSC014")
    assert any("class-based `config` is deprecated" in str(w.message) for w in caught)


def test_psc015_renamed_key_is_ignored():
    ns, caught = define("PSC015")
    assert any("Valid config keys have changed" in str(w.message) for w in caught)

    class Orm:
        id = 1

    with pytest.raises(ValidationError):
        ns["Row"].model_validate(Orm())  # from_attributes is NOT on


def test_psc016_unknown_key_is_silently_ignored():
    ns, caught = define("PSC016")
    assert caught == []
    assert "coerce_numbers" not in pydantic.ConfigDict.__annotations__


def test_psc017_v1_validator_deprecated():
    _, caught = define("PSC017")
    assert any("`@validator` validators are deprecated" in str(w.message) for w in caught)


def test_psc018_v1_method_deprecated():
    ns, _ = define("PSC018")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ns["load"]('{"text": "a"}')
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any("parse_raw" in m for m in messages), messages  # (and load_str_bytes underneath)


def test_psc019_non_annotated_attribute_fails():
    with pytest.raises(pydantic.PydanticUserError, match="non-annotated attribute"):
        define("PSC019")


def test_psc020_duplicate_field_keeps_the_last():
    ns, _ = define("PSC020")
    fields = ns["M"].model_fields
    assert list(fields) == ["x"] and fields["x"].annotation is str


def test_psc021_rebound_name_becomes_nonetype():
    ns, _ = define("PSC021")
    assert ns["Visit"].model_fields["date"].annotation is type(None)
    with pytest.raises(ValidationError):
        ns["Visit"](date="2024-01-01")


def _load_fixture(name: str):
    from pathlib import Path

    path = Path(__file__).parent / "pscheck_fixtures" / f"{name}.py"
    return load_script(path, f"pscheck_fixture_{name}")  # registered: pydantic resolves annotations there


def test_real_code_false_positives_are_correct_pydantic_v2():
    """What pscheck once flagged as errors on real libraries (PSC021, PSC008) and as v1 calls in
    compatibility branches is correct under the installed pydantic: the annotations resolve, the
    validators attach, and no v1 branch runs (no deprecation warning from any of them)."""
    from typing import Literal

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a v1 call on the v2 path would raise PydanticDeprecatedSince20
        m = _load_fixture("real_code_false_positives")
        item = m.Item(name="a")
        for fn in (
            m.dump_flag,
            m.dump_not_v2,
            m.dump_startswith,
            m.dump_compare,
            m.dump_metadata_version,
            m.dump_hasattr,
            m.dump_try,
            m.dump_ifexp,
            m.Wrapper(item=item).to_dict,
        ):
            fn(item) if fn.__name__ != "to_dict" else fn()
        assert m.Credential.model_fields["type"].annotation == Literal["bearer"]  # not the rebound 'type'
        assert m.Credential(type="bearer").type == "bearer"
        assert isinstance(m.Message.model_validate({"content": [{"type": "audio"}]}).content[0], m.Audio)
        assert m.Spec("x").root == "x"  # field_validator("root") on a RootModel attaches
        assert m.EventChunk().type == "event_chunk" and m.Event().type == "event"


def test_psc016_description_is_not_a_config_key():
    """The one error-level finding left on the real-code corpus: ``ConfigDict(description=...)``."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either: the key is silently dropped
        ns = run(
            "from pydantic import BaseModel, ConfigDict\n"
            "class U(BaseModel):\n"
            "    model_config = ConfigDict(title='T', description='A user')\n    x: int\n"
        )
    schema = ns["U"].model_json_schema()
    assert schema["title"] == "T" and "description" not in schema


def test_psc101_psc102_work_at_runtime():
    for code in ("PSC101", "PSC102"):
        ns, _ = define(code)
        assert ns["M"]().n == 1


def test_hardcoded_tables_cover_installed_pydantic():
    public = {a for a in dir(pydantic.BaseModel) if not a.startswith("_")}
    assert public <= BASEMODEL_ATTRS, public - BASEMODEL_ATTRS
    assert set(pydantic.ConfigDict.__annotations__) <= CONFIG_KEYS, (
        set(pydantic.ConfigDict.__annotations__) - CONFIG_KEYS
    )
    try:
        from pydantic._internal._config import V2_REMOVED_KEYS, V2_RENAMED_KEYS
    except ImportError:
        pytest.skip("private pydantic tables moved")
    assert set(V2_RENAMED_KEYS) == set(V1_RENAMED_KEYS) and set(V2_REMOVED_KEYS) == set(V1_REMOVED_KEYS)


def test_decision_optional_none_idiom_is_not_flagged_and_equals_field_default_none():
    src = (
        "from typing import Optional\nfrom pydantic import BaseModel, Field\n"
        "class A(BaseModel):\n    name: Optional[str] = None\n"
        "class B(BaseModel):\n    name: Optional[str] = Field(default=None)\n"
    )
    assert lint_source(src, strict=True) == []
    ns = run(src)
    fa, fb = ns["A"].model_fields["name"], ns["B"].model_fields["name"]
    assert repr(fa) == repr(fb)
    assert ns["A"].model_json_schema()["properties"] == ns["B"].model_json_schema()["properties"]
    for value in (None, "x"):
        assert ns["A"](name=value).name == ns["B"](name=value).name
    assert ns["A"]().name is None and ns["B"]().name is None


def test_decision_mutable_default_is_copied_per_instance():
    ns = run("from pydantic import BaseModel\nclass M(BaseModel):\n    tags: list[str] = []\n")
    ns["M"]().tags.append("x")
    assert ns["M"]().tags == []
    assert (
        lint_source(
            "from pydantic import BaseModel\nclass M(BaseModel):\n    tags: list[str] = []\n", strict=True
        )
        == []
    )
