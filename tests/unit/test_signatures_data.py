"""The shipped dataset, its validation messages, splits and compile mixes."""

import json

import pytest

from nbkit.signatures import data


@pytest.fixture(scope="module")
def kb():
    return data.load_knowledge_base()


@pytest.fixture(scope="module")
def cases(kb):
    return data.load_cases(kb=kb)


def test_shipped_dataset_is_complete(cases, kb):
    assert 60 <= len(cases) <= 100
    assert len(kb) >= 40
    for case in cases:
        assert case["standard"] != case["colloquial"]
        assert all(cond in kb.aliases for cond in case["conditions"])
        assert case["rationale"].strip()


def write(tmp_path, lines):
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


GOOD = {"id": "x1", "conditions": ["gout"], "standard": "a", "colloquial": "b", "rationale": "r"}


def test_empty_file_is_refused(tmp_path, kb):
    with pytest.raises(data.DatasetError, match="empty"):
        data.load_cases(write(tmp_path, [""]), kb)


def test_malformed_line_names_file_and_line(tmp_path, kb):
    path = write(tmp_path, [json.dumps(GOOD), "{not json"])
    with pytest.raises(data.DatasetError, match=r"cases.jsonl:2: not valid JSON"):
        data.load_cases(path, kb)


def test_missing_key_is_named(tmp_path, kb):
    bad = {k: v for k, v in GOOD.items() if k != "colloquial"}
    with pytest.raises(data.DatasetError, match=r":1: missing key 'colloquial'"):
        data.load_cases(write(tmp_path, [json.dumps(bad)]), kb)


def test_unknown_condition_and_duplicate_id(tmp_path, kb):
    with pytest.raises(data.DatasetError, match="not in the knowledge base"):
        data.load_cases(write(tmp_path, [json.dumps(dict(GOOD, conditions=["dragon pox"]))]), kb)
    with pytest.raises(data.DatasetError, match="duplicate id 'x1'"):
        data.load_cases(write(tmp_path, [json.dumps(GOOD), json.dumps(GOOD)]), kb)
    with pytest.raises(data.DatasetError, match="file not found"):
        data.load_cases(tmp_path / "nope.jsonl", kb)


def test_splits_are_deterministic_disjoint_and_keep_cases_together(cases):
    a, b = data.split_cases(cases, 0), data.split_cases(cases, 0)
    assert [c["id"] for c in a.dev] == [c["id"] for c in b.dev]
    ids = [c["id"] for part in (a.train, a.val, a.dev, a.test) for c in part]
    assert sorted(ids) == sorted(c["id"] for c in cases)
    assert [c["id"] for c in data.split_cases(cases, 1).dev] != [c["id"] for c in a.dev]
    examples = data.to_examples(a.dev[:2])
    assert [e.slice for e in examples] == ["standard", "colloquial"] * 2
    assert examples[0].case_id == examples[1].case_id


def test_compile_mix_respects_the_share(cases):
    split = data.split_cases(cases, 0)
    for share, expected in [(0.0, 0), (0.5, 4), (0.1, 1), (0.01, 1)]:
        mix = data.compile_mix(split.train, 8, share, seed=0)
        assert len(mix) == 8 and sum(e.slice == "colloquial" for e in mix) == expected
    with pytest.raises(ValueError, match="needs 99 cases"):
        data.compile_mix(split.train, 99, 0.5)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        data.compile_mix(split.train, 4, 1.5)


def test_condition_matching_uses_aliases_as_whole_words(kb):
    assert data.condition_matches("High blood pressure", "hypertension", kb)
    assert data.condition_matches("Acute gout flare", "gout", kb)
    assert data.condition_matches("Pulmonary TB", "tuberculosis", kb)
    assert not data.condition_matches("Asthma", "copd", kb)
    assert not data.condition_matches("", "gout", kb)
    assert not data.condition_matches("pathogen", "pe", kb)  # alias 'pe' must not match inside a word


def test_gold_outputs_honour_the_contract(cases):
    from nbkit.signatures.contracts import check_contract

    for case in cases:
        assert check_contract(data.gold_outputs(case)) == [], case["id"]
