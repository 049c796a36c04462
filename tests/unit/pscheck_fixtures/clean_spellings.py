# ruff: noqa  -- deliberately uses every annotation spelling pscheck must understand
"""Every spelling pscheck must understand, written correctly: must produce no finding at all."""
from __future__ import annotations

import datetime as dt
import typing as t
import uuid
from collections.abc import Sequence
from decimal import Decimal
from enum import Enum
from functools import partial
from typing import Annotated, ClassVar, Literal, Optional, Union

import annotated_types
import typing_extensions as te
from pydantic import (AliasChoices, BaseModel, ConfigDict, Field, PositiveInt, RootModel, StringConstraints,
                      computed_field, conint, constr, field_serializer, field_validator, model_validator)

MaybeInt = Optional[int]
Name = Annotated[str, StringConstraints(min_length=1, max_length=50)]
DEFAULT_RETRIES = 3


class Color(Enum):
    RED = "red"


def make_tags() -> list[str]:
    return []


class Clean(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    VERSION: ClassVar[str] = "1"
    _cache: dict = {}

    a: Optional[str] = None
    b: str | None = None
    c: t.Optional[int] = None
    d: te.Literal["x", "y"] = "x"
    e: Union[int, str] = 3
    f: MaybeInt = None
    g: Annotated[int, Field(ge=0)] = 0
    h: Annotated[float, annotated_types.Gt(0)] = 0.5
    i: conint(gt=0) = 1
    j: constr(max_length=3) = "abc"
    k: PositiveInt = 5
    l: Name = "ok"
    m: list[int] = [1, 2]
    n: dict[str, float] = {"a": 1}
    o: tuple[int, ...] = (1, 2)
    p: float = 1
    q: Decimal = Field(default=Decimal("1.5"), max_digits=4, decimal_places=2)
    r: dt.datetime = Field(default_factory=dt.datetime.now)
    s: uuid.UUID = Field(default_factory=uuid.uuid4)
    u: list[str] = Field(default_factory=make_tags)
    v: list[int] = Field(default_factory=partial(list, [1]))
    w: Color = Color.RED
    x: Sequence[str] = ()
    y: Optional[str] = Field(...)
    z: "Optional[Clean]" = None
    aa: int = Field(default=DEFAULT_RETRIES, ge=0)
    bb: str = Field(default="a", validation_alias=AliasChoices("bb", "b2"))
    cc: Literal[1, 2] | None = None
    dd: t.List[int] = []
    ee: bool = False
    ff: dt.date | None = None
    gg: Annotated[str, Field(pattern=r"^[a-z]+$")] = "abc"
    hh: set[int] = set()
    ii: Optional[Literal["a"]] = "a"
    jj: Annotated[Optional[int], Field(ge=0)] = None
    kk: te.Annotated[list[str], Field(max_length=3)] = []

    @field_validator("a", "b")
    @classmethod
    def strip(cls, v: str | None) -> str | None:
        return v.strip() if v else v

    @field_validator("*")
    @classmethod
    def anything(cls, v):
        return v

    @model_validator(mode="after")
    def check(self) -> Clean:
        return self

    @field_serializer("m")
    def ser(self, v: list[int]) -> list[int]:
        return v

    @computed_field
    @property
    def total(self) -> int:
        return len(self.m)

    def to_payload(self) -> dict:
        return self.model_dump()


class Child(Clean):
    e: int = 4  # narrowing Union[int, str] -> int is fine
    d: Literal["x"] = "x"


class Ints(RootModel[list[int]]):
    root: list[int] = []


class NotAModel:
    x: str = None  # plain class: not pscheck's business


def use(resp) -> None:
    resp.json()  # unknown receiver: not a model, not flagged
    Clean.model_validate({}).model_dump()
