"""Finished runs trained here with the real Hugging Face Trainer on CPU (a tiny MLP, well under a second of
training each): the run's own trainer_state.json, checkpoint-*/ and TensorBoard events are read, faults
planted through training are each found, and the same run without the fault is clean."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from script_module import load_script

from nbkit.diagnose.artefacts import read_run
from nbkit.diagnose.finished import diagnose_run
from nbkit.diagnose.rows import CLEAR, FOUND

pytest.importorskip("transformers")
pytest.importorskip("tensorboard")

ROOT = Path(__file__).resolve().parents[2]


def _script():
    return load_script(ROOT / "scripts" / "make_finished_run_example.py", "make_finished_run_example")


OVERFIT = dict(
    steps=120, train_size=32, label_noise=0.5, hidden=128, lr=1e-2, batch=8, eval_every=8, eval_size=128
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    mk = _script()
    root = tmp_path_factory.mktemp("hf-runs")
    return {
        "clean": mk.train_tiny(root / "clean", save_steps=30),
        "spike": mk.train_tiny(root / "spike", lr_jump_at=30, lr_jump=30.0),
        "overfit": mk.train_tiny(root / "overfit", **OVERFIT),
    }


def _by(run):
    return {r.key: r for r in run.rows}


def test_the_clean_run_is_clean(runs):
    run = diagnose_run(runs["clean"])
    rows = _by(run)
    assert run.exit_code == 0 and not run.findings
    for key in (
        "loss-spikes",
        "non-finite",
        "grad-explosions",
        "clipping",
        "overfitting",
        "lr-schedule",
        "plateau",
    ):
        assert rows[key].status == CLEAR, (key, rows[key].measured)
    assert "TrainingArguments the Trainer recorded" in run.artefacts.schedule.source


def test_an_lr_jump_mid_run_is_a_spike_and_a_departure_from_the_schedule(runs):
    run = diagnose_run(runs["spike"])
    rows = _by(run)
    spikes = rows["loss-spikes"]
    assert spikes.status == FOUND and 31 <= spikes.steps[0] <= 45, spikes.measured
    lr = rows["lr-schedule"]
    assert lr.status == FOUND and lr.steps[0] in (31, 32), (
        lr.measured
    )  # the jump lands at the next logged step
    assert run.exit_code == 1
    assert rows["overfitting"].status != FOUND  # the eval loss rises, but so does the training loss


def test_a_tiny_noisy_dataset_for_many_epochs_overfits(runs):
    rows = _by(diagnose_run(runs["overfit"]))
    row = rows["overfitting"]
    assert row.status == FOUND and row.steps[0] <= 40, row.measured
    f = row.figures
    steps_up = f["flat_chance"] <= 0.03 and f["later_median_log_ratio_over_level"] > math.log1p(0.05)
    assert steps_up or f["log_rise"][1] > math.log1p(0.02)
    assert rows["loss-spikes"].status == CLEAR and rows["lr-schedule"].status == CLEAR


def test_a_schedule_other_than_the_config_is_found_and_the_stated_one_is_clear(runs, tmp_path):
    cosine = tmp_path / "axolotl.yaml"
    cosine.write_text(
        "base_model: tiny\nlearning_rate: 0.01\nlr_scheduler: cosine\nwarmup_steps: 6\nmax_grad_norm: 1.0\n"
    )
    row = _by(diagnose_run(runs["clean"], cosine))["lr-schedule"]
    assert row.status == FOUND and "it follows linear with 6 warmup steps and peak 0.01" in row.measured
    assert "axolotl.yaml:3 lr_scheduler" in json.dumps(row.figures["where"])
    linear = tmp_path / "training_args.json"
    linear.write_text(
        json.dumps(
            {
                "output_dir": "x",
                "learning_rate": 0.01,
                "lr_scheduler_type": "linear",
                "warmup_steps": 6,
                "max_grad_norm": 1.0,
            }
        )
    )
    assert _by(diagnose_run(runs["clean"], linear))["lr-schedule"].status == CLEAR
    # The same config kept beside the run is found without --config.
    beside = tmp_path / "run"
    shutil.copytree(runs["clean"], beside)
    shutil.copy2(cosine, beside / "axolotl.yaml")
    run = diagnose_run(beside)
    assert run.artefacts.schedule.source == "axolotl.yaml" and _by(run)["lr-schedule"].status == FOUND


def test_trainer_state_from_the_top_level_or_the_latest_checkpoint_and_tensorboard_alone(runs, tmp_path):
    a = read_run(runs["clean"])
    assert any(line.startswith("checkpoint-60/trainer_state.json") for line in a.read)
    assert not any("checkpoint-30" in line for line in a.read)
    no_top = tmp_path / "no_top"
    shutil.copytree(runs["clean"], no_top)
    (no_top / "trainer_state.json").unlink()
    b = read_run(no_top)
    assert b.curves["loss"].source == "checkpoint-60/trainer_state.json: loss"
    tb_only = tmp_path / "tb_only"
    shutil.copytree(
        runs["clean"], tb_only, ignore=shutil.ignore_patterns("checkpoint-*", "trainer_state.json")
    )
    c = read_run(tb_only)
    assert c.curves["loss"].source.endswith("train/loss") and c.state is None
    for name in ("loss", "eval_loss", "grad_norm", "learning_rate"):
        np.testing.assert_array_equal(c.curves[name].steps, a.curves[name].steps)
        np.testing.assert_allclose(
            c.curves[name].values, a.curves[name].values, rtol=1e-6
        )  # float32 in events
    statuses = {r.key: r.status for r in diagnose_run(tb_only).rows}
    assert statuses == {r.key: r.status for r in diagnose_run(runs["clean"]).rows}


def test_the_picture_puts_units_on_their_own_axes_and_marks_the_flagged_steps(runs):
    run = diagnose_run(runs["spike"])
    (fig,) = run.figures()
    names = [t.name for t in fig.data]
    assert {
        "train loss",
        "eval loss",
        "grad norm",
        "learning rate (logged)",
        "learning rate (configured)",
    } <= set(names)
    spike = next(t for t in fig.data if t.name == "spike")
    loss = next(t for t in fig.data if t.name == "train loss")
    assert spike.yaxis == loss.yaxis and int(spike.x[0]) == _by(run)["loss-spikes"].steps[0]
    grad = next(t for t in fig.data if t.name == "grad norm")
    lr = next(t for t in fig.data if t.name == "learning rate (logged)")
    assert len({loss.yaxis, grad.yaxis, lr.yaxis}) == 3 and len({loss.xaxis, grad.xaxis, lr.xaxis}) == 3
    assert fig.layout.yaxis2.type == "log"
