"""The field notes' ``MedicalDiagnosis`` signature, a typed version derived from examples, and the contract
check.

DSPy puts field descriptions ("confidence 0-1", "max 50 words") into the prompt only; nothing enforces them.
:func:`check_contract` enforces them after parsing and names every breach, so a run can count them.

Signature classes need ``dspy`` at class-creation time; they are built on first use (``functools.cache``)
so ``import nbkit.signatures.contracts`` stays instant.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

MAX_DIAGNOSES = 3
MAX_REASONING_WORDS = 50

# Violation kinds, in the order tables show them.
PARSE_ERROR = "parse_error"
MISSING_FIELD = "missing_field"
CONFIDENCE_NOT_NUMERIC = "confidence_not_numeric"
CONFIDENCE_OUT_OF_RANGE = "confidence_out_of_range"
NO_DIAGNOSIS = "no_diagnosis"
TOO_MANY_DIAGNOSES = "too_many_diagnoses"
REASONING_TOO_LONG = "reasoning_over_50_words"
VIOLATION_KINDS = (
    PARSE_ERROR,
    MISSING_FIELD,
    CONFIDENCE_NOT_NUMERIC,
    CONFIDENCE_OUT_OF_RANGE,
    NO_DIAGNOSIS,
    TOO_MANY_DIAGNOSES,
    REASONING_TOO_LONG,
)


# One entry of the differential. No docstring: DSPy copies a model's docstring into the prompt's schema.
# The [0, 1] bound is *not* a pydantic constraint on purpose: a constraint would turn an out-of-range
# answer into a parse error and hide the real cause; check_contract() enforces it after parsing.
class Diagnosis(BaseModel):
    condition: str
    confidence: float


@dataclass(frozen=True)
class Violation:
    kind: str
    detail: str


@functools.cache
def medical_diagnosis_signature():
    """The signature exactly as the field notes wrote it (§2.3)."""
    import dspy

    class MedicalDiagnosis(dspy.Signature):
        """Given patient symptoms, output a differential diagnosis with confidence score."""

        symptoms: str = dspy.InputField(desc="Patient's reported symptoms in natural language")
        diagnosis: str = dspy.OutputField(
            desc="Top 3 possible diagnoses, each with 'condition: [name], confidence: [0-1]' format"
        )
        reasoning: str = dspy.OutputField(desc="Brief clinical reasoning, max 50 words")

    return MedicalDiagnosis


# -- example-first design ------------------------------------------------------------------
# The field notes' process: write ~5 high-quality input/output pairs first, then derive the signature's descs
# from what they have in common. These are hand-written (clinically standard first-line reasoning).
HANDWRITTEN_EXAMPLES: tuple[dict[str, Any], ...] = (
    {
        "symptoms": "Persistent cough for 3 weeks, worse at night, with low-grade fever.",
        "diagnoses": [
            {"condition": "tuberculosis", "confidence": 0.4},
            {"condition": "asthma", "confidence": 0.3},
            {"condition": "gastro-oesophageal reflux disease", "confidence": 0.2},
        ],
        "reasoning": (
            "Cough over 3 weeks with fever needs TB excluded; "
            "nocturnal cough also fits cough-variant asthma or reflux."
        ),
    },
    {
        "symptoms": "Burning on passing urine, going every few minutes, lower belly ache, no fever.",
        "diagnoses": [
            {"condition": "urinary tract infection", "confidence": 0.85},
            {"condition": "kidney stones", "confidence": 0.1},
        ],
        "reasoning": (
            "Dysuria, frequency and suprapubic pain without fever is classic uncomplicated cystitis."
        ),
    },
    {
        "symptoms": "Sudden crushing chest pain for 30 minutes going down the left arm, sweating.",
        "diagnoses": [
            {"condition": "myocardial infarction", "confidence": 0.8},
            {"condition": "angina", "confidence": 0.15},
            {"condition": "pulmonary embolism", "confidence": 0.05},
        ],
        "reasoning": (
            "Prolonged central chest pain at rest with radiation and sweating is an acute coronary syndrome "
            "until proven otherwise; emergency."
        ),
    },
    {
        "symptoms": "Big toe suddenly red, hot and extremely painful overnight after a night of drinking.",
        "diagnoses": [{"condition": "gout", "confidence": 0.9}],
        "reasoning": "Acute monoarthritis of the first MTP joint after alcohol is typical gout.",
    },
    {
        "symptoms": "Every spring: sneezing, itchy watery eyes, runny nose, no fever.",
        "diagnoses": [
            {"condition": "allergic rhinitis", "confidence": 0.9},
            {"condition": "common cold", "confidence": 0.1},
        ],
        "reasoning": (
            "Seasonal recurrence with itch and no fever points to pollen allergy rather than infection."
        ),
    },
)


def derive_field_specs(examples=HANDWRITTEN_EXAMPLES) -> dict[str, Any]:
    """What every good example has in common, turned into the typed signature's bounds and descs."""
    if not examples:
        raise ValueError("derive_field_specs needs at least one example")
    n_max = max(len(e["diagnoses"]) for e in examples)
    confs = [d["confidence"] for e in examples for d in e["diagnoses"]]
    words = max(len(e["reasoning"].split()) for e in examples)
    specs = {
        "max_diagnoses": n_max,
        "confidence_min": 0.0 if min(confs) >= 0 else min(confs),
        "confidence_max": 1.0 if max(confs) <= 1 else max(confs),
        "reasoning_words_observed": words,
        # The contract rounds the observed maximum up to the field notes' stated limit (50 words).
        "max_reasoning_words": max(MAX_REASONING_WORDS, words),
        "ordered": all(
            [d["confidence"] for d in e["diagnoses"]]
            == sorted((d["confidence"] for d in e["diagnoses"]), reverse=True)
            for e in examples
        ),
    }
    specs["diagnoses_desc"] = (
        f"Up to {specs['max_diagnoses']} most likely "
        f"conditions{', most likely first' if specs['ordered'] else ''}; "
        f"each a condition name and a confidence: a number between {specs['confidence_min']:g} and "
        f"{specs['confidence_max']:g}"
    )
    specs["reasoning_desc"] = f"Brief clinical reasoning, at most {specs['max_reasoning_words']} words"
    return specs


@functools.cache
def typed_medical_diagnosis_signature():
    """The typed contract: ``diagnoses: list[Diagnosis]`` + ``reasoning``, descs derived from
    HANDWRITTEN_EXAMPLES."""
    import dspy

    specs = derive_field_specs()

    class MedicalDiagnosisTyped(dspy.Signature):
        """Given patient symptoms, output a differential diagnosis with confidence score."""

        symptoms: str = dspy.InputField(desc="Patient's reported symptoms in natural language")
        diagnoses: list[Diagnosis] = dspy.OutputField(desc=specs["diagnoses_desc"])
        reasoning: str = dspy.OutputField(desc=specs["reasoning_desc"])

    return MedicalDiagnosisTyped


SIGNATURES = ("typed", "field_notes")


def signature_by_name(name: str):
    """``typed`` (list[Diagnosis] + reasoning) or ``field_notes`` (the string signature as the field notes
    wrote it)."""
    if name == "typed":
        return typed_medical_diagnosis_signature()
    if name == "field_notes":
        return medical_diagnosis_signature()
    raise ValueError(f"unknown signature {name!r}; expected one of {SIGNATURES}")


# -- parsing the field notes' free-text diagnosis field ------------------------------------------
_DIAGNOSIS_ITEM = re.compile(
    r"condition\s*:\s*\[?(?P<name>[^,\]\n;]+?)\]?\s*[,;]\s*confidence\s*:\s*\[?(?P<conf>[^,\]\n;)]+)", re.I
)


def parse_diagnosis_text(text: str) -> list[dict[str, Any]]:
    """``"condition: X, confidence: 0.8"`` items from the field-notes signature's string field (conf may be
    non-numeric)."""
    items = []
    for m in _DIAGNOSIS_ITEM.finditer(text or ""):
        items.append(
            {"condition": m.group("name").strip(" *-\"'"), "confidence": m.group("conf").strip(" *\"'.")}
        )
    return items


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip().rstrip("%")
        try:
            number = float(text)
        except ValueError:
            return None
        return number / 100 if value.strip().endswith("%") else number
    return None


def diagnoses_of(outputs: dict[str, Any]) -> list[dict[str, Any]]:
    """The differential as a list of {condition, confidence} dicts, from either signature's outputs."""
    if "diagnoses" in outputs:
        items = outputs.get("diagnoses") or []
        return [
            d.model_dump()
            if isinstance(d, BaseModel)
            else dict(d)
            if isinstance(d, dict)
            else {"condition": str(d), "confidence": None}
            for d in items
        ]
    if "diagnosis" in outputs:
        return parse_diagnosis_text(str(outputs.get("diagnosis") or ""))
    return []


# A confidence an answer gives outside a "condition: X, confidence: Y" item: a value written after the word
# (``confidence: 80%``, ``probability high``) or a likelihood word before it (``high confidence``). The
# bracketed range the signature's description shows ("confidence: [0-1]"), echoed back, is no value.
_LIKELIHOOD_WORDS = (
    r"very\s+high|very\s+low|high|medium|moderate|low|certain|likely|unlikely|possible|probable"
)
_CONFIDENCE_WORD = r"(?P<keyword>confidence|certainty|probability|likelihood)"
_VALUE_AFTER = re.compile(
    rf"\b{_CONFIDENCE_WORD}\b(?:\s+(?:level|score))?\s*(?:[:=]|\bis\b|\bof\b)?\s*[(\[]?\s*"
    rf"(?:(?P<number>\d*\.?\d+\s*%?)(?!\s*[-–]\s*1\b)|(?P<word>{_LIKELIHOOD_WORDS})\b)",
    re.I,
)
_WORD_BEFORE = re.compile(rf"\b(?P<word>{_LIKELIHOOD_WORDS})\s+{_CONFIDENCE_WORD}\b", re.I)


def confidence_values(outputs: dict[str, Any]) -> list[Any]:
    """Every confidence value an answer carries: each diagnosis item's (a typed item's number, or the text
    after "confidence:" in a parsed "condition: X, confidence: Y" item); where the field notes' string
    answer has no such item, the values its text gives around the word confidence (or certainty,
    probability, likelihood): a number or a likelihood word after it, a likelihood word before it.
    Empty: the answer gives no confidence at all (a bare condition name)."""
    values = [d.get("confidence") for d in diagnoses_of(outputs)]
    values = [v for v in values if v is not None and str(v).strip() != ""]
    if values or "diagnosis" not in outputs:
        return values
    text = str(outputs.get("diagnosis") or "")
    after = list(_VALUE_AFTER.finditer(text))
    taken = {m.start("keyword") for m in after}  # "high confidence: 0.8" is one value, the number
    found = [(m.start(), m.group("number") or m.group("word")) for m in after]
    found += [
        (m.start(), m.group("word")) for m in _WORD_BEFORE.finditer(text) if m.start("keyword") not in taken
    ]
    return [value.strip() for _, value in sorted(found)]


def confidence_kinds(outputs: dict[str, Any]) -> tuple[int, int]:
    """(numbers, words) among the confidence values an answer carries (:func:`confidence_values`): a
    value that reads as a number (``0.8``, ``80%``) is a number, any other a word."""
    values = confidence_values(outputs)
    numbers = sum(1 for v in values if _as_float(v) is not None and not math.isnan(_as_float(v) or 0.0))
    return numbers, len(values) - numbers


def check_contract(
    outputs: dict[str, Any] | None,
    error: BaseException | None = None,
    *,
    output_fields=("diagnoses", "reasoning"),
) -> list[Violation]:
    """Every way ``outputs`` breaks the contract (empty list: it holds).

    ``error`` is the exception the module raised, if any: an ``AdapterParseError`` whose parsed result lacks
    fields counts as ``missing_field``, any other parse failure as ``parse_error``.
    """
    if error is not None:
        parsed = getattr(error, "parsed_result", None)
        if isinstance(parsed, dict):
            missing = [f for f in output_fields if f not in parsed]
            if missing:
                return [Violation(MISSING_FIELD, f"missing {missing}; got {sorted(parsed)}")]
        message = str(error).strip().splitlines()
        return [Violation(PARSE_ERROR, f"{type(error).__name__}: {message[0] if message else ''}"[:200])]
    if outputs is None:
        return [Violation(PARSE_ERROR, "no output")]
    violations: list[Violation] = []
    missing = [f for f in output_fields if outputs.get(f) in (None, "")]
    if missing:
        violations.append(Violation(MISSING_FIELD, f"empty or missing {missing}"))
    items = diagnoses_of(outputs)
    if not items and "diagnosis" in output_fields and outputs.get("diagnosis"):
        violations.append(
            Violation(
                NO_DIAGNOSIS, f"no 'condition: X, confidence: p' item in {str(outputs['diagnosis'])[:80]!r}"
            )
        )
    elif not items and "diagnoses" in output_fields and "diagnoses" not in missing:
        violations.append(Violation(NO_DIAGNOSIS, "empty differential"))
    if len(items) > MAX_DIAGNOSES:
        violations.append(Violation(TOO_MANY_DIAGNOSES, f"{len(items)} diagnoses > {MAX_DIAGNOSES}"))
    for item in items:
        conf = _as_float(item.get("confidence"))
        if conf is None or math.isnan(conf):
            violations.append(
                Violation(
                    CONFIDENCE_NOT_NUMERIC,
                    f"{item.get('condition')!r}: confidence {item.get('confidence')!r}",
                )
            )
        elif not 0.0 <= conf <= 1.0:
            violations.append(
                Violation(
                    CONFIDENCE_OUT_OF_RANGE, f"{item.get('condition')!r}: confidence {conf:g} not in [0, 1]"
                )
            )
    words = len(str(outputs.get("reasoning") or "").split())
    if words > MAX_REASONING_WORDS:
        violations.append(
            Violation(REASONING_TOO_LONG, f"reasoning has {words} words > {MAX_REASONING_WORDS}")
        )
    return violations
