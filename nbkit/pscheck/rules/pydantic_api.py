"""What Pydantic 2.x itself defines that the rules compare a model against: ``BaseModel``'s public
attributes, the ``ConfigDict`` keys, and the v1 config keys v2 renamed or removed.

Tests compare each set with the installed pydantic, so a new release cannot make them silently stale.
"""

from __future__ import annotations

# BaseModel's public attributes in Pydantic 2.x (v2 API + deprecated v1 names). A test compares it
# with dir(pydantic.BaseModel) of the installed version, so it cannot silently go stale.
BASEMODEL_ATTRS = frozenset(
    {
        "construct",
        "copy",
        "dict",
        "from_orm",
        "json",
        "model_computed_fields",
        "model_config",
        "model_construct",
        "model_copy",
        "model_dump",
        "model_dump_json",
        "model_extra",
        "model_fields",
        "model_fields_set",
        "model_json_schema",
        "model_parametrized_name",
        "model_post_init",
        "model_rebuild",
        "model_validate",
        "model_validate_json",
        "model_validate_strings",
        "parse_file",
        "parse_obj",
        "parse_raw",
        "schema",
        "schema_json",
        "update_forward_refs",
        "validate",
    }
)
DEFAULT_PROTECTED_NAMESPACES = ("model_validate", "model_dump")
# ConfigDict keys across Pydantic 2.x (checked against the installed pydantic by a test).
CONFIG_KEYS = frozenset(
    {
        "alias_generator",
        "allow_inf_nan",
        "arbitrary_types_allowed",
        "cache_strings",
        "coerce_numbers_to_str",
        "defer_build",
        "experimental_defer_build_mode",
        "extra",
        "field_title_generator",
        "from_attributes",
        "frozen",
        "hide_input_in_errors",
        "ignored_types",
        "json_encoders",
        "json_schema_extra",
        "json_schema_mode_override",
        "json_schema_serialization_defaults_required",
        "loc_by_alias",
        "model_title_generator",
        "plugin_settings",
        "polymorphic_serialization",
        "populate_by_name",
        "protected_namespaces",
        "regex_engine",
        "revalidate_instances",
        "schema_generator",
        "ser_json_bytes",
        "ser_json_inf_nan",
        "ser_json_temporal",
        "ser_json_timedelta",
        "serialize_by_alias",
        "str_max_length",
        "str_min_length",
        "str_strip_whitespace",
        "str_to_lower",
        "str_to_upper",
        "strict",
        "title",
        "url_preserve_empty_path",
        "use_attribute_docstrings",
        "use_enum_values",
        "val_json_bytes",
        "val_temporal_unit",
        "validate_assignment",
        "validate_by_alias",
        "validate_by_name",
        "validate_default",
        "validate_return",
        "validation_error_cause",
    }
)
# pydantic._internal._config.V2_RENAMED_KEYS / V2_REMOVED_KEYS (also test-checked).
V1_RENAMED_KEYS = {
    "allow_population_by_field_name": "validate_by_name",
    "anystr_lower": "str_to_lower",
    "anystr_strip_whitespace": "str_strip_whitespace",
    "anystr_upper": "str_to_upper",
    "keep_untouched": "ignored_types",
    "max_anystr_length": "str_max_length",
    "min_anystr_length": "str_min_length",
    "orm_mode": "from_attributes",
    "schema_extra": "json_schema_extra",
    "validate_all": "validate_default",
}
V1_REMOVED_KEYS = frozenset(
    {
        "allow_mutation",
        "copy_on_model_validation",
        "error_msg_templates",
        "fields",
        "getter_dict",
        "json_dumps",
        "json_loads",
        "post_init_call",
        "smart_union",
        "underscore_attrs_are_private",
    }
)
