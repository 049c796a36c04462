"""One row of a finished run's diagnosis: what a rule found in the user's run.

These rows are a diagnosis of the user's artefacts, not field-note claims: they are never ledger rows
(:class:`nbkit.claims.Claim`) and carry their own statuses. ``found`` is the only one that makes
``nbkit diagnose RUN_DIR`` exit 1: the rule establishes a problem. ``clear`` means the same rule
establishes there is none, ``undecided`` that the data cannot tell (too few points, an interval across
the band), ``not checked`` that the artefact the rule needs is missing, ``figure`` a descriptive number
with no rule of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FOUND, CLEAR, UNDECIDED, NOT_CHECKED, FIGURE = "found", "clear", "undecided", "not checked", "figure"
STATUSES = (FOUND, CLEAR, UNDECIDED, NOT_CHECKED, FIGURE)
MARK = {FOUND: "FOUND", CLEAR: "clear", UNDECIDED: "  ?  ", NOT_CHECKED: " --  ", FIGURE: "  ·  "}


@dataclass(frozen=True)
class RunRow:
    """``key`` a stable slug; ``measured`` one line naming what was found (steps as integers, sizes in
    binary units); ``rule`` the two-sided rule in words; ``source`` the artefact(s) it read; ``steps``
    the steps a picture marks; ``figures`` the numbers behind the line (JSON)."""

    key: str
    title: str
    status: str
    measured: str
    rule: str = ""
    source: str = ""
    steps: tuple[int, ...] = ()
    figures: Mapping[str, Any] = field(default_factory=dict)
    fix: str = ""

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"row status must be one of {STATUSES}, got {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "title": self.title,
            "status": self.status,
            "measured": self.measured,
            "rule": self.rule,
            "source": self.source,
            "steps": list(self.steps),
            "figures": dict(self.figures),
            "fix": self.fix,
        }

    def to_text(self) -> str:
        line = f"{MARK[self.status]} {self.title}: {self.measured}"
        if self.rule:
            line += f"  [rule: {self.rule}]"
        if self.fix and self.status == FOUND:
            line += f"  fix: {self.fix}"
        return line
