# ruff: noqa -- benchmark corpus: spellings and defects are deliberate
"""No defects: realistic v2 models in many styles. Every finding here is a false positive."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone
from decimal import Decimal
from enum import Enum
from typing import Annotated, Any, ClassVar, Generic, Literal, Optional, TypeVar, Union

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    RootModel,
    StringConstraints,
    computed_field,
    field_validator,
    model_validator,
)

T = TypeVar("T")
Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9-]+$", max_length=40)]
MaybeFloat = Optional[float]


class Stage(str, Enum):
    TRAIN = "train"
    EVAL = "eval"


class Optim(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: Literal["adamw", "sgd"] = "adamw"
    lr: Annotated[float, Field(gt=0, le=1)] = 3e-4
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = Field(default=0.01, ge=0)
    momentum: MaybeFloat = None


class Cat(BaseModel):
    kind: Literal["cat"] = "cat"
    lives: int = 9


class Dog(BaseModel):
    kind: Literal["dog"] = "dog"
    good: bool = True


class Animal(BaseModel):
    kind: str
    name: str = ""


class Kitten(Animal):
    kind: Literal["kitten"] = "kitten"


class Pet(BaseModel):
    animal: Union[Cat, Dog] = Field(discriminator="kind")


class Page(BaseModel, Generic[T]):
    items: list[T] = Field(default_factory=list)
    total: int = 0
    cursor: Optional[str] = None


class Ids(RootModel[list[int]]):
    root: list[int] = Field(default_factory=list)


class Run(BaseModel):
    model_config = ConfigDict(populate_by_name=True, validate_default=True, protected_namespaces=())
    VERSION: ClassVar[int] = 2
    run_id: str = Field(default_factory=lambda: uuid.uuid4().hex, alias="runId")
    stage: Stage = Stage.TRAIN
    slug: Slug = "baseline"
    model_name: str = "smollm2"
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    steps: PositiveInt = 100
    budget: Decimal = Field(default=Decimal("9.99"), max_digits=6, decimal_places=2)
    optim: Optim = Field(default_factory=Optim)
    labels: dict[str, str] = {}
    notes: list[str] = []
    seed: int = Field(default=0, validation_alias=AliasChoices("seed", "random_seed"))
    extra: Optional[dict[str, Any]] = None

    @field_validator("slug")
    @classmethod
    def lower(cls, v: str) -> str:
        return v.lower()

    @model_validator(mode="after")
    def check_steps(self) -> Run:
        if self.steps > 10**6:
            raise ValueError("too many steps")
        return self

    @computed_field  # type: ignore[prop-decorator]
    @property
    def short_id(self) -> str:
        return self.run_id[:8]

    def to_row(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)


def roundtrip(run: Run) -> Run:
    return Run.model_validate_json(run.model_dump_json())
