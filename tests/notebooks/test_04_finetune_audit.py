"""Notebook 04 under papermill with SMOKE=True: findings, broken-config findings, claims."""

from __future__ import annotations

import pytest

VERDICTS = {"holds", "refuted", "needs GPU", "not measured", "inconclusive"}


@pytest.fixture(scope="module")
def metrics(executed_notebook):
    _, m = executed_notebook("04_finetune_audit")
    return m


@pytest.mark.slow
def test_every_check_produces_a_finding(metrics):
    ids = [f["check_id"] for f in metrics["findings"]]
    assert ids == list(range(1, 14))
    by = {f["check_id"]: f for f in metrics["findings"]}
    assert not [f for f in metrics["findings"] if f["status"] == "error"], [f["summary"] for f in metrics["findings"] if f["status"] == "error"]
    # the real model: SmolLM2's GQA 9/3 layout shows up in the evidence
    assert metrics["model"]["heads"] == 9 and metrics["model"]["kv_heads"] == 3 and metrics["model"]["pad_id"] == metrics["model"]["eos_id"] == 2
    assert by[2]["figures"]["adapted_modules"] == 60 and by[2]["status"] == "pass"
    assert 0 < by[2]["figures"]["trainable_share_pct"] < 1
    assert by[10]["figures"]["kv_proj_shape"] == "(192, 576)"
    assert by[5]["figures"]["rel_err_token_count"] < 1e-4
    assert by[12]["status"] in ("needs_gpu", "pass", "warn")
    if by[12]["status"] == "needs_gpu":
        assert "gap_ratio_configured" not in by[12]["figures"]
    assert by[1]["figures"]["param_ratio_over_vs_kiss"] > 1


@pytest.mark.slow
def test_broken_config_fails_where_it_is_broken(metrics):
    by = {f["check_id"]: f for f in metrics["findings_broken"]}
    for cid in (2, 5, 7, 8, 10, 11, 13):
        assert by[cid]["status"] == "fail", (cid, by[cid]["summary"])
    assert metrics["status_counts"]["good"]["fail"] == 0


@pytest.mark.slow
def test_claims_table_has_computed_verdicts(metrics):
    claims = metrics["claims"]
    assert len(claims) >= 20
    assert {c["verdict"] for c in claims} <= VERDICTS
    by_claim = {c["seed claim"]: c for c in claims}
    assert by_claim["q/v/o rank-64 has 3.2× the trainable parameters (r8 ≈ 5 % of it)"]["verdict"] in ("holds", "refuted")
    gpu_only = [c for c in claims if c["check"] in (4, 12)]
    assert all(c["verdict"] in ("needs GPU", "holds", "refuted") for c in gpu_only)
