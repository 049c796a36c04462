"""The shipped cases and knowledge base, their validation messages, splits and compile mixes."""

import pytest

from nbkit.signatures import cases as cs


@pytest.fixture(scope="module")
def kb():
    return cs.load_knowledge_base()


@pytest.fixture(scope="module")
def cases(kb):
    return cs.load_cases(kb=kb)


def test_shipped_dataset_is_complete(cases, kb):
    assert 60 <= len(cases) <= 100
    assert len(kb) >= 40
    for case in cases:
        assert case["standard"] != case["colloquial"]
        assert all(cond in kb.aliases for cond in case["conditions"])
        assert case["rationale"].strip()


def test_splits_are_deterministic_disjoint_and_keep_cases_together(cases):
    a, b = cs.split_cases(cases, 0), cs.split_cases(cases, 0)
    assert [c["id"] for c in a.dev] == [c["id"] for c in b.dev]
    ids = [c["id"] for part in (a.train, a.val, a.dev, a.test) for c in part]
    assert sorted(ids) == sorted(c["id"] for c in cases)
    assert [c["id"] for c in cs.split_cases(cases, 1).dev] != [c["id"] for c in a.dev]
    examples = cs.to_examples(a.dev[:2])
    assert [e.slice for e in examples] == ["standard", "colloquial"] * 2
    assert examples[0].case_id == examples[1].case_id


def test_compile_mix_respects_the_share(cases):
    split = cs.split_cases(cases, 0)
    for share, expected in [(0.0, 0), (0.5, 4), (0.1, 1), (0.01, 1)]:
        mix = cs.compile_mix(split.train, 8, share, seed=0)
        assert len(mix) == 8 and sum(e.slice == "colloquial" for e in mix) == expected
    with pytest.raises(cs.UsageError, match="needs 99 cases"):
        cs.compile_mix(split.train, 99, 0.5)
    with pytest.raises(cs.UsageError, match=r"in \[0, 1\]"):
        cs.compile_mix(split.train, 4, 1.5)


def test_condition_matching_uses_aliases_as_whole_words(kb):
    assert cs.condition_matches("High blood pressure", "hypertension", kb)
    assert cs.condition_matches("Acute gout flare", "gout", kb)
    assert cs.condition_matches("Pulmonary TB", "tuberculosis", kb)
    assert not cs.condition_matches("Asthma", "copd", kb)
    assert not cs.condition_matches("", "gout", kb)
    assert not cs.condition_matches("pathogen", "pe", kb)  # alias 'pe' must not match inside a word


def test_gold_outputs_honour_the_contract(cases):
    from nbkit.signatures.contracts import check_contract

    for case in cases:
        assert check_contract(cs.gold_outputs(case)) == [], case["id"]
