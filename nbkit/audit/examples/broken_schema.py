"""A schema module that cannot be imported (check 7 must report it, not crash)."""

from pydantic import BaseModel

from a_package_that_does_not_exist import Thing  # noqa: F401


class SFTExample(BaseModel):
    id: int
