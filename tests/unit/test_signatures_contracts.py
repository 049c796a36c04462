"""Contract checks, the field notes' string-signature parser, example-first spec derivation (no LM needed)."""

import pytest

from nbkit.signatures import contracts as c


def kinds(violations):
    return [v.kind for v in violations]


def test_clean_typed_answer_holds():
    out = {
        "diagnoses": [{"condition": "gout", "confidence": 0.9}],
        "reasoning": "Acute first MTP monoarthritis after alcohol.",
    }
    assert c.check_contract(out) == []


@pytest.mark.parametrize(
    ("outputs", "expected"),
    [
        (
            {"diagnoses": [{"condition": "gout", "confidence": 1.7}], "reasoning": "x"},
            c.CONFIDENCE_OUT_OF_RANGE,
        ),
        (
            {"diagnoses": [{"condition": "gout", "confidence": -0.1}], "reasoning": "x"},
            c.CONFIDENCE_OUT_OF_RANGE,
        ),
        (
            {"diagnoses": [{"condition": "gout", "confidence": "high"}], "reasoning": "x"},
            c.CONFIDENCE_NOT_NUMERIC,
        ),
        (
            {"diagnoses": [{"condition": f"c{i}", "confidence": 0.1} for i in range(4)], "reasoning": "x"},
            c.TOO_MANY_DIAGNOSES,
        ),
        (
            {"diagnoses": [{"condition": "gout", "confidence": 0.5}], "reasoning": "word " * 51},
            c.REASONING_TOO_LONG,
        ),
        ({"diagnoses": [{"condition": "gout", "confidence": 0.5}], "reasoning": ""}, c.MISSING_FIELD),
        ({"diagnoses": [], "reasoning": "x"}, c.NO_DIAGNOSIS),
    ],
)
def test_each_breach_is_named(outputs, expected):
    assert expected in kinds(c.check_contract(outputs))


def test_exactly_fifty_words_is_allowed():
    out = {"diagnoses": [{"condition": "gout", "confidence": 0.5}], "reasoning": "word " * 50}
    assert c.check_contract(out) == []


def test_parse_errors_and_missing_fields_from_adapter_errors():
    from dspy.utils.exceptions import AdapterParseError

    sig = c.typed_medical_diagnosis_signature()
    partial = AdapterParseError(
        adapter_name="ChatAdapter",
        signature=sig,
        lm_response="[[ ## reasoning ## ]] hi",
        parsed_result={"reasoning": "hi"},
    )
    assert kinds(c.check_contract(None, partial)) == [c.MISSING_FIELD]
    garbage = AdapterParseError(
        adapter_name="JSONAdapter", signature=sig, lm_response="{d}", message="cannot be serialized"
    )
    assert kinds(c.check_contract(None, garbage)) == [c.PARSE_ERROR]
    assert kinds(c.check_contract(None)) == [c.PARSE_ERROR]


def test_field_notes_string_signature_items_are_parsed_and_checked():
    text = "condition: [Hypertension], confidence: [0.7]; condition: anxiety, confidence: high"
    items = c.parse_diagnosis_text(text)
    assert [i["condition"] for i in items] == ["Hypertension", "anxiety"]
    v = c.check_contract({"diagnosis": text, "reasoning": "ok"}, output_fields=("diagnosis", "reasoning"))
    assert kinds(v) == [c.CONFIDENCE_NOT_NUMERIC]
    v = c.check_contract(
        {"diagnosis": "probably the flu", "reasoning": "ok"}, output_fields=("diagnosis", "reasoning")
    )
    assert kinds(v) == [c.NO_DIAGNOSIS]


@pytest.mark.parametrize(
    ("diagnosis", "kinds_"),
    [
        ("condition: [Hypertension], confidence: [0.7]; condition: anxiety, confidence: high", (1, 1)),
        ("Gout", (0, 0)),  # a bare condition name gives no confidence at all
        ("1. Gout\n2. Pseudogout", (0, 0)),
        ("Gout (high confidence), cellulitis (low confidence)", (0, 2)),
        ("Gout - confidence: 80%; septic arthritis, probability 0.1", (2, 0)),
        ("Gout, confidence: moderate", (0, 1)),
        ("Gout — high confidence: 0.9", (1, 0)),  # one value, the number
        ("Gout (confidence: [0-1])", (0, 0)),  # the description's range echoed back is no value
        ("Gout; a confidence score cannot be given", (0, 0)),
    ],
)
def test_confidence_values_an_answer_carries(diagnosis, kinds_):
    """(numbers, words) among the confidences an answer gives: in its items, or around the word."""
    assert c.confidence_kinds({"diagnosis": diagnosis, "reasoning": "x"}) == kinds_


def test_typed_answers_give_numbers_and_unparsed_ones_nothing():
    typed = {
        "diagnoses": [{"condition": "gout", "confidence": 0.8}, {"condition": "flu", "confidence": None}]
    }
    assert c.confidence_kinds(typed) == (1, 0)
    assert c.confidence_kinds({}) == (0, 0)


def test_percent_confidence_is_read_as_a_fraction():
    out = {"diagnoses": [{"condition": "gout", "confidence": "80%"}], "reasoning": "x"}
    assert c.check_contract(out) == []


def test_specs_are_derived_from_the_examples():
    specs = c.derive_field_specs()
    assert specs["max_diagnoses"] == 3 and specs["ordered"] is True
    assert "between 0 and 1" in specs["diagnoses_desc"] and "at most 50 words" in specs["reasoning_desc"]
    longer = [dict(c.HANDWRITTEN_EXAMPLES[0], reasoning="w " * 70)]
    assert c.derive_field_specs(longer)["max_reasoning_words"] == 70
    with pytest.raises(ValueError, match="at least one example"):
        c.derive_field_specs(())


def test_signatures_have_the_contract_fields():
    notes, typed = c.signature_by_name("field_notes"), c.signature_by_name("typed")
    assert list(notes.output_fields) == ["diagnosis", "reasoning"]
    assert list(typed.output_fields) == ["diagnoses", "reasoning"]
    assert "max 50 words" in notes.output_fields["reasoning"].json_schema_extra["desc"]
    with pytest.raises(ValueError, match="unknown signature"):
        c.signature_by_name("nope")


def test_prompt_does_not_leak_python_comments_or_docstrings():
    # Regression: a docstring on Diagnosis was copied into the prompt's JSON schema.
    import dspy

    msgs = dspy.ChatAdapter().format(
        c.typed_medical_diagnosis_signature(), demos=[], inputs={"symptoms": "cough"}
    )
    prompt = "\n".join(m["content"] for m in msgs)
    assert "pydantic" not in prompt and "confidence" in prompt
