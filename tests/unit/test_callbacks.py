"""nbkit.callbacks in real training runs: a tiny regression model trained on CPU by the HF Trainer and by
Lightning, healthy and diverging (plain SGD at a learning rate too high: the loss overflows to inf, then
NaN), with the finished-run rules applied as the logs arrive."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

from nbkit.callbacks import RULE_BUDGET, Watch
from nbkit.diagnose.curves import EVAL_LOSS, GRAD_NORM, LEARNING_RATE, LOSS
from nbkit.diagnose.rows import CLEAR, FOUND

torch = pytest.importorskip("torch")
nn = torch.nn
warnings.filterwarnings("ignore", category=UserWarning)  # the trainers' own advice on CPU runs


def _data(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = x @ (torch.arange(8.0) / 8) + 0.1 * torch.randn(n, generator=g)
    return x, y


# -- the HF Trainer -------------------------------------------------------------------------------------


class Regression(nn.Module):
    """A linear model the HF Trainer can train: forward(x, labels) returns the loss."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 1)

    def forward(self, x, labels=None):
        out = self.lin(x).squeeze(-1)
        return {"loss": nn.functional.mse_loss(out, labels), "logits": out}


def _rows(x, y):
    return [{"x": x[i], "labels": y[i]} for i in range(len(x))]


def hf_run(tmp_path, callback, *, lr=0.05, steps=40, optimizers=None, evals=True, **kw):
    pytest.importorskip("transformers")
    from transformers import Trainer, TrainingArguments

    torch.manual_seed(0)
    args = TrainingArguments(
        str(tmp_path),
        max_steps=steps,
        per_device_train_batch_size=8,
        learning_rate=lr,
        optim="sgd",
        logging_steps=1,
        eval_strategy="steps" if evals else "no",
        eval_steps=10,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        **{"max_grad_norm": 0.0, "warmup_steps": 5, **kw},
    )
    eval_sets = {"a": _rows(*_data(64, 1)), "b": _rows(*_data(64, 2))} if evals else None
    trainer = Trainer(
        model=Regression(),
        args=args,
        train_dataset=_rows(*_data(256, 0)),
        eval_dataset=eval_sets,
        callbacks=[callback],
        optimizers=optimizers or (None, None),
    )
    trainer.train()
    return trainer


def _hf_callback(**kw):
    from nbkit.callbacks import DiagnoseCallback

    lines: list[str] = []
    return DiagnoseCallback(echo=lines.append, **kw), lines


def test_hf_healthy_run_records_what_the_trainer_logged_and_finds_nothing(tmp_path):
    cb, lines = _hf_callback(live=False)
    trainer = hf_run(
        tmp_path, cb, lr_scheduler_type="cosine_with_restarts", lr_scheduler_kwargs={"num_cycles": 2}
    )
    history = trainer.state.log_history
    logged = [(h["step"], h["loss"]) for h in history if "loss" in h]
    loss = cb.curves[LOSS]
    assert list(zip(loss.steps.tolist(), loss.values.tolist(), strict=True)) == logged
    for name in (
        "a",
        "b",
    ):  # each eval dataset of the Trainer's dict: its own series, keyed as diagnose keys it
        evals = [(h["step"], h[f"eval_{name}_loss"]) for h in history if f"eval_{name}_loss" in h]
        curve = cb.curves[f"eval_loss:{name}"]
        assert len(evals) == 4 and curve.steps.tolist() == [s for s, _ in evals]
        assert (curve.logged, curve.eval_set, curve.convention) == (f"eval_{name}_loss", name, "HF Trainer")
    rows = {r.key: r for r in cb.rows}
    assert rows["lr-schedule"].status == CLEAR, rows["lr-schedule"].measured  # the Trainer's own LR
    assert "num_cycles=2" in rows["lr-schedule"].measured
    assert {"overfitting:a", "overfitting:b", "non-finite"} <= set(rows) and rows[
        "non-finite"
    ].status == CLEAR
    assert cb.findings == [] and cb.stopped_at is None and trainer.state.global_step == 40
    assert lines[0].startswith("nbkit: applying the finished-run rules") and "no GPU" not in lines[0]
    assert lines[-1].startswith("nbkit: training ended at step 40: nothing found") and len(lines) == 2
    # The run's trainer_state.json read by nbkit diagnose: the same rules, rows keyed the same way, the same
    # statuses (the LR row apart: a folder holding only the state names no schedule to compare with).
    run = tmp_path / "finished"
    run.mkdir()
    trainer.state.save_to_json(str(run / "trainer_state.json"))
    from nbkit.diagnose.finished import diagnose_run

    finished = {r.key: r.status for r in diagnose_run(run).rows if r.key != "lr-schedule"}
    assert finished == {k: r.status for k, r in rows.items() if k != "lr-schedule"}


def test_hf_stop_on_nonfinite_stops_at_the_first_nan_step_the_logged_loss_hides(tmp_path):
    cb, lines = _hf_callback(stop_on_nonfinite=True, live=False)
    trainer = hf_run(tmp_path, cb, lr=3.0, steps=60, evals=False)
    stopped = cb.stopped_at
    assert stopped is not None and trainer.state.global_step == stopped < 60
    # The Trainer's logging_nan_inf_filter kept the NaN out of its logged loss: the callback saw it in the
    # model's output at that step.
    assert all(np.isfinite(h["loss"]) for h in trainer.state.log_history if "loss" in h)
    row = next(r for r in cb.rows if r.key == "non-finite")
    assert row.status == FOUND and row.figures["first_step"] == stopped
    stop_line = next(line for line in lines if "training stopped (stop_on_nonfinite)" in line)
    assert stop_line.startswith(f"nbkit: step {stopped} · FOUND non-finite")
    assert all(len(line) <= 300 for line in lines)


def test_hf_without_stop_trains_on_and_reports_the_nan(tmp_path):
    cb, lines = _hf_callback(live=False)
    trainer = hf_run(tmp_path, cb, lr=3.0, steps=40, evals=False)
    assert trainer.state.global_step == 40 and cb.stopped_at is None
    row = next(r for r in cb.rows if r.key == "non-finite")
    assert row.status == FOUND and row.measured.startswith("non-finite train loss (loss) at "), row.measured
    assert "fp16" not in row.fix  # the callback read the run's precision: fp32, no loss scaler to blame
    assert sum("FOUND non-finite" in line for line in lines) == 1  # one line per finding, not per NaN step


@pytest.mark.parametrize(
    "kind, kwargs",
    [
        ("linear", {}),
        ("polynomial", {"power": 2.0, "lr_end": 1e-4}),
        ("inverse_sqrt", {}),
        ("warmup_stable_decay", {"num_decay_steps": 10}),
    ],
)
def test_hf_logged_lr_follows_the_configured_schedule(tmp_path, kind, kwargs):
    cb, _ = _hf_callback(live=False)
    hf_run(tmp_path, cb, steps=30, evals=False, lr_scheduler_type=kind, lr_scheduler_kwargs=kwargs)
    row = next(r for r in cb.rows if r.key == "lr-schedule")
    assert row.status == CLEAR, row.measured


def test_hf_an_optimizer_override_that_changes_the_lr_is_found(tmp_path):
    """The Trainer's arguments say linear with 5 warmup steps; the scheduler handed to it is cosine."""
    from transformers import get_scheduler

    cb, lines = _hf_callback(live=False)
    torch.manual_seed(0)
    model = Regression()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    sched = get_scheduler("cosine", opt, num_warmup_steps=5, num_training_steps=40)
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(
        str(tmp_path), max_steps=40, per_device_train_batch_size=8, learning_rate=0.05, warmup_steps=5,
        logging_steps=1, report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
    )  # fmt: skip
    Trainer(
        model=model, args=args, train_dataset=_rows(*_data(256, 0)), callbacks=[cb], optimizers=(opt, sched)
    ).train()
    row = next(r for r in cb.rows if r.key == "lr-schedule")
    assert row.status == FOUND and "cosine with 5 warmup steps" in row.measured
    assert any("FOUND learning rate differs from the configured schedule: " in line for line in lines)


def test_hf_live_panel_draws_the_logged_curves_and_says_no_gpu(tmp_path):
    from nbkit.live import LiveFigure

    cb, lines = _hf_callback(live=True)
    hf_run(tmp_path, cb, steps=20)
    panel = cb.watch.panel
    assert panel is not None and panel.memory is None and "CUDA memory: no GPU" in lines[0]
    assert "no GPU" in panel.loss.figure.layout.title.text
    xs, ys = panel.loss.trace_data("train loss")
    assert xs == cb.curves[LOSS].steps.tolist() and ys == cb.curves[LOSS].values.tolist()
    assert {"eval loss (a)", "eval loss (b)"} <= set(panel.loss.trace_names)
    configured = panel.lr.trace_data("configured")
    logged = panel.lr.trace_data("logged")
    assert configured[0][0] == 1 and len(configured[0]) == 21  # the schedule at steps 0…20, logged one later
    assert logged[0] == list(range(1, 21))
    np.testing.assert_allclose(logged[1], [configured[1][x - 1] for x in logged[0]], rtol=1e-12)
    assert panel.grad.trace_data("grad norm")[0] == cb.curves[GRAD_NORM].steps.tolist()
    assert all(f.figure.data for f in panel.figures)  # flushed: every figure holds its traces

    given = LiveFigure("mine", widget=False, min_interval_s=0)
    cb2, _ = _hf_callback(figure=given)
    hf_run(tmp_path / "2", cb2, steps=10, evals=False)
    assert cb2.watch.panel.lr is None and given.trace_names == ["train loss"]


# -- Lightning --------------------------------------------------------------------------------------------


def _lightning_module(lr: float):
    pl = pytest.importorskip("lightning.pytorch")

    class Regression(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 1)

        def training_step(self, batch, i):
            x, y = batch
            loss = nn.functional.mse_loss(self.lin(x).squeeze(-1), y)
            self.log("train/loss_step", loss)
            return loss

        def validation_step(self, batch, i, dataloader_idx=0):
            x, y = batch
            self.log("val_loss", nn.functional.mse_loss(self.lin(x).squeeze(-1), y))

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=lr)
            sched = torch.optim.lr_scheduler.LinearLR(opt, 1.0, 0.1, 60)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    return Regression()


def lightning_run(callback, *, lr=0.05, steps=60, loaders=1, **kw):
    pl = pytest.importorskip("lightning.pytorch")
    from torch.utils.data import DataLoader, TensorDataset

    pl.seed_everything(0, verbose=False)
    trainer = pl.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        val_check_interval=10,
        log_every_n_steps=5,
        callbacks=[callback],
        **kw,
    )
    val = [DataLoader(TensorDataset(*_data(64, 1 + i)), batch_size=16) for i in range(loaders)]
    trainer.fit(_lightning_module(lr), DataLoader(TensorDataset(*_data(480, 0)), batch_size=8), val)
    return trainer


def _lightning_callback(**kw):
    pytest.importorskip("lightning.pytorch")
    from nbkit.callbacks import LightningDiagnoseCallback

    lines: list[str] = []
    return LightningDiagnoseCallback(echo=lines.append, live=False, **kw), lines


def test_lightning_healthy_run_records_each_step_and_the_val_loss(tmp_path):
    cb, lines = _lightning_callback()
    trainer = lightning_run(cb, gradient_clip_val=100.0)
    assert trainer.global_step == 60 and cb.stopped_at is None
    assert cb.curves[LOSS].steps.tolist() == list(range(1, 61))
    assert cb.curves[EVAL_LOSS].steps.tolist() == [10, 20, 30, 40, 50, 60]
    assert cb.curves[GRAD_NORM].steps.tolist() == list(range(5, 61, 5))  # log_every_n_steps
    lr = cb.curves[LEARNING_RATE]  # the LR each step used: LinearLR from 1.0× to 0.1× over 60 steps
    np.testing.assert_allclose(lr.values, 0.05 * (1.0 - 0.9 * (lr.steps - 1) / 60), rtol=1e-9)
    rows = {r.key: r for r in cb.rows}
    assert "lr-schedule" not in rows  # a Lightning run names no schedule to check against
    assert rows["clipping"].status == CLEAR and "Trainer(gradient_clip_val)" in rows["clipping"].measured
    assert rows["non-finite"].status == CLEAR and cb.findings == []
    assert lines[-1].startswith("nbkit: training ended at step 60: nothing found")


def test_lightning_stop_on_nonfinite(tmp_path):
    cb, lines = _lightning_callback(stop_on_nonfinite=True)
    trainer = lightning_run(cb, lr=3.0)
    stopped = cb.stopped_at
    assert stopped is not None and trainer.global_step == stopped < 60
    assert not np.isfinite(cb.curves[LOSS].values[-1]) and cb.curves[LOSS].steps[-1] == stopped
    assert any(line.startswith(f"nbkit: step {stopped} · FOUND non-finite") for line in lines)


def test_lightning_several_val_loaders_and_gradient_accumulation(tmp_path):
    cb, _ = _lightning_callback()
    lightning_run(cb, steps=20, loaders=2, accumulate_grad_batches=2)
    curves = cb.curves
    assert curves[LOSS].steps.tolist() == list(range(1, 21))  # one point per optimizer step
    assert {"eval_loss:dataloader_idx_0", "eval_loss:dataloader_idx_1"} <= set(curves)
    assert curves["eval_loss:dataloader_idx_1"].logged == "val_loss/dataloader_idx_1"
    assert {"overfitting:dataloader_idx_0", "overfitting:dataloader_idx_1"} <= {r.key for r in cb.rows}


# -- the watch itself ------------------------------------------------------------------------------------


def _watch(**kw):
    lines: list[str] = []
    w = Watch(stop_on_nonfinite=False, live=False, figure=None, echo=lines.append, source="test")
    w.begin(schedule=None, total=None, total_where="", max_grad_norm=None, clip_where="", memory_device=None)
    return w, lines


def test_one_line_per_new_finding_events_counted():
    w, lines = _watch()
    rng = np.random.default_rng(0)
    for step in range(1, 201):
        w.add(LOSS, step, 1.0 + 0.01 * rng.standard_normal() + (5.0 if step in (80, 150) else 0.0))
        if step in (100, 120, 200):
            w.maybe_judge(force=True)
    spikes = [line for line in lines if "FOUND loss spikes" in line]
    assert len(spikes) == 2  # the spike at 80 once (judged three times), the one at 150 when it came
    assert spikes[0].startswith("nbkit: step 100 · FOUND loss spikes: 1 spike: step 80: ")
    assert spikes[1].startswith("nbkit: step 200 · FOUND loss spikes: 2 spikes: step 80: ")
    assert "step 150: " in spikes[1]


def test_the_rules_wait_while_their_time_exceeds_the_budget():
    w, _ = _watch()
    for step in range(1, 30):
        w.add(LOSS, step, 1.0)
    w.rule_seconds = 1e9  # far over RULE_BUDGET of any elapsed time
    w.maybe_judge()
    assert w.judged == 0
    w.maybe_judge(force=True)
    assert w.judged == 1 and 0 < RULE_BUDGET < 0.02
    w.add("eval_a_loss", 30, float("nan"))  # a non-finite loss is judged at once
    assert w.judged == 2 and any(r.status == FOUND for r in w.rows if r.key.startswith("non-finite"))


def test_importing_the_callbacks_imports_neither_trainer_library():
    code = (
        "import sys, nbkit.callbacks; "
        "assert not {'transformers', 'lightning', 'torch'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- notebook 04's section ---------------------------------------------------------------------------------


def test_notebook_04s_watched_run_trains_and_reports_what_the_callback_judged():
    import json

    from nbkit.audit import context, experiments
    from nbkit.record import to_jsonable

    ctx = context.AuditContext("cpu", smoke=True, model="tiny", progress=False, threads=1)
    result = experiments.run("watched-run", ctx)
    m = result.metrics
    assert m.steps_run == m.max_steps == 40 and m.stopped_at is None
    statuses = {r.key: r.status for r in m.rows}
    assert statuses["lr-schedule"] == CLEAR and statuses["non-finite"] == CLEAR
    assert set(m.findings) == {k for k, s in statuses.items() if s == FOUND}
    assert {"train loss", "eval loss", "learning rate (configured)"} <= {t.name for t in result.figure.data}
    assert m.seconds_per_step > 0 and m.rule_seconds > 0
    json.dumps(to_jsonable(m), allow_nan=False)  # what the notebook records
    assert "learning rate follows the configured schedule" in result.data.table_html()
