# ruff: noqa -- benchmark corpus: spellings and defects are deliberate
"""Project base classes (clean on their own); subclasses live in inherit_child.py."""
from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict


class Entity(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int
    name: str = ""
    parent: Optional[int] = None


class Timestamped(Entity):
    version: int = 1
