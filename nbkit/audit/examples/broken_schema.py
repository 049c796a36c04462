"""A schema module that cannot be imported (data-schema must report it, not crash)."""

from a_package_that_does_not_exist import Thing  # noqa: F401
from pydantic import BaseModel


class SFTExample(BaseModel):
    id: int
