# ruff: noqa -- benchmark corpus: spellings and defects are deliberate
"""Seeded defects: validators on missing fields, alias collisions, reserved names."""
from __future__ import annotations

from pydantic import BaseModel, Field, field_serializer, field_validator


class User(BaseModel):
    name: str
    email: str

    @field_validator("name", "emial")  # DEFECT: validator-unknown-field
    @classmethod
    def strip(cls, v: str) -> str:
        return v.strip()

    @field_serializer("nmae")  # DEFECT: validator-unknown-field
    def upper(self, v: str) -> str:
        return v.upper()

    @field_validator("email")
    @classmethod
    def lower(cls, v: str) -> str:
        return v.lower()


class Row(BaseModel):
    user_id: int = Field(alias="id")
    item_id: int = Field(alias="id")  # DEFECT: duplicate-alias @class
    total: int = Field(serialization_alias="sum")
    count: int = Field(serialization_alias="sum")  # DEFECT: duplicate-alias
    a: int = Field(alias="b")
    b: int = 0  # DEFECT: duplicate-alias @class


class Payload(BaseModel):
    json: str  # DEFECT: shadows-basemodel-attribute
    copy: bool = False  # DEFECT: shadows-basemodel-attribute
    model_dump_path: str = ""  # DEFECT: protected-namespace
    model_name: str = "gpt"
    schema_: str = Field(default="", alias="schema")
