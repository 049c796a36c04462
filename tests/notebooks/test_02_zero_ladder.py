"""Notebook 02 under papermill (SMOKE=True): recorded metrics are present and plausible."""

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def metrics(executed_notebook):
    return executed_notebook("02_zero_ladder")[1]


def test_ladder_rows_cover_stages_and_ranks(metrics):
    rows = metrics["ladder"]
    assert {(r["stage"], r["rank"]) for r in rows} >= {(s, r) for s in range(4) for r in range(2)}
    for r in rows:
        assert r["params_bytes"] > 0 and r["optimizer_bytes"] > 0 and r["peak_bytes"] > 0
        assert len(r["losses"]) == 3


def test_bytes_follow_formula(metrics):
    ratios = metrics["ladder_metrics"]["bytes_vs_formula"]
    assert set(ratios) == {"stage0", "stage1", "stage2", "stage3"}
    for stage, ratio in ratios.items():
        assert 0.95 <= ratio <= 1.05, (stage, ratio)


def test_claims_rows_have_the_one_shape(metrics):
    rows = {c["key"]: c for c in metrics["claims"]}
    for c in rows.values():
        assert c["verdict"] in {"holds", "refuted", "inconclusive", "needs GPU"}
        assert c["rule"] and c["n"] and c["why"]
    # What a healthy CPU run must find (a failure would show here as "refuted", not crash the notebook).
    for key in ("loss_agree", "replicas", "checkpoint", "failure_drill", "bytes_formula"):
        assert rows[key]["verdict"] == "holds", rows[key]
    assert rows["batch_identity"]["verdict"] == "refuted"
    assert rows["sub_group_size"]["verdict"] == "refuted"
    assert rows["fallback_rate"]["verdict"] in {
        "holds",
        "refuted",
        "inconclusive",
    }  # measured on CPU, never "needs GPU"
    for key in ("zero1_saves", "zero2_saves", "zero3_saves", "estimator2_under", "estimator3_under"):
        assert rows[key]["verdict"] in {"holds", "refuted", "inconclusive"}, rows[key]
    if metrics["device"] == "cpu":
        assert (
            rows["loss_scale"]["verdict"] == "needs GPU" and "not measured" in rows["loss_scale"]["measured"]
        )
        assert rows["fragmentation"]["verdict"] == "needs GPU"


def test_headline_and_drill(metrics):
    head = metrics["headline"]
    assert 3 <= len(head) <= 6 and head["model_params_billion"] == pytest.approx(6.738, abs=1e-3)
    drill = metrics["failure_drill"]
    assert (
        drill["detected"]
        and drill["reported_rank"] == drill["expected_rank"]
        and drill["leftover_processes"] == []
    )


def test_fragmentation_and_speculative(metrics):
    if metrics["device"] == "cpu":
        assert metrics["fragmentation"]["needs_cuda"] is True
    spec = metrics["speculative"]
    assert spec and all(s["all_identical"] for s in spec.values())
    for s in spec.values():
        assert s["tok_s_baseline"] > 0 and s["rounds"] > 0
        assert s["target_calls_speculative"] <= s["new_tokens"] + s["n_prompts"]
