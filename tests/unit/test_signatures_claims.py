"""Every verdict function of notebook 03 driven through every outcome, on fabricated measurements of the
types the experiments return (``run_modules`` / ``run_contracts`` / ``run_compile`` / ``run_token_limit`` /
``run_history``, :mod:`nbkit.signatures.metrics`)."""

import dataclasses

import pytest

from nbkit.claims import HOLDS, INCONCLUSIVE, REFUTED, Claim, Verdict, claims_frame
from nbkit.signatures import claims as sc
from nbkit.signatures.metrics import (
    CompileMetrics,
    ContractsMetrics,
    FieldNotesAnswers,
    HistoryMetrics,
    LMCalls,
    ModuleChoice,
    ModulesMetrics,
    RandomSearchRun,
    TokenLimitMetrics,
)


def outcome(verdict):
    assert isinstance(verdict, Verdict)
    return verdict.verdict


def shipped_sizes() -> dict[str, int]:
    """The n notebook 03 really has at its defaults, from the shipped cases and the experiments' configs:
    dev questions per program, dev cases, distinct bound-checked requests, field-notes-signature questions."""
    from nbkit.signatures import config as cfg
    from nbkit.signatures.cases import load_cases, split_cases
    from nbkit.signatures.modules import MODULES

    splits = split_cases(load_cases(), cfg.SessionConfig().seed)
    dev_q = 2 * len(splits.dev)
    contracts = cfg.ContractsConfig()
    # modules (auto → json_grammar) + contracts' adapters; contracts' predict/json_grammar is the modules'
    # request
    requests = len(MODULES) * dev_q + sum(1 for a in contracts.adapters if a != "json_grammar") * dev_q
    notes_q = 2 * sum(len(getattr(splits, name)) for name in contracts.field_notes_splits)
    return {
        "dev_questions": dev_q,
        "dev_cases": len(splits.dev),
        "requests": requests,
        "notes_questions": notes_q,
    }


N = shipped_sizes()


def test_the_shipped_n_can_decide_the_existence_rules():
    """At 0 breaches the rules refute from min_n_to_refute() answers on; the default run has more (if most
    parse)."""
    assert sc.min_n_to_refute() == 73
    assert N == {"dev_questions": 30, "dev_cases": 15, "requests": 120, "notes_questions": 100}
    assert N["requests"] >= sc.min_n_to_refute() and N["notes_questions"] >= sc.min_n_to_refute()


@pytest.mark.parametrize(
    ("clean", "expected"),
    [
        ({"predict": (30, 30), "cot": (30, 30), "hybrid": (29, 30)}, HOLDS),  # lowest Wilson bound 0.83
        ({"predict": (30, 30), "cot": (10, 30), "hybrid": (30, 30)}, REFUTED),
        (
            {"predict": (30, 30), "cot": (26, 30), "hybrid": (30, 30)},
            INCONCLUSIVE,
        ),  # 26/30: [0.70, 0.95] straddles 0.8
        ({}, INCONCLUSIVE),
    ],
)
def test_modules_serve_contract(clean, expected):
    assert {q for q, _ in clean.values()} <= set(range(N["dev_questions"] + 1))
    assert outcome(sc.verdict_modules_serve_contract(clean)) == expected


def test_modules_serve_contract_judges_every_module_not_the_worst_point_rate():
    # 4/5 has the lower point rate but a wide interval; 18/30 ([0.42, 0.75]) lies wholly below 0.8 and refutes
    assert outcome(sc.verdict_modules_serve_contract({"a": (4, 5), "b": (18, 30)})) == REFUTED


@pytest.mark.parametrize(
    ("k", "n", "expected"),
    [
        (1, N["requests"], HOLDS),
        (0, N["requests"], REFUTED),
        (0, N["notes_questions"], REFUTED),
        (0, N["dev_questions"], INCONCLUSIVE),  # dev alone (the old n of the confidence claim) cannot refute
        (0, 72, INCONCLUSIVE),
        (0, 0, INCONCLUSIVE),
    ],
)
def test_observed(k, n, expected):
    verdict, interval = sc.verdict_observed(k, n, "breaches"), sc.observed_interval(k, n)
    assert verdict.verdict == expected
    assert (interval == "") == (n == 0)
    if expected == INCONCLUSIVE and n:
        assert "needs ≥ 73 answers" in verdict.why


D = N["dev_questions"]
C = N["dev_cases"]


@pytest.mark.parametrize(
    ("chat", "grammar", "expected"),
    [
        ([1.0] * D, [0.0] * D, HOLDS),
        ([0.0] * D, [1.0] * D, REFUTED),
        (
            [0.0] * D,
            [0.0] * D,
            INCONCLUSIVE,
        ),  # no discordant question: the interval keeps its width (the bootstrap said refuted)
        ([1.0] + [0.0] * (D - 1), [0.0] * D, INCONCLUSIVE),
        ([1.0], [0.0], INCONCLUSIVE),  # one question cannot decide
    ],
)
def test_grammar_fixes_structure(chat, grammar, expected):
    assert outcome(sc.verdict_grammar_fixes_structure(chat, grammar)) == expected


@pytest.mark.parametrize(
    ("standard", "colloquial", "expected", "why"),
    [
        ([1.0] * C, [0.0] * C, HOLDS, "≥"),
        ([0.0] * C, [1.0] * C, REFUTED, "<"),
        ([1.0] * C, [1.0] * C, INCONCLUSIVE, "straddles"),  # equal slices at n=15 cannot exclude a 0.10 gap
        ([1.0] * 4, [0.0] * 4, HOLDS, "≥"),  # 4 cases, all one way: the interval is honest at small n
        ([0.0] * C, [0.0] * C, INCONCLUSIVE, "floor"),
    ],
)
def test_colloquial_gap(standard, colloquial, expected, why):
    verdict = sc.verdict_colloquial_gap(standard, colloquial)
    assert verdict.verdict == expected and why in verdict.why
    assert (sc.paired_interval(standard, colloquial, floor=True) == "") == (why == "floor")


@pytest.mark.parametrize(
    ("mixed", "standard_only", "expected"),
    [
        ([1.0] * C, [0.0] * C, HOLDS),
        ([0.0] * C, [1.0] * C, REFUTED),
        ([1.0] + [0.0] * (C - 1), [0.0] * C, INCONCLUSIVE),
        ([0.0] * C, [0.0] * C, INCONCLUSIVE),
    ],
)
def test_mix_lifts_colloquial(mixed, standard_only, expected):
    assert outcome(sc.verdict_mix_lifts_colloquial(mixed, standard_only)) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([1.0] * D, [0.0] * D, HOLDS),
        ([0.0] * D, [1.0] * D, REFUTED),
        ([1.0] * D, [1.0] * D, INCONCLUSIVE),
        ([1.0, 0.0, 0.0, 0.0, 1.0] * (D // 5), [0.0, 0.0, 1.0, 0.0, 0.0] * (D // 5), INCONCLUSIVE),
    ],
)
def test_program_beats(a, b, expected):
    verdict, interval = sc.verdict_program_beats(a, b, "hit@3 a − b"), sc.paired_interval(a, b, floor=True)
    assert verdict.verdict == expected
    assert interval.startswith("[")
    if expected == INCONCLUSIVE:
        assert "straddles" in verdict.why


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([0.9, 0.8] * 16, [0.1, 0.2] * 16, HOLDS),
        ([0.1, 0.2] * 16, [0.9, 0.8] * 16, REFUTED),
        ([0.5] * 32, [0.5] * 32, INCONCLUSIVE),
        ([0.9] * 4, [0.1] * 4, INCONCLUSIVE),
    ],
)
def test_program_beats_on_a_non_binary_metric(a, b, expected):
    """A user's metric with fractional scores: paired bootstrap, ≥ MIN_PAIRS pairs, no verdict from a
    spread-less sample."""
    assert outcome(sc.verdict_program_beats(a, b, "score a − b")) == expected


@pytest.mark.parametrize(("candidates", "expected"), [(1, INCONCLUSIVE), (16, REFUTED)])
def test_random_search_refuted_only_at_its_documented_budget(candidates, expected):
    verdict = sc.verdict_random_search_beats([0.0] * D, [1.0] * D, candidates)
    assert verdict.verdict == expected
    assert outcome(sc.verdict_random_search_beats([1.0] * D, [0.0] * D, 1)) == HOLDS
    assert outcome(sc.verdict_random_search_beats([1.0] * D, [1.0] * D, 16)) == INCONCLUSIVE


@pytest.mark.parametrize(
    ("tokens", "expected"), [(230, HOLDS), (16, REFUTED), (30, INCONCLUSIVE), (None, INCONCLUSIVE)]
)
def test_runaway(tokens, expected):
    assert sc.verdict_runaway(tokens, 16, 256).verdict == expected


@pytest.mark.parametrize(
    ("longest", "calls", "probes", "expected"),
    [
        (128, 50, (), HOLDS),
        (129, 50, (), REFUTED),
        (0, 0, (), INCONCLUSIVE),
        (0, 0, (16, 16, 12), HOLDS),
        (128, 50, (16, 17), REFUTED),
        (0, 0, (40,), REFUTED),
    ],
)
def test_limit_enforced(longest, calls, probes, expected):
    assert sc.verdict_limit_enforced(longest, 128, calls, probes, 16).verdict == expected


def test_pairing_is_by_question_not_by_position():
    a = {"keys": ["c1:standard", "c2:standard", "c3:standard"], "hit": [1.0, 0.0, 1.0]}
    b = {"keys": ["c3:standard", "c1:standard"], "hit": [0.0, 1.0]}
    assert sc.paired(a, b) == ([1.0, 1.0], [1.0, 0.0])
    q = {
        "keys": ["c1:standard", "c1:colloquial", "c2:colloquial", "c2:standard"],
        "hit": [1.0, 0.0, 1.0, 0.0],
    }
    assert sc.by_slice(q) == ([1.0, 0.0], [0.0, 1.0])


def _questions(n, hit, structural=0.0, breaches=0):
    keys = [f"c{i}:{s}" for i in range(n) for s in ("standard", "colloquial")]
    hits = hit if isinstance(hit, list) else [hit] * len(keys)
    over = [
        [] if structural else (["reasoning_over_50_words"] if i < breaches else []) for i in range(len(keys))
    ]
    return {
        "keys": keys,
        "hit": hits,
        "clean": [1.0 - structural] * len(keys),
        "structural": [structural] * len(keys),
        "bound_breaches": over,
    }


def _modules(questions, adapter="json_grammar"):
    evaluated = {m: len(q["keys"]) for m, q in questions.items()}
    return ModulesMetrics(
        adapter=adapter,
        signature="typed",
        dev_questions_evaluated=evaluated,
        scores={},
        questions=questions,
        bounds={},
    )


def _contracts(questions, field_notes=None):
    return ContractsMetrics(
        module="predict",
        signature="typed",
        dev_questions_evaluated=0,
        violation_rate={},
        violations_by_kind={},
        questions=questions,
        bounds={},
        field_notes_signature=field_notes,
    )


def _notes(**fields):
    counts = {f.name: 0 for f in dataclasses.fields(FieldNotesAnswers) if f.type == "int"}
    return FieldNotesAnswers(
        **{**counts, "adapter": "json_grammar", "splits": ["dev"], "violation_rate": 0.0, **fields}
    )


def _compiled(questions, **fields):
    base = {
        "module": "predict",
        "module_chosen_on": None,
        "adapter": "json_grammar",
        "dev_questions_evaluated": 0,
        "table": [],
        "gains": {},
        "questions": questions,
        "random_search": RandomSearchRun(),
        "seconds": 0.0,
    }
    return CompileMetrics(**{**base, **fields})


def _token_limit(**fields):
    return TokenLimitMetrics(
        **{
            "limit": 16,
            "dspy_wire_fields": {"max_completion_tokens": 16},
            "stock_dspy_tokens": 230,
            "stock_n_ctx": 256,
            **fields,
        }
    )


def _history(**fields):
    calls = {
        "calls": 0,
        "served": 0,
        "from_cache": 0,
        "completion_tokens": 0,
        "max_completion_tokens": 0,
        "over_max_tokens": 0,
        "max_tokens": 128,
    }
    return HistoryMetrics(calls=LMCalls(**{**calls, **fields}))


def test_bounds_count_each_request_once():
    """The modules' predict under the grammar and the contracts' json_grammar are one request per question."""
    n = N["dev_cases"]
    modules = _modules(
        {"predict": _questions(n, 0.0, breaches=2), "cot": _questions(n, 0.0), "hybrid": _questions(n, 0.0)}
    )
    contracts = _contracts({"chat": _questions(n, 0.0, 1.0), "json_grammar": _questions(n, 0.0, breaches=2)})
    b = sc.request_bounds(modules, contracts)
    assert (
        b["requests"] == N["requests"]
        and b["parsed_answers"] == 3 * N["dev_questions"]
        and b["answers_over_bounds"] == 2
    )
    assert b["reasoning_over_50_words"] == 2
    clean = _modules({m: _questions(n, 0.0) for m in ("predict", "cot", "hybrid")})
    parsed = sc.request_bounds(clean, _contracts({"chat": _questions(n, 0.0)}))["parsed_answers"]
    assert (
        sc.verdict_observed(0, parsed, "breaches").verdict == REFUTED
    )  # 120 distinct parsed answers, none breaching


def test_claims_rows_from_recorded_metrics():
    n = 16
    std_only = [1.0 if k.endswith("standard") else 0.0 for k in _questions(n, 0.0)["keys"]]
    modules = _modules(
        {"predict": _questions(n, 0.0, breaches=3), "cot": _questions(n, 0.0), "hybrid": _questions(n, 1.0)}
    )
    notes = _notes(
        confidence_not_numeric=2,
        diagnosis_items=40,
        answers_not_numeric=1,
        answers_with_items=90,
        questions=100,
        splits=["train", "val", "dev"],
    )
    contracts = _contracts(
        {"chat": _questions(n, 0.0, 1.0), "json_grammar": _questions(n, 0.0, 0.0, breaches=3)}, notes
    )
    compiled = _compiled(
        {
            "BFS 0% colloquial": _questions(n, std_only),
            "BFS 50% colloquial": _questions(n, 1.0),
            "RS 50% colloquial": _questions(n, 1.0),
        },
        module="hybrid",
        module_chosen_on=ModuleChoice(
            split="val", questions=10, hit_at_3={"predict": 0.0, "cot": 0.0, "hybrid": 0.2}
        ),
        random_search=RandomSearchRun(
            ran=True, program="RS 50% colloquial", val_questions=18, num_candidates=1
        ),
    )
    token_limit = _token_limit()
    history = _history(calls=300, served=300, completion_tokens=9000, max_completion_tokens=128)
    rows = sc.claims(
        modules=modules, contracts=contracts, compiled=compiled, token_limit=token_limit, history=history
    )
    assert all(isinstance(r, Claim) and r.n and r.rule for r in rows)
    verdicts = {r.key: r.verdict for r in rows}
    assert verdicts == {
        "modules_serve_contract": HOLDS,
        "cot_beats_predict": INCONCLUSIVE,
        "hybrid_beats_predict": HOLDS,
        "prompt_bounds_not_enforced": HOLDS,
        "grammar_fixes_structure": HOLDS,
        "confidence_in_words": HOLDS,
        "standard_only_gap": HOLDS,
        "colloquial_mix_lifts": HOLDS,
        "random_search_beats_bootstrap": INCONCLUSIVE,
        "runaway_reproduced": HOLDS,
        "limit_enforced": HOLDS,
    }
    by = {r.key: r for r in rows}
    assert "32 paired dev questions" in by["hybrid_beats_predict"].n
    assert (
        "3 of 96 parsed answers" in by["prompt_bounds_not_enforced"].measured
    )  # 32 × 3 modules, the grammar's duplicates not counted
    assert (
        "1 of 90 answers" in by["confidence_in_words"].measured
        and "train+val+dev" in by["confidence_in_words"].n
    )
    assert "module chosen on 10 val questions" in by["standard_only_gap"].n
    assert (
        "reasoning step" in by["cot_beats_predict"].field_note
        and "knowledge base" in by["hybrid_beats_predict"].field_note
    )
    assert list(claims_frame(rows).columns)[:4] == ["claim", "field_note", "measured", "verdict"]
    # compiling not run (SMOKE without it): no compile rows, the rest stays
    assert not {"standard_only_gap", "colloquial_mix_lifts"} & {
        r.key
        for r in sc.claims(
            modules=modules, contracts=contracts, compiled=None, token_limit=token_limit, history=history
        )
    }


def test_a_run_answered_from_cache_says_so_in_the_limit_claim():
    """A warm re-run: the limit claim counts only calls the LM served in this run and names the cached
    ones."""
    modules = _modules({"predict": _questions(16, 0.0)})
    contracts = _contracts({})

    def row(history, token_limit=None):
        token_limit = token_limit or _token_limit()
        rows = sc.claims(
            modules=modules, contracts=contracts, compiled=None, token_limit=token_limit, history=history
        )
        return next(r for r in rows if r.key == "limit_enforced")

    warm = row(_history(calls=300, served=4, from_cache=296, completion_tokens=60, max_completion_tokens=16))
    assert (
        warm.verdict == HOLDS
        and "over 4 calls served" in warm.measured
        and "296 more answered from DSPy's cache" in warm.measured
    )
    all_cached = _history(calls=300, served=0, from_cache=300)
    assert row(all_cached).verdict == INCONCLUSIVE and "all answered from cache" in row(all_cached).why
    probed = _token_limit(
        nbkit_max_tokens=16, nbkit_max_completion_tokens=16, dspy_through_session=16
    )  # the cell's uncached probes
    assert row(all_cached, probed).verdict == HOLDS and "3 limit probes" in row(all_cached, probed).n


def test_claims_read_only_typed_metrics():
    """A claim that reads a field the experiments do not write fails here, not silently on a machine nobody
    has."""
    with pytest.raises(AttributeError):
        sc.claims(
            modules={"questions": {}},
            contracts=_contracts({}),
            compiled=None,
            token_limit=_token_limit(),
            history=_history(),
        )
