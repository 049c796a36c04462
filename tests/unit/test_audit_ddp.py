"""The ddp-eval check: two real gloo ranks (subprocesses with a timeout)."""

from __future__ import annotations

import pytest

from nbkit.audit.checks.ddp_eval import DdpEvalConfig


@pytest.mark.slow
def test_ddp_eval_scenarios_count_allreduce_and_catch_reducer_error():
    from nbkit.audit.checks.ddp_eval import check_ddp_eval

    good = check_ddp_eval(DdpEvalConfig(no_grad=True), steps=4).finding
    assert good.status == "pass" and good.figures["ranks_agree"]
    rows = {r["scenario"]: r for r in good.table}
    assert rows["no_grad"]["allreduce_eval"] == 0 and rows["no_grad"]["error"] is None
    assert rows["backward_find_unused"]["allreduce_eval"] > 0
    assert rows["backward_no_sync"]["allreduce_eval"] == 0
    assert "Expected to have finished reduction" in rows["backward"]["error"]
    bad = check_ddp_eval(DdpEvalConfig(no_grad=False, backward=True), steps=4).finding
    assert bad.status == "fail" and "Expected to have finished reduction" in bad.summary


def test_ddp_timeout_is_reported_not_hung():
    from nbkit.audit.checks.ddp_eval import run_ranks

    res = run_ranks(steps=2, timeout=0.5)
    assert res == {"timeout": 0.5}
