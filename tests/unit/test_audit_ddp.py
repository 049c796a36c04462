"""The ddp-eval check: two real gloo ranks (subprocesses with a timeout)."""

from __future__ import annotations

import pytest

from nbkit.audit.checks.ddp_eval import DdpEvalConfig


@pytest.mark.slow
def test_ddp_eval_scenarios_measure_pollution_against_the_no_grad_control():
    """The common loop (backward, step, zero_grad) on two gloo ranks: an eval backward all-reduces and its
    gradients reach the next step, so the weights leave the no_grad control's; under no_sync it does not
    all-reduce and still pollutes (the replicas stay equal); a forward with gradients enabled changes
    nothing. The unused value head's reducer error is its own finding. One seed gives one measurement."""
    from nbkit.audit.checks.ddp_eval import check_ddp_eval, run_ranks

    res = run_ranks(steps=4, eval_interval=2, seed=0)
    good = check_ddp_eval(DdpEvalConfig(no_grad=True), steps=4, results=res)
    assert good.finding.status == "pass" and good.finding.figures["ranks_agree"]
    m = good.metrics
    control, forward = m.of("no_grad"), m.of("grad_no_backward")
    assert control.extra_allreduces == 0 and control.max_abs_dw == 0 and not control.error
    assert forward.extra_allreduces == 0 and forward.max_abs_dw == 0
    backward, no_sync = m.of("backward"), m.of("backward_no_sync")
    assert backward.extra_allreduces == 2 and not backward.error  # one eval every 2 of 4 steps
    assert no_sync.extra_allreduces == 0 and not no_sync.error
    for polluted in (backward, no_sync):
        assert polluted.max_abs_dw > 1e-6 and polluted.replicas_max_abs_diff == 0, polluted
    assert 0 < m.control_update and m.learning_rate > 0
    head = m.unused_head
    assert "Expected to have finished reduction" in head.error
    assert head.error_with_find_unused == "" and head.error_every_parameter_used == ""
    assert m.of("value_head_find_unused").max_abs_dw > 1e-6
    bad = check_ddp_eval(DdpEvalConfig(no_grad=False, backward=True), steps=4, results=res).finding
    assert bad.status == "fail" and "Expected to have finished reduction" in bad.summary
    bare = check_ddp_eval(DdpEvalConfig(no_grad=False, backward=True, value_head=False), steps=4, results=res)
    assert bare.finding.status == "fail" and "weights differ" in bare.finding.summary
    again = run_ranks(steps=4, eval_interval=2, seed=0)
    assert again["ranks"] == res["ranks"]


def test_ddp_timeout_is_reported_not_hung():
    from nbkit.audit.checks.ddp_eval import run_ranks

    res = run_ranks(steps=2, timeout=0.5)
    assert res == {"timeout": 0.5}
