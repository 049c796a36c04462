# ruff: noqa -- benchmark corpus: spellings and defects are deliberate
"""Seeded defects: Pydantic v1 API left in v2 code (the field notes' JSONL checker among them)."""
from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, ValidationError, root_validator, validator


class Sample(BaseModel):
    model_config = ConfigDict(coerce_numbers=True)  # DEFECT: unknown-config-key
    uid: int
    age: int


class Record(BaseModel):
    model_config = ConfigDict(orm_mode=True)  # DEFECT: v1-config-key
    id: int


class Legacy(BaseModel):
    name: str

    class Config:  # DEFECT: v1-config-class
        anystr_strip_whitespace = True  # DEFECT: v1-config-key

    @validator("name")  # DEFECT: v1-validator
    def not_empty(cls, v: str) -> str:
        return v

    @root_validator(pre=True)  # DEFECT: v1-validator
    def fill(cls, values: dict) -> dict:
        return values


class Strictish(BaseModel):
    model_config = {"extra": "forbid", "frozen": True, "validate_asignment": True}  # DEFECT: unknown-config-key
    x: int = 0


def validate_jsonl_line(line: str, model: type[BaseModel]) -> Optional[BaseModel]:
    try:
        return model.parse_raw(line)  # DEFECT: v1-method-call
    except ValidationError:
        return None


def export(rec: Record) -> dict:
    clone = rec.copy()  # DEFECT: v1-method-call
    return clone.dict()  # DEFECT: v1-method-call


def load(data: dict) -> Sample:
    return Sample.parse_obj(data)  # DEFECT: v1-method-call
