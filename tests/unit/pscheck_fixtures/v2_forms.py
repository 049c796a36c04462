# ruff: noqa  -- the models of v1_forms.py ported to Pydantic v2
"""Each block of ``v1_forms.py`` written for Pydantic v2, keeping what it meant in v1. The tests
import it under the installed pydantic with every warning an error, check it behaves as the v1
form did under ``pydantic.v1``, and lint it with every rule group: it must be clean."""
from typing import Any, Generic, List, Literal, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator, model_validator
from pydantic_core import core_schema
from pydantic_settings import BaseSettings, SettingsConfigDict

T = TypeVar("T")


class Event(BaseModel):
    payload: Any = None
    meta: object = None
    note: Optional[str] = None


class Query(BaseModel):
    text: str = Field(default="", pattern=r"^\w*$")
    tags: List[str] = Field(default_factory=list, max_length=2)
    kind: Literal["q"] = "q"
    size: int = Field(default=0, examples=[3])


class Tags(RootModel[List[str]]):
    pass


class Slug(str):
    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        return core_schema.no_info_plain_validator_function(cls.validate)

    @classmethod
    def validate(cls, v):
        return cls(str(v).lower())

    @classmethod
    def __get_pydantic_json_schema__(cls, schema, handler):
        return {"type": "string", "format": "slug"}


class Post(BaseModel):
    slug: Slug
    title: str

    @field_validator("title")
    @classmethod
    def strip(cls, v: str) -> str:
        return v.strip()

    @model_validator(mode="before")
    @classmethod
    def title_from_slug(cls, values: Any) -> Any:
        if isinstance(values, dict):
            values.setdefault("title", values.get("slug", ""))
        return values


class Page(BaseModel, Generic[T]):
    items: List[T] = []


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="NBKIT_FIXTURE_", frozen=True)

    db_url: str = Field(default="sqlite://", validation_alias="NBKIT_FIXTURE_DB_URL")
