"""One finding of a run (:class:`Diagnostic`), as every rule, the engine and ``--import`` report it,
and the two codes that mean "not checked": :data:`UNREADABLE` (``PSC000``) and :data:`RULE_CRASHED`
(``PSC999``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# Code for "this file could not be checked" (read/decode/parse/import failures): exit status 2.
UNREADABLE = "PSC000"
# Code for "pscheck failed on this file" (a rule crashed or yielded a non-Diagnostic): exit status 2 too.
RULE_CRASHED = "PSC999"


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One finding. ``line``/``col`` are 1-based (what editors expect)."""

    path: str
    line: int
    col: int
    code: str
    severity: str  # "error" | "warning"
    message: str
    rule: str  # rule name, e.g. "default-type-mismatch"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def format(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message} [{self.severity}]"


def unreadable(path: str, message: str, line: int = 1, col: int = 1) -> Diagnostic:
    """A ``PSC000`` finding: ``path`` could not be checked, and why (at the place, when one is known)."""
    return Diagnostic(
        path=path,
        line=max(1, line),
        col=max(1, col),
        code=UNREADABLE,
        severity="error",
        message=message,
        rule="unreadable-file",
    )
