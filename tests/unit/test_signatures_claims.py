"""Every verdict function of notebook 03 driven through every outcome, on fabricated measurements with the
keys the experiments record (``run_modules`` / ``run_contracts`` / ``run_compile`` / ``run_token_limit``)."""

import pytest

from nbkit.claims import HOLDS, INCONCLUSIVE, REFUTED, Claim, Verdict, claims_frame
from nbkit.signatures import claims as sc


def outcome(result):
    verdict = result if isinstance(result, Verdict) else result[0]
    return verdict.verdict


@pytest.mark.parametrize(
    ("clean", "expected"),
    [
        ({"predict": (40, 40), "cot": (39, 40)}, HOLDS),
        ({"predict": (40, 40), "cot": (10, 40)}, REFUTED),
        ({"predict": (5, 5), "cot": (4, 5)}, INCONCLUSIVE),  # 4/5: Wilson interval straddles 0.8
        ({}, INCONCLUSIVE),
    ],
)
def test_modules_serve_contract(clean, expected):
    assert outcome(sc.verdict_modules_serve_contract(clean)) == expected


@pytest.mark.parametrize(("k", "n", "expected"), [(1, 30, HOLDS), (0, 400, REFUTED), (0, 30, INCONCLUSIVE), (0, 0, INCONCLUSIVE)])
def test_observed(k, n, expected):
    verdict, interval = sc.verdict_observed(k, n, "breaches")
    assert verdict.verdict == expected
    assert (interval == "") == (n == 0)


@pytest.mark.parametrize(
    ("chat", "grammar", "expected"),
    [
        ([1.0] * 30, [0.0] * 30, HOLDS),
        ([0.0] * 30, [0.0] * 30, REFUTED),
        ([1.0] + [0.0] * 11, [0.0] * 12, INCONCLUSIVE),  # 1 of 12: the interval [0, 0.25] straddles 0.10
        ([1.0] * 4, [0.0] * 4, INCONCLUSIVE),  # 4 pairs: too few to decide, however clear they look
        ([1.0], [0.0], INCONCLUSIVE),  # one question cannot decide
    ],
)
def test_grammar_fixes_structure(chat, grammar, expected):
    assert outcome(sc.verdict_grammar_fixes_structure(chat, grammar)) == expected


@pytest.mark.parametrize(
    ("standard", "colloquial", "expected", "why"),
    [
        ([1.0] * 20, [0.0] * 20, HOLDS, "≥"),
        ([1.0] * 20, [1.0] * 20, REFUTED, "<"),
        ([1.0] + [0.0] * 11, [0.0] * 12, INCONCLUSIVE, "straddles"),
        ([1.0] * 4, [0.0] * 4, INCONCLUSIVE, "only 4 paired cases — n too small"),
        ([0.0] * 20, [0.0] * 20, INCONCLUSIVE, "floor"),
    ],
)
def test_colloquial_gap(standard, colloquial, expected, why):
    verdict, _interval = sc.verdict_colloquial_gap(standard, colloquial)
    assert verdict.verdict == expected and why in verdict.why


@pytest.mark.parametrize(
    ("mixed", "standard_only", "expected"),
    [([1.0] * 10, [0.0] * 10, HOLDS), ([0.0] * 10, [1.0] * 10, REFUTED), ([1.0] + [0.0] * 11, [0.0] * 12, INCONCLUSIVE),
     ([0.0] * 12, [0.0] * 12, INCONCLUSIVE)],
)
def test_mix_lifts_colloquial(mixed, standard_only, expected):
    assert outcome(sc.verdict_mix_lifts_colloquial(mixed, standard_only)) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [([1.0] * 32, [0.0] * 32, HOLDS), ([0.5] * 32, [0.5] * 32, REFUTED), ([1.0, 0.0, 0.0, 0.0, 1.0] * 2, [0.0, 0.0, 1.0, 0.0, 0.0] * 2, INCONCLUSIVE)],
)
def test_program_beats(a, b, expected):
    verdict, interval = sc.verdict_program_beats(a, b, "hit@3 a − b")
    assert verdict.verdict == expected
    assert interval.startswith("[")
    if expected == INCONCLUSIVE:
        assert "straddles" in verdict.why


@pytest.mark.parametrize(("tokens", "expected"), [(230, HOLDS), (16, REFUTED), (30, INCONCLUSIVE), (None, INCONCLUSIVE)])
def test_runaway(tokens, expected):
    assert sc.verdict_runaway(tokens, 16, 256).verdict == expected


@pytest.mark.parametrize(
    ("longest", "calls", "probes", "expected"),
    [(128, 50, (), HOLDS), (129, 50, (), REFUTED), (0, 0, (), INCONCLUSIVE),
     (0, 0, (16, 16, 12), HOLDS), (128, 50, (16, 17), REFUTED), (0, 0, (40,), REFUTED)],
)  # fmt: skip
def test_limit_enforced(longest, calls, probes, expected):
    assert sc.verdict_limit_enforced(longest, 128, calls, probes, 16).verdict == expected


def test_pairing_is_by_question_not_by_position():
    a = {"keys": ["c1:standard", "c2:standard", "c3:standard"], "hit": [1.0, 0.0, 1.0]}
    b = {"keys": ["c3:standard", "c1:standard"], "hit": [0.0, 1.0]}
    assert sc.paired(a, b) == ([1.0, 1.0], [1.0, 0.0])
    q = {"keys": ["c1:standard", "c1:colloquial", "c2:colloquial", "c2:standard"], "hit": [1.0, 0.0, 1.0, 0.0]}
    assert sc.by_slice(q) == ([1.0, 0.0], [0.0, 1.0])


def _questions(n, hit, structural=0.0):
    keys = [f"c{i}:{s}" for i in range(n) for s in ("standard", "colloquial")]
    hits = hit if isinstance(hit, list) else [hit] * len(keys)
    return {"keys": keys, "hit": hits, "clean": [1.0 - structural] * len(keys), "structural": [structural] * len(keys)}


def _bounds(parsed, over):
    return {"parsed_answers": parsed, "diagnosis_items": parsed, "answers_over_bounds": over, "reasoning_over_50_words": over,
            "confidence_out_of_range": 0, "confidence_not_numeric": 0}  # fmt: skip


def test_claims_rows_from_recorded_metrics():
    n = 16
    std_only = [1.0 if k.endswith("standard") else 0.0 for k in _questions(n, 0.0)["keys"]]
    modules = {"adapter": "json_grammar", "questions": {"predict": _questions(n, 0.0), "cot": _questions(n, 0.0), "hybrid": _questions(n, 1.0)},
               "bounds": {"predict": _bounds(32, 3)}}  # fmt: skip
    contracts = {"module": "predict", "questions": {"chat": _questions(n, 0.0, 1.0), "json_grammar": _questions(n, 0.0, 0.0)},
                 "bounds": {"chat": _bounds(0, 0)}, "field_notes_signature": {"confidence_not_numeric": 2, "diagnosis_items": 40}}  # fmt: skip
    compiled = {"module": "hybrid", "questions": {"BFS 0% colloquial": _questions(n, std_only), "BFS 50% colloquial": _questions(n, 1.0),
                                                  "RS 50% colloquial": _questions(n, 1.0)},
                "random_search": {"ran": True, "program": "RS 50% colloquial", "val_questions": 18}}  # fmt: skip
    token_limit = {"limit": 16, "dspy_wire_fields": {"max_completion_tokens": 16}, "stock_dspy_tokens": 230, "stock_n_ctx": 256}
    calls = {"calls": 300, "completion_tokens": 9000, "max_completion_tokens": 128, "over_max_tokens": 0, "max_tokens": 128}
    rows = sc.claims(modules=modules, contracts=contracts, compiled=compiled, token_limit=token_limit, calls=calls)
    assert all(isinstance(r, Claim) and r.n and r.rule for r in rows)
    verdicts = {r.key: r.verdict for r in rows}
    assert verdicts == {
        "modules_serve_contract": HOLDS, "cot_beats_predict": INCONCLUSIVE, "hybrid_beats_predict": HOLDS,
        "prompt_bounds_not_enforced": HOLDS, "grammar_fixes_structure": HOLDS, "confidence_in_words": HOLDS,
        "standard_only_gap": HOLDS, "colloquial_mix_lifts": HOLDS, "random_search_beats_bootstrap": REFUTED,
        "runaway_reproduced": HOLDS, "limit_enforced": HOLDS,
    }  # fmt: skip
    assert "32 paired dev questions" in next(r.n for r in rows if r.key == "hybrid_beats_predict")
    assert list(claims_frame(rows).columns)[:4] == ["claim", "field_note", "measured", "verdict"]
    # compiling not run (SMOKE without it): no compile rows, the rest stays
    assert not {"standard_only_gap", "colloquial_mix_lifts"} & {r.key for r in sc.claims(modules=modules, contracts=contracts, compiled=None,
                                                                                         token_limit=token_limit, calls=calls)}  # fmt: skip


def test_a_run_answered_from_cache_says_so_in_the_limit_claim():
    """A warm re-run: the limit claim counts only calls the LM served in this run and names the cached ones."""
    token_limit = {"limit": 16, "dspy_wire_fields": {"max_completion_tokens": 16}, "stock_dspy_tokens": 230, "stock_n_ctx": 256}
    modules = {"adapter": "json_grammar", "questions": {"predict": _questions(16, 0.0)}}
    contracts = {"module": "predict", "questions": {}}

    def row(calls):
        rows = sc.claims(modules=modules, contracts=contracts, compiled=None, token_limit=token_limit, calls=calls)
        return next(r for r in rows if r.key == "limit_enforced")

    warm = row({"calls": 300, "served": 4, "from_cache": 296, "completion_tokens": 60, "max_completion_tokens": 16, "max_tokens": 128})
    assert warm.verdict == HOLDS and "over 4 calls served" in warm.measured and "296 more answered from DSPy's cache" in warm.measured
    all_cached = {"calls": 300, "served": 0, "from_cache": 300, "completion_tokens": 0, "max_completion_tokens": 0, "max_tokens": 128}
    assert row(all_cached).verdict == INCONCLUSIVE and "all answered from cache" in row(all_cached).why
    token_limit.update(nbkit_max_tokens=16, nbkit_max_completion_tokens=16, dspy_through_session=16)  # the cell's uncached probes
    assert row(all_cached).verdict == HOLDS and "3 limit probes" in row(all_cached).n
