# ruff: noqa -- benchmark corpus: spellings and defects are deliberate
"""Seeded defects: defaults that do not belong to their field's type (+ controls that are fine)."""
from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

import typing_extensions as te
from pydantic import BaseModel, Field


class Contact(BaseModel):
    email: str = Field(default=None)  # DEFECT: default-type-mismatch
    phone: str = None  # DEFECT: default-type-mismatch
    fax: Optional[str] = None
    age: int = "42"  # DEFECT: default-type-mismatch
    score: float = 1
    tags: list[str] = [1, 2]  # DEFECT: default-type-mismatch
    extra: dict[str, int] = {}
    nick: Annotated[str, Field(description="shown in UI")] = None  # DEFECT: default-type-mismatch
    active: bool = 1  # DEFECT: default-type-mismatch
    ref: Union[int, str] = 3.5  # DEFECT: default-type-mismatch


class Job(BaseModel):
    mode: Literal["train", "eval"] = "test"  # DEFECT: literal-default-not-allowed
    level: te.Literal["debug", "info"] = "info"
    device: Optional[Literal["cpu", "cuda"]] = "tpu"  # DEFECT: literal-default-not-allowed
    precision: Literal[16, 32] = 32
    split: Literal["a", "b"] = Field(default="c")  # DEFECT: literal-default-not-allowed
