"""Notebook 03 end to end with SMOKE=True on the real local SmolLM2 server (papermill, once per session)."""

import pytest

pytestmark = pytest.mark.slow

MODULES = {"predict", "cot", "hybrid"}


@pytest.fixture(scope="module")
def metrics(executed_notebook):
    pytest.importorskip("llama_cpp")
    _path, metrics = executed_notebook("03_dspy_signatures")
    return metrics


def test_required_metrics_are_recorded(metrics):
    for key in ("dev_score_by_module", "contract_violation_rate", "compile_gain_by_slice", "lm_tokens_per_s", "claims"):
        assert key in metrics, key


def test_module_scores_are_rates(metrics):
    scores = metrics["dev_score_by_module"]
    assert set(scores) == MODULES
    for row in scores.values():
        for key in ("hit@3", "standard", "colloquial", "contract_violation_rate"):
            assert 0.0 <= row[key] <= 1.0, (key, row)


def test_contract_accounting_covers_every_adapter(metrics):
    rates = metrics["contract_violation_rate"]
    assert set(rates) == {"chat", "json", "json_grammar"}
    assert all(0.0 <= r <= 1.0 for r in rates.values())
    by_kind = metrics["contract_violations_by_kind"]
    assert set(by_kind) == set(rates) and all(sum(v.values()) >= 0 for v in by_kind.values())


def test_compile_gains_are_per_slice(metrics):
    gains = metrics["compile_gain_by_slice"]
    assert gains and all(set(g) == {"standard", "colloquial"} for g in gains.values())
    assert all(-1.0 <= v <= 1.0 for g in gains.values() for v in g.values() if v is not None)


def test_the_token_limit_reaches_the_server(metrics):
    check = metrics["max_tokens_check"]
    assert check["raw_max_tokens_24"] <= 24
    assert check["raw_max_completion_tokens_24"] <= 24
    assert check["dspy_max_tokens_24"] <= 24
    assert metrics["lm_calls"]["over_max_tokens"] == 0 and metrics["lm_calls"]["calls"] > 5
    assert metrics["lm_tokens_per_s"] > 0


def test_save_load_and_claims(metrics):
    assert metrics["save_load_roundtrip"]["same_demos"] is True
    claims = metrics["claims"]
    assert len(claims) >= 6
    assert all(c["verdict"] and c["measured here"] for c in claims)
