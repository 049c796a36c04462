# ruff: noqa -- benchmark corpus: spellings and defects are deliberate
"""No defects for a v2 linter: a deliberate pydantic.v1 model (the compatibility namespace)."""
from __future__ import annotations

from pydantic.v1 import BaseModel, validator


class OldStyle(BaseModel):
    name: str = "x"

    class Config:
        orm_mode = True

    @validator("name")
    def strip(cls, v: str) -> str:
        return v.strip()


def legacy(raw: str) -> dict:
    return OldStyle.parse_raw(raw).dict()
