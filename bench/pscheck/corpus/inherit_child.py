# ruff: noqa -- benchmark corpus: spellings and defects are deliberate
"""Seeded defects that are only visible through a project base class in another file."""
from __future__ import annotations

from pydantic import field_validator

from inherit_base import Timestamped


class Document(Timestamped):
    title: str = None  # DEFECT: default-type-mismatch
    version: str = "1"  # DEFECT: override-changes-type
    parent: int = 0

    @field_validator("id", "name", "title")
    @classmethod
    def check(cls, v: object) -> object:
        return v

    @field_validator("titel")  # DEFECT: validator-unknown-field
    @classmethod
    def check_title(cls, v: str) -> str:
        return v


def dump(doc: Document) -> str:
    return doc.json()  # DEFECT: v1-method-call
