"""The learning-rate check's schedule formulas against transformers' own schedulers, and the check on long
logs: every modelled schedule equal to the real ``LambdaLR`` stepped on short schedules and to its factor
function at sampled steps of million-step ones; the verdict on long logs; kwargs transformers refuses."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from nbkit.diagnose.curves import Series
from nbkit.diagnose.rows import CLEAR, FOUND, NOT_CHECKED
from nbkit.diagnose.schedule import (
    DRAWN_POINTS,
    MODELLED,
    Schedule,
    ScheduleOptionError,
    configured_curve,
    expected_curve,
    expected_lr,
    resolve_options,
    verdict_schedule,
)

pytest.importorskip("transformers")

PEAK = 3e-4
# Each modelled schedule with lr_scheduler_kwargs other than its defaults (where it takes any), so a formula
# that ignored a kwarg would differ.
KWARGS = {
    "linear": {},
    "cosine": {"num_cycles": 0.7},
    "cosine_with_restarts": {"num_cycles": 3},
    "polynomial": {"power": 2.0, "lr_end": 1e-5},
    "constant": {},
    "constant_with_warmup": {},
    "inverse_sqrt": {"timescale": 50},
    "cosine_with_min_lr": {"min_lr": 1e-5},
    "cosine_warmup_with_min_lr": {"min_lr_rate": 0.1, "warmup_lr_rate": 0.2},
    "warmup_stable_decay": {"num_decay_steps": 100, "decay_type": "1-sqrt", "warmup_type": "cosine"},
}


def _real(kind: str, warmup: int, total: int, kwargs: dict):
    """(optimizer, transformers' scheduler) as the HF Trainer builds them."""
    import torch
    from transformers import get_scheduler

    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=PEAK)
    return opt, get_scheduler(
        kind, opt, num_warmup_steps=warmup, num_training_steps=total, scheduler_specific_kwargs=kwargs
    )


def test_every_modelled_schedule_is_tested():
    assert set(KWARGS) == set(MODELLED)


@pytest.mark.parametrize("warmup", [0, 1, 37])
@pytest.mark.parametrize("kind", MODELLED)
def test_formula_equals_the_stepped_transformers_scheduler(kind, warmup):
    total = 400
    opt, sched = _real(kind, warmup, total, KWARGS[kind])
    stepped = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "lr_scheduler.step() before optimizer.step()": nothing trains here
        for _ in range(total + 1):
            stepped.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
    ours = expected_lr(kind, PEAK, warmup, total, options=KWARGS[kind])
    np.testing.assert_allclose(ours, stepped, rtol=1e-12, atol=1e-18)


@pytest.mark.parametrize("kind", MODELLED)
def test_formula_equals_transformers_factor_at_sampled_steps_of_a_long_schedule(kind):
    """A 2,000,000-step schedule: the real factor function at 3,000 steps (random, and every corner)."""
    total, warmup = 2_000_000, 4000
    kwargs = dict(KWARGS[kind])
    if kind == "warmup_stable_decay":
        kwargs["num_decay_steps"] = 300_000
    _, sched = _real(kind, warmup, total, kwargs)
    factor = sched.lr_lambdas[0]
    rng = np.random.default_rng(0)
    corners = [0, 1, warmup - 1, warmup, warmup + 1, total - 300_000 - 1, total - 300_000, total - 1, total]
    steps = np.unique(np.concatenate([rng.integers(0, total + 1, 3000), corners]))
    real = np.array([PEAK * factor(int(s)) for s in steps])
    ours = expected_lr(kind, PEAK, warmup, total, at=steps, options=kwargs)
    np.testing.assert_allclose(ours, real, rtol=1e-12, atol=1e-18)


def _schedule(kind="cosine", warmup=2000.0, options=None, total=0):
    where = {"lr_scheduler_type": "cfg.json lr_scheduler_type", "learning_rate": "cfg.json learning_rate"}
    return Schedule(kind, PEAK, warmup, 0.0, total, 1.0, where, "cfg.json", options=options)


def _logged(kind, warmup, total, options, steps, offset=1):
    """A log as the HF Trainer writes it under transformers 5: step k carries the schedule at k − 1."""
    return Series(
        "learning_rate",
        steps,
        expected_lr(kind, PEAK, warmup, total, at=steps - offset, options=options),
        "log",
    )


def test_a_million_step_log_that_follows_its_schedule_is_clear():
    total = 1_000_000
    steps = np.arange(10, total + 1, 10)
    lr = _logged("cosine_with_restarts", 2000, total, {"num_cycles": 4}, steps)
    row = verdict_schedule(
        lr, _schedule("cosine_with_restarts", options={"num_cycles": 4}), total, "max_steps"
    )
    assert row.status == CLEAR, row.measured
    assert row.figures["offset"] == 1 and "num_cycles=4" in row.measured


def test_a_million_step_log_restarted_without_its_scheduler_state_is_found_where_it_restarts():
    total, restart = 1_000_000, 612_340
    steps = np.arange(10, total + 1, 10)
    lr = _logged("cosine", 2000, total, None, steps)
    restarted = expected_lr("cosine", PEAK, 2000, total, at=steps - restart - 1)
    lr = Series("learning_rate", steps, np.where(steps > restart, restarted, lr.values), "log")
    row = verdict_schedule(lr, _schedule(options={}), total, "max_steps")
    assert row.status == FOUND
    assert row.steps == (612_350,)  # the first logged step after the restart
    assert "lr_scheduler_kwargs not read" not in row.measured


def test_a_log_of_another_schedule_names_it():
    total = 200_000
    steps = np.arange(1, total + 1)
    lr = _logged("linear", 500, total, None, steps)
    row = verdict_schedule(lr, _schedule("cosine", warmup=500.0, options={}), total, "max_steps")
    assert row.status == FOUND and "linear with 500 warmup steps" in row.measured


def test_kwargs_change_the_verdict_and_unread_kwargs_are_said():
    total = 5000
    steps = np.arange(1, total + 1)
    lr = _logged("polynomial", 100, total, {"power": 2.0}, steps)
    assert verdict_schedule(lr, _schedule("polynomial", 100.0, {"power": 2.0}), total, "m").status == CLEAR
    row = verdict_schedule(lr, _schedule("polynomial", 100.0, None), total, "m")
    assert row.status == FOUND and "lr_scheduler_kwargs not read: transformers' defaults" in row.measured


@pytest.mark.parametrize(
    "kind, options, message",
    [
        ("reduce_lr_on_plateau", {}, "follows the eval metric"),
        ("cosine", {"num_cycle": 2}, "lr_scheduler_kwargs num_cycle: not an argument"),
        ("warmup_stable_decay", {}, "needs lr_scheduler_kwargs num_decay_steps"),
        ("cosine_with_min_lr", {}, "needs lr_scheduler_kwargs min_lr or min_lr_rate"),
        ("cosine_with_min_lr", {"min_lr": 1e-6, "min_lr_rate": 0.1}, "both min_lr and min_lr_rate"),
        ("polynomial", {"lr_end": 1.0}, "lr_end 1 is not below the peak"),
        ("warmup_stable_decay", {"num_decay_steps": 5, "decay_type": "exp"}, "decay_type 'exp' is not one"),
    ],
)
def test_schedules_transformers_would_refuse_are_not_checked(kind, options, message):
    lr = _logged("linear", 10, 100, None, np.arange(1, 101))
    row = verdict_schedule(lr, _schedule(kind, 10.0, options), 100, "m")
    assert row.status == NOT_CHECKED and message.replace("follows", "") in row.measured.replace(
        "lowers the LR when", ""
    )


def test_refused_kwargs_raise_as_transformers_does():
    """resolve_options refuses what transformers' functions refuse (checked against them)."""
    import torch
    from transformers import get_scheduler

    for kind, options in (
        ("cosine", {"num_cycle": 2}),
        ("warmup_stable_decay", {}),
        ("cosine_with_min_lr", {}),
    ):
        with pytest.raises(ScheduleOptionError):
            resolve_options(kind, options, PEAK)
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=PEAK)
        with pytest.raises((TypeError, ValueError)):
            get_scheduler(
                kind, opt, num_warmup_steps=1, num_training_steps=10, scheduler_specific_kwargs=options
            )


def test_the_drawn_configured_curve_is_short_and_exact():
    total = 1_000_000
    schedule = _schedule("warmup_stable_decay", 2000.0, {"num_decay_steps": 100_000})
    steps, values = configured_curve(schedule, total, offset=1)
    assert len(steps) <= DRAWN_POINTS + 6
    assert {2001, 900_001} <= set(steps.tolist())  # warmup's end and the stable phase's end, as logged
    np.testing.assert_array_equal(
        values, expected_lr("warmup_stable_decay", PEAK, 2000, total, at=steps - 1, options=schedule.options)
    )
    lr = _logged("warmup_stable_decay", 2000, total, schedule.options, np.arange(100, total + 1, 100))
    row = verdict_schedule(lr, schedule, total, "m")
    drawn = expected_curve(row)
    assert drawn is not None and np.array_equal(drawn[0], steps) and np.array_equal(drawn[1], values)
    assert expected_curve(verdict_schedule(lr, None, total, "m")) is None
    assert configured_curve(_schedule("reduce_lr_on_plateau"), total) is None
