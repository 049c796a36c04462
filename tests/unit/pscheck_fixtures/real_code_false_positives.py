# ruff: noqa  -- minimal reproductions of false positives pscheck gave on real pydantic-v2 libraries
"""Each block reproduces, in a few lines, a pattern real libraries use correctly and pscheck once
flagged (bench/pscheck/real_code.py, labels.jsonl). Linted with every group: must stay clean.
Not library code: written from the pattern, not copied."""
from __future__ import annotations

import importlib.metadata
from typing import Annotated, Any, Literal

import pydantic
from pydantic import VERSION, AfterValidator, BaseModel, Field, RootModel, field_validator
from pydantic.version import VERSION as PYDANTIC_VERSION

PYDANTIC_V1 = pydantic.VERSION.startswith("1.")
IS_V2 = int(VERSION.split(".")[0]) >= 2
_MAJOR = importlib.metadata.version("pydantic")


class Item(BaseModel):
    name: str = ""


# -- v1 calls in branches only Pydantic v1 runs --------------------------------------------------
def dump_flag(m: Item) -> dict[str, Any]:
    if PYDANTIC_V1:
        return m.dict()
    return m.model_dump()


def dump_not_v2(m: Item) -> str:
    if not IS_V2:
        return m.json()
    else:
        return m.model_dump_json()


def dump_startswith(m: Item) -> Item:
    if VERSION.startswith("1"):
        return m.copy()
    return m.model_copy()


def dump_compare(m: Item) -> dict[str, Any]:
    if PYDANTIC_VERSION < "2":
        return m.dict()
    if pydantic.version.VERSION >= "2":
        return m.model_dump()
    return m.dict()  # after a v2 branch that returns


def dump_metadata_version(m: Item) -> dict[str, Any]:
    if _MAJOR.startswith("2"):
        return m.model_dump()
    return m.dict()


def dump_hasattr(m: Item) -> dict[str, Any]:
    if hasattr(m, "model_dump"):
        return m.model_dump()
    return m.dict()


def dump_try(m: Item) -> dict[str, Any]:
    try:
        return m.model_dump()
    except Exception:  # pydantic v1
        return m.dict()


def dump_ifexp(m: Item) -> str:
    return m.model_dump_json() if not PYDANTIC_V1 else m.json()


class Wrapper(BaseModel):
    item: Item = Item()

    def to_dict(self) -> dict[str, Any]:
        if PYDANTIC_V1:
            return self.dict()
        return self.model_dump()


# -- strings inside Annotated metadata calls are values, not forward references -----------------
def check(value: str) -> Any:
    return lambda v: v


class Credential(BaseModel):
    type: Annotated[Literal["bearer"], AfterValidator(check("bearer")), Field(alias="type")] = "bearer"


class Text(BaseModel):
    type: Literal["text"] = "text"


class Audio(BaseModel):
    type: Literal["audio"] = "audio"


class Message(BaseModel):
    type: Literal["message"] = "message"
    content: list[Annotated[Text | Audio, Field(discriminator="type")]] = []


# -- RootModel's own field is ``root`` ----------------------------------------------------------
class Spec(RootModel[str | dict[str, Any]]):
    @field_validator("root")
    @classmethod
    def one_key(cls, value: Any) -> Any:
        return value


# -- a subclass in a tagged hierarchy carries its own tag ----------------------------------------
class Event(BaseModel):
    type: Literal["event"] = "event"


class EventChunk(Event):
    type: Literal["event_chunk"] = "event_chunk"
