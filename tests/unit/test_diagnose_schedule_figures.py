"""A long run's report: curves thinned for drawing (first, last, lowest and highest point of each step
range; flagged steps and non-finite values kept), the page of a million-step run under 1 MB."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nbkit.diagnose.artefacts import RunArtefacts
from nbkit.diagnose.curves import GRAD_NORM, LEARNING_RATE, LOSS, Series
from nbkit.diagnose.finished import FinishedRun
from nbkit.diagnose.rows import FOUND, RunRow
from nbkit.diagnose.run_figures import DRAW_BUCKETS, curves_figure, thin
from nbkit.diagnose.schedule import Schedule, expected_lr, verdict_schedule


def test_a_short_curve_is_drawn_whole():
    steps = np.arange(1, 4 * DRAW_BUCKETS + 1)
    assert np.array_equal(thin(steps, np.sin(steps)), np.arange(len(steps)))


def test_each_bucket_keeps_its_first_last_lowest_and_highest_point():
    rng = np.random.default_rng(0)
    steps = np.arange(1, 100_001)
    values = rng.standard_normal(len(steps))
    idx = thin(steps, values, buckets=100)
    assert len(idx) <= 4 * 100
    kept = set(idx.tolist())
    for b in range(100):
        lo, hi = b * 1000, (b + 1) * 1000  # the bucket's indices (equal step ranges, every step logged)
        part = values[lo:hi]
        assert {lo, hi - 1, lo + int(np.argmin(part)), lo + int(np.argmax(part))} <= kept


def test_flagged_steps_and_non_finite_values_are_kept():
    steps = np.arange(0, 2_000_000, 2)  # uneven logging does not matter: buckets are step ranges
    values = np.ones(len(steps))
    values[[1234, 777_777]] = np.nan
    values[500_000] = np.inf
    idx = thin(steps, values, keep=(24_680, 3, 1_999_998))  # 3 was never logged: nothing to keep
    drawn = set(steps[idx].tolist())
    assert {2468, 1_555_554, 1_000_000} <= drawn  # the non-finite points
    assert {24_680, 1_999_998} <= drawn and 3 not in drawn
    assert len(idx) <= 4 * DRAW_BUCKETS + 6


def test_the_figure_of_a_long_run_draws_the_spike_and_says_it_is_thinned():
    steps = np.arange(1, 300_001)
    loss = np.full(len(steps), 2.0)
    loss[123_456] = 50.0
    spike = RunRow("loss-spikes", "loss spikes", FOUND, "1 spike", steps=(123_457,))
    fig = curves_figure({LOSS: Series(LOSS, steps, loss, "log")}, [spike])
    train = next(t for t in fig.data if t.name == "train loss")
    assert len(train.x) <= 4 * DRAW_BUCKETS and 123_457 in list(train.x) and max(train.y) == 50.0
    assert "300,000 logged points" in fig.layout.title.text
    marker = next(t for t in fig.data if t.name == "spike")
    assert list(marker.x) == [123_457] and list(marker.y) == [50.0]


def test_the_report_page_of_a_million_step_run_is_under_a_megabyte():
    total = 1_000_000
    steps = np.arange(1, total + 1)
    rng = np.random.default_rng(1)
    lr = expected_lr("cosine", 3e-4, 2000, total, at=steps - 1)
    lr[700_000:] *= 0.5  # an LR the config does not explain, from step 700,001
    curves = {
        LOSS: Series(LOSS, steps, 2.0 + 0.05 * rng.standard_normal(total), "log"),
        GRAD_NORM: Series(GRAD_NORM, steps, np.exp(0.3 * rng.standard_normal(total)), "log"),
        LEARNING_RATE: Series(LEARNING_RATE, steps, lr, "log"),
    }
    where = {"lr_scheduler_type": "cfg lr_scheduler_type", "learning_rate": "cfg learning_rate"}
    schedule = Schedule("cosine", 3e-4, 2000, 0.0, total, 1.0, where, "cfg.json", options={})
    row = verdict_schedule(curves[LEARNING_RATE], schedule, total, "max_steps")
    assert row.status == FOUND and row.steps == (700_001,)
    run = FinishedRun(
        RunArtefacts(Path("run"), curves, [], [], None, schedule, total, "max_steps", []), [row]
    )
    page = run.html_page()
    assert len(page.encode()) < 1_000_000
    fig = run.figures()[0]
    logged = next(t for t in fig.data if t.name == "learning rate (logged)")
    configured = next(t for t in fig.data if t.name == "learning rate (configured)")
    assert 700_001 in list(logged.x) and len(configured.x) <= 4 * DRAW_BUCKETS


def test_every_eval_set_is_drawn_and_each_kind_of_event_has_its_own_marker():
    from nbkit.diagnose.curves import EVAL_LOSS
    from nbkit.diagnose.run_figures import EVENTS

    steps = np.arange(1, 301)
    ev_steps = np.arange(30, 301, 30)
    curves = {
        LOSS: Series(LOSS, steps, np.linspace(2, 1, 300), "s"),
        "eval_loss:news": Series(EVAL_LOSS, ev_steps, np.linspace(2, 1.5, 10), "s", "eval_news_loss", "news"),
        "eval_loss:code": Series(EVAL_LOSS, ev_steps, np.linspace(2, 1.2, 10), "s", "eval_code_loss", "code"),
        GRAD_NORM: Series(GRAD_NORM, steps, np.ones(300), "s"),
        LEARNING_RATE: Series(LEARNING_RATE, steps, np.full(300, 1e-3), "s"),
    }
    rows = [
        RunRow("loss-spikes", "loss spikes", FOUND, "m", steps=(100,)),
        RunRow("grad-explosions", "grad-norm explosions", FOUND, "m", steps=(101,)),
        RunRow("overfitting:news", "overfitting onset (eval set news)", FOUND, "m", steps=(120,)),
        RunRow("lr-schedule", "learning rate as configured", FOUND, "m", steps=(150,)),
        RunRow("non-finite", "non-finite", FOUND, "m", steps=(200,)),
    ]
    fig = curves_figure(curves, rows)
    by_name = {t.name: t for t in fig.data}
    assert {"eval loss (eval set news)", "eval loss (eval set code)"} <= set(by_name)
    onset = by_name["overfitting onset (eval set news)"]
    assert list(onset.x) == [120] and onset.y[0] == curves["eval_loss:news"].values[3]
    marks = [by_name[n] for n in ("spike", "grad-norm explosion", "LR departs from the configured schedule")]
    marks.append(onset)
    assert len({(t.marker.symbol, t.marker.color) for t in marks}) == 4 == len(EVENTS)
    assert "non-finite value logged" in by_name  # the dotted lines' legend entry
