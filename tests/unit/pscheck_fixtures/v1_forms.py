# ruff: noqa  -- v1 forms of every kind of site a v1-to-v2 port rewrites, one block per kind
"""Written for Pydantic v1: the tests run it under ``pydantic.v1`` (its imports rewritten) to show
what each line meant there, and lint it as written with ``--select migration``: every line ending in
``# MIGRATION: CODE`` must be reported with that code, and no other line. ``v2_forms.py`` holds
the same models ported to v2. Not library code: written from the patterns the recall bench found."""
from typing import Any, Generic, List, Optional, TypeVar

from pydantic import BaseModel, BaseSettings, Field, root_validator, validator  # MIGRATION: PSC023
from pydantic.generics import GenericModel  # MIGRATION: PSC023

T = TypeVar("T")


# v1 gave every field that admits None the default None; v2 requires them.
class Event(BaseModel):
    payload: Any  # MIGRATION: PSC002
    meta: object  # MIGRATION: PSC002
    note: Optional[str]  # MIGRATION: PSC002


# Field() keywords v2 refuses or only deprecates.
class Query(BaseModel):
    text: str = Field("", regex=r"^\w*$")  # MIGRATION: PSC022
    tags: List[str] = Field(default_factory=list, max_items=2)  # MIGRATION: PSC022
    kind: str = Field("q", const=True)  # MIGRATION: PSC022
    size: int = Field(0, example=3)  # MIGRATION: PSC022


class Tags(BaseModel):
    __root__: List[str]  # MIGRATION: PSC024


class Slug(str):
    @classmethod  # MIGRATION: PSC025
    def __get_validators__(cls):
        yield cls.validate

    @classmethod
    def validate(cls, v):
        return cls(str(v).lower())

    @classmethod  # MIGRATION: PSC025
    def __modify_schema__(cls, schema):
        schema.update(format="slug")


class Post(BaseModel):
    slug: Slug
    title: str

    @validator("title")  # MIGRATION: PSC017
    def strip(cls, v):
        return v.strip()

    @root_validator(pre=True)  # MIGRATION: PSC017
    def title_from_slug(cls, values):
        values.setdefault("title", values.get("slug", ""))
        return values


class Page(GenericModel, Generic[T]):  # MIGRATION: PSC023
    items: List[T] = []


class Settings(BaseSettings):
    db_url: str = Field("sqlite://", env="NBKIT_FIXTURE_DB_URL")  # MIGRATION: PSC022

    class Config:  # MIGRATION: PSC014
        env_prefix = "NBKIT_FIXTURE_"
        allow_mutation = False  # MIGRATION: PSC015
