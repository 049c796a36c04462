"""Notebook 02 under papermill (SMOKE=True): recorded metrics are present and plausible."""

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def metrics(executed_notebook):
    return executed_notebook("02_zero_ladder")[1]


def test_ladder_peaks_cover_stages_and_ranks(metrics):
    peaks = {p["rung"]: p for p in metrics["ladder"]["peaks"]}
    assert {"stage0", "stage1", "stage2", "stage3", "stage0_control"} <= set(peaks)
    for p in peaks.values():
        assert len(p["measured"]) == 2 and min(p["measured"]) > 0 and p["model_states"] > 0
    assert metrics["ladder"]["steps"] == 3 and metrics["ladder"]["control_rel_diff"] is not None


def test_bytes_follow_formula(metrics):
    ratios = {r["stage"]: r["ratio"] for r in metrics["ladder"]["formula_ratios"]}
    assert set(ratios) == {"stage0", "stage1", "stage2", "stage3"}
    for stage, ratio in ratios.items():
        assert 0.95 <= ratio <= 1.05, (stage, ratio)


def test_claims_rows_have_the_one_shape(metrics):
    rows = {c["key"]: c for c in metrics["claims"]}
    assert len(rows) == 26
    for c in rows.values():
        assert c["verdict"] in {"holds", "refuted", "inconclusive", "needs GPU"}
        assert c["rule"] and c["n"] and c["why"] and c["kind"]
        assert (c["p_holds_if_true"] is None) == (c["kind"] != "measured")
    # What a healthy CPU run must find (a failure would show here as "refuted", not crash the notebook).
    for key in ("replicas", "checkpoint", "failure_drill", "bytes_formula"):
        assert rows[key]["verdict"] == "holds", rows[key]
    assert rows["loss_agree"]["verdict"] in {"holds", "inconclusive"}  # inconclusive: the control unseen
    assert rows["batch_identity"]["verdict"] == "refuted"
    assert rows["sub_group_size"]["verdict"] == "refuted"
    assert (
        rows["fallback_rate"]["verdict"] == "inconclusive"
        and rows["fallback_rate"]["decided_at_defaults"] is False
    )
    # the defaults' five launches decide these; SMOKE's one launch is a range over ranks, no interval
    for key in ("zero1_saves", "zero2_saves", "zero3_saves", "estimator2_under"):
        assert rows[key]["verdict"] == "inconclusive" and rows[key]["decided_at_defaults"] is True, rows[key]
        assert "one launch" in rows[key]["why"], rows[key]
    assert "not Medusa heads" in rows["fallback_rate"]["measured"]
    if metrics["device"]["device"] == "cpu":
        assert (
            rows["loss_scale"]["verdict"] == "needs GPU" and "not measured" in rows["loss_scale"]["measured"]
        )


def test_headline_and_drill(metrics):
    head = metrics["headline"]
    assert 3 <= len(head) <= 6 and head["model_params_billion"] == pytest.approx(6.738, abs=1e-3)
    drill = metrics["failure_drill"]
    assert (
        drill["detected"]
        and drill["reported_rank"] == drill["expected_rank"]
        and drill["leftover_processes"] == []
    )
    assert drill["ready_s"] is not None and drill["seconds_to_report"] > drill["ready_s"]


def test_fragmentation_and_speculative(metrics):
    if metrics["device"]["device"] == "cpu":
        assert metrics["fragmentation"]["needs_cuda"] is True
    spec = metrics["specdec"]
    for name in ("prompt_lookup", "truncated_draft"):
        s = spec[name]
        assert s["all_identical"] and s["tok_s_baseline"] > 0 and s["rounds"] > 0
        assert s["target_calls_speculative"] <= s["new_tokens"] + s["n_prompts"]
        assert s["rounds_per_prompt"] and sum(s["rounds_per_prompt"]) == s["rounds"]
    assert len(spec["loadavg"]) == 2 and spec["timings"] >= 1
