# ruff: noqa
from typing import Optional

from pydantic import field_validator

from .base import Base


class User(Base):
    email: str = None  # PSC001 through an indirect base
    name: int = 0  # PSC012: parent says str

    @field_validator("id", "name", "email")
    @classmethod
    def ok(cls, v):
        return v

    @field_validator("nickname")
    @classmethod
    def bad(cls, v):
        return v


class Admin(User):
    level: Optional[int]  # PSC002 (two levels down)
