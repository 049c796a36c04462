# ruff: noqa -- benchmark corpus: spellings and defects are deliberate
"""Seeded defects: class-body structure (non-annotated attributes, duplicates, shadowed names)."""
from __future__ import annotations

import datetime
from datetime import date
from typing import ClassVar, Optional

from pydantic import BaseModel, Field


class Cfg(BaseModel):
    VERSION: ClassVar[str] = "2"
    retries = 3  # DEFECT: non-annotated-attribute
    timeout = Field(default=10)  # DEFECT: non-annotated-attribute
    host: str = "localhost"
    port: int = 80
    port: str = "80"  # DEFECT: duplicate-field
    _cache: dict = {}


class Visit(BaseModel):
    date: Optional[date] = None  # DEFECT: field-name-shadows-type
    when: Optional[datetime.date] = None


class Span(BaseModel):
    int: int = 0  # DEFECT: field-name-shadows-type
    length: int = 1  # DEFECT: field-name-shadows-type


class Base(BaseModel):
    seed: int = 0
    kind: str = "base"
    ratio: float = 0.5


class Child(Base):
    seed: str = "0"  # DEFECT: override-changes-type
    kind: str = "child"
    ratio: int = 1
    retries = 5  # DEFECT: non-annotated-attribute
