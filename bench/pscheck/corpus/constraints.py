# ruff: noqa -- benchmark corpus: spellings and defects are deliberate
"""Seeded defects: constraints that are bypassed by a default or do not apply to the type."""
from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Optional

from annotated_types import Gt, MaxLen
from pydantic import BaseModel, Field, StringConstraints


class TrainConfig(BaseModel):
    lr: float = Field(default=0.0, gt=0)  # DEFECT: default-violates-constraint
    epochs: int = Field(default=0, ge=1)  # DEFECT: default-violates-constraint
    name: str = Field(default="a-very-long-run-name", max_length=8)  # DEFECT: default-violates-constraint
    slug: str = Field(default="Bad Slug", pattern=r"^[a-z0-9-]+$")  # DEFECT: default-violates-constraint
    warmup: Annotated[int, Gt(0)] = 0  # DEFECT: default-violates-constraint
    layers: Annotated[int, Field(ge=1, le=48)] = 64  # DEFECT: default-violates-constraint
    tag: Annotated[str, StringConstraints(min_length=2)] = "x"  # DEFECT: default-violates-constraint
    batch: int = Field(default=32, ge=1, multiple_of=8)
    seed: Annotated[int, Field(ge=0)] = 0
    note: Annotated[str, MaxLen(10)] = "ok"


class Item(BaseModel):
    qty: int = Field(max_length=3)  # DEFECT: constraint-not-applicable
    title: str = Field(gt=0)  # DEFECT: constraint-not-applicable
    code: Optional[int] = Field(default=None, pattern=r"\d+")  # DEFECT: constraint-not-applicable
    price: float = Field(decimal_places=2)  # DEFECT: constraint-not-applicable
    amount: Decimal = Field(max_digits=6, decimal_places=2)
    sku: str = Field(min_length=3, max_length=12)
