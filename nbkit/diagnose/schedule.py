"""The learning rate a finished run logged, against the schedule its trainer config names.

The config's ``lr_scheduler_type``, ``learning_rate``, warmup and total steps become the audit's
scheduler stages (:mod:`nbkit.audit.checks.schedulers`: real ``torch.optim.lr_scheduler`` objects —
``LinearLR`` for the warmup, then ``LinearLR`` to 0, ``CosineAnnealingLR`` or ``ConstantLR``), which
reproduce transformers' ``get_linear/cosine/constant(_with_warmup)_schedule`` step for step. Each stage
is run alone from the peak (the audit's "intended" trace), as transformers' single ``LambdaLR`` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nbkit.audit.checks.schedulers import build, lr_trace
from nbkit.audit.sections import SchedulerSection, StageSection
from nbkit.diagnose.curves import Series
from nbkit.diagnose.rows import CLEAR, FOUND, NOT_CHECKED, UNDECIDED, RunRow

MODELLED = ("linear", "cosine", "constant", "constant_with_warmup")
TOLERANCE = 0.01  # of the configured peak: a logged LR further off than this is not the configured schedule
# transformers' warmup starts at 0; LinearLR needs a start factor > 0. At 1e-12 the two agree to 1e-12
# of the peak at every step.
_START = 1e-12


@dataclass(frozen=True)
class Schedule:
    """The schedule a trainer config names, each value with where it was read (``file:line key``, or
    "not set; the trainer's default")."""

    kind: str
    peak: float
    warmup_steps: float  # ≥ 1: steps; in (0, 1): a share of the total (transformers ≥ 5)
    warmup_ratio: float  # transformers 4's separate ratio (used when warmup_steps is 0)
    max_steps: int  # ≤ 0: from the epochs (the run's trainer_state.json says how many)
    max_grad_norm: float | None  # only when the config sets it (no default assumed)
    where: dict[str, str] = field(default_factory=dict)
    source: str = ""

    def warmup(self, total: int) -> int:
        """Warmup steps as transformers resolves them (``TrainingArguments.get_warmup_steps``)."""
        if self.warmup_steps >= 1:
            return int(self.warmup_steps)
        if self.warmup_steps > 0:
            return math.ceil(total * self.warmup_steps)
        return math.ceil(total * self.warmup_ratio) if self.warmup_ratio > 0 else 0


def schedule_from_values(values: dict[str, Any], source: str) -> Schedule:
    """A :class:`Schedule` from :func:`nbkit.diagnose.setup.trainer_values`' settings."""
    v = values
    clip = v["max_grad_norm"]
    return Schedule(
        kind=str(v["lr_scheduler_type"].value),
        peak=float(v["learning_rate"].value),
        warmup_steps=float(v["warmup_steps"].value),
        warmup_ratio=float(v["warmup_ratio"].value),
        max_steps=int(v["max_steps"].value),
        max_grad_norm=float(clip.value) if clip.set else None,
        where={
            k: v[k].text()
            for k in (
                "lr_scheduler_type",
                "learning_rate",
                "warmup_steps",
                "warmup_ratio",
                "max_steps",
                "max_grad_norm",
            )
        },
        source=source,
    )


def stages(kind: str, warmup: int, total: int) -> list[StageSection]:
    """transformers' schedule ``kind`` as the audit's stages (``constant`` has no warmup there)."""
    if kind not in MODELLED:
        raise ValueError(f"schedule {kind!r} is not modelled")

    def stage(**kw: Any) -> StageSection:
        return StageSection.model_validate(kw)

    warm = [stage(kind="linear_warmup", steps=warmup, start_factor=_START)] if warmup > 0 else []
    rest = max(total - warmup, 1)
    if kind == "constant":
        return [stage(kind="constant", steps=max(total, 1))]
    tail = {"linear": "linear_decay", "cosine": "cosine", "constant_with_warmup": "constant"}[kind]
    return [*warm, stage(kind=tail, steps=rest)]


def expected_lr(kind: str, peak: float, warmup: int, total: int) -> np.ndarray:
    """The LR at steps 0…total (each stage alone from ``peak``, concatenated; the last stage run one step
    further so step ``total`` is included)."""
    out: list[float] = []
    parts = stages(kind, warmup, total)
    for i, s in enumerate(parts):
        opt, sched = build(SchedulerSection.model_validate({"base_lr": peak, "stages": [s]}))
        out += lr_trace(opt, sched, s.steps + (1 if i == len(parts) - 1 else 0))
    return np.array(out[: total + 1])


def _deviation(lr: Series, exp: np.ndarray, offset: int, peak: float) -> np.ndarray:
    idx = lr.steps - offset
    ok = (idx >= 0) & (idx < len(exp))
    dev = np.full(len(lr), np.inf)
    dev[ok] = np.abs(lr.values[ok] - exp[idx[ok]]) / peak
    return dev


def _fit(lr: Series, kind: str, peak: float, warmup: int, total: int) -> tuple[float, int, np.ndarray]:
    """(largest deviation ÷ peak, offset used, deviations) at the better of the two logging alignments."""
    exp = expected_lr(kind, peak, warmup, total)
    best = None
    for offset in (0, 1):
        dev = _deviation(lr, exp, offset, peak)
        m = float(dev.max()) if len(dev) else 0.0
        if best is None or m < best[0]:
            best = (m, offset, dev)
    assert best is not None
    return best


RULE = (
    "the logged LR at every logged step against the config's schedule (lr_scheduler_type, learning_rate, "
    "warmup, total steps) computed with the audit's scheduler model (torch LinearLR / CosineAnnealingLR / "
    "ConstantLR stages, equal to transformers' schedules); the Trainer logs step k's LR as the schedule at "
    "k (transformers 4) or at k − 1 (transformers 5), the closer alignment is used; found when any logged "
    f"LR is off by more than {TOLERANCE:.0%} of the configured peak, clear when none is"
)


def observed_warmup(lr: Series) -> int:
    """Logged steps before the LR first reaches 99 % of its largest logged value."""
    f = lr.finite()
    top = float(f.values.max())
    return int(f.steps[int(np.argmax(f.values >= 0.99 * top))])


def verdict_schedule(
    lr: Series | None, schedule: Schedule | None, total: int | None, total_where: str
) -> RunRow:
    """The logged LR against the configured schedule (:data:`RULE`)."""

    title = "learning rate as configured"
    if schedule is None:
        return RunRow(
            "lr-schedule",
            title,
            NOT_CHECKED,
            "no trainer config: pass --config (an axolotl YAML or TrainingArguments JSON), or keep it "
            "beside the run",
            RULE,
        )
    if lr is None:
        return RunRow("lr-schedule", title, NOT_CHECKED, "no learning rate logged", RULE, schedule.source)
    if schedule.kind not in MODELLED:
        return RunRow(
            "lr-schedule",
            title,
            NOT_CHECKED,
            f"{schedule.where['lr_scheduler_type']}: schedule {schedule.kind!r} is not modelled "
            f"({', '.join(MODELLED)} are)",
            RULE,
            schedule.source,
        )
    f = lr.finite()
    source = f"{lr.source} against {schedule.source}"
    if len(f) < 2:
        return RunRow(
            "lr-schedule", title, UNDECIDED, f"only {len(f)} finite logged learning rates", RULE, source
        )
    if schedule.peak <= 0:
        return RunRow(
            "lr-schedule", title, UNDECIDED, f"{schedule.where['learning_rate']}: peak ≤ 0", RULE, source
        )
    if total is None or total < 1:
        total, total_where = int(f.steps[-1]), "the last logged step (no max_steps known)"
    warmup = schedule.warmup(total)
    described = (
        f"{schedule.kind}, peak {schedule.peak:g}, {warmup} warmup step{'s' if warmup != 1 else ''}, "
        f"{total} steps ({total_where})"
    )
    beyond = int((f.steps > total + 1).sum())
    worst, offset, dev = _fit(f, schedule.kind, schedule.peak, warmup, total)
    figures: dict[str, Any] = {
        "configured": {"kind": schedule.kind, "peak": schedule.peak, "warmup": warmup, "total": total},
        "max_deviation_over_peak": worst if math.isfinite(worst) else None,
        "offset": offset,  # step k logs the schedule at k − offset
        "where": schedule.where,
    }
    if worst <= TOLERANCE:
        return RunRow(
            "lr-schedule",
            title,
            CLEAR,
            f"the logged LR follows {described} at all {len(f)} logged steps (largest difference "
            f"{worst:.2%} of the peak)",
            RULE,
            source,
            figures=figures,
        )
    bad = np.flatnonzero(dev > TOLERANCE)
    first = int(bad[0])
    step = int(f.steps[first])
    exp = expected_lr(schedule.kind, schedule.peak, warmup, total)
    k = step - offset
    expected = f"{exp[k]:.4g}" if 0 <= k < len(exp) else "none (past the configured total)"
    obs_peak, obs_warm = float(f.values.max()), observed_warmup(f)
    text = (
        f"configured {described}; the logged LR departs at step {step} (logged {f.values[first]:.4g}, "
        f"configured {expected}) and at {len(bad)} of {len(f)} logged steps; logged peak {obs_peak:.4g} "
        f"reached at step {obs_warm}"
    )
    if beyond:
        text += f"; {beyond} logged steps lie past the configured total"
    alternatives = []
    for kind in MODELLED:
        for w in sorted({obs_warm, max(obs_warm - 1, 0), warmup}):
            m, _, _ = _fit(f, kind, obs_peak, w, total)
            if m <= TOLERANCE:
                alternatives.append(f"{kind} with {w} warmup steps and peak {obs_peak:.4g}")
                break
    if alternatives:
        text += "; it follows " + " or ".join(alternatives[:2]) + " instead"
        figures["logged_follows"] = alternatives
    return RunRow(
        "lr-schedule",
        title,
        FOUND,
        text,
        RULE,
        source,
        steps=(step,),
        figures=figures,
        fix="check what set the LR: a DeepSpeed scheduler section replaces the Trainer's, a resumed run "
        "without its scheduler state restarts the schedule, a callback or optimizer override changes it",
    )


def read_args_text(text: str) -> dict[str, Any] | None:
    """The TrainingArguments JSON transformers' TensorBoard callback writes as the ``args`` text (or None)."""
    import json

    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) and "lr_scheduler_type" in data else None
