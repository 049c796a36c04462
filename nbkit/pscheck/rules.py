"""Built-in pscheck rules. Each docstring-free class carries its own documentation attributes;
``docs/pscheck.md`` is generated from them (``python -m nbkit.pscheck.docs``) and the tests lint
every ``bad``/``good`` example, so the reference cannot drift from the behaviour.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterable, Iterator
from typing import Any

from nbkit.pscheck.model import FieldSpec, ModelInfo, ModuleInfo, is_ellipsis
from nbkit.pscheck.registry import BaseRule, Diagnostic, RuleContext
from nbkit.pscheck.types import NON_NULL_OPAQUE, TypeRef, accepts, fmt, literal_value

# BaseModel's public attributes in Pydantic 2.x (v2 API + deprecated v1 names). A test compares it
# with dir(pydantic.BaseModel) of the installed version, so it cannot silently go stale.
BASEMODEL_ATTRS = frozenset({
    "construct", "copy", "dict", "from_orm", "json", "model_computed_fields", "model_config",
    "model_construct", "model_copy", "model_dump", "model_dump_json", "model_extra", "model_fields",
    "model_fields_set", "model_json_schema", "model_parametrized_name", "model_post_init",
    "model_rebuild", "model_validate", "model_validate_json", "model_validate_strings", "parse_file",
    "parse_obj", "parse_raw", "schema", "schema_json", "update_forward_refs", "validate",
})
DEFAULT_PROTECTED_NAMESPACES = ("model_validate", "model_dump")
# ConfigDict keys across Pydantic 2.x (checked against the installed pydantic by a test).
CONFIG_KEYS = frozenset({
    "alias_generator", "allow_inf_nan", "arbitrary_types_allowed", "cache_strings", "coerce_numbers_to_str",
    "defer_build", "experimental_defer_build_mode", "extra", "field_title_generator", "from_attributes",
    "frozen", "hide_input_in_errors", "ignored_types", "json_encoders", "json_schema_extra",
    "json_schema_mode_override", "json_schema_serialization_defaults_required", "loc_by_alias",
    "model_title_generator", "plugin_settings", "polymorphic_serialization", "populate_by_name",
    "protected_namespaces", "regex_engine", "revalidate_instances", "schema_generator", "ser_json_bytes",
    "ser_json_inf_nan", "ser_json_temporal", "ser_json_timedelta", "serialize_by_alias", "str_max_length",
    "str_min_length", "str_strip_whitespace", "str_to_lower", "str_to_upper", "strict", "title",
    "url_preserve_empty_path", "use_attribute_docstrings", "use_enum_values", "val_json_bytes",
    "val_temporal_unit", "validate_assignment", "validate_by_alias", "validate_by_name", "validate_default",
    "validate_return", "validation_error_cause",
})
# pydantic._internal._config.V2_RENAMED_KEYS / V2_REMOVED_KEYS (also test-checked).
V1_RENAMED_KEYS = {
    "allow_population_by_field_name": "validate_by_name", "anystr_lower": "str_to_lower",
    "anystr_strip_whitespace": "str_strip_whitespace", "anystr_upper": "str_to_upper",
    "keep_untouched": "ignored_types", "max_anystr_length": "str_max_length",
    "min_anystr_length": "str_min_length", "orm_mode": "from_attributes", "schema_extra": "json_schema_extra",
    "validate_all": "validate_default",
}
V1_REMOVED_KEYS = frozenset({"allow_mutation", "copy_on_model_validation", "error_msg_templates", "fields",
                             "getter_dict", "json_dumps", "json_loads", "post_init_call", "smart_union",
                             "underscore_attrs_are_private"})
# Calls whose value changes between calls: computing a default with one freezes it at import.
VOLATILE_CALLS = frozenset({
    "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today", "datetime.date.today",
    "time.time", "time.time_ns", "time.monotonic", "time.perf_counter", "uuid.uuid1", "uuid.uuid4",
    "os.urandom", "os.getpid", "pendulum.now", "arrow.now", "arrow.utcnow",
})
VOLATILE_PREFIXES = ("random.", "secrets.", "numpy.random.")
# Calls that build a *callable* (fine as default_factory=...()).
FACTORY_BUILDERS = frozenset({"functools.partial", "partial", "operator.itemgetter", "operator.attrgetter",
                              "operator.methodcaller", "itertools.count"})
VALUE_BUILTINS = frozenset({"list", "dict", "set", "tuple", "frozenset", "str", "int", "float", "bool",
                            "bytes", "object", "bytearray", "complex", "range"})

_NUMERIC_ORDERED = {"int", "float", "bool", "Decimal", "date", "datetime", "time", "timedelta"}
_LENGTH_TYPES = {"str", "bytes", "bytearray", "list", "tuple", "set", "frozenset", "dict", "deque", "Sequence",
                 "MutableSequence", "Mapping", "MutableMapping", "AbstractSet", "MutableSet", "Collection"}
# constraint -> (types it applies to, types known to reject it). Other types: cannot tell, no finding.
CONSTRAINT_TYPES: dict[str, tuple[set[str], set[str]]] = {
    "gt": (_NUMERIC_ORDERED, _LENGTH_TYPES | {"None", "UUID", "Path"}),
    "ge": (_NUMERIC_ORDERED, _LENGTH_TYPES | {"None", "UUID", "Path"}),
    "lt": (_NUMERIC_ORDERED, _LENGTH_TYPES | {"None", "UUID", "Path"}),
    "le": (_NUMERIC_ORDERED, _LENGTH_TYPES | {"None", "UUID", "Path"}),
    "multiple_of": ({"int", "float", "Decimal"}, _LENGTH_TYPES | {"date", "datetime", "time"}),
    "min_length": (_LENGTH_TYPES, {"int", "float", "bool", "Decimal", "date", "datetime", "time", "timedelta"}),
    "max_length": (_LENGTH_TYPES, {"int", "float", "bool", "Decimal", "date", "datetime", "time", "timedelta"}),
    "pattern": ({"str", "bytes"}, {"int", "float", "bool", "Decimal", "list", "tuple", "set", "frozenset",
                                   "dict", "date", "datetime", "time", "timedelta"}),
    "max_digits": ({"Decimal"}, {"int", "float", "str", "bytes", "list", "tuple", "set", "dict"}),
    "decimal_places": ({"Decimal"}, {"int", "float", "str", "bytes", "list", "tuple", "set", "dict"}),
    "allow_inf_nan": ({"float", "Decimal", "int"}, {"str", "bytes", "list", "tuple", "set", "dict"}),
}


def _validate_default_on(model: ModelInfo, spec: FieldSpec) -> bool:
    ok, v = spec.kwarg_literal("validate_default")
    if ok:
        return bool(v)
    ok, v = model.config_literal("validate_default")
    return bool(v) if ok else False


def _is_literal_type(t: TypeRef) -> bool:
    ms = [m for m in t.members() if m.name != "None"]
    return bool(ms) and all(m.name == "Literal" for m in ms)


def _short(v: Any, limit: int = 40) -> str:
    s = repr(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _suggest(name: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _call_qualname(node: ast.Call, module: ModuleInfo) -> str:
    return module.resolver.canonical(node.func) or ""


class DefaultTypeMismatch(BaseRule):
    code = "PSC001"
    name = "default-type-mismatch"
    severity = "error"
    summary = "A literal default is not a value of the field's own type."
    bad = """
from pydantic import BaseModel, Field

class User(BaseModel):
    email: str = Field(default=None)
"""
    good = """
from typing import Optional
from pydantic import BaseModel

class User(BaseModel):
    email: Optional[str] = None
"""
    rationale = """Pydantic v2 does not validate defaults (`validate_default=False` is the documented
default), so `User().email` is `None` although the annotation promises `str`: downstream code,
`model_dump()` consumers and JSON Schema users all see a type the model says cannot exist. This is
the field notes' own example (`email: str = Field(default=None)`). Literal defaults are compared with the
annotation (`Optional`/`Union`/`X | None`, containers and their items, the numeric tower of PEP 484:
`int` is fine for `float`). Non-literal defaults are left to `--import`. Not flagged when
`validate_default=True`, where Pydantic coerces or rejects the default itself."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        def is_model(q: str) -> bool:
            return ctx.model_for(q, model.module) is not None

        for spec in model.all_field_specs:
            if _is_literal_type(spec.type) or _validate_default_on(model, spec):
                continue
            ok, value = spec.literal_default()
            if not ok:
                continue
            if accepts(spec.type, value, is_model) is False:
                yield self.diag(model, spec.default or spec.node,
                                f"default {_short(value)} of '{spec.name}' is not of its type "
                                f"{fmt(spec.type.strip_annotated())}; Pydantic does not validate defaults, so "
                                f"instances silently hold it")


class OptionalWithoutDefault(BaseRule):
    code = "PSC002"
    name = "optional-without-default"
    severity = "warning"
    group = "migration"
    summary = "`Optional[T]` with no default is *required* in Pydantic v2 (None is allowed but must be passed)."
    bad = """
from typing import Optional
from pydantic import BaseModel

class Job(BaseModel):
    note: Optional[str]
"""
    good = """
from typing import Optional
from pydantic import BaseModel, Field

class Job(BaseModel):
    note: Optional[str] = None                 # optional, defaults to None
    owner: Optional[str] = Field(...)          # required but nullable, said explicitly
"""
    rationale = """Pydantic v2 changed the meaning: its migration guide lists `f3: Optional[str]` as
required and nullable (in v1 it defaulted to None). `Job()` raises `Field required` although
the annotation reads "optional". Warning, not error, because required-nullable is legitimate;
writing `= Field(...)` (or `= ...`) states that intent and silences the rule. `Field(...)` on an
Optional is therefore *not* flagged: it is the explicit spelling of required-nullable, not a
contradiction (the field notes call it one; the documented semantics say otherwise)."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            if spec.type.is_optional and not spec.has_default and not spec.explicitly_required:
                yield self.diag(model, spec.node,
                                f"'{spec.name}: {spec.type}' has no default, so Pydantic v2 makes it required "
                                f"(None allowed but must be passed); add '= None' or state it with '= Field(...)'")


class DefaultAndFactory(BaseRule):
    code = "PSC003"
    name = "default-and-default-factory"
    severity = "error"
    summary = "`Field()` is given both `default` and `default_factory`."
    bad = """
from pydantic import BaseModel, Field

class Batch(BaseModel):
    ids: list[int] = Field(default=[], default_factory=list)
"""
    good = """
from pydantic import BaseModel, Field

class Batch(BaseModel):
    ids: list[int] = Field(default_factory=list)
"""
    rationale = """Pydantic raises `TypeError: cannot specify both default and default_factory` when the
class is created: the module cannot even be imported. (`Field(..., default_factory=f)` is accepted
— `...` means "no default" — and is not flagged.)"""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            if spec.factory is not None and spec.default is not None and not is_ellipsis(spec.default):
                yield self.diag(model, spec.field_call or spec.node,
                                f"'{spec.name}' has both a default and a default_factory; Pydantic raises "
                                f"TypeError when the class is created")


class DefaultFactoryCalled(BaseRule):
    code = "PSC004"
    name = "default-factory-called"
    severity = "error"
    summary = "`default_factory` receives a value (a call's result, a literal) instead of a callable."
    bad = """
from datetime import datetime
from pydantic import BaseModel, Field

class Event(BaseModel):
    at: datetime = Field(default_factory=datetime.now())
"""
    good = """
from datetime import datetime
from pydantic import BaseModel, Field

class Event(BaseModel):
    at: datetime = Field(default_factory=datetime.now)
"""
    rationale = """`default_factory` must be a zero-argument callable (or, since 2.10, one taking the
validated data); Pydantic calls it for every instance. Passing `datetime.now()` or `list()` hands
it a value: the class is created fine, and every `Event()` then fails (`'datetime' object is not
callable`). Static rule: literals, displays, calls of builtins/known value functions and of classes
defined in the run; other calls (which might return a factory, e.g. `functools.partial(...)`) are
not guessed — `--import` checks `callable()` on them."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            f = spec.factory
            if f is None:
                continue
            why = None
            if isinstance(f, (ast.Constant, ast.List, ast.Dict, ast.Set, ast.Tuple, ast.ListComp, ast.DictComp,
                              ast.SetComp, ast.JoinedStr, ast.BinOp)):
                why = "a value"
            elif isinstance(f, ast.Call):
                q = _call_qualname(f, model.module)
                if q in FACTORY_BUILDERS:
                    continue
                if (q in VALUE_BUILTINS or q in VOLATILE_CALLS or q.startswith(VOLATILE_PREFIXES)
                        or ctx.model_at(f.func, model.module) is not None
                        or q in model.module.resolver.local_classes):
                    why = f"the result of {ast.unparse(f)}"
            if why:
                fix = ast.unparse(f.func) if isinstance(f, ast.Call) else "a callable, e.g. lambda: ..."
                yield self.diag(model, f, f"default_factory of '{spec.name}' is {why}, not a callable; "
                                          f"every instantiation fails — pass {fix}")


class DefaultViolatesConstraint(BaseRule):
    code = "PSC005"
    name = "default-violates-constraint"
    severity = "error"
    summary = "A literal default breaks the field's own constraints (gt/ge/lt/le/multiple_of/length/pattern)."
    bad = """
from pydantic import BaseModel, Field

class Train(BaseModel):
    lr: float = Field(default=0.0, gt=0)
"""
    good = """
from pydantic import BaseModel, Field

class Train(BaseModel):
    lr: float = Field(default=1e-3, gt=0)
"""
    rationale = """Defaults are not validated (`validate_default=False`), so `Train().lr == 0.0` passes
silently although `gt=0` forbids it — the constraint is bypassed exactly when the caller relies on
the default. With `validate_default=True` the same default makes every `Train()` raise a
`ValidationError`; either way the default is wrong. Checks `Field(...)` constraints, `Annotated`
metadata (`Gt`, `MaxLen`, `StringConstraints`, ...) and `conint(...)`-style types."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            ok, value = spec.literal_default()
            if not ok or value is None:
                continue
            for key, limit in spec.constraints.items():
                bad = _violates(key, limit, value)
                if bad:
                    tail = ("every instance created without it raises ValidationError"
                            if _validate_default_on(model, spec)
                            else "defaults are not validated, so the constraint is silently bypassed")
                    yield self.diag(model, spec.default or spec.node,
                                    f"default {_short(value)} of '{spec.name}' violates {key}={_short(limit)}; {tail}")


def _violates(key: str, limit: Any, value: Any) -> bool:
    if isinstance(limit, ast.AST):
        return False
    try:
        num = isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(limit, (int, float))
        if key == "gt" and num:
            return not value > limit
        if key == "ge" and num:
            return not value >= limit
        if key == "lt" and num:
            return not value < limit
        if key == "le" and num:
            return not value <= limit
        if key == "multiple_of" and num and limit:
            q = value / limit
            return abs(q - round(q)) > 1e-9
        if key in ("min_length", "max_length") and isinstance(value, (str, bytes, list, tuple, dict, set,
                                                                        frozenset)) and isinstance(limit, int):
            return len(value) < limit if key == "min_length" else len(value) > limit
        if key == "pattern" and isinstance(value, str) and isinstance(limit, str):
            try:
                return re.search(limit, value) is None
            except re.error:
                return False  # a pattern Python's re cannot compile: Pydantic's engine may; no guess
    except (TypeError, ValueError, OverflowError, ZeroDivisionError):
        return False
    return False


class ConstraintNotApplicable(BaseRule):
    code = "PSC006"
    name = "constraint-not-applicable"
    severity = "error"
    summary = "A constraint is used on a type it does not apply to (e.g. `max_length` on `int`)."
    bad = """
from pydantic import BaseModel, Field

class Item(BaseModel):
    qty: int = Field(max_length=3)
"""
    good = """
from pydantic import BaseModel, Field

class Item(BaseModel):
    qty: int = Field(le=999)
"""
    rationale = """Pydantic v2 creates the class without complaint and raises `TypeError: Unable to apply
constraint 'max_length' to supplied value ...` the first time a value is validated — in production,
not at import. Applies to `Optional[T]` through `T`, and to every member of a `Union` (Pydantic
applies the constraint to each). Types pscheck does not know are not judged."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            base = spec.type.strip_annotated()
            members = [m for m in base.members() if m.name != "None"] if base.is_optional else list(base.members())
            for key, node in spec.constraint_nodes.items():
                if key not in CONSTRAINT_TYPES:
                    continue
                _, rejects = CONSTRAINT_TYPES[key]
                bad = [m for m in members if m.name in rejects]
                if bad:
                    yield self.diag(model, node, f"'{key}' does not apply to {fmt(bad[0])} (field '{spec.name}'); "
                                                 f"Pydantic raises TypeError when a value is first validated")


class LiteralDefaultNotInOptions(BaseRule):
    code = "PSC007"
    name = "literal-default-not-allowed"
    severity = "error"
    summary = "The default of a `Literal[...]` field is not one of its options."
    bad = """
from typing import Literal
from pydantic import BaseModel

class Opt(BaseModel):
    mode: Literal["train", "eval"] = "test"
"""
    good = """
from typing import Literal
from pydantic import BaseModel

class Opt(BaseModel):
    mode: Literal["train", "eval"] = "eval"
"""
    rationale = """The unvalidated default escapes the closed set the `Literal` documents: `Opt().mode ==
"test"`, while `Opt(mode="test")` is rejected and the JSON Schema `enum` omits it. Comparison is by
type and value, as Pydantic's literal validator does (`Literal[1]` does not admit `True`)."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            if not _is_literal_type(spec.type) or _validate_default_on(model, spec):
                continue
            ok, value = spec.literal_default()
            if not ok:
                continue
            if value is None and spec.type.is_optional:
                continue
            options = [v for m in spec.type.members() if m.name == "Literal" for v in m.values]
            if not any(type(o) is type(value) and o == value for o in options):
                yield self.diag(model, spec.default or spec.node,
                                f"default {_short(value)} of '{spec.name}' is not one of {_short(options, 80)}")


class ValidatorUnknownField(BaseRule):
    code = "PSC008"
    name = "validator-unknown-field"
    severity = "error"
    summary = "A field validator/serializer names a field the model does not have."
    bad = """
from pydantic import BaseModel, field_validator

class User(BaseModel):
    name: str

    @field_validator("nmae")
    @classmethod
    def strip(cls, v: str) -> str:
        return v.strip()
"""
    good = """
from pydantic import BaseModel, field_validator

class User(BaseModel):
    name: str

    @field_validator("name")
    @classmethod
    def strip(cls, v: str) -> str:
        return v.strip()
"""
    rationale = """Pydantic raises `PydanticUserError: Decorators defined with incorrect fields` at class
creation unless `check_fields=False`. Inherited fields count when the parents are in the same run;
if an ancestor is outside the run, the rule stays silent rather than guess."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        if not model.hierarchy_complete:
            return
        for v in model.validators:
            if v.kind not in ("field_validator", "validator", "field_serializer") or not v.check_fields:
                continue
            for name, node in v.fields:
                if name == "root" and _is_root_model(model):
                    continue  # RootModel's one field is pydantic's own ``root``
                if name != "*" and model.nearest("fields", name) is None:
                    known = set(model.fields) | set(model.inherited_fields())  # only to suggest a name
                    yield self.diag(model, node, f"{v.kind} '{v.func.name}' names field '{name}' which "
                                                 f"{model.name} does not have{_suggest(name, known)}")


def _is_root_model(model: ModelInfo) -> bool:
    """Whether ``model`` or an in-run ancestor derives from pydantic's ``RootModel``."""
    for m in model.mro():
        for b in m.base_nodes:
            node = b.value if isinstance(b, ast.Subscript) else b
            if m.module.resolver.is_pydantic(node, "RootModel"):
                return True
    return False


class DuplicateAlias(BaseRule):
    code = "PSC009"
    name = "duplicate-alias"
    severity = "error"
    summary = "Two fields share one input or output name (alias, or an alias equal to another field's name)."
    bad = """
from pydantic import BaseModel, Field

class Row(BaseModel):
    user_id: int = Field(alias="id")
    item_id: int = Field(alias="id")
"""
    good = """
from pydantic import BaseModel, Field

class Row(BaseModel):
    user_id: int = Field(alias="user")
    item_id: int = Field(alias="item")
"""
    rationale = """Pydantic accepts this silently: one input key fills *both* fields, and
`model_dump(by_alias=True)` emits the key once, dropping a value. Measured on 2.13:
`Row(id=1)` gives `user_id=1 item_id=1`; the dump is `{'id': 1}`. Skipped when an
`alias_generator` is configured (names are computed at runtime)."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        if model.nearest("config", "alias_generator") is not None:
            return
        fields = _fields_sharing_own_keys(model)
        own = set(model.fields)
        clashes: dict[tuple[str, str], list[tuple[str, str, ast.AST]]] = {}
        for direction in ("input", "output"):
            seen: dict[str, str] = {}
            for name, spec in fields.items():
                for key, node in spec.keys(direction):
                    other = seen.get(key)
                    if other is not None and other != name and (name in own or other in own):
                        where = node if name in own else model.fields[other].node
                        clashes.setdefault((name, other), []).append((direction, key, where))
                    seen.setdefault(key, name)
        for (name, other), hits in clashes.items():
            dirs = " and ".join(dict.fromkeys(d for d, _, _ in hits))
            yield self.diag(model, hits[0][2], f"{dirs} name {hits[0][1]!r} of field '{name}' is also used by field "
                                               f"'{other}'; one key fills/serialises both and a value is lost")


def _fields_sharing_own_keys(model: ModelInfo) -> dict[str, FieldSpec]:
    """The model's own fields plus the inherited fields that share an input/output key with one of
    them, in the order of the full field list (inherited, nearest definition first; own fields
    overriding one keep its place; new own fields last).

    Only these can take part in a clash the model itself is responsible for; clashes between two
    inherited fields are reported on the parent. Restricting to them keeps a deep hierarchy from
    costing a walk over every inherited field per model.
    """
    mro = model.mro()
    index = model._owners
    inherited: dict[str, ModelInfo] = {}
    walked: dict[str, tuple[ModelInfo, FieldSpec]] | None = None
    for direction in ("input", "output"):
        own_keys = {k for spec in model.fields.values() for k, _ in spec.keys(direction)}
        holders = [index.key_owners(direction, k) for k in own_keys] if index is not None else None
        # Look the keys up in the run-wide index when few fields of the run share them (a deep
        # hierarchy); walk the ancestors' fields when many do (a shallow model whose field names
        # recur across a large run): whichever touches fewer fields.
        if holders is None or sum(map(len, holders)) > 8 * len(mro):
            walked = model.inherited_fields() if walked is None else walked
            for name, (owner, spec) in walked.items():
                if name not in model.fields and any(k in own_keys for k, _ in spec.keys(direction)):
                    inherited[name] = owner
            continue
        for owners in holders:
            for owner, name in owners:
                if owner is model or name in model.fields or name in inherited or owner not in mro:
                    continue
                if model.nearest("fields", name, inherited=True) is owner:  # not hidden by a nearer one
                    inherited[name] = owner

    def place(name: str) -> tuple[int, int]:
        owner = inherited.get(name)
        if owner is None:
            found = model.inherited_field(name)
            if found is None:
                return len(mro), list(model.fields).index(name)
            owner = found[0]
        return mro.index(owner), list(owner.fields).index(name)

    names = sorted([*inherited, *model.fields], key=place)
    return {n: model.fields[n] if n in model.fields else inherited[n].fields[n] for n in names}


class ShadowsBaseModelAttribute(BaseRule):
    code = "PSC010"
    name = "shadows-basemodel-attribute"
    severity = "warning"
    summary = "A field is named like a `BaseModel` method/attribute (`json`, `dict`, `copy`, `schema`, ...)."
    bad = """
from pydantic import BaseModel

class Payload(BaseModel):
    json: str
"""
    good = """
from pydantic import BaseModel, Field

class Payload(BaseModel):
    json_: str = Field(alias="json")
"""
    rationale = """Pydantic warns `Field name "json" shadows an attribute in parent "BaseModel"` and the
instance attribute hides the (deprecated) method. Warning: works, but any code calling
`payload.json()` breaks. Names under the protected namespaces are PSC011."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            if spec.name in BASEMODEL_ATTRS and not spec.name.startswith("model_"):
                yield self.diag(model, spec.node, f"field '{spec.name}' shadows BaseModel.{spec.name}; "
                                                  f"rename it and use alias={spec.name!r}")


class ProtectedNamespace(BaseRule):
    code = "PSC011"
    name = "protected-namespace"
    severity = "error"
    summary = "A field name collides with Pydantic's protected namespaces (`model_validate*`, `model_dump*`)."
    bad = """
from pydantic import BaseModel

class Run(BaseModel):
    model_dump_path: str
"""
    good = """
from pydantic import BaseModel

class Run(BaseModel):
    dump_path: str
    model_name: str      # fine since Pydantic 2.10: only model_validate*/model_dump* are protected
"""
    rationale = """Since 2.10 the default `protected_namespaces` is `('model_validate', 'model_dump')`:
a field equal to an existing member (`model_dump`) raises `ValueError` at class creation; any other
name in those namespaces triggers a UserWarning and may collide with a future Pydantic method.
`model_name` and similar are *not* flagged any more (they were warnings before 2.10). Honours a
literal `protected_namespaces` in `model_config`; other `model_*` members (e.g. `model_fields`)
are reported too because they shadow the API."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        ok, ns = model.config_literal("protected_namespaces")
        namespaces = tuple(ns) if ok and isinstance(ns, (tuple, list)) else DEFAULT_PROTECTED_NAMESPACES
        for spec in model.all_field_specs:
            hit = next((p for p in namespaces if isinstance(p, str) and spec.name.startswith(p)), None)
            if hit or (spec.name in BASEMODEL_ATTRS and spec.name.startswith("model_")):
                what = f"protected namespace {hit!r}" if hit else "a BaseModel member"
                yield self.diag(model, spec.node, f"field '{spec.name}' collides with {what}; rename it "
                                                  f"(alias={spec.name!r} keeps the external name)")


def _subtype(child: TypeRef, parent: TypeRef, ctx: RuleContext, cmod: ModuleInfo, pmod: ModuleInfo) -> bool | None:
    c, p = child.strip_annotated(), parent.strip_annotated()
    if fmt(c) == fmt(p) or p.name in ("Any", "object") or c.name == "Any":
        return True
    if "?" in (c.name, p.name) or c.mentions(lambda t: t.name == "?") or p.mentions(lambda t: t.name == "?"):
        return None
    if c.name == "Union":
        rs = [_subtype(m, p, ctx, cmod, pmod) for m in c.members()]
        return False if any(r is False for r in rs) else (True if all(rs) else None)
    if p.name == "Union":
        rs = [_subtype(c, m, ctx, cmod, pmod) for m in p.members()]
        return True if any(r is True for r in rs) else (False if all(r is False for r in rs) else None)
    if c.name == "Literal":
        rs = [accepts(p, v, lambda q: ctx.model_for(q, pmod) is not None) for v in c.values]
        return False if any(r is False for r in rs) else (True if all(rs) else None)
    if p.name == "Literal":
        return False
    tower = ["bool", "int", "float", "complex"]
    if c.name in tower and p.name in tower:
        return tower.index(c.name) <= tower.index(p.name)
    if c.name.startswith("cls:") or p.name.startswith("cls:"):
        if c.name.startswith("cls:") and p.name.startswith("cls:"):
            cm, pm = ctx.model_for(c.name[4:], cmod), ctx.model_for(p.name[4:], pmod)
            if cm is not None and pm is not None:
                return pm in cm.mro()
        return None
    if c.name == p.name:
        if not c.args or not p.args or len(c.args) != len(p.args):
            return True
        rs = [_subtype(a, b, ctx, cmod, pmod) for a, b in zip(c.args, p.args, strict=True)]
        return False if any(r is False for r in rs) else (True if all(rs) else None)
    known = {"str", "int", "float", "bool", "bytes", "list", "dict", "set", "tuple", "frozenset", "None",
             *NON_NULL_OPAQUE}
    if c.name in known and p.name in known:
        return False
    return None


class OverrideChangesType(BaseRule):
    code = "PSC012"
    name = "override-changes-type"
    severity = "warning"
    summary = "A subclass redeclares a parent's field with a type that is not a subtype of the parent's."
    bad = """
from pydantic import BaseModel

class Base(BaseModel):
    seed: int = 0

class Child(Base):
    seed: str = "0"
"""
    good = """
from typing import Literal
from pydantic import BaseModel

class Animal(BaseModel):
    kind: str

class Cat(Animal):
    kind: Literal["cat"] = "cat"     # narrowing to a Literal: the discriminated-union idiom
"""
    rationale = """Pydantic lets a subclass replace a field's annotation wholesale, so a `Child` is no
longer a valid `Base` (Liskov): code typed against `Base` reads a `str` where it expects an `int`,
and a validator on the parent sees values of another type. Narrowing (a `Literal` of the parent's
type, `bool` for `int`, dropping `None` from an `Optional`, a subclass model) is the documented
discriminated-union pattern and is not flagged, and so is a subclass replacing a `Literal` tag with
its own `Literal` (`type: Literal["ai"]` -> `Literal["ai_chunk"]`: each class of a tagged hierarchy
carries its own tag). Only parents in the same run are compared."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for name, spec in model.fields.items():
            found = model.inherited_field(name)
            if found is None:
                continue
            parent, pspec = found
            if _is_literal_type(spec.type) and _is_literal_type(pspec.type):
                continue  # a subclass re-tagging its discriminator (``type: Literal["chunk"]``): the tag idiom
            if _subtype(spec.type, pspec.type, ctx, model.module, parent.module) is False:
                yield self.diag(model, spec.node, f"'{name}: {spec.type}' changes the type of {parent.name}.{name} "
                                                  f"({pspec.type}); {model.name} instances are no longer "
                                                  f"valid {parent.name} instances")


class ImportTimeDefault(BaseRule):
    code = "PSC013"
    name = "import-time-default"
    severity = "error"
    summary = "A default is computed once at import (`datetime.now()`, `uuid4()`, `random()`...)."
    bad = """
from datetime import datetime
from pydantic import BaseModel

class Record(BaseModel):
    created_at: datetime = datetime.now()
"""
    good = """
from datetime import datetime
from pydantic import BaseModel, Field

class Record(BaseModel):
    created_at: datetime = Field(default_factory=datetime.now)
"""
    rationale = """The class body runs once, so every `Record()` shares the import-time timestamp (or
UUID, random number): the value looks fresh in tests and is wrong in a long-running service.
`default_factory` is Pydantic's documented way to compute a default per instance."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            if spec.default is None:
                continue
            for node in _walk_no_lambda(spec.default):
                if isinstance(node, ast.Call):
                    q = _call_qualname(node, model.module)
                    if q in VOLATILE_CALLS or q.startswith(VOLATILE_PREFIXES):
                        yield self.diag(model, node, f"default of '{spec.name}' is computed once at import by "
                                                     f"{ast.unparse(node)}; all instances share it — use "
                                                     f"default_factory={ast.unparse(node.func)}")
                        break


def _walk_no_lambda(node: ast.AST) -> Iterator[ast.AST]:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Lambda):
            continue
        yield n
        stack.extend(ast.iter_child_nodes(n))


class V1ConfigClass(BaseRule):
    code = "PSC014"
    name = "v1-config-class"
    severity = "warning"
    summary = "A Pydantic v1 `class Config:` inside a v2 model."
    bad = """
from pydantic import BaseModel

class Item(BaseModel):
    name: str

    class Config:
        frozen = True
"""
    good = """
from pydantic import BaseModel, ConfigDict

class Item(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
"""
    rationale = """Class-based config is deprecated in v2 ("Support for class-based `config` is
deprecated, use ConfigDict instead ... to be removed in V3") and mixes badly with `model_config`
in subclasses. Warning: it still works today. Renamed/removed keys inside it are PSC015."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        if model.config_class is not None:
            extra = " (model_config is also set)" if model.config_node is not None else ""
            yield self.diag(model, model.config_class,
                            f"class-based Config in {model.name} is deprecated in Pydantic v2{extra}; "
                            f"use model_config = ConfigDict(...)")


class V1ConfigKey(BaseRule):
    code = "PSC015"
    name = "v1-config-key"
    severity = "error"
    summary = "A config key renamed or removed in v2 (`orm_mode`, `allow_population_by_field_name`, ...)."
    bad = """
from pydantic import BaseModel, ConfigDict

class Row(BaseModel):
    model_config = ConfigDict(orm_mode=True)
    id: int
"""
    good = """
from pydantic import BaseModel, ConfigDict

class Row(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
"""
    rationale = """Pydantic only *warns* ("Valid config keys have changed in V2") and ignores the old key:
measured on 2.13, `orm_mode=True` leaves `from_attributes` off, so `Row.model_validate(orm_obj)`
fails. An ignored setting is a behaviour change hidden behind a warning — error."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        items: list[tuple[str, ast.AST]] = [(k, v) for k, v in model.config.items()]
        if model.config_class is not None:
            for stmt in model.config_class.body:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else (
                    [stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
                items += [(t.id, stmt) for t in targets if isinstance(t, ast.Name)]
        for key, node in items:
            if key in V1_RENAMED_KEYS:
                yield self.diag(model, node, f"config key '{key}' was renamed to '{V1_RENAMED_KEYS[key]}' in "
                                             f"Pydantic v2; the old key is ignored")
            elif key in V1_REMOVED_KEYS:
                yield self.diag(model, node, f"config key '{key}' was removed in Pydantic v2 and is ignored")


class UnknownConfigKey(BaseRule):
    code = "PSC016"
    name = "unknown-config-key"
    severity = "error"
    summary = "A `model_config` key that is not a Pydantic v2 setting (typo or invented)."
    bad = """
from pydantic import BaseModel, ConfigDict

class Sample(BaseModel):
    model_config = ConfigDict(coerce_numbers=True)
    age: int
"""
    good = """
from pydantic import BaseModel, ConfigDict

class Sample(BaseModel):
    model_config = ConfigDict(coerce_numbers_to_str=True)
    age: str
"""
    rationale = """Unknown keys are silently ignored (measured on 2.13: no error, no warning), so the
intended behaviour never happens. The field notes themselves recommend `coerce_numbers=True`, which is not a
Pydantic setting (the real key is `coerce_numbers_to_str`, and it does the opposite of what the
field notes want). Only `ConfigDict(...)` and dict literals are checked, and not on `pydantic-settings`
models, whose `SettingsConfigDict` has keys of its own."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        if model.is_settings or model.config_source not in ("ConfigDict", "dict"):
            return  # SettingsConfigDict(...) and other config builders have keys of their own
        for key, node in model.config.items():
            if key not in CONFIG_KEYS and key not in V1_RENAMED_KEYS and key not in V1_REMOVED_KEYS:
                yield self.diag(model, node, f"model_config key '{key}' is not a Pydantic v2 setting and is "
                                             f"silently ignored{_suggest(key, CONFIG_KEYS)}")


class V1Validator(BaseRule):
    code = "PSC017"
    name = "v1-validator"
    severity = "warning"
    summary = "Pydantic v1 `@validator` / `@root_validator` in a v2 model."
    bad = """
from pydantic import BaseModel, validator

class User(BaseModel):
    name: str

    @validator("name")
    def strip(cls, v):
        return v.strip()
"""
    good = """
from pydantic import BaseModel, field_validator

class User(BaseModel):
    name: str

    @field_validator("name")
    @classmethod
    def strip(cls, v: str) -> str:
        return v.strip()
"""
    rationale = """Deprecated in v2 (removed in v3) and semantically different: v1 `@validator` takes
`values`/`each_item`/`always`, which `@field_validator` replaces with `ValidationInfo`, and
`@root_validator` without `skip_on_failure=True` raises `PydanticUserError` in v2."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for v in model.validators:
            if v.kind in ("validator", "root_validator"):
                new = "field_validator" if v.kind == "validator" else "model_validator"
                yield self.diag(model, v.decorator, f"@{v.kind} on {model.name}.{v.func.name} is Pydantic v1 API "
                                                    f"(deprecated in v2); use @{new}")


V1_CLASS_METHODS = {"parse_raw": "model_validate_json", "parse_obj": "model_validate",
                    "parse_file": "model_validate_json(Path(...).read_text())", "from_orm": "model_validate",
                    "construct": "model_construct", "schema": "model_json_schema",
                    "schema_json": "json.dumps(model_json_schema())", "update_forward_refs": "model_rebuild",
                    "validate": "model_validate"}
V1_INSTANCE_METHODS = {"dict": "model_dump", "json": "model_dump_json", "copy": "model_copy",
                       **V1_CLASS_METHODS}


# Methods that return an instance of the model they are called on (or on its class).
_RETURNS_INSTANCE = frozenset({"model_copy", "copy", "model_validate", "model_validate_json", "model_validate_strings",
                               "model_construct", "construct", "parse_obj", "parse_raw", "parse_file", "from_orm",
                               "validate"})
_V1_CALL_HINT = re.compile(r"\.(?:" + "|".join(sorted(V1_INSTANCE_METHODS)) + r")\s*\(")


class V1MethodCall(BaseRule):
    code = "PSC018"
    name = "v1-method-call"
    severity = "warning"
    summary = "A Pydantic v1 method (`parse_raw`, `parse_obj`, `.dict()`, `.json()`...) called on a v2 model."
    bad = """
from pydantic import BaseModel

class Sample(BaseModel):
    text: str

def load(line: str) -> Sample:
    return Sample.parse_raw(line)
"""
    good = """
from pydantic import BaseModel

class Sample(BaseModel):
    text: str

def load(line: str) -> Sample:
    return Sample.model_validate_json(line)
"""
    rationale = """Deprecated in v2 with a warning per call and removed in v3; some changed meaning
(`copy(update=...)` skips validation, `parse_raw` routes through the deprecated `load_str_bytes`).
The field notes' own JSONL checker calls `model.parse_raw(line)`. The receiver must be known to be a model
— a model class of the run, `self`/`cls` in a model method, or a name annotated or assigned as one
(including `Type[BaseModel]` parameters) — so `response.json()` on an HTTP client is not flagged."""

    def check_module(self, module: ModuleInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        if module.imports_pydantic_v1 or not _V1_CALL_HINT.search(module.source):
            return  # cheap text pre-filter: most files call none of these methods
        r = module.resolver

        # A "kind" is ("class" | "instance", the model of the run or None when only known to be a
        # BaseModel): the model lets the rule skip methods the project defines itself (openai's
        # BaseModel defines its own ``construct``; overriding ``dict`` is common).
        Kind = tuple[str, Any]

        def model_kind(ann: ast.expr | None) -> Kind | None:
            if ann is None:
                return None
            t = r.parse(ann).strip_annotated()
            t = t.without_none() if t.is_optional else t
            is_type = t.name == "type" and bool(t.args)
            target = t.args[0] if is_type else t
            if not target.name.startswith("cls:"):
                return None
            q = target.name[4:]
            m = ctx.model_for(q, module)
            if m is None and q not in ("pydantic.BaseModel", "pydantic.main.BaseModel"):
                return None
            return ("class" if is_type else "instance", m)

        model_by_node = {id(m.node): m for m in ctx.models if m.module is module}
        rule = self
        out: list[Diagnostic] = []

        class Scanner(ast.NodeVisitor):
            # Scope-aware walk: which names hold a model class or instance at each call site.
            def __init__(self) -> None:
                self.scopes: list[dict[str, Kind]] = [{}]
                self.enclosing: list[Any] = [None]  # model whose body we are directly in

            def visit_ClassDef(self, node: ast.ClassDef) -> None:
                for d in node.decorator_list + node.bases:
                    self.visit(d)
                self.scopes.append(dict(self.scopes[-1]))
                self.enclosing.append(model_by_node.get(id(node)))
                for stmt in node.body:
                    self.visit(stmt)
                self.enclosing.pop()
                self.scopes.pop()

            def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
                for d in node.decorator_list:
                    self.visit(d)
                scope = dict(self.scopes[-1])
                params = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                owner = self.enclosing[-1]
                for i, a in enumerate(params):
                    k = model_kind(a.annotation)
                    if k:
                        scope[a.arg] = k
                    elif i == 0 and owner is not None and a.arg in ("self", "cls"):
                        is_cls = a.arg == "cls" or any(isinstance(d, ast.Name) and d.id == "classmethod"
                                                       for d in node.decorator_list)
                        scope[a.arg] = ("class" if is_cls else "instance", owner)
                self.scopes.append(scope)
                self.enclosing.append(None)
                for stmt in node.body:
                    self.visit(stmt)
                self.enclosing.pop()
                self.scopes.pop()

            visit_AsyncFunctionDef = visit_FunctionDef

            def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
                if isinstance(node.target, ast.Name):
                    k = model_kind(node.annotation)
                    if k:
                        self.scopes[-1][node.target.id] = k
                self.generic_visit(node)

            def kind_of(self, node: ast.expr) -> Kind | None:
                """What ``node`` is known to evaluate to: a model class or instance (and which model)."""
                if isinstance(node, ast.Name):
                    if node.id in self.scopes[-1]:
                        return self.scopes[-1][node.id]
                    m = ctx.model_at(node, module)
                    return ("class", m) if m is not None else None
                if isinstance(node, ast.Call):
                    f = node.func
                    if isinstance(f, ast.Name):
                        m = ctx.model_at(f, module)
                        return ("instance", m) if m is not None else None
                    if isinstance(f, ast.Attribute) and f.attr in _RETURNS_INSTANCE:
                        inner = self.kind_of(f.value)
                        if inner:
                            return ("instance", inner[1])
                return None

            def visit_Assign(self, node: ast.Assign) -> None:
                self.generic_visit(node)
                k = self.kind_of(node.value)
                if k:
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            self.scopes[-1][t.id] = k

            def visit_Call(self, node: ast.Call) -> None:
                if isinstance(node.func, ast.Attribute):
                    attr = node.func.attr
                    kind = self.kind_of(node.func.value)
                    table = {} if kind is None else V1_CLASS_METHODS if kind[0] == "class" else V1_INSTANCE_METHODS
                    own = kind is not None and kind[1] is not None and kind[1].nearest("methods", attr) is not None
                    if attr in table and not own:
                        out.append(rule.diag(module, node, f"{ast.unparse(node.func)}() is Pydantic v1 API "
                                                           f"(deprecated in v2); use {table[attr]}"))
                self.generic_visit(node)

        Scanner().visit(module.tree)  # a RecursionError is reported by the engine as PSC999, not dropped
        yield from out


class NonAnnotatedAttribute(BaseRule):
    code = "PSC019"
    name = "non-annotated-attribute"
    severity = "error"
    summary = "A plain class attribute (`x = 1`, `x = Field(...)`) in a model body."
    bad = """
from pydantic import BaseModel

class Cfg(BaseModel):
    retries = 3
"""
    good = """
from typing import ClassVar
from pydantic import BaseModel

class Cfg(BaseModel):
    retries: int = 3
    VERSION: ClassVar[str] = "1"
"""
    rationale = """Pydantic raises `PydanticUserError: A non-annotated attribute was detected` at class
creation (and "Field 'x' defined on a base class was overridden by a non-annotated attribute" for
an un-annotated override). Flagged for literal values, `Field(...)` and any override of an inherited
field; other values (functions, descriptors, types) are allowed by Pydantic and not flagged."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        ignored = "ignored_types" in model.config
        for name, stmt in model.non_annotated:
            parent = model.inherited_field(name)
            value = stmt.value
            is_lit = literal_value(value)[0] or isinstance(value, ast.JoinedStr)
            is_field = isinstance(value, ast.Call) and (model.module.resolver.is_pydantic(value.func, "Field"))
            if parent is not None:
                yield self.diag(model, stmt, f"'{name} = ...' overrides inherited field {parent[0].name}."
                                             f"{name} without an annotation; Pydantic raises at class creation")
            elif (is_lit and not ignored) or is_field:
                yield self.diag(model, stmt, f"'{name}' has no type annotation; Pydantic raises at class creation "
                                             f"— annotate it, or use ClassVar[...] if it is not a field")


class DuplicateField(BaseRule):
    code = "PSC020"
    name = "duplicate-field"
    severity = "error"
    summary = "A field is declared twice in one class body."
    bad = """
from pydantic import BaseModel

class M(BaseModel):
    x: int = 1
    x: str = "a"
"""
    good = """
from pydantic import BaseModel

class M(BaseModel):
    x: int = 1
    y: str = "a"
"""
    rationale = """The second declaration silently replaces the first (Python class bodies are dicts):
the model has one `x: str`. Almost always a copy-paste slip that loses a field."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        first: dict[str, FieldSpec] = {}
        for spec in model.all_field_specs:
            if spec.name in first:
                yield self.diag(model, spec.node, f"field '{spec.name}' is declared again (first at line "
                                                  f"{first[spec.name].line}); the earlier declaration is lost")
            else:
                first[spec.name] = spec


class FieldNameShadowsType(BaseRule):
    code = "PSC021"
    name = "field-name-shadows-type"
    severity = "error"
    summary = "An annotation uses a name the class body has already rebound (`date: date | None = None`)."
    bad = """
from datetime import date
from typing import Optional
from pydantic import BaseModel

class Visit(BaseModel):
    date: Optional[date] = None
"""
    good = """
import datetime
from typing import Optional
from pydantic import BaseModel, Field

class Visit(BaseModel):
    date: Optional[datetime.date] = None
"""
    rationale = """Annotations in a class body are resolved in the class namespace, where `date` is now
the default `None`: measured on 2.13, `Visit.model_fields['date'].annotation` is `NoneType`, so
`Visit(date="2024-01-01")` is rejected. With a `Field(...)` value, or a later field annotated with an
earlier field's name (`int: int = 0; y: int`), Pydantic raises "field name clashing with a type
annotation"."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        bound: dict[str, int] = {}
        for stmt in model.node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                name = stmt.target.id
                if stmt.value is not None:
                    bound_now = dict(bound)
                    bound_now[name] = stmt.lineno
                else:
                    bound_now = bound
                for ident in _annotation_names(stmt.annotation, model.module, 0):
                    if ident in bound_now:
                        where = "its own default" if ident == name else f"the attribute on line {bound_now[ident]}"
                        yield self.diag(model, stmt, f"annotation of '{name}' uses '{ident}', which the class body "
                                                     f"has rebound ({where}); Pydantic resolves it to that value")
                        break
                if stmt.value is not None:
                    bound[name] = stmt.lineno
            elif isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        bound[t.id] = stmt.lineno


def _annotation_names(node: ast.AST, module: ModuleInfo, depth: int, in_call: bool = False) -> Iterator[str]:
    """Names an annotation looks up (forward-reference strings included, ``Literal`` values not).

    A string is a forward reference only in a type position: inside a call's arguments
    (``Field(alias="type")``, ``AfterValidator(check("x"))`` in ``Annotated`` metadata) it is a value."""
    if depth > 20:
        return
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        if in_call:
            return
        try:
            inner = ast.parse(node.value.strip(), mode="eval").body
        except (SyntaxError, ValueError):
            return
        yield from _annotation_names(inner, module, depth + 1)
    elif isinstance(node, ast.Subscript) and module.resolver.canonical(node.value) == "Literal":
        yield from _annotation_names(node.value, module, depth + 1, in_call)
    elif isinstance(node, ast.Call):
        yield from _annotation_names(node.func, module, depth + 1, in_call)
        for child in [*node.args, *(kw.value for kw in node.keywords)]:
            yield from _annotation_names(child, module, depth + 1, True)
    else:
        for child in ast.iter_child_nodes(node):
            yield from _annotation_names(child, module, depth + 1, in_call)


class FieldPositionalDefault(BaseRule):
    code = "PSC101"
    name = "field-positional-default"
    severity = "warning"
    strict_only = True
    summary = "`Field(1)`: the default is passed positionally (strict)."
    bad = """
from pydantic import BaseModel, Field

class M(BaseModel):
    n: int = Field(1, ge=0)
"""
    good = """
from pydantic import BaseModel, Field

class M(BaseModel):
    n: int = Field(default=1, ge=0)
"""
    rationale = """Allowed at runtime, but PEP 681 (`dataclass_transform`) only recognises `default=`
as a keyword: type checkers synthesise an `__init__` where `n` is required. `Field(...)` (the
required marker) is not flagged. Same intent as flake8-pydantic's PYD001; strict-only because it is
about tooling, not runtime behaviour."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            for call in ([spec.field_call] if spec.field_call else []) + spec.annotated_fields:
                if call.args and not is_ellipsis(call.args[0]):
                    yield self.diag(model, call.args[0], f"default of '{spec.name}' is passed positionally to "
                                                         f"Field(); write Field(default=...)")


class DefaultInsideAnnotated(BaseRule):
    code = "PSC102"
    name = "default-inside-annotated"
    severity = "warning"
    strict_only = True
    summary = "`Annotated[T, Field(default=...)]`: the default hides inside the annotation (strict)."
    bad = """
from typing import Annotated
from pydantic import BaseModel, Field

class M(BaseModel):
    n: Annotated[int, Field(default=1)]
"""
    good = """
from typing import Annotated
from pydantic import BaseModel, Field

class M(BaseModel):
    n: Annotated[int, Field(ge=0)] = 1
"""
    rationale = """Pydantic's fields documentation says defaults go outside `Annotated` (as the assigned
value, or `default_factory` inside). Pydantic 2.13 honours it at runtime, but type checkers treat
`n` as required, and a reused `Annotated` alias silently carries the default to every user.
flake8-pydantic's PYD004 covers the same; strict-only for the same reason as PSC101."""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterator[Diagnostic]:
        for spec in model.all_field_specs:
            for call in spec.annotated_fields:
                d = next((kw.value for kw in call.keywords if kw.arg == "default"), None)
                if d is None and call.args and not is_ellipsis(call.args[0]):
                    d = call.args[0]
                if d is not None:
                    yield self.diag(model, call, f"default of '{spec.name}' is set inside Annotated[...]; assign it "
                                                 f"after the annotation instead")


BUILTIN_RULES: tuple[type[BaseRule], ...] = (
    DefaultTypeMismatch, OptionalWithoutDefault, DefaultAndFactory, DefaultFactoryCalled,
    DefaultViolatesConstraint, ConstraintNotApplicable, LiteralDefaultNotInOptions, ValidatorUnknownField,
    DuplicateAlias, ShadowsBaseModelAttribute, ProtectedNamespace, OverrideChangesType, ImportTimeDefault,
    V1ConfigClass, V1ConfigKey, UnknownConfigKey, V1Validator, V1MethodCall, NonAnnotatedAttribute,
    DuplicateField, FieldNameShadowsType, FieldPositionalDefault, DefaultInsideAnnotated,
)
