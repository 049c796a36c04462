"""One row of a finished run's diagnosis: what a rule found in the user's run.

These rows are a diagnosis of the user's artefacts, not field-note claims: they are never ledger rows
(:class:`nbkit.claims.Claim`) and carry their own statuses. ``found`` is the only one that makes
``nbkit diagnose RUN_DIR`` exit 1: the rule establishes a problem. ``clear`` means the same rule
establishes there is none, ``undecided`` that the data cannot tell (too few points, an interval across
the band), ``not checked`` that the artefact the rule needs is missing, ``figure`` a descriptive number
with no rule of its own.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FOUND, CLEAR, UNDECIDED, NOT_CHECKED, FIGURE = "found", "clear", "undecided", "not checked", "figure"
STATUSES = (FOUND, CLEAR, UNDECIDED, NOT_CHECKED, FIGURE)
MARK = {FOUND: "FOUND", CLEAR: "clear", UNDECIDED: "  ?  ", NOT_CHECKED: " --  ", FIGURE: "  ·  "}

# What a found or clear row says it found, by the rule's key: a label reads as the answer ("learning rate
# differs from the configured schedule"), never as the question with a status beside it. Undecided and
# not-checked rows say so after the rule's title.
LABELS = {
    "loss-spikes": ("loss spikes", "no loss spike"),
    "non-finite": ("non-finite values logged", "no non-finite value logged"),
    "grad-explosions": ("grad-norm explosions", "no grad-norm explosion"),
    "clipping": ("clipping active on most steps", "clipping active on few steps"),
    "overfitting": ("overfitting", "no overfitting"),
    "lr-schedule": (
        "learning rate differs from the configured schedule",
        "learning rate follows the configured schedule",
    ),
    "plateau": ("training loss plateaued", "no plateau"),
    "progress": ("no progress over the run", "the training loss fell over the run"),
    "fragmentation": ("memory fragmented", "no fragmentation"),
}
_QUALIFIER = re.compile(r"\([^()]*\)$")  # a keyed row's title ends with what it is about: "(eval set squad)"


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

    @property
    def label(self) -> str:
        """What the row found, in words (:data:`LABELS`); the title with "cannot tell" / "not checked"
        for the other statuses. A keyed row's qualifier (``overfitting:squad``, ``fragmentation:1``) stays
        in its title."""
        pair = LABELS.get(self.key.partition(":")[0])
        if pair is not None and self.status in (FOUND, CLEAR):
            text = pair[0] if self.status == FOUND else pair[1]
            qualifier = _QUALIFIER.search(self.title)
            return f"{text} {qualifier.group(0)}" if qualifier else text
        if self.status == UNDECIDED:
            return f"{self.title}: cannot tell"
        if self.status == NOT_CHECKED:
            return f"{self.title}: not checked"
        return self.title

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "title": self.title,
            "status": self.status,
            "label": self.label,
            "measured": self.measured,
            "rule": self.rule,
            "source": self.source,
            "steps": list(self.steps),
            "figures": dict(self.figures),
            "fix": self.fix,
        }

    def text_lines(self, width: int, indent: int = 2) -> list[str]:
        """The row as text wrapped at ``width``: its mark, label and what was measured, then its rule and
        (found rows) its fix, each on its own indented lines."""
        pad, more = " " * indent, " " * (indent + len(MARK[FOUND]) + 2)
        out = wrap(f"{MARK[self.status]}  {self.label}: {self.measured}", width, pad, more)
        if self.rule:
            out += wrap(f"rule: {self.rule}", width, more, more + "  ")
        if self.fix and self.status == FOUND:
            out += wrap(f"fix: {self.fix}", width, more, more + "  ")
        return out


def wrap(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    """``text`` wrapped at ``width`` columns (never narrower than 40) with the given indents; words are
    never broken (a long path stays whole on its own line)."""
    return textwrap.wrap(
        text,
        max(width, 40),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def terminal_width() -> int:
    """The terminal's width in columns (``COLUMNS``, else the terminal, else 100 when not a terminal)."""
    return shutil.get_terminal_size((100, 24)).columns
