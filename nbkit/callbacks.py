"""The finished-run diagnosis while the run trains: callbacks for the HF Trainer and Lightning.

``nbkit diagnose RUN_DIR`` judges the curves a run left behind; these callbacks apply the same rules
(:mod:`nbkit.diagnose.curves`, :mod:`nbkit.diagnose.schedule`) to the curves logged so far, as the logs
arrive::

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

import dataclasses
import math
import re
import time
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from nbkit.diagnose.curves import (
    EVAL_LOSS,
    GRAD_NORM,
    LEARNING_RATE,
    LOSS,
    Series,
    verdict_clipping,
    verdict_explosions,
    verdict_nonfinite,
    verdict_overfitting,
    verdict_plateau,
    verdict_spikes,
)
from nbkit.diagnose.rows import FOUND, RunRow
from nbkit.diagnose.schedule import Schedule, configured_curve, verdict_schedule
from nbkit.live import LiveFigure, in_kernel

# The two callback classes are built on first use (the module's __getattr__ below).
__all__ = ["RULE_BUDGET", "DiagnoseCallback", "LightningDiagnoseCallback", "Watch", "judge"]  # noqa: F822

RULE_BUDGET = 0.005  # the share of training time the rules may take (recording and drawing come on top)
LINE_CHARS = 300  # a finding's printed line is cut here; callback.rows keeps the whole text
PENDING_LOSSES = 64  # per-step losses held on the device at most before they are read in one copy
LIVE_POINTS = 1000  # a live trace draws every point up to this many, then every 2nd, 4th …
GIB = 2**30
EVENT_KEYS = ("loss-spikes", "grad-explosions")  # rows of events: each further event is a new finding

# An eval loss as Lightning users and the HF Trainer name it: val_loss, val/loss, valid_loss_epoch,
# loss/val, eval_loss, eval_<set>_loss (the HF Trainer's dict of eval datasets), validation/loss.
_EVAL_WORD = r"(?:val|valid|validation|eval)"
_EVAL_NAME = re.compile(
    rf"^(?:{_EVAL_WORD}[_/](?:(?P<set>.+?)[_/])?loss|loss[_/]{_EVAL_WORD})(?:[_/]epoch)?$", re.IGNORECASE
)


_DATALOADER = re.compile(r"^(?P<base>.+)/(?P<idx>dataloader_idx_\d+)$")  # Lightning, several val loaders


def eval_set(name: str) -> str | None:
    """The eval set an eval-loss metric name belongs to ("" for the only or default one; Lightning's
    ``/dataloader_idx_N`` suffix names the set too), None when the name is not an eval loss."""
    loader = _DATALOADER.match(name)
    m = _EVAL_NAME.match(loader.group("base") if loader else name)
    if m is None:
        return None
    parts = [p for p in (m.group("set"), loader.group("idx") if loader else None) if p]
    return "/".join(parts)


# -- the one adapter between the callbacks and the rules ------------------------------------------------


def judge(
    curves: Mapping[str, Series],
    evals: Mapping[str, Series],
    schedule: Schedule | None,
    total: int | None,
    total_where: str,
    max_grad_norm: float | None,
    clip_where: str,
) -> list[RunRow]:
    """The finished-run rules on the curves logged so far: ``curves`` by quantity (loss, grad norm, LR),
    ``evals`` each eval set's loss by name; a rule that takes an eval loss runs once per eval set (its key
    and title then name the set). No ``schedule``: the LR is not checked (no row)."""
    loss, grad, lr = curves.get(LOSS), curves.get(GRAD_NORM), curves.get(LEARNING_RATE)
    sets = list(evals.items()) or [("", None)]

    def named(row: RunRow, name: str) -> RunRow:
        if len(sets) == 1:
            return row
        label = name or "eval"
        return dataclasses.replace(row, key=f"{row.key}:{label}", title=f"{row.title} ({label})")

    first_eval = {EVAL_LOSS: sets[0][1]} if sets[0][1] is not None else {}
    rows = [
        verdict_spikes(loss),
        verdict_nonfinite({k: v for k, v in ((LOSS, loss), (GRAD_NORM, grad)) if v is not None} | first_eval),
    ]
    rows += [named(verdict_nonfinite({EVAL_LOSS: s}), n) for n, s in sets[1:] if s is not None]
    rows += [
        verdict_explosions(grad),
        verdict_clipping(grad, max_grad_norm, clip_where),
    ]
    rows += [named(verdict_overfitting(loss, s), n) for n, s in sets]
    if schedule is not None:
        rows.append(verdict_schedule(lr, schedule, total, total_where))
    rows.append(verdict_plateau(loss, lr))
    return rows


# -- what both callbacks share ----------------------------------------------------------------------------


class _Curve:
    """One quantity's points as they arrive (a step logged twice keeps its last value)."""

    def __init__(self, name: str, source: str) -> None:
        self.name, self.source = name, source
        self.steps: list[int] = []
        self.values: list[float] = []

    def add(self, step: int, value: float) -> None:
        if self.steps and self.steps[-1] == step:
            self.values[-1] = value
        else:
            self.steps.append(step)
            self.values.append(value)

    def series(self, override: Mapping[int, float] | None = None) -> Series:
        """The points as a :class:`Series`, the values in ``override`` replacing (or adding) theirs."""
        points = dict(zip(self.steps, self.values, strict=True))
        if override:
            points.update(override)
            steps = np.array(sorted(points), dtype=np.int64)
            return Series(self.name, steps, np.array([points[s] for s in steps]), self.source)
        return Series(self.name, np.array(self.steps, dtype=np.int64), np.array(self.values), self.source)


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

    :meth:`begin` starts a run (what is known of its schedule and clipping); :meth:`add` records a logged
    value (``quantity``: loss, learning_rate, grad_norm, or eval_loss with ``eval_set`` naming the set);
    :meth:`step_losses` a training step's own losses, read from the device in one copy; :meth:`maybe_judge`
    applies the rules within :data:`RULE_BUDGET`; :meth:`end` judges once more and prints the summary.
    ``echo`` prints each new finding's line (``print`` by default)."""

    def __init__(
        self,
        *,
        stop_on_nonfinite: bool,
        live: bool | None,
        figure: Any,
        echo: Callable[[str], None] | None,
        source: str,
    ) -> None:
        self.stop_on_nonfinite = stop_on_nonfinite
        self.live = live
        self.figure = figure
        self.echo = echo if echo is not None else (lambda line: print(line, flush=True))
        self.source = source
        self.reset()

    def reset(self) -> None:
        self.quantities: dict[str, _Curve] = {}
        self.evals: dict[str, _Curve] = {}
        self.bad_losses: dict[int, float] = {}  # steps whose own training loss was not finite
        self.rows: list[RunRow] = []
        self.schedule: Schedule | None = None
        self.total: int | None = None
        self.total_where = ""
        self.max_grad_norm: float | None = None
        self.clip_where = ""
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
        lr_offset: int = 0,
    ) -> None:
        """A run starts: what is known of its schedule and clipping; the panel when drawing."""
        import scipy.stats  # noqa: F401  (the rules' intervals: imported here, not inside the first judgement)

        self.reset()
        self.schedule, self.total, self.total_where = schedule, total, total_where
        self.max_grad_norm, self.clip_where = max_grad_norm, clip_where
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

    def add(self, quantity: str, step: int, value: float, eval_set: str = "") -> None:
        value = float(value)
        if quantity == EVAL_LOSS:
            curve = self.evals.get(eval_set)
            if curve is None:
                name = f"eval_{eval_set}_loss" if eval_set else EVAL_LOSS
                curve = self.evals[eval_set] = _Curve(name, self.source)
        else:
            curve = self.quantities.get(quantity)
            if curve is None:
                curve = self.quantities[quantity] = _Curve(quantity, self.source)
        curve.add(step, value)
        if self.panel is not None and math.isfinite(value):
            self._draw(quantity, eval_set, step, value)
        if quantity in (LOSS, EVAL_LOSS) and not math.isfinite(value):
            self._nonfinite(step)

    def _draw(self, quantity: str, eval_set: str, step: int, value: float) -> None:
        assert self.panel is not None
        p = self.panel
        if quantity in (LOSS, EVAL_LOSS):
            trace = "train loss" if quantity == LOSS else "eval loss" + (f" ({eval_set})" if eval_set else "")
            p.add(p.loss, trace, step, value)
        elif quantity == LEARNING_RATE and p.lr is not None:
            p.add(p.lr, "logged", step, value)
        elif quantity == GRAD_NORM and p.grad is not None:
            p.add(p.grad, "grad norm", step, value)

    def step_losses(self, pairs: list[tuple[int, float]]) -> None:
        """Training steps' own losses: the non-finite ones are kept (the logged loss may hide them)."""
        for step, value in pairs:
            if not math.isfinite(value):
                self.bad_losses[step] = value
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

    def curves(self) -> tuple[dict[str, Series], dict[str, Series]]:
        """The series logged so far, a step whose own loss was not finite carrying that value."""
        curves = {k: c.series() for k, c in self.quantities.items() if c.steps and k != LOSS}
        if LOSS in self.quantities or self.bad_losses:
            loss = self.quantities.get(LOSS) or _Curve(LOSS, self.source)
            curves[LOSS] = loss.series(self.bad_losses)
        return curves, {k: c.series() for k, c in self.evals.items() if c.steps}

    def maybe_judge(self, force: bool = False) -> None:
        """Apply the rules now when forced, or when their time so far and one more judgement as long as
        the last stay within the budget (the first judgement is made at once)."""
        if not force and self.rule_seconds + self.last_cost > RULE_BUDGET * (time.monotonic() - self.started):
            return
        t0 = time.perf_counter()
        curves, evals = self.curves()
        if curves or evals:
            self.rows = judge(
                curves,
                evals,
                self.schedule,
                self.total,
                self.total_where,
                self.max_grad_norm,
                self.clip_where,
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
                f"nbkit: step {self.last_step()} · FOUND {row.title}"
                + (", training stopped (stop_on_nonfinite)" if stopped else "")
                + f": {row.measured}"
            )
            self.echo(line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…")
            self._mark(row)

    def _mark(self, row: RunRow) -> None:
        """Mark a finding on the loss figure: spikes on the train loss, an onset on its eval loss."""
        if self.panel is None:
            return
        base, _, name = row.key.partition(":")
        if base == "loss-spikes":
            curve, trace = self.quantities.get(LOSS), "spike"
        elif base == "overfitting" and self.evals:
            curve = self.evals.get("" if name in ("", "eval") else name) or next(iter(self.evals.values()))
            trace = "overfitting onset"
        else:
            return
        for step in row.steps:
            if curve is not None and step in curve.steps:
                self.panel.loss.add(trace, step, curve.values[curve.steps.index(step)])

    def last_step(self) -> int:
        ends = [c.steps[-1] for c in [*self.quantities.values(), *self.evals.values()] if c.steps]
        return max([*ends, *self.bad_losses], default=0)

    def end(self) -> None:
        """Training ended: the rules once more on everything logged, and one summary line."""
        self.maybe_judge(force=True)
        if self.panel is not None:
            self.panel.close()
        found = self.findings
        what = (
            f"{len(found)} finding{'s' if len(found) != 1 else ''} ({', '.join(r.title for r in found)})"
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
        """The series the rules read: loss, grad norm, LR, and each eval set's loss under its metric name."""
        curves, evals = self.watch.curves()
        return curves | {(f"eval_{name}_loss" if name else EVAL_LOSS): s for name, s in evals.items()}

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
                if key in (LOSS, LEARNING_RATE, GRAD_NORM):
                    self.watch.add(key, step, value)
                elif (name := eval_set(key)) is not None:
                    self.watch.add(EVAL_LOSS, step, value, eval_set=name)
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
        (``val_loss``, ``val/loss``, ``loss/val``, ``valid_<set>_loss`` …) after each validation. Clipping
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
                if (name := eval_set(key)) is not None:
                    self.watch.add(EVAL_LOSS, step, float(value), eval_set=name)
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
