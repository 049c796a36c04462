"""The ledger's row: what a notebook records for each claim, and the words every row uses.

A :class:`Claim` is one row of a notebook's claims table, as :func:`nbkit.claims.judge` builds it and
``record("claims", rows)`` stores it (``Claim.to_dict()``); :func:`as_claims` reads rows back from
their dicts (the run's index, ``nbkit compare``), tolerating rows of older runs that lack the newer
fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

HOLDS, REFUTED, INCONCLUSIVE, NEEDS_GPU = "holds", "refuted", "inconclusive", "needs GPU"
# A smoke run measures at a size chosen to be fast, not to decide: its rows show what was measured and
# never a verdict.
NOT_JUDGED = "not judged"
VERDICTS = (HOLDS, REFUTED, INCONCLUSIVE, NEEDS_GPU, NOT_JUDGED)
# What a row is: a measurement of this run, a formula on constants (16Ψ), a fact of a library's own
# convention (PEFT stores B as (out, r)), or a fixture written to show a failure. The ledger shows the
# kind, so a constant is never read as a measurement.
MEASURED, ARITHMETIC, LIBRARY_FACT, DEMONSTRATION = "measured", "arithmetic", "library fact", "demonstration"
KINDS = (MEASURED, ARITHMETIC, LIBRARY_FACT, DEMONSTRATION)
# The source of a claim the project makes itself (a premise of a notebook), never shown as the notes'.
OWN = "nbkit"
COLUMNS = ("claim", "field_note", "measured", "verdict", "kind", "rule", "n", "interval", "why")
NOT_MEASURED = "not measured"


class Verdict(NamedTuple):
    """What a rule returns: the verdict and the one-line reason for it."""

    verdict: str
    why: str


@dataclass(frozen=True)
class Claim:
    """One row of a notebook's claims table.

    ``claim`` the claim in words; ``field_note`` the figure the field notes state ("" for the project's
    own claim, whose ``source`` is :data:`OWN`); ``source`` the notes' section; ``measured`` what this run
    measured; ``verdict`` one of :data:`VERDICTS` and ``why`` its reason; ``rule`` the rule in words,
    rendered from the rule's data; ``n`` what the measurement rests on; ``interval`` the interval the
    verdict used ("" for an exact figure) at ``level``; ``kind`` one of :data:`KINDS`.

    The design of a noisy row: ``units`` that ran and ``budget``, the most its profile runs (a sequential
    row stops when its verdict is reached); ``p_holds_if_true`` and ``p_refuted_if_false``, its operating
    characteristics at that budget, simulated at ``true_value`` (the claimed value) and ``false_value``
    (the rule's false value); ``decided`` whether both reach the bar a verdict needs; ``design`` the
    design in one line (expected units under each value, the spread it was planned with);
    ``estimate`` the figure its interval is built around, on the rule's scale (a mean of the units'
    values, a geometric mean, a rate), for the units the verdict used; ``alpha_needed`` the smallest
    family-wise α at which a decisive noisy row still decides (what a run of
    several notebooks judges them on as one family). An ``exact`` row (a count, a flag, a formula) has no
    operating characteristics: it is exact, and ``decided`` where this run measured it.
    """

    claim: str
    field_note: str
    measured: str
    verdict: str
    rule: str
    n: str
    why: str
    interval: str = ""
    key: str = ""
    source: str = ""
    kind: str = MEASURED
    level: float | None = None
    exact: bool = True
    units: int | None = None
    budget: int | None = None
    p_holds_if_true: float | None = None
    p_refuted_if_false: float | None = None
    true_value: str = ""
    false_value: str = ""
    decided: bool = True
    design: str = ""
    estimate: float | None = None
    alpha_needed: float | None = None

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(
                f"claim {self.key or self.claim!r}: verdict must be one of {VERDICTS}, got {self.verdict!r}"
            )
        if self.kind not in KINDS:
            raise ValueError(
                f"claim {self.key or self.claim!r}: kind must be one of {KINDS}, got {self.kind!r}"
            )
        for name in ("claim", "rule", "n", "why"):
            if not str(getattr(self, name)).strip():
                raise ValueError(f"claim {self.key or self.claim!r}: {name!r} must not be empty")

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON values: text as strings, the design's numbers as numbers (or None), flags as
        booleans."""
        return {k: v if k in _TYPED else str(v) for k, v in dataclasses.asdict(self).items()}


_TYPED = {
    "level": float,
    "units": int,
    "budget": int,
    "p_holds_if_true": float,
    "p_refuted_if_false": float,
    "alpha_needed": float,
    "estimate": float,
    "exact": bool,
    "decided": bool,
}


def _typed(name: str, value: Any) -> Any:
    kind = _TYPED[name]
    if kind is bool:
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if value is None or value == "":
        return None
    return kind(value)


def as_claims(rows: Iterable[Claim | dict[str, Any]]) -> list[Claim]:
    """Claims from ``Claim`` objects or their dicts (as ``record`` stores them); a bad row is named.
    Fields a row lacks (an older run's) take their defaults; fields this version does not know are
    left out."""
    out = []
    known = {f.name for f in dataclasses.fields(Claim)}
    for i, row in enumerate(rows):
        if isinstance(row, Claim):
            out.append(row)
            continue
        if not isinstance(row, dict):
            raise TypeError(f"claims row {i}: expected a Claim or a dict, got {type(row).__name__}")
        missing = {"claim", "field_note", "measured", "verdict", "rule", "n", "why"} - set(row)
        if missing:
            raise ValueError(f"claims row {i}: missing field(s) {sorted(missing)}")
        fields: dict[str, Any] = {
            k: (_typed(k, v) if k in _TYPED else str(v)) for k, v in row.items() if k in known
        }
        if "decided" not in row and "decided_at_defaults" in row:  # an older run's name for it
            fields["decided"] = _typed("decided", row["decided_at_defaults"])
        if "exact" not in row:  # an older run: exact where it had no operating characteristics
            fields["exact"] = row.get("p_holds_if_true") in (None, "")
        out.append(Claim(**fields))
    return out


class Ledger(list):
    """A notebook's claims rows (a list of :class:`Claim`) that shows itself as the claims table."""

    def frame(self):
        return claims_frame(self)

    def _repr_html_(self) -> str:
        return self.frame().to_html(index=False)


def claims_frame(rows: Iterable[Claim | dict[str, Any]]):
    """A pandas DataFrame of claims, columns in :data:`COLUMNS` order (what notebooks display)."""
    import pandas as pd

    claims = as_claims(rows)
    return pd.DataFrame([{c: getattr(x, c) for c in COLUMNS} for x in claims], columns=list(COLUMNS))
