"""Pydantic schema for the example SFT data (``sft.jsonl``), used by data-schema."""

from typing import Literal

from pydantic import BaseModel, Field


class SFTExample(BaseModel):
    id: int
    instruction: str = Field(min_length=1)
    response: str = Field(min_length=1)
    source: Literal["upper", "reverse", "sum", "spell"] | None = None
