"""Notebook 03 end to end with SMOKE=True on the real local SmolLM2 servers (papermill, once per session)."""

import pytest

pytestmark = pytest.mark.slow

MODULES = {"predict", "cot", "hybrid"}


@pytest.fixture(scope="module")
def metrics(executed_notebook):
    pytest.importorskip("llama_cpp")
    _path, metrics = executed_notebook("03_dspy_signatures")
    return metrics


def test_every_module_answers_the_same_questions(metrics):
    evaluated = metrics["dev_questions_evaluated"]
    assert set(evaluated) == MODULES and len(set(evaluated.values())) == 1
    assert evaluated["predict"] == 4  # SMOKE: 2 dev cases x 2 phrasings (the default: every dev case)
    scores = metrics["dev_score_by_module"]
    for row in scores.values():
        # a rate over n questions is a multiple of 1/n: catches a score averaged over the wrong count
        n = evaluated["predict"]
        assert abs(row["hit@3"] * n - round(row["hit@3"] * n)) < 1e-6, row


def test_contract_accounting_covers_every_adapter(metrics):
    rates = metrics["contract_violation_rate"]
    assert set(rates) == {"chat", "json_grammar"}  # "json" is a panel choice, off by default
    by_kind = metrics["contract_violations_by_kind"]
    assert set(by_kind) == set(rates)
    # the grammar forces the contract's shape: no parse errors or missing fields under it
    assert by_kind["json_grammar"]["parse_error"] + by_kind["json_grammar"]["missing_field"] == 0


def test_compile_gains_are_per_slice(metrics):
    gains = metrics["compile_gain_by_slice"]
    assert set(gains) == {"BFS 0% colloquial", "BFS 50% colloquial"}
    assert all(set(g) == {"standard", "colloquial"} for g in gains.values())


def test_the_token_limit_reaches_the_server_and_the_stock_server_runs_away(metrics):
    check = metrics["max_tokens_check"]
    limit = check["limit"]
    assert check["nbkit_max_tokens"] <= limit and check["nbkit_max_completion_tokens"] <= limit
    assert check["dspy_through_session"] <= limit
    assert check["stock_dspy_tokens"] > limit  # reproduced: the stock server ignores DSPy's field
    assert metrics["lm_calls"]["over_max_tokens"] == 0 and metrics["lm_calls"]["calls"] > 5
    slots = metrics["lm_slots"]  # how full the local servers' slots were: every served call went through them
    assert slots["requests"] >= metrics["lm_calls"]["served"] and slots["capacity"] >= 1
    assert 0 < slots["fill"] <= 1 and 1 <= slots["mean_in_flight"] <= slots["capacity"]
    assert 0 < slots["serving_seconds"] and slots["queued_seconds"] >= 0


def test_retriever_chosen_on_validation(metrics):
    assert metrics["retrieval"]["chosen_on"] == "val" and metrics["retrieval"]["chosen"] in ("bm25", "minilm")
    user = metrics["user_contract"]  # recorded from UserContractMetrics: the fields a run fills stay null
    assert user["ran"] is False and user["why"] == "set SIGNATURE and DEV_SET to check your own contract"
    assert {k for k, v in user.items() if v is not None} == {"ran", "why"}


def test_save_load_headline_and_claims(metrics):
    assert metrics["save_load_roundtrip"]["same_demos"] is True
    assert 3 <= len(metrics["headline"]) <= 6
    claims = metrics["claims"]
    keys = {c["key"] for c in claims}
    assert {
        "modules_serve_contract",
        "grammar_fixes_structure",
        "runaway_reproduced",
        "limit_enforced",
        "standard_only_gap",
    } <= keys
    assert all(c["verdict"] in ("holds", "refuted", "inconclusive") and c["n"] and c["rule"] for c in claims)
    assert next(c for c in claims if c["key"] == "runaway_reproduced")["verdict"] == "holds"
