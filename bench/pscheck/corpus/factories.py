# ruff: noqa -- benchmark corpus: spellings and defects are deliberate
"""Seeded defects: default/default_factory misuse and import-time defaults."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone
from functools import partial

from pydantic import BaseModel, Field


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Settings(BaseModel):
    retries: int = 3


class Event(BaseModel):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    at: datetime = Field(default_factory=datetime.now())  # DEFECT: default-factory-called
    tags: list[str] = Field(default_factory=list())  # DEFECT: default-factory-called
    meta: dict[str, str] = Field(default={}, default_factory=dict)  # DEFECT: default-and-default-factory
    cfg: Settings = Field(default_factory=Settings())  # DEFECT: default-factory-called
    seen: datetime = Field(default_factory=_now)
    buckets: list[int] = Field(default_factory=partial(list, [0, 0]))
    created: datetime = datetime.now()  # DEFECT: import-time-default
    token: str = str(uuid.uuid4())  # DEFECT: import-time-default
    updated: datetime = Field(default=datetime.now(timezone.utc))  # DEFECT: import-time-default
