"""The runs people really have, each written by the library itself: an HF Trainer run with a dict of two
eval datasets, a Lightning Trainer with its CSVLogger, custom metric names and an injected NaN, an MLflow
run written by MLflow's client, and a W&B-style JSONL history export. Each fault is found at its step and
its clean twin is clean; what a file holds besides the series (a script's entries without a step, a data
set beside the run, a Git LFS pointer) never refuses it."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from script_module import load_script

from nbkit.diagnose.artefacts import read_run
from nbkit.diagnose.cli import main
from nbkit.diagnose.finished import diagnose_run
from nbkit.diagnose.names import EVAL_LOSS, GRAD_NORM, LEARNING_RATE, LOSS, Named, classify
from nbkit.diagnose.rows import CLEAR, FOUND, UNDECIDED

ROOT = Path(__file__).resolve().parents[2]


def _by(run):
    return {r.key: r for r in run.rows}


# -- the pattern list ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,named",
    [
        ("loss", Named(LOSS)),
        ("train_loss_batch", Named(LOSS, "", "step")),
        ("train/loss_step", Named(LOSS, "", "step")),
        ("Loss/train", Named(LOSS)),
        ("train_loss_epoch", Named(LOSS, "", "epoch")),
        ("val_loss_epoch", Named(EVAL_LOSS, "", "epoch")),
        ("loss/val", Named(EVAL_LOSS)),
        ("validation/epoch_loss", Named(EVAL_LOSS, "", "epoch")),
        ("eval_loss", Named(EVAL_LOSS)),
        ("eval_squad_v2_loss", Named(EVAL_LOSS, "squad_v2")),
        ("eval/squad_v2_loss", Named(EVAL_LOSS, "squad_v2")),
        ("val_loss/dataloader_idx_1", Named(EVAL_LOSS, "dataloader_idx_1")),
        ("learning_rate", Named(LEARNING_RATE)),
        ("train/lr", Named(LEARNING_RATE)),
        ("lr-AdamW", Named(LEARNING_RATE)),
        ("lr-AdamW/pg1", Named(LEARNING_RATE)),
        ("grad_norm", Named(GRAD_NORM)),
        ("train/grad_norm", Named(GRAD_NORM)),
        ("grad_2.0_norm_total", Named(GRAD_NORM)),
        # not series: components, the test split, per-parameter norms, other groups, other metrics
        ("train_loss_auto_0", None),
        ("val_loss_auto_3", None),
        ("train/nll_loss", Named(LOSS, "", "", "nll")),
        ("val/rmse_loss", Named(EVAL_LOSS, "", "", "rmse")),
        ("Training loss", Named(LOSS)),
        ("test_loss", Named(EVAL_LOSS, "test", "", "", True)),  # read only when logged along the run
        ("Test loss (avg on test)", Named(EVAL_LOSS, "test", "", "", True)),
        ("predict_loss", None),
        ("grad_2.0_norm/layer.weight", None),
        ("lr-AdamW/pg2", None),
        ("eval_runtime", None),
        ("train_accuracy", None),
    ],
)
def test_names_are_read_by_their_words(name, named):
    assert classify(name) == named


def test_a_plain_name_is_preferred_to_a_typed_one_and_a_test_loss_logged_once_is_not_a_curve(tmp_path):
    rows = [
        {"step": s, "train/loss": 1 / s, "train/mse_loss": 0.5 / s, "test_loss": 0.9} for s in range(1, 40)
    ]
    rows += [{"step": 40, "test_loss": 0.8}]
    path = tmp_path / "history.jsonl"
    once = [{k: v for k, v in r.items() if k != "test_loss" or r["step"] > 37} for r in rows]
    path.write_text("".join(json.dumps(r) + "\n" for r in once))
    a = read_run(tmp_path)
    assert a.curves[LOSS].logged == "train/loss" and EVAL_LOSS not in a.curves
    assert any("test_loss logged at fewer than 4 steps" in n for n in a.notes), a.notes
    assert [o.logged for o in a.others] == ["test_loss"]  # still checked for NaN
    # logged along the run, the test loss is an eval curve (the eval set "test")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    curves = read_run(tmp_path).curves
    assert curves["eval_loss:test"].logged == "test_loss" and len(curves["eval_loss:test"]) == 40


# -- an HF Trainer run with a dict of two eval datasets -----------------------------------------------------


def _script():
    return load_script(ROOT / "scripts" / "make_finished_run_example.py", "make_finished_run_example")


OVERFIT = dict(
    steps=120, train_size=32, label_noise=0.5, hidden=128, lr=1e-2, batch=8, eval_every=8, eval_size=32
)


@pytest.fixture(scope="module")
def hf_runs(tmp_path_factory):
    pytest.importorskip("transformers")
    mk = _script()
    root = tmp_path_factory.mktemp("hf-two-evals")
    return {
        "overfit": mk.train_tiny(root / "overfit", seen_eval=True, **OVERFIT),
        "clean": mk.train_tiny(root / "clean", seen_eval=True),
    }


def test_each_eval_set_of_the_hf_trainer_is_judged_and_named(hf_runs):
    run = diagnose_run(hf_runs["overfit"])
    rows = _by(run)
    assert {"eval_loss:heldout", "eval_loss:seen"} <= set(run.artefacts.curves)
    assert run.artefacts.curves["eval_loss:heldout"].logged == "eval_heldout_loss"
    held, seen = rows["overfitting:heldout"], rows["overfitting:seen"]
    assert held.status == FOUND and held.steps[0] <= 40, held.measured
    assert held.label == "overfitting (eval set heldout)"
    assert seen.status != FOUND, seen.measured  # the memorised training examples' loss keeps falling
    assert "eval_heldout_loss" in held.fix  # the Trainer's own metric_for_best_model for that set
    text = run.text(width=120)
    assert "eval loss (eval set heldout) ← trainer_state.json: eval_heldout_loss" in text


def test_the_clean_twin_with_two_eval_sets_is_clean(hf_runs):
    run = diagnose_run(hf_runs["clean"])
    rows = _by(run)
    assert run.exit_code == 0, [(r.key, r.measured) for r in run.findings]
    assert rows["overfitting:heldout"].status == CLEAR and rows["overfitting:seen"].status == CLEAR
    assert rows["progress"].status == CLEAR


def test_entries_without_a_step_are_skipped_and_counted_never_a_refusal(hf_runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(hf_runs["clean"], run)
    state = json.loads((run / "trainer_state.json").read_text())
    # What a script appends after training: predict_* metrics with no step.
    state["log_history"].append(
        {"predict_loss": 0.41, "predict_runtime": 0.2, "predict_samples_per_second": 9}
    )
    (run / "trainer_state.json").write_text(json.dumps(state))
    a = read_run(run)
    assert any("1 holding none of the series skipped" in line for line in a.read), a.read
    assert diagnose_run(run).exit_code == 0


def test_a_nan_written_by_the_trainer_is_kept_at_its_step(hf_runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(hf_runs["clean"], run, ignore=shutil.ignore_patterns("runs"))
    state = json.loads((run / "trainer_state.json").read_text())
    entry = next(e for e in state["log_history"] if e.get("step") == 30 and "grad_norm" in e)
    entry["grad_norm"] = float("nan")
    (run / "trainer_state.json").write_text(json.dumps(state))  # json writes NaN, as the Trainer does
    row = _by(diagnose_run(run))["non-finite"]
    assert row.status == FOUND and row.figures["first_step"] == 30, row.measured
    assert "logging_nan_inf_filter" in row.measured  # an HF Trainer run: its loss filter is said


# -- a Lightning Trainer with its CSVLogger ----------------------------------------------------------------


def _lightning_run(out: Path, nan_at: int | None = None, steps: int = 120) -> Path:
    """A real Lightning fit logging under the names users choose (train_loss_batch, loss/val, the grad
    norm via lightning's grad_norm, the LR via LearningRateMonitor), with a batch of NaN inputs at the
    global step ``nan_at``: its NaN gradients make the weights NaN, and the run ends in NaN."""
    lightning = pytest.importorskip("lightning")
    import torch
    from lightning.pytorch.callbacks import LearningRateMonitor
    from lightning.pytorch.loggers import CSVLogger
    from lightning.pytorch.utilities import grad_norm

    torch.manual_seed(0)
    w = torch.randn(8, 1)
    x = torch.randn(steps * 16, 8)
    data = torch.utils.data.TensorDataset(x, x @ w)
    val = torch.utils.data.TensorDataset(x[:64], x[:64] @ w)

    class Regression(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(8, 1)

        def training_step(self, batch, i):
            xb, yb = batch
            if nan_at is not None and self.global_step == nan_at:
                xb = xb * float("nan")
            loss = torch.nn.functional.mse_loss(self.net(xb), yb)
            self.log("train_loss_batch", loss, on_step=True, on_epoch=False)
            return loss

        def validation_step(self, batch, i):
            xb, yb = batch
            self.log("loss/val", torch.nn.functional.mse_loss(self.net(xb), yb))

        def on_before_optimizer_step(self, optimizer):
            self.log("grad_2.0_norm_total", grad_norm(self.net, norm_type=2)["grad_2.0_norm_total"])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.02)

    trainer = lightning.Trainer(
        max_steps=steps,
        logger=CSVLogger(str(out)),
        callbacks=[LearningRateMonitor()],
        log_every_n_steps=1,
        val_check_interval=20,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        num_sanity_val_steps=0,
    )
    trainer.fit(
        Regression(),
        torch.utils.data.DataLoader(data, batch_size=16),
        torch.utils.data.DataLoader(val, batch_size=64),
    )
    return out


@pytest.fixture(scope="module")
def lightning_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lightning")
    return {"nan": _lightning_run(root / "nan", nan_at=60), "clean": _lightning_run(root / "clean")}


def test_a_lightning_nan_written_as_text_is_found_at_its_step(lightning_runs):
    metrics = next(lightning_runs["nan"].rglob("metrics.csv"))
    assert ",nan," in metrics.read_text() or "\nnan," in metrics.read_text()  # Lightning's own spelling
    run = diagnose_run(lightning_runs["nan"])
    c = run.artefacts.curves
    assert c[LOSS].logged == "train_loss_batch" and c[EVAL_LOSS].logged == "loss/val"
    assert c[GRAD_NORM].logged == "grad_2.0_norm_total" and c[LEARNING_RATE].logged == "lr-SGD"
    assert c[LOSS].convention == "Lightning"
    row = _by(run)["non-finite"]
    assert row.status == FOUND and 59 <= row.figures["first_step"] <= 61, row.measured
    assert "logging_nan_inf_filter" not in row.measured  # an HF Trainer note never on a Lightning run
    assert run.exit_code == 1


def test_the_clean_lightning_twin_is_clean(lightning_runs):
    run = diagnose_run(lightning_runs["clean"])
    assert run.exit_code == 0, [(r.key, r.measured) for r in run.findings]
    rows = _by(run)
    assert rows["non-finite"].status == CLEAR and rows["progress"].status == CLEAR
    assert "logging_nan_inf_filter" not in run.text(width=200)  # the HF Trainer's note


# -- MLflow ----------------------------------------------------------------------------------------------


def _mlflow_run(store: Path, name: str, nan_at: int | None = None) -> str:
    mlflow = pytest.importorskip("mlflow")
    import os

    from mlflow.tracking import MlflowClient

    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=store.resolve().as_uri())
    exp = client.get_experiment_by_name("Default") or client.get_experiment("0")
    run = client.create_run(exp.experiment_id if exp else "0", run_name=name)
    rid = run.info.run_id
    for step in range(1, 101):
        loss = 2.0 * math.exp(-step / 40) + 0.3
        client.log_metric(rid, "train_loss", float("nan") if step == nan_at else loss, step=step)
        client.log_metric(rid, "learning_rate", 1e-3, step=step)
        if step % 10 == 0:
            client.log_metric(rid, "val_loss", loss * 1.05, step=step)
    client.log_param(rid, "fp16", "False")
    client.set_terminated(rid)
    del mlflow
    return rid


def test_an_mlflow_store_written_by_its_client_is_read_with_its_client(tmp_path):
    store = tmp_path / "mlruns"
    rid = _mlflow_run(store, "faulty", nan_at=40)
    run = diagnose_run(tmp_path)  # the folder holding mlruns/
    row = _by(run)["non-finite"]
    assert row.status == FOUND and row.figures["first_step"] == 40, row.measured
    assert run.artefacts.curves[LOSS].convention == "MLflow"
    # one run's folder, and the tracking URI itself
    assert _by(diagnose_run(next(store.glob(f"*/{rid}"))))["non-finite"].status == FOUND
    assert _by(diagnose_run(store.resolve().as_uri()))["non-finite"].status == FOUND


def test_the_clean_mlflow_twin_is_clean_and_several_runs_need_a_run_id(tmp_path, capsys):
    store = tmp_path / "mlruns"
    _mlflow_run(store, "clean")
    assert diagnose_run(tmp_path).exit_code == 0
    _mlflow_run(store, "faulty", nan_at=40)
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "several runs" in err[0] and "--run-id" in err[0]
    assert main([str(tmp_path), "--run-id", "clean"]) == 0  # a run's name selects it
    assert main([str(tmp_path), "--run-id", "faulty", "--format", "json"]) == 1
    assert main([str(tmp_path), "--run-id", "nope"]) == 2
    assert "no run of that id or name" in capsys.readouterr().err


# -- a W&B-style JSONL history export and plain CSV files ---------------------------------------------------


def _history(path: Path, spike_at: int | None = None, n: int = 150) -> Path:
    """Rows as W&B's run.history() exports them: its own _step row counter beside the trainer's
    train/global_step, NaN written as JSON's NaN literal, eval rows on their own."""
    rng = np.random.default_rng(1)
    rows = []
    k = 0
    for step in range(1, n + 1):
        loss = 2.0 * math.exp(-step / 60) + 0.5 + 0.01 * rng.standard_normal()
        if step == spike_at:
            loss *= 3
        rows.append({"_step": k, "_runtime": step * 0.1, "train/global_step": step, "train/loss": loss})
        k += 1
        if step % 15 == 0:
            rows.append({"_step": k, "train/global_step": step, "eval/loss": loss * 1.1})
            k += 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_jsonl_history_export_reads_the_trainer_step_not_the_row_counter(tmp_path):
    _history(tmp_path / "spiky" / "history.jsonl", spike_at=90)
    run = diagnose_run(tmp_path / "spiky")
    row = _by(run)["loss-spikes"]
    assert row.status == FOUND and row.steps == (90,), row.measured
    assert any("steps from its 'train/global_step' column" in line for line in run.artefacts.read)
    _history(tmp_path / "clean" / "history.jsonl")
    assert diagnose_run(tmp_path / "clean").exit_code == 0
    # the export alone, given as the file
    assert _by(diagnose_run(tmp_path / "spiky" / "history.jsonl"))["loss-spikes"].steps == (90,)


def test_csv_non_finite_spellings_are_kept_and_an_empty_cell_is_not_logged(tmp_path):
    run = tmp_path / "csv"
    run.mkdir()
    lines = ["step,train_loss,val_loss"]
    for s in range(1, 61):
        cell = {20: "nan", 30: "NaN", 40: "inf", 50: "Infinity"}.get(s, f"{2.0 - s / 100:.4f}")
        lines.append(f"{s},{cell},{'1.5' if s % 10 == 0 else ''}")
    (run / "export.csv").write_text("\n".join(lines) + "\n")
    c = read_run(run).curves
    assert len(c[EVAL_LOSS]) == 6 and len(c[LOSS]) == 60
    row = _by(diagnose_run(run))["non-finite"]
    assert row.status == FOUND and row.figures["loss:train_loss"] == [20, 30, 40, 50]


def test_every_loss_logged_is_checked_for_non_finite_values_even_one_no_rule_reads(tmp_path):
    """A GAN's two losses (train_disc_loss, train_gen_loss) are neither the training loss nor an eval
    loss, but a NaN in either is still found (a Lightning run that went NaN from its first step)."""
    run = tmp_path / "lightning_logs" / "version_0"
    run.mkdir(parents=True)
    rows = ["step,epoch,train_disc_loss,train_gen_loss"] + [
        f"{s},0,{'nan' if s >= 3 else 1.2},{'nan' if s >= 1 else 0.7}" for s in range(40)
    ]
    (run / "metrics.csv").write_text("\n".join(rows) + "\n")
    d = diagnose_run(tmp_path)
    row = _by(d)["non-finite"]
    assert row.status == FOUND and row.figures["first_step"] == 1, row.measured
    assert "train_gen_loss at 39 steps" in row.measured
    assert d.artefacts.unread == ["train_disc_loss", "train_gen_loss"]


def test_data_sets_and_lfs_pointers_beside_a_run_are_set_aside(hf_runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(hf_runs["clean"], run)
    (run / "train.jsonl").write_text('{"text": "a sentence", "label": 1}\n')
    (run / "scores.csv").write_text("model,accuracy\nbase,0.5\n")
    pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 4419\n"
    (next(run.glob("runs/*")) / "events.out.tfevents.1.host.0").write_text(pointer)
    d = diagnose_run(run)
    assert d.exit_code == 0
    notes = " ".join(d.artefacts.notes)
    assert "train.jsonl (no step column" in notes and "scores.csv (no step column" in notes
    assert "a Git LFS pointer, not the file" in notes


def test_series_named_explicitly(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    rows = ["step,objective,heldout_nll"] + [
        f"{s},{3 - s / 50:.4f},{3.2 - s / 60:.4f}" for s in range(1, 101)
    ]
    (run / "log.csv").write_text("\n".join(rows) + "\n")
    plain = diagnose_run(run)
    assert not plain.rows and not plain.artefacts.curves
    assert any("no series recognised among heldout_nll, objective" in n for n in plain.artefacts.notes)
    named = diagnose_run(run, series_names=[("loss", "objective"), ("eval_loss", "heldout_nll")])
    assert named.artefacts.curves[LOSS].logged == "objective"
    assert _by(named)["progress"].status == CLEAR
    assert main([str(run), "--series", "loss=objective", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["curves"]["loss"]["logged"] == "objective" and doc["summary"]["found"] == 0


def test_the_run_text_leads_with_what_was_found_in_words_and_wraps(hf_runs):
    run = diagnose_run(hf_runs["overfit"])
    lines = run.text(width=72).splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("summary: "))
    assert top <= 2  # after the title (the run's path may take a line of its own)
    assert "overfitting (eval set heldout) (from step" in " ".join(lines[top : top + 4])
    assert all(len(line) <= 72 or " " not in line.strip() for line in lines)
    assert not any("FOUND  learning rate as configured" in line for line in lines)
    assert UNDECIDED  # statuses stay the JSON's words


# -- the config's lr_scheduler_kwargs ------------------------------------------------------------------------


def _restarts_run(run: Path, args: dict | None, recorded: dict | None = None) -> Path:
    """A trainer_state.json whose LR is what transformers' own cosine_with_restarts scheduler (3 cycles) set,
    step by step, with the Trainer's arguments beside it (``args``) or recorded in its TensorBoard events as
    the Trainer's TensorBoard callback records them (``recorded``)."""
    torch = pytest.importorskip("torch")
    from transformers import get_scheduler

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    sched = get_scheduler("cosine_with_restarts", opt, 10, 200, scheduler_specific_kwargs={"num_cycles": 3})
    history = []
    for step in range(1, 201):
        history.append({"step": step, "loss": 2.0 / step**0.3, "learning_rate": sched.get_last_lr()[0]})
        opt.step()
        sched.step()
    run.mkdir(parents=True)
    (run / "trainer_state.json").write_text(json.dumps({"log_history": history, "max_steps": 200}))
    if args is not None:
        (run / "training_args.json").write_text(json.dumps(args))
    if recorded is not None:
        from torch.utils.tensorboard import SummaryWriter

        with SummaryWriter(str(run / "runs" / "stamp")) as w:
            w.add_text("args", json.dumps(recorded))
    return run


ARGS = {
    "lr_scheduler_type": "cosine_with_restarts",
    "learning_rate": 1e-3,
    "warmup_steps": 10,
    "max_steps": 200,
}


@pytest.mark.parametrize(
    "kwargs",
    [{"num_cycles": 3}, '{"num_cycles": 3}'],
    ids=["a mapping", "TrainingArguments' JSON text"],
)
def test_the_configs_lr_scheduler_kwargs_are_what_the_lr_is_checked_against(tmp_path, kwargs):
    row = _by(diagnose_run(_restarts_run(tmp_path / "run", ARGS | {"lr_scheduler_kwargs": kwargs})))
    lr = row["lr-schedule"]
    assert lr.status == CLEAR and "num_cycles=3" in lr.measured and "not read" not in lr.measured, lr.measured
    # the same log against a config that sets none: transformers' default of one cycle, found
    row = _by(diagnose_run(_restarts_run(tmp_path / "none", ARGS)))["lr-schedule"]
    assert row.status == FOUND and "num_cycles=1" in row.measured and "not read" not in row.measured


def test_the_kwargs_the_trainer_recorded_in_its_events_are_read(tmp_path):
    pytest.importorskip("tensorboard")
    run = _restarts_run(tmp_path / "run", None, recorded=ARGS | {"lr_scheduler_kwargs": {"num_cycles": 3}})
    a = read_run(run)
    assert a.schedule is not None and a.schedule.options == {"num_cycles": 3}
    assert _by(diagnose_run(run))["lr-schedule"].status == CLEAR


def test_lr_scheduler_kwargs_that_are_not_a_mapping_are_one_line_naming_the_key(tmp_path, capsys):
    run = _restarts_run(tmp_path / "run", ARGS | {"lr_scheduler_kwargs": [3]})
    assert main([str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "training_args.json lr_scheduler_kwargs: expected a mapping" in err, err
