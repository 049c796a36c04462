"""Which findings are dropped before the report: those silenced on their line by a comment
(``# noqa``, ``# noqa: PSC001``, ``# pscheck: ignore[PSC0]``) and those inside code only Pydantic v1
runs (compatibility branches, found by :mod:`nbkit.pscheck.compat`)."""

from __future__ import annotations

import re

from nbkit.pscheck.compat import in_regions
from nbkit.pscheck.diagnostic import RULE_CRASHED, UNREADABLE, Diagnostic

_SUPPRESS = re.compile(r"#\s*(?:pscheck:\s*ignore|noqa)(?:\[([A-Z0-9,\s]+)\]|:\s*([A-Z0-9,\s]+))?", re.I)


def suppressed(d: Diagnostic, lines_by_path: dict[str, list[str]]) -> bool:
    """Whether the finding's line carries a suppression comment for its code (no codes: any code)."""
    lines = lines_by_path.get(d.path)
    if not lines or d.line > len(lines):
        return False
    m = _SUPPRESS.search(lines[d.line - 1])
    if not m:
        return False
    codes = m.group(1) or m.group(2)
    if not codes:
        return True
    return any(d.code.startswith(c.strip().upper()) for c in codes.split(",") if c.strip())


def in_v1_code(d: Diagnostic, v1_code: dict[str, list[tuple[int, int, int, int]]]) -> bool:
    """A finding in a compatibility branch only Pydantic v1 runs (``if PYDANTIC_V1:`` ...)."""
    regions = v1_code.get(d.path)
    return (
        bool(regions) and d.code not in (UNREADABLE, RULE_CRASHED) and in_regions(regions, d.line, d.col - 1)
    )
