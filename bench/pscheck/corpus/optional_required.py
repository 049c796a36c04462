# ruff: noqa -- benchmark corpus: spellings and defects are deliberate
"""Seeded defects: Optional fields that Pydantic v2 makes required."""
from __future__ import annotations

from typing import Optional, Union

from pydantic import BaseModel, Field


class Sample(BaseModel):
    text: str
    label: Optional[str]  # DEFECT: optional-without-default
    source: str | None  # DEFECT: optional-without-default
    weight: Union[float, None]  # DEFECT: optional-without-default
    lang: Optional[str] = None
    owner: Optional[str] = Field(...)
    parent_id: Optional[int] = Field(default=None, ge=0)


class Batch(BaseModel):
    ids: list[int] = Field(default_factory=list)
    note: Optional[str] = Field(description="free text")  # DEFECT: optional-without-default
