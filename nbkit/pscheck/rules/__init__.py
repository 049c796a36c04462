"""The built-in pscheck rules, one module per rule (named after the rule), as ruff keeps its rules.

Each module holds one :class:`~nbkit.pscheck.registry.BaseRule` subclass: its code, name, group and
severity, its documentation (``summary``, ``bad``, ``good``, ``rationale``) and its check.
``docs/pscheck.md`` is generated from those attributes (``python -m nbkit.pscheck.docs``) and the tests
lint every ``bad``/``good`` example, so the reference cannot drift from the behaviour.
:data:`BUILTIN_RULES` is the table ``RuleRegistry.default()`` registers: a new rule is a new module plus
one line here. The modules without a rule (``calls``, ``fields``, ``messages``, ``pydantic_api``) hold
what several rules share.
"""

from __future__ import annotations

from nbkit.pscheck.rule import BaseRule
from nbkit.pscheck.rules.constraint_not_applicable import ConstraintNotApplicable
from nbkit.pscheck.rules.default_and_default_factory import DefaultAndFactory
from nbkit.pscheck.rules.default_factory_called import DefaultFactoryCalled
from nbkit.pscheck.rules.default_inside_annotated import DefaultInsideAnnotated
from nbkit.pscheck.rules.default_type_mismatch import DefaultTypeMismatch
from nbkit.pscheck.rules.default_violates_constraint import DefaultViolatesConstraint
from nbkit.pscheck.rules.duplicate_alias import DuplicateAlias
from nbkit.pscheck.rules.duplicate_field import DuplicateField
from nbkit.pscheck.rules.field_name_shadows_type import FieldNameShadowsType
from nbkit.pscheck.rules.field_positional_default import FieldPositionalDefault
from nbkit.pscheck.rules.import_time_default import ImportTimeDefault
from nbkit.pscheck.rules.literal_default_not_allowed import LiteralDefaultNotInOptions
from nbkit.pscheck.rules.non_annotated_attribute import NonAnnotatedAttribute
from nbkit.pscheck.rules.optional_without_default import OptionalWithoutDefault
from nbkit.pscheck.rules.override_changes_type import OverrideChangesType
from nbkit.pscheck.rules.protected_namespace import ProtectedNamespace
from nbkit.pscheck.rules.pydantic_api import BASEMODEL_ATTRS, CONFIG_KEYS, V1_REMOVED_KEYS, V1_RENAMED_KEYS
from nbkit.pscheck.rules.shadows_basemodel_attribute import ShadowsBaseModelAttribute
from nbkit.pscheck.rules.unknown_config_key import UnknownConfigKey
from nbkit.pscheck.rules.v1_config_class import V1ConfigClass
from nbkit.pscheck.rules.v1_config_key import V1ConfigKey
from nbkit.pscheck.rules.v1_custom_root import V1CustomRoot
from nbkit.pscheck.rules.v1_custom_type_hook import V1CustomTypeHook
from nbkit.pscheck.rules.v1_field_argument import V1FieldArgument
from nbkit.pscheck.rules.v1_method_call import V1MethodCall
from nbkit.pscheck.rules.v1_moved_name import V1MovedName
from nbkit.pscheck.rules.v1_validator import V1Validator
from nbkit.pscheck.rules.validator_unknown_field import ValidatorUnknownField

__all__ = ["BASEMODEL_ATTRS", "BUILTIN_RULES", "CONFIG_KEYS", "V1_REMOVED_KEYS", "V1_RENAMED_KEYS"]

BUILTIN_RULES: tuple[type[BaseRule], ...] = (
    DefaultTypeMismatch,
    OptionalWithoutDefault,
    DefaultAndFactory,
    DefaultFactoryCalled,
    DefaultViolatesConstraint,
    ConstraintNotApplicable,
    LiteralDefaultNotInOptions,
    ValidatorUnknownField,
    DuplicateAlias,
    ShadowsBaseModelAttribute,
    ProtectedNamespace,
    OverrideChangesType,
    ImportTimeDefault,
    V1ConfigClass,
    V1ConfigKey,
    UnknownConfigKey,
    V1Validator,
    V1MethodCall,
    NonAnnotatedAttribute,
    DuplicateField,
    FieldNameShadowsType,
    FieldPositionalDefault,
    DefaultInsideAnnotated,
    V1FieldArgument,
    V1MovedName,
    V1CustomRoot,
    V1CustomTypeHook,
)
