"""Make the bundled finished run (``nbkit/diagnose/examples/finished_run``) that ``nbkit diagnose RUN_DIR``
and notebook 04's "your finished run" section show by default, and the tiny runs the tests train.

``train_tiny`` trains a small MLP classifier with the real Hugging Face Trainer on CPU (seconds), with
``report_to=["tensorboard"]``, so its folder holds what a real run leaves: ``trainer_state.json``,
``checkpoint-*/`` when asked, and TensorBoard event files. Faults are planted through training, never by
editing the files: a learning-rate jump mid-run (a callback multiplies the scheduler's base LR), a tiny
training set with noisy labels trained for many epochs (overfitting), a schedule other than the one a
config states.

A CUDA memory snapshot needs a GPU to be recorded; ``snapshot`` builds one in the layout
``torch.cuda.memory._snapshot()`` documents (segments of blocks, frames, device_traces), and
``fragmented_snapshot`` is the bundled example's: large segments whose free memory lies in small holes
between live blocks, and a recorded OOM.

    .venv/bin/python scripts/make_finished_run_example.py   # rewrites nbkit/diagnose/examples/finished_run
"""

from __future__ import annotations

import json
import pickle
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "nbkit" / "diagnose" / "examples" / "finished_run"
MIB = 2**20


def train_tiny(
    out: Path,
    *,
    steps: int = 60,
    train_size: int = 256,
    label_noise: float = 0.0,
    hidden: int = 64,
    lr: float = 1e-2,
    schedule: str = "linear",
    warmup: int = 6,
    batch: int = 16,
    eval_every: int = 6,
    eval_size: int = 64,
    max_grad_norm: float = 1.0,
    lr_jump_at: int | None = None,
    lr_jump: float = 30.0,
    optim: str = "adamw_torch",
    save_steps: int | None = None,
    seen_eval: bool = False,
    seed: int = 0,
) -> Path:
    """Train the tiny classifier with transformers' Trainer into ``out`` (TensorBoard events under
    ``out/runs/``); returns ``out``. ``seen_eval``: evaluate on a dict of two eval datasets, ``heldout``
    (fresh examples) and ``seen`` (the first training examples), as the Trainer does for each of
    ``eval_dataset={name: dataset}`` (``eval_<name>_loss``)."""

    import torch
    from torch import nn
    from transformers import PrinterCallback, Trainer, TrainerCallback, TrainingArguments

    torch.set_num_threads(1)
    torch.manual_seed(seed)

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(16, hidden), nn.ReLU(), nn.Linear(hidden, 4))

        def forward(self, x, labels=None):
            logits = self.net(x)
            out = {"logits": logits}
            if labels is not None:
                out["loss"] = nn.functional.cross_entropy(logits, labels)
            return out

    g = torch.Generator().manual_seed(seed)
    w = torch.randn(16, 4, generator=g)

    def data(n: int, noise: float) -> list[dict[str, Any]]:
        x = torch.randn(n, 16, generator=g)
        y = (x @ w).argmax(-1)
        flip = torch.rand(n, generator=g) < noise
        y = torch.where(flip, torch.randint(0, 4, (n,), generator=g), y)
        return [{"x": x[i], "labels": y[i]} for i in range(n)]

    train, evaluation = data(train_size, label_noise), data(eval_size, 0.0)

    class LRJump(TrainerCallback):
        """Multiplies the scheduler's base LR at one step: the LR jump a bad resume or override makes."""

        def on_step_end(self, args, state, control, **kw):
            if lr_jump_at is not None and state.global_step == lr_jump_at:
                sched, opt = kw["lr_scheduler"], kw["optimizer"]
                sched.base_lrs = [b * lr_jump for b in sched.base_lrs]
                for group in opt.param_groups:
                    group["lr"] *= lr_jump

    args = TrainingArguments(
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=batch,
        per_device_eval_batch_size=eval_size,
        learning_rate=lr,
        lr_scheduler_type=schedule,
        warmup_steps=warmup,
        max_grad_norm=max_grad_norm,
        optim=optim,
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=eval_every,
        save_strategy="steps" if save_steps else "no",
        save_steps=save_steps or 500,
        report_to=["tensorboard"],
        seed=seed,
        data_seed=seed,
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
        log_level="error",
    )
    evals = {"heldout": evaluation, "seen": train[:eval_size]} if seen_eval else evaluation
    trainer = Trainer(model=Tiny(), args=args, train_dataset=train, eval_dataset=evals, callbacks=[LRJump()])
    trainer.remove_callback(PrinterCallback)  # the logs go to trainer_state.json and TensorBoard, not stdout
    trainer.train()
    trainer.save_state()
    return out


def frame(filename: str, line: int, name: str) -> dict[str, Any]:
    return {"filename": filename, "line": line, "name": name}


TORCH_LINEAR = frame("/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", 125, "forward")
TORCH_ADAMW = frame("/venv/lib/python3.11/site-packages/torch/optim/adamw.py", 171, "_init_group")
SITES = {
    "activations": [TORCH_LINEAR, frame("/home/me/proj/model.py", 42, "forward")],
    "optimizer": [TORCH_ADAMW, frame("/home/me/proj/train.py", 88, "train_step")],
    "weights": [frame("/home/me/proj/train.py", 31, "main")],
    "logits": [frame("/home/me/proj/model.py", 57, "forward")],
}


def snapshot(
    segments: list[list[tuple[str, int, str | None]]],
    *,
    small: list[list[tuple[str, int, str | None]]] = (),  # type: ignore[assignment]
    traces: list[dict[str, Any]] | None = None,
    base: int = 0x7F0000000000,
    expandable: bool = False,
) -> dict[str, Any]:
    """A snapshot in ``torch.cuda.memory._snapshot()``'s layout: each segment a list of blocks
    ``(state, size, site)`` (state ``a`` allocated, ``f`` free, ``p`` pending free; site a key of
    :data:`SITES` or None), addresses laid out one after another."""

    states = {"a": "active_allocated", "f": "inactive", "p": "active_pending_free"}
    out = []
    addr = base
    for kind, group in (("large", segments), ("small", small)):
        for blocks in group:
            seg_addr = addr
            bl = []
            for state, size, site in blocks:
                st = states[state]
                req = size - (512 if st == "active_allocated" and size > 4096 else 0)
                bl.append(
                    {
                        "address": addr,
                        "size": size,
                        "requested_size": req if st != "inactive" else 0,
                        "state": st,
                        "frames": list(SITES[site]) if site and st != "inactive" else [],
                    }
                )
                addr += size
            total = sum(b["size"] for b in bl)
            out.append(
                {
                    "device": 0,
                    "address": seg_addr,
                    "total_size": total,
                    "allocated_size": sum(b["size"] for b in bl if b["state"] == "active_allocated"),
                    "active_size": sum(b["size"] for b in bl if b["state"] != "inactive"),
                    "requested_size": sum(b["requested_size"] for b in bl),
                    "stream": 0,
                    "segment_type": kind,
                    "segment_pool_id": (0, 0),
                    "is_expandable": expandable,
                    "frames": [],
                    "blocks": bl,
                }
            )
            addr += 2 * MIB  # segments are separate cudaMalloc calls
    return {"segments": out, "device_traces": [traces or []]}


def fragmented_snapshot() -> dict[str, Any]:
    """Four 2 GiB segments of activations and optimizer state with free holes between live blocks (none over
    96 MiB), a small pool, and a history whose last entry is an OOM asking for 256 MiB."""

    holes = [96, 88, 80, 72]
    segments = []
    for i in range(4):
        blocks: list[tuple[str, int, str | None]] = []
        used = 0
        for j, hole in enumerate(holes[: 3 if i % 2 else 4]):
            live = (300 + 30 * j - 10 * i) * MIB
            blocks.append(("a", live, "activations" if j % 2 == 0 else "optimizer"))
            blocks.append(("f", (hole - 4 * i) * MIB, None))
            used += live + (hole - 4 * i) * MIB
        blocks.append(("a", 2048 * MIB - used, "weights" if i == 0 else "logits"))
        segments.append(blocks)
    small = [[("a", 512 * 1024, "logits"), ("f", 1536 * 1024, None)] for _ in range(6)]
    snap = snapshot(segments, small=small)
    # A history: the segments' allocations, a transient batch's activations allocated and freed, then an
    # OOM for a 256 MiB request (more than the largest hole, less than the free total).
    trace: list[dict[str, Any]] = []
    t = 1_000
    for seg in snap["segments"]:
        trace.append(
            {
                "action": "segment_alloc",
                "addr": seg["address"],
                "size": seg["total_size"],
                "stream": 0,
                "frames": [],
                "time_us": t,
            }
        )
        t += 10
        for b in seg["blocks"]:
            trace.append(
                {
                    "action": "alloc",
                    "addr": b["address"],
                    "size": b["size"],
                    "stream": 0,
                    "frames": b["frames"],
                    "time_us": t,
                }
            )
            t += 10
    for seg in snap["segments"]:
        for b in seg["blocks"]:
            if b["state"] == "inactive":
                for action in ("free_requested", "free_completed"):
                    trace.append(
                        {
                            "action": action,
                            "addr": b["address"],
                            "size": b["size"],
                            "stream": 0,
                            "frames": [],
                            "time_us": t,
                        }
                    )
                    t += 10
    trace.append(
        {"action": "oom", "size": 256 * MIB, "device_free": 40 * MIB, "stream": 0, "frames": [], "time_us": t}
    )
    snap["device_traces"] = [trace]
    return snap


def main() -> int:
    if EXAMPLE.exists():
        shutil.rmtree(EXAMPLE)
    EXAMPLE.mkdir(parents=True)
    tmp = EXAMPLE.parent / ".finished_run_tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    # A small noisy training set for many epochs (overfits), and the LR multiplied by 50 at step 100 (spikes).
    train_tiny(
        tmp,
        steps=150,
        train_size=64,
        label_noise=0.4,
        hidden=128,
        lr=1e-2,
        schedule="cosine",
        warmup=10,
        batch=8,
        eval_every=10,
        eval_size=128,
        lr_jump_at=100,
        lr_jump=50.0,
    )
    shutil.copy2(tmp / "trainer_state.json", EXAMPLE / "trainer_state.json")
    (events,) = (tmp / "runs").glob("*/events.out.tfevents.*")
    (EXAMPLE / "runs" / "example").mkdir(parents=True)
    shutil.copy2(events, EXAMPLE / "runs" / "example" / events.name)
    # The config the run was launched with, as a user keeps it beside the run.
    config = {
        "output_dir": "finished_run",
        "learning_rate": 1e-2,
        "lr_scheduler_type": "cosine",
        "warmup_steps": 10,
        "max_steps": 150,
        "per_device_train_batch_size": 8,
        "max_grad_norm": 1.0,
        "logging_steps": 1,
    }
    (EXAMPLE / "training_args.json").write_text(json.dumps(config, indent=2) + "\n")
    with open(EXAMPLE / "memory_snapshot.pickle", "wb") as f:
        pickle.dump(fragmented_snapshot(), f)
    shutil.rmtree(tmp)
    print(f"wrote {EXAMPLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
