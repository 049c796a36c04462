"""How findings quote a value (shortened) and suggest the name that was probably meant."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


def short(v: Any, limit: int = 40) -> str:
    """``repr(v)``, cut to ``limit`` characters so a huge default does not flood the message."""
    s = repr(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def suggest(name: str, options: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``options``, or ``""`` when none is close."""
    close = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
