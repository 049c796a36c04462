"""Notebook 04's "your run while it trains": a tiny HF Trainer run on CPU watched by
:class:`nbkit.callbacks.DiagnoseCallback`.

A randomly initialised tiny Llama learns the bundled SFT task (:func:`nbkit.audit.sft.make_sft_examples`,
tokenised with the tiny tokenizer) from a handful of examples and is evaluated on others every
``eval_every`` steps: with few examples it memorises them, the eval loss turns up while the training loss
keeps falling, and the callback says so at the step it can tell. A learning rate far too high makes the
loss blow up instead (spikes, explosions); a loss that turns NaN or infinite stops the run when
``stop_on_nonfinite`` is set. The loop is the HF Trainer's own;
:func:`build_trainer` is what bench/diagnose_callback.py times with and without the callback.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from nbkit.audit.sft import make_sft_examples, tiny_tokenizer
from nbkit.callbacks import DiagnoseCallback
from nbkit.diagnose.artefacts import RunArtefacts
from nbkit.diagnose.finished import FinishedRun
from nbkit.diagnose.rows import FOUND
from nbkit.experiment import param
from nbkit.model_files import tiny_llama
from nbkit.result import Result

SCHEDULES = ("constant_with_warmup", "linear", "cosine", "inverse_sqrt")
SEQ_LEN = 48


@dataclass
class WatchedRunConfig:
    """A tiny Llama trained on CPU by the HF Trainer with ``DiagnoseCallback``: its steps, data and
    optimisation; ``stop_on_nonfinite`` as the callback takes it."""

    steps: int = param(120, min=10, max=2000, help="optimizer steps")
    train_examples: int = param(
        16, min=8, max=512, help="training examples: a handful are memorised (the eval loss turns up)"
    )
    eval_examples: int = param(64, min=8, max=512, help="held-out examples evaluated every eval_every steps")
    eval_every: int = param(10, min=1, max=500, help="steps between evaluations")
    learning_rate: float = param(
        3e-3, min=1e-5, max=100.0, log=True, help="AdamW's peak LR (far above 1e-2 the loss blows up)"
    )
    lr_scheduler_type: str = param("constant_with_warmup", choices=SCHEDULES)
    warmup_steps: int = param(10, min=0, max=500)
    batch_size: int = param(8, min=1, max=64)
    stop_on_nonfinite: bool = param(True, help="stop at the first step whose loss is NaN or infinite")

    @classmethod
    def smoke(cls):
        return cls(steps=40, eval_every=5)


@dataclass(frozen=True)
class RowStatus:
    """One row of the callback's last judgement: its key and status."""

    key: str
    status: str


@dataclass(frozen=True)
class WatchedRunMetrics:
    """What the watched run did and what the callback found: steps trained (fewer than asked when it was
    stopped), the step a non-finite loss stopped it at (None: not stopped), the keys of the rows found,
    every row's status, the median seconds per training step and the seconds the rules took in all."""

    steps_run: int
    max_steps: int
    stopped_at: int | None
    findings: tuple[str, ...]
    rows: tuple[RowStatus, ...]
    seconds_per_step: float
    rule_seconds: float


def _examples(tokenizer, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each record as one causal-LM example: instruction and response, padded to :data:`SEQ_LEN`, the
    padding out of the loss."""
    texts = [f"{r['instruction']} {r['response']}{tokenizer.eos_token}" for r in records]
    enc = tokenizer(texts, padding="max_length", truncation=True, max_length=SEQ_LEN, return_tensors="pt")
    out = []
    for ids, mask in zip(enc["input_ids"], enc["attention_mask"], strict=True):
        labels = ids.clone()
        labels[mask == 0] = -100
        out.append({"input_ids": ids, "attention_mask": mask, "labels": labels})
    return out


@lru_cache(maxsize=1)
def _clock_class() -> type:
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        """The time each training step ends (their intervals are the step times)."""

        def __init__(self) -> None:
            self.ends: list[float] = []

        def on_step_end(self, args, state, control, **kwargs):
            self.ends.append(time.perf_counter())

        def seconds_per_step(self) -> float:
            """The median interval between step ends (evaluations and load spikes fall out)."""
            gaps = np.diff(self.ends)
            return float(np.median(gaps)) if len(gaps) else float("nan")

    return StepClock


def step_clock() -> Any:
    """A Trainer callback keeping the time each step ends (``.seconds_per_step()``)."""
    return _clock_class()()


def build_trainer(cfg: WatchedRunConfig, callbacks: list[Any], output_dir: str | Path, seed: int = 0):
    """The HF Trainer of the watched run (CPU, fp32, nothing saved or reported), its callbacks given."""
    from transformers import PrinterCallback, Trainer, TrainingArguments

    tokenizer = tiny_tokenizer()
    records = make_sft_examples(cfg.train_examples + cfg.eval_examples, seed=seed)
    model = tiny_llama(seed=seed, vocab_size=len(tokenizer), max_position_embeddings=SEQ_LEN)
    args = TrainingArguments(
        str(output_dir),
        max_steps=cfg.steps,
        per_device_train_batch_size=cfg.batch_size,
        per_device_eval_batch_size=32,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler_type,
        warmup_steps=cfg.warmup_steps,
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=cfg.eval_every,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=seed,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=_examples(tokenizer, records[: cfg.train_examples]),
        eval_dataset=_examples(tokenizer, records[cfg.train_examples :]),
        callbacks=callbacks,
    )
    # Without a progress bar the Trainer prints every log as a dict; the callback's lines are what to read.
    trainer.remove_callback(PrinterCallback)
    return trainer


def run_watched(cfg: WatchedRunConfig, ctx: Any, live=None) -> Result[WatchedRunMetrics]:
    """Train the tiny run with the callback (the loss and eval loss drawn into ``live`` as they come);
    the result's data is the finished run's report on the callback's rows, its figure the run's curves."""
    import tempfile

    callback = DiagnoseCallback(stop_on_nonfinite=cfg.stop_on_nonfinite, figure=live)
    clock = step_clock()
    seed = int(ctx.config.model.seed) if hasattr(ctx, "config") else 0
    with tempfile.TemporaryDirectory(prefix="nbkit-watched-") as out:
        trainer = build_trainer(cfg, [callback, clock], out, seed)
        trainer.train()
    watch = callback.watch
    curves = callback.curves
    run = FinishedRun(
        RunArtefacts(
            Path("the run trained above"),
            curves,
            [
                f"{name}: {len(s)} points, steps {int(s.steps[0])}–{int(s.steps[-1])}"
                for name, s in curves.items()
            ],
            [],
            None,
            watch.schedule,
            watch.total,
            watch.total_where,
            [],
        ),
        callback.rows,
    )
    figures = run.figures()
    metrics = WatchedRunMetrics(
        steps_run=int(trainer.state.global_step),
        max_steps=cfg.steps,
        stopped_at=callback.stopped_at,
        findings=tuple(r.key for r in callback.rows if r.status == FOUND),
        rows=tuple(RowStatus(r.key, r.status) for r in callback.rows),
        seconds_per_step=clock.seconds_per_step(),
        rule_seconds=callback.rule_seconds,
    )
    return Result(metrics=metrics, figure=figures[0] if figures else None, data=run)


def show_watched(result: Result[WatchedRunMetrics]) -> Any:
    """The callback's last judgement as the finished-run report's table."""
    from IPython.display import HTML

    return HTML(result.data.table_html())
