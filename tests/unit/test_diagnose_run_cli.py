"""``nbkit diagnose RUN_DIR``: the bundled finished run end to end in the three formats, a run logged with a
plain SummaryWriter loop, a Lightning-layout metrics.csv, the notebook call, and the bad-input table (every
bad artefact is exit 2 with one line naming the file, even where another artefact holds findings)."""

from __future__ import annotations

import csv
import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from nbkit.cli import main as nbkit_main
from nbkit.diagnose.cli import main
from nbkit.diagnose.finished import EXAMPLE_RUN, diagnose_run, finished_run, render, run_folder
from nbkit.diagnose.rows import CLEAR, FOUND, NOT_CHECKED

pytest.importorskip("tensorboard")

EXAMPLE = run_folder(EXAMPLE_RUN)


def test_the_bundled_run_is_found_in_the_package():
    assert EXAMPLE.is_dir() and (EXAMPLE / "trainer_state.json").is_file()
    assert (
        list((EXAMPLE / "runs").glob("*/events.out.tfevents.*"))
        and (EXAMPLE / "memory_snapshot.pickle").is_file()
    )


@pytest.fixture(scope="module")
def example_json(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "d.json"
    rc = main([str(EXAMPLE), "--format", "json", "--output", str(out)])

    def strict(constant):
        raise AssertionError(f"not strict JSON: {constant}")

    return rc, json.loads(out.read_text(), parse_constant=strict)


def test_the_bundled_run_shows_its_planted_faults(example_json):
    rc, d = example_json
    assert rc == 1 and d["exit_code"] == 1
    rows = {r["key"]: r for r in d["rows"]}
    for key in ("loss-spikes", "overfitting", "lr-schedule", "fragmentation"):
        assert rows[key]["status"] == FOUND, (key, rows[key]["measured"])
    assert rows["non-finite"]["status"] == CLEAR
    assert set(d["findings"]) == {k for k, r in rows.items() if r["status"] == FOUND}
    assert d["schedule"]["source"] == "training_args.json" and d["total_steps"] == 150
    assert rows["lr-schedule"]["steps"][0] in (101, 102)  # the LR jump at step 100
    assert rows["memory-totals"]["measured"].startswith("reserved 8.01 GiB in 10 segments")


def test_text_names_each_row_with_its_rule_and_sizes_in_binary_units(capsys):
    assert main([str(EXAMPLE)]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"nbkit diagnose: finished run {EXAMPLE}"
    found = [i for i, ln in enumerate(lines) if ln.lstrip().startswith("FOUND")]
    assert len(found) >= 4
    for i in found:  # each row's rule follows it, indented under its label
        rule = next(ln for ln in lines[i + 1 :] if ln.lstrip().startswith("rule: "))
        assert rule.startswith(" " * 9)
    flat = " ".join(ln.strip() for ln in lines)
    assert "free 1.10 GiB of 8.01 GiB reserved, in 20 blocks; largest free block 96 MiB" in flat
    assert "step 101" in out or "step 102" in out


def test_html_with_its_pictures_and_plotly_beside_it(tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main([str(EXAMPLE), "--format", "html", "--output", str(out)]) == 1
    page = out.read_text()
    assert (tmp_path / "plotly.min.js").is_file() and "<script src='plotly.min.js'>" in page
    assert page.count("Plotly.newPlot(") == 2  # the curves and the snapshot's block map
    assert page.count("<tr style=") == len(diagnose_run(EXAMPLE).rows)
    assert not list(tmp_path.glob(".*part*"))
    inline = render(diagnose_run(EXAMPLE), "html", inline_js=True)
    assert "<script src=" not in inline and len(inline) > 1_000_000  # plotly.js itself, for a page on stdout


def test_the_nbkit_command_dispatches_a_folder_to_the_finished_run(capsys):
    assert nbkit_main(["diagnose", str(EXAMPLE), "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["run"] == str(EXAMPLE)


def test_the_notebook_call_displays_the_report_and_pictures(monkeypatch):
    run = finished_run()
    assert run.artefacts.path == EXAMPLE
    assert not hasattr(run, "claims")  # not ledger rows: the finished-run experiment records typed metrics
    shown = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    run._ipython_display_()
    assert isinstance(shown[0], IPython.display.HTML) and "fragmentation" in shown[0].data
    assert [type(x).__name__ for x in shown[1:]] == ["Figure", "Figure"]
    assert "<table>" in run._repr_html_()


# -- other loggers: a plain SummaryWriter loop and Lightning's CSV layout ------------------------------------


def _loop(steps=120, bad_batch_at=None, seed=0):
    """A plain torch loop clipping at 1.0: (step, loss, grad norm before clipping, lr) per step; a batch
    scaled ×30 at ``bad_batch_at``."""
    import torch

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    w = torch.randn(8, 1)
    rows = []
    for step in range(1, steps + 1):
        x = torch.randn(32, 8)
        y = x @ w
        if step == bad_batch_at:
            x, y = 30 * x, 30 * y
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        grad = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        opt.step()
        rows.append((step, float(loss.detach()), grad, opt.param_groups[0]["lr"]))
    return rows


def test_a_plain_summarywriter_run_is_read_from_its_event_file(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "sw"
    with SummaryWriter(str(run / "logs")) as w:
        for step, loss, grad, lr in _loop(bad_batch_at=70):
            w.add_scalar("loss", loss, step)
            w.add_scalar("grad_norm", grad, step)
            w.add_scalar("lr", lr, step)
    d = diagnose_run(run)
    rows = {r.key: r for r in d.rows}
    assert d.artefacts.curves["loss"].source == "logs: loss"
    assert rows["loss-spikes"].status == FOUND and rows["loss-spikes"].steps == (70,)
    assert rows["grad-explosions"].status == FOUND and rows["grad-explosions"].steps == (70,)
    assert rows["clipping"].status == NOT_CHECKED and rows["lr-schedule"].status == NOT_CHECKED
    assert rows["overfitting"].status == NOT_CHECKED  # no eval loss logged
    clean = tmp_path / "sw_clean"
    with SummaryWriter(str(clean / "logs")) as w:
        for step, loss, grad, _ in _loop():
            w.add_scalar("loss", loss, step)
            w.add_scalar("grad_norm", grad, step)
    assert diagnose_run(clean).exit_code == 0


def _lightning_csv(path: Path, rows, val_every=20):
    """metrics.csv as Lightning's CSVLogger writes it: one row per log call, every key a column, the
    others empty."""
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = ["epoch", "lr-SGD", "step", "train_loss_step", "val_loss"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for step, loss, _, lr in rows:
            w.writerow({"epoch": 0, "step": step, "train_loss_step": loss, "lr-SGD": lr})
            if step % val_every == 0:
                w.writerow({"epoch": 0, "step": step, "val_loss": loss * 1.05})


def test_a_lightning_metrics_csv_is_read_from_its_latest_version(tmp_path):
    run = tmp_path / "lightning_logs"
    _lightning_csv(run / "version_0" / "metrics.csv", _loop(bad_batch_at=50))
    _lightning_csv(run / "version_1" / "metrics.csv", _loop())
    d = diagnose_run(run)
    assert d.artefacts.curves["loss"].source == "version_1/metrics.csv: train_loss_step"
    assert d.artefacts.curves["eval_loss"].source == "version_1/metrics.csv: val_loss"
    assert d.artefacts.curves["learning_rate"].source == "version_1/metrics.csv: lr-SGD"
    assert any("version_0/metrics.csv: read, not used" in line for line in d.artefacts.read)
    assert d.exit_code == 0, [r.measured for r in d.findings]


def test_training_args_bin_is_never_read(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(EXAMPLE, run)
    marker = tmp_path / "ran"

    class Shell:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    (run / "training_args.bin").write_bytes(pickle.dumps(Shell()))
    d = diagnose_run(run)
    assert not marker.exists() and "training_args.bin is a pickle: never read" in d.artefacts.notes


# -- bad input -----------------------------------------------------------------------------------------------


class _Shell:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _bad(tmp: Path) -> None:
    def run_with(name: str, **files) -> Path:
        d = tmp / name
        shutil.copytree(EXAMPLE, d)
        for rel, content in files.items():
            p = d / rel.replace("__", "/")
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(content if isinstance(content, bytes) else content.encode())
        return d

    state = (EXAMPLE / "trainer_state.json").read_text()
    run_with("truncated", **{"trainer_state.json": state[: len(state) // 2]})
    empty = json.loads(state) | {"log_history": []}
    run_with("empty_history", **{"trainer_state.json": json.dumps(empty)})
    bad_entry = json.loads(state)
    bad_entry["log_history"][1]["loss"] = "nan-ish"
    run_with("bad_entry", **{"trainer_state.json": json.dumps(bad_entry)})
    run_with("bad_checkpoint", **{"checkpoint-150__trainer_state.json": '{"log_history": [1, '})
    run_with("not_snapshot", **{"memory_snapshot.pickle": pickle.dumps({"weights": [1, 2, 3]})})
    run_with("evil_snapshot", **{"memory_snapshot.pickle": pickle.dumps(_Shell(str(tmp / "ran")))})
    snap = (EXAMPLE / "memory_snapshot.pickle").read_bytes()
    run_with("cut_snapshot", **{"memory_snapshot.pickle": snap[: len(snap) // 3]})
    run_with("bad_events", **{"runs__other__events.out.tfevents.1.host": b"\x00garbage, not records\xff" * 4})
    (tmp / "bad_csv" / "lightning" / "version_0").mkdir(parents=True)
    (tmp / "bad_csv" / "lightning" / "version_0" / "metrics.csv").write_text("epoch_time,loss\n3.1,1.0\n")
    run_with("bad_cell", **{"lightning__version_0__metrics.csv": "epoch,step,train_loss\n0,1,1.0\n0,2,n/a\n"})
    run_with("no_step", **{"logs__history.jsonl": '{"_step": 1, "train/loss": 1.0}\n{"train/loss": 0.9}\n'})
    (tmp / "nothing").mkdir()
    (tmp / "nothing" / "notes.txt").write_text("not an artefact\n")
    (tmp / "dup.yaml").write_text("learning_rate: 0.01\nlr_scheduler: cosine\nlr_scheduler: linear\n")
    (tmp / "peft.json").write_text('{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q"]}')
    (tmp / "ok.yaml").write_text("base_model: tiny\nmicro_batch_size: 2\n")


# (argv, what the one error line must name); the run folders are copies of the bundled run, which has findings
BAD = [
    (["truncated"], "truncated/trainer_state.json:612:7: not valid JSON"),
    (["empty_history"], "empty_history/trainer_state.json: log_history is empty"),
    (["bad_entry"], "bad_entry/trainer_state.json: log_history[1].loss: expected a number, got 'nan-ish'"),
    (["bad_checkpoint"], "bad_checkpoint/checkpoint-150/trainer_state.json:1:21: not valid JSON"),
    (["not_snapshot"], "not_snapshot/memory_snapshot.pickle: not a memory snapshot: expected"),
    (
        ["evil_snapshot"],
        "evil_snapshot/memory_snapshot.pickle: not a memory snapshot: it would import os.system",
    ),
    (["cut_snapshot"], "cut_snapshot/memory_snapshot.pickle: not a memory snapshot: truncated"),
    (["bad_events"], "bad_events/runs/other/events.out.tfevents.1.host: not a TensorBoard event file"),
    (["bad_csv"], "bad_csv: is a directory with no training-run artefact"),
    (["bad_csv"], "set aside: lightning/version_0/metrics.csv (no step column: not a logged history)"),
    (["bad_cell"], "bad_cell/lightning/version_0/metrics.csv:3 train_loss: expected a number, got 'n/a'"),
    (["no_step"], "no_step/logs/history.jsonl:2 _step: empty on a row that logs train/loss"),
    (["nothing"], "nothing: is a directory with no training-run artefact"),
    (["truncated", "--config", "dup.yaml"], "truncated/trainer_state.json:612:7: not valid JSON"),
    ([EXAMPLE, "--config", "dup.yaml"], "dup.yaml:3: duplicate key 'lr_scheduler'"),
    ([EXAMPLE, "--config", "peft.json"], "peft.json: looks like a peft config"),
    ([EXAMPLE, "--config", "missing.yaml"], "missing.yaml: no such file"),
    (
        [EXAMPLE, "--gpu-memory", "80"],
        "--gpu-memory: applies to a trainer config, not to a finished run's folder",
    ),
    ([EXAMPLE, "--no-audit"], "--no-audit: applies to a trainer config"),
    (["ok.yaml", "--config", "dup.yaml"], "--config: names a finished run's trainer config"),
    (
        ["bad_entry/trainer_state.json"],
        "bad_entry/trainer_state.json: log_history[1].loss: expected a number, got 'nan-ish'",
    ),
    (["truncated", "--series", "loss"], "--series: expected KIND=NAME"),
    (["truncated", "--series", "accuracy=acc"], "--series: expected KIND=NAME with KIND one of"),
    ([EXAMPLE, "--series", "loss=nothing_logged"], "--series loss=nothing_logged: no artefact read logs"),
    (["ok.yaml", "--series", "loss=x"], "--series: applies to a finished run's folder"),
    ([EXAMPLE, "--run-id", "abc"], "--run-id abc: "),
    (["file:///nonexistent/mlruns"], "file:///nonexistent/mlruns: no such folder"),
    (["http://127.0.0.1:9"], "http://127.0.0.1:9: not a readable MLflow tracking store"),
    ([EXAMPLE, "--format", "xml"], "--format: invalid choice: 'xml'"),
    ([EXAMPLE, "--output", "nowhere/report.html"], "--output"),
]


@pytest.mark.parametrize(
    "argv,named", BAD, ids=[" ".join(map(str, a)).replace(str(EXAMPLE), "EXAMPLE") for a, _ in BAD]
)
def test_bad_input_is_one_line_naming_the_file_and_exit_2(tmp_path, monkeypatch, capsys, argv, named):
    _bad(tmp_path)
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "report.json"
    rc = main([str(a) for a in argv] + (["--output", str(report)] if "--output" not in argv else []))
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert rc == 2 and out == "" and len(lines) == 1 and lines[0].startswith("nbkit diagnose: error: "), err
    assert named in lines[0], (named, lines[0])
    assert "Traceback" not in err and not report.exists() and not (tmp_path / "ran").exists()


def test_notebook_04s_experiment_reads_the_bundled_run_and_a_missing_folder_is_one_usage_error(tmp_path):
    """Notebook 04's "your finished run" section: the registered ``finished-run`` experiment, its rows
    typed as metrics (a diagnosis of the user's run, never ledger rows)."""
    from nbkit.audit import experiments
    from nbkit.audit.context import AuditContext
    from nbkit.errors import UsageError

    ctx = AuditContext("cpu", model="tiny", progress=False)
    result = experiments.run("finished-run", ctx)
    assert result.metrics.exit_code == 1 and result.data.artefacts.path == EXAMPLE
    assert set(result.metrics.findings) == {r.key for r in result.data.findings} >= {"fragmentation"}
    assert {r.key: r.status for r in result.metrics.rows}["non-finite"] == "clear"
    with pytest.raises(UsageError, match="no_run"):
        experiments.run("finished-run", ctx, run_dir=str(tmp_path / "no_run"))
