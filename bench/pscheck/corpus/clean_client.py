# ruff: noqa -- benchmark corpus: spellings and defects are deliberate
"""No defects: code that calls .json()/.dict()/.copy() on things that are not Pydantic models."""
from __future__ import annotations

import copy
import json
from typing import Any

from pydantic import BaseModel


class Response:
    def __init__(self, body: str) -> None:
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)

    def copy(self) -> Response:
        return Response(self.body)


class Reply(BaseModel):
    text: str = ""


def fetch(resp: Response) -> Reply:
    data = resp.json()
    again = resp.copy().json()
    merged = dict(data, **again)
    snapshot = copy.copy(merged)
    return Reply.model_validate(snapshot)


def as_dict(reply: Reply) -> dict[str, Any]:
    return reply.model_dump()
