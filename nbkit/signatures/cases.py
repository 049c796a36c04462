"""The medical cases and the knowledge base, validated on load; splits fixed by the random seed.

``data/medical_cases.jsonl`` — 63 cases written for this project. Each line::

    {"id": "case001", "conditions": ["hypertension"], "standard": "...", "colloquial": "...", "rationale":
    "..."}

``conditions`` lists acceptable diagnoses (first = most likely), each a ``condition`` of the knowledge base;
``standard`` is a clinician's phrasing, ``colloquial`` how a patient or relative would ask; ``rationale``
notes the clinical reasoning or guideline the expected answer rests on. Every case yields two examples,
one per slice, and both phrasings of a case always land in the same split (no leakage across splits).

``data/knowledge_base.jsonl`` — 49 conditions: aliases, typical symptoms, first-line notes (summarised
from NICE CKS / standard textbook presentations). It serves the HybridRetriever and the answer matcher.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from nbkit.errors import UsageError
from nbkit.signatures.contracts import MAX_DIAGNOSES, Diagnosis

SLICES = ("standard", "colloquial")
CASE_KEYS = {"id": str, "conditions": list, "standard": str, "colloquial": str, "rationale": str}
KB_KEYS = {"condition": str, "aliases": list, "symptoms": str, "notes": str}


class DatasetError(UsageError):
    """A data file is empty or malformed; the message names the file, line and key."""


def data_path(name: str) -> Path:
    return Path(str(resources.files("nbkit.signatures") / "data" / name))


def _lines(path: Path):
    """``(line_no, text)`` of a UTF-8 text file; a bad byte or a directory is named, never a raw traceback."""
    if path.is_dir():
        raise DatasetError(f"{path}: is a directory; expected a JSONL file")
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    with open(path, "rb") as fh:
        for line_no, raw in enumerate(fh, 1):
            try:
                yield line_no, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DatasetError(
                    f"{path}:{line_no}: not UTF-8 text (byte {raw[exc.start]:#04x} at column "
                    f"{exc.start + 1}); save the file as UTF-8"
                ) from None


def json_objects(path: Path):
    """``(line_no, object)`` for each non-blank line of a JSONL file; a line that is not a JSON object is
    named."""
    for line_no, line in _lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"{path}:{line_no}: not valid JSON ({exc.msg} at column {exc.colno})"
            ) from None
        if not isinstance(row, dict):
            raise DatasetError(f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}")
        yield line_no, row


def _read_jsonl(
    path: Path, required: dict[str, type], optional: dict[str, type] | None = None
) -> list[dict[str, Any]]:
    """Rows of a JSONL file with exactly the ``required`` keys (plus ``optional``); any other key is an error
    naming the closest known key, so a typo ("colloqial") never passes silently."""
    import difflib

    path = Path(path)
    optional = optional or {}
    known = {**required, **optional}
    rows = []
    for line_no, row in json_objects(path):
        for key in row:
            if key not in known:
                close = difflib.get_close_matches(key, list(known), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise DatasetError(
                    f"{path}:{line_no}: unknown key {key!r} (expected keys {sorted(known)}){hint}"
                )
        for key, typ in known.items():
            if key not in row:
                if key in optional:
                    continue
                raise DatasetError(
                    f"{path}:{line_no}: missing key {key!r} (expected keys {sorted(required)})"
                )
            value = row[key]
            if (
                not isinstance(value, typ)
                or (typ is str and not value.strip())
                or (typ is list and not value)
            ):
                raise DatasetError(
                    f"{path}:{line_no}: key {key!r} must be a non-empty {typ.__name__}, got {value!r}"
                )
            if typ is list and not all(isinstance(v, str) and v.strip() for v in value):
                raise DatasetError(
                    f"{path}:{line_no}: key {key!r} must list non-empty strings, got {value!r}"
                )
        row["_line"] = line_no
        rows.append(row)
    if not rows:
        raise DatasetError(f"{path}: no records (the file is empty)")
    return rows


@dataclass
class KnowledgeBase:
    entries: list[dict[str, Any]]
    aliases: dict[str, list[str]] = field(default_factory=dict)  # condition -> normalised names incl. itself

    def __post_init__(self):
        self.aliases = {
            e["condition"]: sorted({normalise(e["condition"]), *(normalise(a) for a in e["aliases"])})
            for e in self.entries
        }

    def documents(self) -> list[str]:
        """One retrievable passage per condition."""
        return [
            f"{e['condition']} ({', '.join(e['aliases'])}): {e['symptoms']} {e['notes']}"
            for e in self.entries
        ]

    def __len__(self) -> int:
        return len(self.entries)


def load_knowledge_base(path: str | Path | None = None) -> KnowledgeBase:
    path = Path(path) if path else data_path("knowledge_base.jsonl")
    rows = _read_jsonl(path, KB_KEYS)
    seen: dict[str, int] = {}
    for row in rows:
        line = row.pop("_line")
        if row["condition"] in seen:
            raise DatasetError(
                f"{path}:{line}: condition {row['condition']!r} appears twice (first on line "
                f"{seen[row['condition']]})"
            )
        seen[row["condition"]] = line
    return KnowledgeBase(rows)


def load_cases(path: str | Path | None = None, kb: KnowledgeBase | None = None) -> list[dict[str, Any]]:
    """Cases, checked: required keys, unique ids, every expected condition known to the knowledge base."""
    path = Path(path) if path else data_path("medical_cases.jsonl")
    kb = kb or load_knowledge_base()
    rows = _read_jsonl(path, CASE_KEYS)
    ids: set[str] = set()
    for row in rows:
        line = row.pop("_line")
        if row["id"] in ids:
            raise DatasetError(f"{path}:{line}: duplicate id {row['id']!r}")
        ids.add(row["id"])
        unknown = [c for c in row["conditions"] if c not in kb.aliases]
        if unknown:
            raise DatasetError(
                f"{path}:{line} ({row['id']}): conditions {unknown} are not in the knowledge base"
            )
        if len(row["conditions"]) > MAX_DIAGNOSES:
            # The contract allows MAX_DIAGNOSES answers; a longer gold list would be cut silently in the
            # demos.
            raise DatasetError(
                f"{path}:{line} ({row['id']}): {len(row['conditions'])} conditions; the contract allows at "
                f"most {MAX_DIAGNOSES}"
            )
    return rows


def normalise(name: str) -> str:
    name = name.lower().replace("’", "'")
    name = re.sub(r"[^a-z0-9' ]+", " ", name)
    return re.sub(r"\s+", " ", name).strip()


def condition_matches(predicted: str, condition: str, kb: KnowledgeBase) -> bool:
    """Does a predicted condition name name ``condition`` (by its name or an alias, as whole words)?"""
    text = normalise(predicted)
    if not text:
        return False
    for alias in kb.aliases.get(condition, [normalise(condition)]):
        if alias == text or re.search(rf"(?<![a-z0-9]){re.escape(alias)}(?![a-z0-9])", text):
            return True
    return False


def gold_outputs(case: dict[str, Any]) -> dict[str, Any]:
    """Labelled outputs for a case, in the typed contract's shape (used as labelled demos)."""
    conds = case["conditions"][:3]
    weights = {1: [0.8], 2: [0.6, 0.3], 3: [0.5, 0.3, 0.2]}[len(conds)]
    return {
        "diagnoses": [{"condition": c, "confidence": w} for c, w in zip(conds, weights, strict=True)],
        "diagnosis": "; ".join(
            f"condition: {c}, confidence: {w}" for c, w in zip(conds, weights, strict=True)
        ),
        "reasoning": case["rationale"],
    }


def to_examples(cases: list[dict[str, Any]], slices=SLICES, with_labels: bool = True):
    """``dspy.Example``s (inputs: ``symptoms``), one per case and slice, tagged ``slice`` and ``case_id``."""
    import dspy

    examples = []
    for case in cases:
        for slice_name in slices:
            fields: dict[str, Any] = {
                "symptoms": case[slice_name],
                "slice": slice_name,
                "case_id": case["id"],
                "conditions": list(case["conditions"]),
            }
            if with_labels:
                gold = gold_outputs(case)
                fields.update(
                    diagnoses=[Diagnosis(**d) for d in gold["diagnoses"]],
                    diagnosis=gold["diagnosis"],
                    reasoning=gold["reasoning"],
                )
            examples.append(dspy.Example(**fields).with_inputs("symptoms"))
    return examples


@dataclass
class Splits:
    train: list[dict[str, Any]]
    val: list[dict[str, Any]]
    dev: list[dict[str, Any]]
    test: list[dict[str, Any]]

    def sizes(self) -> dict[str, int]:
        return {k: len(getattr(self, k)) for k in ("train", "val", "dev", "test")}


def check_fractions(fractions) -> None:
    """Four shares (train, val, dev, test), each in [0, 1], summing to 1."""
    try:
        values = [float(f) for f in fractions]
    except (TypeError, ValueError):
        raise UsageError(
            f"split fractions must be four numbers (train, val, dev, test), got {fractions!r}"
        ) from None
    if len(values) != 4:
        raise UsageError(
            f"split fractions must be four numbers (train, val, dev, test), got {len(values)}: {fractions!r}"
        )
    bad = [f for f in values if not 0.0 <= f <= 1.0]  # NaN fails this too
    if bad:
        raise UsageError(f"split fractions must each lie in [0, 1], got {fractions!r}")
    if abs(sum(values) - 1.0) > 1e-6:
        raise UsageError(f"split fractions must sum to 1, got {fractions!r} (sum {sum(values):g})")


def split_cases(cases: list[dict[str, Any]], seed: int = 0, fractions=(0.4, 0.15, 0.25, 0.2)) -> Splits:
    """Shuffle cases by ``seed`` and cut train/val/dev/test (both phrasings of a case stay together)."""
    if len(cases) < 4:
        raise DatasetError(f"need at least 4 cases to split, got {len(cases)}")
    check_fractions(fractions)
    order = sorted(cases, key=lambda c: c["id"])
    random.Random(seed).shuffle(order)
    n = len(order)
    cuts = [round(n * sum(fractions[: i + 1])) for i in range(3)]
    cuts = [max(i + 1, min(c, n - (3 - i))) for i, c in enumerate(cuts)]
    return Splits(order[: cuts[0]], order[cuts[0] : cuts[1]], order[cuts[1] : cuts[2]], order[cuts[2] :])


def compile_mix(cases: list[dict[str, Any]], size: int, colloquial_fraction: float, seed: int = 0):
    """A compile set of ``size`` examples from ``cases`` with the given share of colloquial phrasings.

    Each case contributes one phrasing, so the mix changes the wording, never the clinical content.
    """
    if not 0.0 <= colloquial_fraction <= 1.0:
        raise UsageError(f"colloquial_fraction must be in [0, 1], got {colloquial_fraction}")
    if size > len(cases):
        raise UsageError(f"compile set of {size} needs {size} cases, only {len(cases)} available")
    chosen = sorted(cases, key=lambda c: c["id"])
    random.Random(seed).shuffle(chosen)
    chosen = chosen[:size]
    n_coll = int(round(size * colloquial_fraction))
    if colloquial_fraction > 0 and n_coll == 0:
        n_coll = 1  # "at least 10 %" must mean at least one example in a small set
    examples = []
    for i, case in enumerate(chosen):
        slice_name = "colloquial" if i < n_coll else "standard"
        examples.extend(to_examples([case], slices=(slice_name,)))
    random.Random(seed + 1).shuffle(examples)
    return examples
