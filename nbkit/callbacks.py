"""The finished-run diagnosis while the run trains: callbacks for the HF Trainer and Lightning.

``nbkit diagnose RUN_DIR`` judges the curves a run left behind; these callbacks apply the same rules, by
the same function (:func:`nbkit.diagnose.rules.curve_rows`), to the curves logged so far, as the logs arrive,
and read the logged names as a finished run's are read (:mod:`nbkit.diagnose.names`: ``loss``,
``eval_<set>_loss`` for each of the HF Trainer's eval datasets, ``val_loss``, ``val_loss/dataloader_idx_1``
…)::

    from nbkit.callbacks import DiagnoseCallback            # transformers.Trainer
    trainer = Trainer(..., callbacks=[DiagnoseCallback(stop_on_nonfinite=True)])

    from nbkit.callbacks import LightningDiagnoseCallback   # lightning.Trainer
    trainer = lightning.Trainer(..., callbacks=[LightningDiagnoseCallback()])

Each new finding is printed as one line, with the step the run had reached (``nbkit: step 120 · FOUND loss
spikes: 1 spike: step 97: …``); in Jupyter the loss
and eval losses, the learning rate, the grad norm and, on a GPU, the CUDA memory are drawn live
(:class:`nbkit.live.LiveFigure`: widgets in a live kernel, one refreshed output each when headless).
``stop_on_nonfinite=True`` stops training at the end of the first step whose training loss (or an eval
loss) is NaN or infinite. After training, ``callback.rows`` holds every rule's row and
``callback.curves`` the series they were judged on.

The rules cost more the longer the run, so they are applied only while the time spent in them stays under
:data:`RULE_BUDGET` of the training time so far (the first log is judged at once, the end of training and
the first non-finite value always); recording a logged value costs microseconds. Non-finite losses are
seen at the step they happen: the HF Trainer's ``logging_nan_inf_filter`` (on by default) keeps a NaN step
out of the logged loss, so the HF callback reads each training step's loss from the model's output, and
the Lightning callback from the training step's: one device-to-host copy per step with
``stop_on_nonfinite``; without it, one per :data:`PENDING_LOSSES` steps for the HF Trainer (a
non-finite step is then reported up to that many steps later, and training goes on) and one per
``log_every_n_steps`` for Lightning (whose loss curve these are).

transformers and lightning are imported when a callback class is first used, never by ``import nbkit``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from nbkit.diagnose.artefacts import choose, unread_loss
from nbkit.diagnose.curves import (
    EVAL_LOSS,
    GRAD_NORM,
    HF_TRAINER,
    LEARNING_RATE,
    LIGHTNING,
    LOSS,
    OTHER_LOSS,
    Series,
    series,
)
from nbkit.diagnose.logs import Logged
from nbkit.diagnose.names import classify, loss_like
from nbkit.diagnose.rows import FOUND, RunRow
from nbkit.diagnose.rules import curve_rows
from nbkit.diagnose.schedule import Schedule, configured_curve
from nbkit.live import LiveFigure, in_kernel

# The two callback classes are built on first use (the module's __getattr__ below).
__all__ = ["RULE_BUDGET", "DiagnoseCallback", "LightningDiagnoseCallback", "Watch"]  # noqa: F822

RULE_BUDGET = 0.005  # the share of training time the rules may take (recording and drawing come on top)
LINE_CHARS = 300  # a finding's printed line is cut here; callback.rows keeps the whole text
PENDING_LOSSES = 64  # per-step losses held on the device at most before they are read in one copy
LIVE_POINTS = 1000  # a live trace draws every point up to this many, then every 2nd, 4th …
GIB = 2**30
EVENT_KEYS = ("loss-spikes", "grad-explosions")  # rows of events: each further event is a new finding


class _Panel:
    """The live figures: loss and eval losses (into ``figure`` when given, else a figure of its own), and,
    without a given figure, the learning rate, the grad norm (log scale) and, on a GPU, CUDA memory."""

    def __init__(self, figure: Any, memory_device: Any, title_note: str) -> None:
        self.given = figure is not None
        self.loss = (
            figure if figure is not None else LiveFigure(f"loss · {title_note}", xaxis="step", height=300)
        )
        self.lr = self.grad = self.memory = None
        self._counts: dict[tuple[int, str], tuple[int, int]] = {}
        if not self.given:
            self.lr = LiveFigure("learning rate", xaxis="step", height=240, mode="lines")
            self.grad = LiveFigure("grad norm (log scale)", xaxis="step", height=240, mode="lines")
            self.grad.figure.update_yaxes(type="log")
            if memory_device is not None:
                self.memory = LiveFigure(f"CUDA memory ({memory_device}), GiB", xaxis="step", height=240)

    def add(self, figure: Any, trace: str, step: int, value: float) -> None:
        """One point, when the trace's stride takes it: every point up to :data:`LIVE_POINTS` per trace,
        then every 2nd, every 4th … (a live figure re-sends its whole trace on each redraw)."""
        key = (id(figure), trace)
        seen, stride = self._counts.get(key, (0, 1))
        if seen % stride == 0:
            figure.add(trace, step, value)
        seen += 1
        if seen >= LIVE_POINTS * stride:
            stride *= 2
        self._counts[key] = (seen, stride)

    @property
    def figures(self) -> list[Any]:
        return [f for f in (self.loss, self.lr, self.grad, self.memory) if f is not None]

    def show(self) -> None:
        if self.given:
            return
        if self.loss.widget:
            import ipywidgets as w
            from IPython.display import display

            display(w.VBox([f.figure for f in self.figures]))
        else:
            for f in self.figures:
                f.show()

    def close(self) -> None:
        for f in self.figures:
            f.flush()


class Watch:
    """The rules applied to a run's curves as they are logged (what both callbacks drive).

    :meth:`begin` starts a run (what is known of its schedule, clipping and precision); :meth:`add` records
    a logged value under its name (read as :mod:`nbkit.diagnose.names` reads a finished run's: ``loss``,
    ``eval_<set>_loss``, ``val_loss``, ``learning_rate``, ``grad_norm`` …); :meth:`step_losses` a training
    step's own losses, read from the device in one copy; :meth:`maybe_judge` applies the rules
    (:func:`nbkit.diagnose.rules.curve_rows`, the finished run's) within :data:`RULE_BUDGET`; :meth:`end`
    judges once more and prints the summary. ``echo`` prints each new finding's line (``print`` by default);
    ``convention`` is the library whose names and logging the series follow."""

    def __init__(
        self,
        *,
        stop_on_nonfinite: bool,
        live: bool | None,
        figure: Any,
        echo: Callable[[str], None] | None,
        source: str,
        convention: str = "",
    ) -> None:
        self.stop_on_nonfinite = stop_on_nonfinite
        self.live = live
        self.figure = figure
        self.echo = echo if echo is not None else (lambda line: print(line, flush=True))
        self.source = source
        self.convention = convention
        self.reset()

    def reset(self) -> None:
        self.points: dict[str, dict[int, float]] = {}  # every logged series by name, {step: value}
        self.max_step = 0
        self.judged_curves: dict[str, Series] = {}
        self.rows: list[RunRow] = []
        self.schedule: Schedule | None = None
        self.total: int | None = None
        self.total_where = ""
        self.max_grad_norm: float | None = None
        self.clip_where = ""
        self.precision: str | None = None
        self.precision_where = ""
        self.memory_device: Any = None
        self.rule_seconds = 0.0
        self.last_cost = 0.0  # seconds the last judgement took
        self.judged = 0
        self.started = time.monotonic()
        self.stop_step: int | None = None
        self.announced: dict[str, int] = {}  # row key → findings announced (events counted)
        self.panel: _Panel | None = None

    def begin(
        self,
        *,
        schedule: Schedule | None,
        total: int | None,
        total_where: str,
        max_grad_norm: float | None,
        clip_where: str,
        memory_device: Any,
        precision: tuple[str | None, str] = (None, ""),
        lr_offset: int = 0,
    ) -> None:
        """A run starts: what is known of its schedule, clipping and precision ("fp16" | "bf16" | "fp32" |
        None, and where it was read); the panel when drawing."""
        import scipy.stats  # noqa: F401  (the rules' intervals: imported here, not inside the first judgement)

        self.reset()
        self.schedule, self.total, self.total_where = schedule, total, total_where
        self.max_grad_norm, self.clip_where = max_grad_norm, clip_where
        self.precision, self.precision_where = precision
        self.memory_device = memory_device
        memory = f"CUDA memory on {memory_device}" if memory_device is not None else "CUDA memory: no GPU"
        if self.figure is not None or (self.live if self.live is not None else in_kernel()):
            self.panel = _Panel(self.figure, memory_device, memory)
            self.panel.show()
            curve = configured_curve(schedule, total, lr_offset) if schedule is not None and total else None
            if curve is not None and self.panel.lr is not None:
                self.panel.lr.extend("configured", curve[0].tolist(), curve[1].tolist())
        self.echo(
            "nbkit: applying the finished-run rules to this run's loss, eval loss, learning rate and grad "
            "norm as they are logged"
            + (f" ({memory})" if self.panel is not None else "")
            + ("; stops at a non-finite loss" if self.stop_on_nonfinite else "")
        )

    # -- recording --------------------------------------------------------------------------------------

    @staticmethod
    def reads(name: str) -> bool:
        """Whether a logged name is one the rules read: a series (:func:`nbkit.diagnose.names.classify`) or
        a loss no rule but the non-finite one reads."""
        return classify(name) is not None or loss_like(name)

    def _record(self, name: str, step: int, value: float) -> None:
        into = self.points.setdefault(name, {})
        # A step logged twice keeps its last value unless the earlier one was not finite (as a finished
        # run's histories are read): a non-finite step loss is never hidden by the logged window mean.
        if math.isfinite(into.get(step, 0.0)):
            into[step] = value
        self.max_step = max(self.max_step, step)

    def add(self, name: str, step: int, value: float) -> None:
        """One logged value of the series ``name`` at ``step``."""
        value = float(value)
        self._record(name, step, value)
        named = classify(name)
        if self.panel is not None and named is not None and math.isfinite(value):
            self._draw(named.kind, named.eval_set, step, value)
        if not math.isfinite(value) and (named is None or named.kind in (LOSS, EVAL_LOSS)):
            self._nonfinite(step)

    def _draw(self, kind: str, eval_set: str, step: int, value: float) -> None:
        assert self.panel is not None
        p = self.panel
        if kind in (LOSS, EVAL_LOSS):
            trace = "train loss" if kind == LOSS else "eval loss" + (f" ({eval_set})" if eval_set else "")
            p.add(p.loss, trace, step, value)
        elif kind == LEARNING_RATE and p.lr is not None:
            p.add(p.lr, "logged", step, value)
        elif kind == GRAD_NORM and p.grad is not None:
            p.add(p.grad, "grad norm", step, value)

    def step_losses(self, pairs: list[tuple[int, float]]) -> None:
        """Training steps' own losses: the non-finite ones are kept as the training loss at their step (the
        logged loss may hide them)."""
        for step, value in pairs:
            if not math.isfinite(value):
                self._record(LOSS, step, value)
                self._nonfinite(step)

    def memory(self, step: int, allocated: float, peak: float) -> None:
        if self.panel is not None and self.panel.memory is not None:
            self.panel.add(self.panel.memory, "allocated", step, allocated / GIB)
            self.panel.add(self.panel.memory, "peak allocated", step, peak / GIB)

    def _nonfinite(self, step: int) -> None:
        if self.stop_on_nonfinite and self.stop_step is None:
            self.stop_step = step
        self.maybe_judge(force=True)

    @property
    def should_stop(self) -> bool:
        return self.stop_step is not None

    # -- judging ----------------------------------------------------------------------------------------

    def curves(self) -> tuple[dict[str, Series], list[Series]]:
        """The series logged so far, named as a finished run's are (:func:`nbkit.diagnose.artefacts.choose`:
        a kind, or ``eval_loss:<set>`` for each of several eval sets), and the loss-like series no rule but
        the non-finite one reads."""
        logged = Logged(self.source, self.convention, {k: v for k, v in self.points.items() if v})
        curves = choose([logged], (), [])
        used = {s.logged for s in curves.values()}
        others = [
            series(OTHER_LOSS, v, f"{self.source}: {n}", logged=n, convention=self.convention)
            for n, v in sorted(logged.points.items())
            if n not in used and unread_loss(n, v)
        ]
        return curves, others

    def maybe_judge(self, force: bool = False) -> None:
        """Apply the rules now when forced, or when their time so far and one more judgement as long as
        the last stay within the budget (the first judgement is made at once)."""
        if not force and self.rule_seconds + self.last_cost > RULE_BUDGET * (time.monotonic() - self.started):
            return
        t0 = time.perf_counter()
        curves, others = self.curves()
        if curves or others:
            self.judged_curves = curves
            self.rows = curve_rows(
                curves,
                others,
                schedule=self.schedule,
                total=self.total,
                total_where=self.total_where,
                max_grad_norm=self.max_grad_norm,
                clip_where=self.clip_where,
                precision=self.precision,
                precision_where=self.precision_where,
                check_lr=self.schedule is not None,
            )
            self.judged += 1
            self._announce()
        self.last_cost = time.perf_counter() - t0
        self.rule_seconds += self.last_cost

    def _announce(self) -> None:
        """One line per new finding: a row newly found, or a row of events (spikes, explosions) with more
        events than it had (an event's first step can move as later points change its trailing scale, so
        events are counted, not matched by step)."""
        for row in self.rows:
            if row.status != FOUND:
                continue
            events = row.key.split(":")[0] in EVENT_KEYS
            count = len(row.steps) if events else 1
            if count <= self.announced.get(row.key, 0):
                continue
            self.announced[row.key] = count
            stopped = row.key == "non-finite" and self.stop_step is not None
            line = (
                f"nbkit: step {self.last_step()} · FOUND {row.label}"
                + (", training stopped (stop_on_nonfinite)" if stopped else "")
                + f": {row.measured}"
            )
            self.echo(line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…")
            self._mark(row)

    def _mark(self, row: RunRow) -> None:
        """Mark a finding on the loss figure: spikes on the train loss, an onset on its eval set's loss."""
        if self.panel is None:
            return
        base, _, which = row.key.partition(":")
        if base == "loss-spikes":
            curve, trace = self.judged_curves.get(LOSS), "spike"
        elif base == "overfitting":
            curve = self.judged_curves.get(f"{EVAL_LOSS}:{which}" if which else EVAL_LOSS)
            trace = "overfitting onset" + (f" ({which})" if which else "")
        else:
            return
        if curve is None:
            return
        at = np.searchsorted(curve.steps, row.steps)
        for step, i in zip(row.steps, at, strict=True):
            if i < len(curve) and curve.steps[i] == step:
                self.panel.loss.add(trace, int(step), float(curve.values[i]))

    def last_step(self) -> int:
        return self.max_step

    def end(self) -> None:
        """Training ended: the rules once more on everything logged, and one summary line."""
        self.maybe_judge(force=True)
        if self.panel is not None:
            self.panel.close()
        found = self.findings
        what = (
            f"{len(found)} finding{'s' if len(found) != 1 else ''} ({'; '.join(r.label for r in found)})"
            if found
            else "nothing found"
        )
        self.echo(
            f"nbkit: training ended at step {self.last_step()}: {what}; rules applied {self.judged} "
            f"time{'s' if self.judged != 1 else ''} in {self.rule_seconds:.2f} s"
        )

    @property
    def findings(self) -> list[RunRow]:
        return [r for r in self.rows if r.status == FOUND]


class _WatchingCallback:
    """What the two callbacks expose: their :class:`Watch`'s rows, findings, curves and rule time."""

    watch: Watch

    @property
    def rows(self) -> list[RunRow]:
        """Every rule's row at the last judgement (the end of training, once it has ended)."""
        return self.watch.rows

    @property
    def findings(self) -> list[RunRow]:
        return self.watch.findings

    @property
    def curves(self) -> dict[str, Series]:
        """The series the rules read, keyed as a finished run's: ``loss``, ``learning_rate``, ``grad_norm``,
        ``eval_loss`` (``eval_loss:<set>`` for each of several eval sets)."""
        return self.watch.curves()[0]

    @property
    def rule_seconds(self) -> float:
        """Seconds spent applying the rules (the budgeted part of the callback's cost)."""
        return self.watch.rule_seconds

    @property
    def stopped_at(self) -> int | None:
        """The step training was stopped at (a non-finite loss with ``stop_on_nonfinite``), or None."""
        return self.watch.stop_step


class _StepLosses:
    """Training steps' losses kept on the device until read together (one device-to-host copy)."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.losses: list[Any] = []

    def __len__(self) -> int:
        return len(self.losses)

    def add(self, step: int, loss: Any) -> None:
        self.steps.append(step)
        self.losses.append(loss.detach())  # the rest (shape, dtype, the copy) once per read

    def read(self) -> list[tuple[int, float]]:
        """Every (step, loss) kept, in order; empties the store."""
        if not self.losses:
            return []
        import torch

        values = torch.stack([x.reshape(()) for x in self.losses]).float().cpu().tolist()
        out = list(zip(self.steps, values, strict=True))
        self.steps, self.losses = [], []
        return out


def _model_loss(output: Any) -> Any:
    """The one-element loss tensor a model's forward returned (a ModelOutput, a dict, an object with
    ``.loss``), or None."""
    loss = output.get("loss") if isinstance(output, Mapping) else getattr(output, "loss", None)
    return loss if hasattr(loss, "detach") and loss.numel() == 1 else None


@lru_cache(maxsize=1)
def _hf_class() -> type:
    import transformers
    from transformers import TrainerCallback

    # transformers 5 logs the LR the step used (the schedule before that step), transformers 4 the next one.
    lr_offset = 1 if int(transformers.__version__.split(".")[0]) >= 5 else 0

    class DiagnoseCallback(_WatchingCallback, TrainerCallback):
        """The finished-run rules on the HF Trainer's logs as they arrive (see :mod:`nbkit.callbacks`).

        ``stop_on_nonfinite``: stop training after the first step whose training loss or an eval loss is
        not finite. ``live``: draw the curves (default: when running in Jupyter). ``figure``: a
        :class:`nbkit.live.LiveFigure` to draw the loss and eval losses into instead (nothing else is
        drawn). ``echo``: what prints a finding's line (default ``print``). The schedule and clipping are
        read from the Trainer's own arguments (``lr_scheduler_type``, ``learning_rate``, warmup,
        ``lr_scheduler_kwargs``, ``max_grad_norm``), the total from its ``max_steps``, each step's own
        loss from the model's output (a forward hook, removed when training ends)."""

        def __init__(
            self,
            stop_on_nonfinite: bool = False,
            *,
            live: bool | None = None,
            figure: Any = None,
            echo: Callable[[str], None] | None = None,
        ) -> None:
            self.watch = Watch(
                stop_on_nonfinite=stop_on_nonfinite,
                live=live,
                figure=figure,
                echo=echo,
                source="the HF Trainer's logs",
                convention=HF_TRAINER,
            )
            self._losses = _StepLosses()
            self._hook: Any = None
            self._step = 0

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            total = int(state.max_steps)
            kind = getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)
            keys = ("lr_scheduler_type", "learning_rate", "warmup_steps", "max_steps", "max_grad_norm")
            schedule = Schedule(
                kind=str(kind),
                peak=float(args.learning_rate),
                warmup_steps=float(args.get_warmup_steps(total)),
                warmup_ratio=0.0,
                max_steps=total,
                max_grad_norm=float(args.max_grad_norm),
                where={k: f"TrainingArguments.{k}" for k in keys},
                source="the Trainer's TrainingArguments",
                options=dict(args.lr_scheduler_kwargs or {}),
            )
            device = getattr(args, "device", None)
            self.watch.begin(
                schedule=schedule,
                total=total,
                total_where="the Trainer's max_steps",
                max_grad_norm=float(args.max_grad_norm),
                clip_where="TrainingArguments.max_grad_norm",
                memory_device=device if getattr(device, "type", "") == "cuda" else None,
                precision=_hf_precision(args),
                lr_offset=lr_offset,
            )
            self._losses = _StepLosses()
            self._step = int(state.global_step) + 1
            if model is not None:
                self._hook = model.register_forward_hook(self._on_forward)

        def _on_forward(self, module, inputs, output):
            if module.training:
                loss = _model_loss(output)
                if loss is not None:
                    self._losses.add(self._step, loss)

        def on_step_end(self, args, state, control, **kwargs):
            self._step = int(state.global_step) + 1
            if self.watch.stop_on_nonfinite or len(self._losses) >= PENDING_LOSSES:
                self.watch.step_losses(self._losses.read())
            if self.watch.should_stop:
                control.should_training_stop = True
            return control

        def on_log(self, args, state, control, logs=None, **kwargs):
            logs = logs or {}
            if "train_runtime" in logs:  # the Trainer's summary of the whole run, not a logged step
                return control
            step = int(state.global_step)
            for key, value in logs.items():
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    continue
                if self.watch.reads(key):
                    self.watch.add(key, step, value)
            _memory(self.watch, step)
            self.watch.maybe_judge()
            if self.watch.should_stop:
                control.should_training_stop = True
            return control

        def on_train_end(self, args, state, control, **kwargs):
            self.watch.step_losses(self._losses.read())
            if self._hook is not None:
                self._hook.remove()
                self._hook = None
            self.watch.end()

    return DiagnoseCallback


def _hf_precision(args: Any) -> tuple[str | None, str]:
    """The run's precision as the non-finite rule reads it, from TrainingArguments' fp16 / bf16."""
    for name in ("fp16", "bf16"):
        if getattr(args, name, False):
            return name, f"TrainingArguments.{name} = True"
    return "fp32", "TrainingArguments.fp16 and bf16 = False"


def _lightning_precision(trainer: Any) -> tuple[str | None, str]:
    """The run's precision from ``Trainer(precision=…)`` ("16-mixed" is fp16 with a loss scaler)."""
    text = str(getattr(trainer, "precision", "") or "")
    kind = (
        "bf16"
        if text.startswith("bf16")
        else "fp16"
        if text.startswith("16")
        else "fp32"
        if text.startswith(("32", "64"))
        else None
    )
    return kind, f"Trainer(precision={text!r})"


def _memory(watch: Watch, step: int) -> None:
    """CUDA memory at ``step`` into the panel (only when training on a GPU and drawing)."""
    if watch.memory_device is not None and watch.panel is not None:
        import torch

        device = watch.memory_device
        watch.memory(step, torch.cuda.memory_allocated(device), torch.cuda.max_memory_allocated(device))


@lru_cache(maxsize=1)
def _lightning_class() -> type:
    import lightning.pytorch as pl

    class LightningDiagnoseCallback(_WatchingCallback, pl.Callback):
        """The finished-run rules on a Lightning run as it trains (see :mod:`nbkit.callbacks`).

        The training loss is the training step's own (``outputs["loss"]`` times the accumulation; the mean
        over a step's micro-batches), the LR the first optimizer's first parameter group's at each step,
        the grad norm the total 2-norm before clipping every ``log_every_n_steps`` (as
        ``on_before_optimizer_step`` sees it), each eval loss a logged metric whose name says so
        (:mod:`nbkit.diagnose.names`: ``val_loss``, ``val/loss``, ``loss/val``, ``val_loss/dataloader_idx_1``
        …) after each validation, its precision ``Trainer(precision=…)``'s. Clipping
        is judged against ``Trainer(gradient_clip_val=…)`` with the norm algorithm; the LR is drawn, not
        checked (a Lightning run's schedule is its own torch objects, with no named config to compare
        with). Arguments as for :class:`DiagnoseCallback`."""

        def __init__(
            self,
            stop_on_nonfinite: bool = False,
            *,
            live: bool | None = None,
            figure: Any = None,
            echo: Callable[[str], None] | None = None,
        ) -> None:
            self.watch = Watch(
                stop_on_nonfinite=stop_on_nonfinite,
                live=live,
                figure=figure,
                echo=echo,
                source="the Lightning run's training steps and metrics",
                convention=LIGHTNING,
            )
            self._losses = _StepLosses()
            self._step = 0

        def on_train_start(self, trainer, pl_module):
            clip = trainer.gradient_clip_val
            algorithm = str(getattr(trainer, "gradient_clip_algorithm", None) or "norm")
            device = trainer.strategy.root_device
            self.watch.begin(
                schedule=None,
                total=None,
                total_where="",
                max_grad_norm=float(clip) if clip and algorithm.endswith("norm") else 0.0,
                clip_where="Trainer(gradient_clip_val)",
                memory_device=device if device.type == "cuda" else None,
                precision=_lightning_precision(trainer),
            )
            self._losses = _StepLosses()

        def _logs_at(self, trainer, step: int) -> bool:
            return step % max(1, int(trainer.log_every_n_steps)) == 0

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            self._step = int(trainer.global_step) + 1  # the optimizer step this batch is part of

        def on_before_optimizer_step(self, trainer, pl_module, optimizer):
            self.watch.add(LEARNING_RATE, self._step, optimizer.param_groups[0]["lr"])
            if self._logs_at(trainer, self._step):
                import torch

                grads = [p.grad for p in pl_module.parameters() if p.grad is not None]
                if grads:
                    self.watch.add(GRAD_NORM, self._step, float(torch.nn.utils.get_total_norm(grads)))

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
            if hasattr(loss, "detach"):
                self._losses.add(self._step, loss * int(trainer.accumulate_grad_batches))
            stepped = int(trainer.global_step) == self._step  # the step's last micro-batch is done
            logs = stepped and self._logs_at(trainer, self._step)
            if stepped and (logs or self.watch.stop_on_nonfinite or len(self._losses) >= PENDING_LOSSES):
                self._read_losses()
            if logs:
                _memory(self.watch, self._step)
                self.watch.maybe_judge()
            if self.watch.should_stop:
                trainer.should_stop = True

        def _read_losses(self) -> None:
            by_step: dict[int, list[float]] = {}
            for step, value in self._losses.read():
                by_step.setdefault(step, []).append(value)
            for step, values in by_step.items():  # a step's micro-batches (gradient accumulation): their mean
                self.watch.add(LOSS, step, float(np.mean(values)))

        def on_validation_end(self, trainer, pl_module):
            if trainer.sanity_checking:
                return
            step = int(trainer.global_step)
            for key, value in trainer.callback_metrics.items():
                # The eval losses, and the losses no rule but the non-finite one reads; the training loss is
                # the step's own (callback_metrics holds only its last logged value).
                named = classify(key)
                if (named is not None and named.kind == EVAL_LOSS) or loss_like(key):
                    self.watch.add(key, step, float(value))
            self.watch.maybe_judge()
            if self.watch.should_stop:
                trainer.should_stop = True

        def on_train_end(self, trainer, pl_module):
            self._read_losses()
            self.watch.end()

    return LightningDiagnoseCallback


def __getattr__(name: str) -> Any:
    # The callback classes subclass transformers' and lightning's: built on first use, so importing this
    # module (or nbkit) imports neither library.
    if name == "DiagnoseCallback":
        return _hf_class()
    if name == "LightningDiagnoseCallback":
        return _lightning_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "DiagnoseCallback", "LightningDiagnoseCallback"])
