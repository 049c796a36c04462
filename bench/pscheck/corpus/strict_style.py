# ruff: noqa -- benchmark corpus: spellings and defects are deliberate
"""Seeded defects for the strict tier (tooling, not runtime): positional/annotated defaults."""
from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field


class Knobs(BaseModel):
    n: int = Field(1, ge=0)  # DEFECT: field-positional-default
    m: Annotated[int, Field(default=2)]  # DEFECT: default-inside-annotated
    k: int = Field(default=3, ge=0)
    j: Annotated[int, Field(ge=0)] = 4
    req: int = Field(..., ge=0)
