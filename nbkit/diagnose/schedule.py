"""The learning rate a run logged, against the schedule its trainer config names.

The config's ``lr_scheduler_type``, ``learning_rate``, warmup, total steps and ``lr_scheduler_kwargs`` name
one of transformers' schedules (what ``transformers.get_scheduler`` builds for the HF Trainer: a
``LambdaLR`` whose factor is a formula of the step). Those formulas are written here once more, in numpy
over a whole array of steps: stepping a real optimizer and scheduler once per step costs seconds per
hundred thousand steps, and a pre-training run logs millions. The tests check every formula against
transformers' own schedulers (stepped, on short schedules, and their factor functions at sampled steps
of long ones), so the two cannot drift apart unnoticed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nbkit.diagnose.curves import Series
from nbkit.diagnose.rows import CLEAR, FOUND, NOT_CHECKED, UNDECIDED, RunRow

# Each modelled ``lr_scheduler_type`` with the ``lr_scheduler_kwargs`` its transformers function takes and
# their defaults there (``REQUIRED``: the function refuses to build without it).
REQUIRED = object()
OPTIONS: dict[str, dict[str, Any]] = {
    "linear": {},
    "cosine": {"num_cycles": 0.5},
    "cosine_with_restarts": {"num_cycles": 1},
    "polynomial": {"lr_end": 1e-7, "power": 1.0},
    "constant": {},
    "constant_with_warmup": {},
    "inverse_sqrt": {"timescale": None},
    "cosine_with_min_lr": {"num_cycles": 0.5, "min_lr": None, "min_lr_rate": None},
    "cosine_warmup_with_min_lr": {
        "num_cycles": 0.5,
        "min_lr": None,
        "min_lr_rate": None,
        "warmup_lr_rate": None,
    },
    "warmup_stable_decay": {
        "num_decay_steps": REQUIRED,
        "num_stable_steps": None,
        "warmup_type": "linear",
        "decay_type": "cosine",
        "min_lr_ratio": 0.0,
        "num_cycles": 0.5,
    },
}
MODELLED = tuple(OPTIONS)
NOT_MODELLED = {
    "reduce_lr_on_plateau": "it lowers the LR when the eval metric stops improving, not at a given step",
    "greedy": "it changes the LR from the training loss as it goes, not at a given step",
}
SHAPES = ("linear", "cosine", "1-sqrt")  # warmup_stable_decay's warmup_type and decay_type
TOLERANCE = 0.01  # of the configured peak: a logged LR further off than this is not the configured schedule
# Alternatives are first tried on this many evenly spaced logged points: one of them off the alternative
# already rules it out, so only a candidate that fits there is checked at every point.
PROBE_POINTS = 2000


class ScheduleOptionError(ValueError):
    """``lr_scheduler_kwargs`` that transformers' schedule function would refuse (the message says why)."""


@dataclass(frozen=True)
class Schedule:
    """The schedule a trainer config names, each value with where it was read (``file:line key``, or
    "not set; the trainer's default"). ``options`` are its ``lr_scheduler_kwargs`` (None: not read, so
    transformers' defaults are assumed and the row says so)."""

    kind: str
    peak: float
    warmup_steps: float  # ≥ 1: steps; in (0, 1): a share of the total (transformers ≥ 5)
    warmup_ratio: float  # transformers 4's separate ratio (used when warmup_steps is 0)
    max_steps: int  # ≤ 0: from the epochs (the run's trainer_state.json says how many)
    max_grad_norm: float | None  # only when the config sets it (no default assumed)
    where: dict[str, str] = field(default_factory=dict)
    source: str = ""
    options: Mapping[str, Any] | None = None

    def warmup(self, total: int) -> int:
        """Warmup steps as transformers resolves them (``TrainingArguments.get_warmup_steps``)."""
        if self.warmup_steps >= 1:
            return int(self.warmup_steps)
        if self.warmup_steps > 0:
            return math.ceil(total * self.warmup_steps)
        return math.ceil(total * self.warmup_ratio) if self.warmup_ratio > 0 else 0


def schedule_from_values(
    values: dict[str, Any], source: str, options: Mapping[str, Any] | None = None
) -> Schedule:
    """A :class:`Schedule` from :func:`nbkit.diagnose.setup.trainer_values`' settings (and the config's
    ``lr_scheduler_kwargs`` when it was read)."""
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
        options=options,
    )


def resolve_options(kind: str, options: Mapping[str, Any] | None, peak: float) -> dict[str, Any]:
    """``options`` over the schedule's defaults, checked as transformers' function checks them
    (:class:`ScheduleOptionError` naming the key otherwise); ``min_lr`` becomes ``min_lr_rate``."""
    if kind not in OPTIONS:
        raise ScheduleOptionError(f"schedule {kind!r} is not modelled")
    given = dict(options or {})
    unknown = sorted(set(given) - set(OPTIONS[kind]))
    if unknown:
        allowed = ", ".join(OPTIONS[kind]) or "none"
        raise ScheduleOptionError(
            f"lr_scheduler_kwargs {', '.join(unknown)}: not an argument of transformers' {kind!r} schedule "
            f"(it takes: {allowed})"
        )
    out = {**OPTIONS[kind], **given}
    missing = [k for k, v in out.items() if v is REQUIRED]
    if missing:
        raise ScheduleOptionError(f"{kind!r} needs lr_scheduler_kwargs {', '.join(missing)}")
    if kind in ("cosine_with_min_lr", "cosine_warmup_with_min_lr"):
        if out["min_lr"] is not None and out["min_lr_rate"] is not None:
            raise ScheduleOptionError(f"{kind!r}: lr_scheduler_kwargs sets both min_lr and min_lr_rate")
        if out["min_lr"] is None and out["min_lr_rate"] is None:
            raise ScheduleOptionError(f"{kind!r} needs lr_scheduler_kwargs min_lr or min_lr_rate")
        if out["min_lr"] is not None:
            out["min_lr_rate"] = float(out["min_lr"]) / peak
    if kind == "polynomial" and not peak > float(out["lr_end"]):
        raise ScheduleOptionError(f"polynomial: lr_end {out['lr_end']:g} is not below the peak {peak:g}")
    if kind == "warmup_stable_decay":
        for key in ("warmup_type", "decay_type"):
            if out[key] not in SHAPES:
                raise ScheduleOptionError(f"warmup_stable_decay: {key} {out[key]!r} is not one of {SHAPES}")
    return out


def _ramp(s: np.ndarray, warmup: int) -> np.ndarray:
    return s / float(max(1, warmup))


def lr_factor(
    kind: str, steps: np.ndarray, warmup: int, total: int, options: Mapping[str, Any], peak: float = 1.0
) -> np.ndarray:
    """The factor transformers' ``kind`` schedule multiplies the peak LR by after ``steps`` scheduler steps
    (``options`` as :func:`resolve_options` returns them). Each branch is the numpy transcription of the
    transformers function named beside it, operation for operation, so the two agree to rounding."""

    s = np.asarray(steps, dtype=np.int64)
    sf = s.astype(float)
    w, t = int(warmup), int(total)
    o = options
    warm = s < w
    if kind == "constant":  # get_constant_schedule (no warmup)
        return np.ones(len(s))
    if kind == "constant_with_warmup":  # get_constant_schedule_with_warmup
        return np.where(warm, sf / float(max(1.0, w)), 1.0)
    if kind == "linear":  # get_linear_schedule_with_warmup
        decay = np.maximum(0.0, (t - s).astype(float) / float(max(1, t - w)))
        return np.where(warm, _ramp(sf, w), decay)
    if kind in ("cosine", "cosine_with_restarts", "cosine_with_min_lr"):
        progress = (s - w).astype(float) / float(max(1, t - w))
        cycles = float(o["num_cycles"])
        if kind == "cosine_with_restarts":  # get_cosine_with_hard_restarts_schedule_with_warmup
            after = np.where(
                progress >= 1.0,
                0.0,
                np.maximum(0.0, 0.5 * (1.0 + np.cos(math.pi * np.mod(cycles * progress, 1.0)))),
            )
        else:  # get_cosine_schedule_with_warmup, get_cosine_with_min_lr_schedule_with_warmup
            after = 0.5 * (1.0 + np.cos(math.pi * cycles * 2.0 * progress))
            if kind == "cosine_with_min_lr":
                rate = float(o["min_lr_rate"])
                after = after * (1 - rate) + rate
            after = np.maximum(0.0, after)
        return np.where(warm, _ramp(sf, w), after)
    if kind == "cosine_warmup_with_min_lr":  # get_cosine_with_min_lr_schedule_with_warmup_lr_rate
        wf, tf = float(w), float(t)
        if o["warmup_lr_rate"] is None:
            ramp = (sf + 1.0) / max(1.0, wf)
        else:
            r = float(o["warmup_lr_rate"])
            ramp = r + (1.0 - r) * sf / max(1, wf - 1)
        progress = (sf - wf + 1.0) / max(1.0, tf - wf)
        rate = float(o["min_lr_rate"])
        after = 0.5 * (1.0 + np.cos(math.pi * float(o["num_cycles"]) * 2.0 * progress))
        return np.where(sf < wf, ramp, np.maximum(0, after * (1 - rate) + rate))
    if kind == "polynomial":  # get_polynomial_decay_schedule_with_warmup (its lambda divides by the peak)
        end, power = float(o["lr_end"]), float(o["power"])
        span = t - w
        with np.errstate(divide="ignore", invalid="ignore"):
            remaining = 1 - (s - w) / span
            decay = ((peak - end) * remaining**power + end) / peak
        return np.where(warm, _ramp(sf, w), np.where(s > t, end / peak, decay))
    if kind == "inverse_sqrt":  # get_inverse_sqrt_schedule
        scale = o["timescale"] if o["timescale"] is not None else (w or 10_000)
        shift = scale - w
        with np.errstate(divide="ignore", invalid="ignore"):
            decay = 1.0 / np.sqrt((s + shift) / scale)
        return np.where(warm, _ramp(sf, w), decay)
    if kind == "warmup_stable_decay":  # get_wsd_schedule
        ratio, cycles = float(o["min_lr_ratio"]), float(o["num_cycles"])
        n_decay = int(o["num_decay_steps"])
        n_stable = int(o["num_stable_steps"]) if o["num_stable_steps"] is not None else t - w - n_decay
        up = sf / float(max(1, w))
        with np.errstate(invalid="ignore"):
            ramp = {
                "linear": up,
                "cosine": 0.5 * (1.0 - np.cos(math.pi * up)),
                "1-sqrt": 1.0 - np.sqrt(1.0 - up),
            }[o["warmup_type"]]
            down = (s - w - n_stable).astype(float) / float(max(1, n_decay))
            fall = {
                "linear": 1.0 - down,
                "cosine": 0.5 * (1.0 + np.cos(math.pi * cycles * 2.0 * down)),
                "1-sqrt": 1.0 - np.sqrt(down),
            }[o["decay_type"]]
        ramp = np.maximum(0.0, ramp * (1.0 - ratio) + ratio)
        fall = np.maximum(0.0, fall * (1.0 - ratio) + ratio)
        stable_end, decay_end = w + n_stable, w + n_stable + n_decay
        return np.select([warm, s < stable_end, s < decay_end], [ramp, 1.0, fall], ratio)
    raise ScheduleOptionError(f"schedule {kind!r} is not modelled")


def expected_lr(
    kind: str,
    peak: float,
    warmup: int,
    total: int,
    *,
    at: np.ndarray | None = None,
    options: Mapping[str, Any] | None = None,
) -> np.ndarray:
    """The LR transformers' ``kind`` schedule sets after each of ``at`` scheduler steps (default: steps
    0…total), ``options`` its ``lr_scheduler_kwargs`` (:class:`ScheduleOptionError` when transformers
    would refuse them)."""
    steps = np.arange(total + 1) if at is None else np.asarray(at, dtype=np.int64)
    return peak * lr_factor(kind, steps, warmup, total, resolve_options(kind, options, peak), peak)


def _deviation(
    lr: Series, offset: int, kind: str, peak: float, warmup: int, total: int, options
) -> np.ndarray:
    """|logged − configured| ÷ peak at each logged step k, the configured LR taken at k − ``offset``; a step
    outside 0…total has no configured LR (∞)."""
    idx = lr.steps - offset
    ok = (idx >= 0) & (idx <= total)
    dev = np.full(len(lr), np.inf)
    dev[ok] = np.abs(lr.values[ok] - peak * lr_factor(kind, idx[ok], warmup, total, options, peak)) / peak
    return dev


def _fit(
    lr: Series, kind: str, peak: float, warmup: int, total: int, options: Mapping[str, Any]
) -> tuple[float, int, np.ndarray]:
    """(largest deviation ÷ peak, offset used, deviations) at the better of the two logging alignments."""
    best: tuple[float, int, np.ndarray] | None = None
    for offset in (0, 1):
        dev = _deviation(lr, offset, kind, peak, warmup, total, options)
        m = float(dev.max()) if len(dev) else 0.0
        if best is None or m < best[0]:
            best = (m, offset, dev)
    assert best is not None
    return best


def _fits(lr: Series, kind: str, peak: float, warmup: int, total: int) -> bool:
    """Whether ``lr`` follows ``kind`` (transformers' default kwargs) within :data:`TOLERANCE` at some
    alignment: first on a probe of evenly spaced points, then at every point."""
    try:
        options = resolve_options(kind, None, peak)
    except ScheduleOptionError:
        return False  # a schedule that cannot be built without kwargs of its own is no alternative
    probe = lr
    if len(lr) > PROBE_POINTS:
        pick = np.unique(np.linspace(0, len(lr) - 1, PROBE_POINTS).astype(np.int64))
        probe = dataclasses.replace(lr, steps=lr.steps[pick], values=lr.values[pick])
    if _fit(probe, kind, peak, warmup, total, options)[0] > TOLERANCE:
        return False
    return _fit(lr, kind, peak, warmup, total, options)[0] <= TOLERANCE


RULE = (
    "the logged LR at every logged step against the config's schedule (lr_scheduler_type, learning_rate, "
    "warmup, total steps, lr_scheduler_kwargs) computed with transformers' schedule formulas (the "
    "LambdaLR transformers.get_scheduler builds for the HF Trainer); the HF Trainer logs step k's LR as "
    "the schedule at k (transformers 4) or at k − 1 (transformers 5), the closer alignment is used; found "
    f"when any logged LR is off by more than {TOLERANCE:.0%} of the configured peak, clear when none is"
)


def observed_warmup(lr: Series) -> int:
    """Logged steps before the LR first reaches 99 % of its largest logged value."""
    f = lr.finite()
    top = float(f.values.max())
    return int(f.steps[int(np.argmax(f.values >= 0.99 * top))])


def _described(schedule: Schedule, warmup: int, total: int, total_where: str, options: dict[str, Any]) -> str:
    shown = {k: v for k, v in options.items() if k != "min_lr_rate" or options.get("min_lr") is None}
    given = set(schedule.options or {})
    kwargs = ", ".join(f"{k}={v!r}" for k, v in shown.items() if k in given or v is not None)
    text = f"{schedule.kind}, peak {schedule.peak:g}"
    if schedule.kind != "constant":
        text += f", {warmup} warmup step{'s' if warmup != 1 else ''}"
    text += f", {total} steps ({total_where})"
    if kwargs:
        text += f", {kwargs}"
    if schedule.options is None and OPTIONS[schedule.kind]:
        text += " (lr_scheduler_kwargs not read: transformers' defaults)"
    return text


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
    where_kind = schedule.where.get("lr_scheduler_type", "lr_scheduler_type")
    if schedule.kind not in MODELLED:
        why = NOT_MODELLED.get(schedule.kind, "not one of transformers' schedules")
        return RunRow(
            "lr-schedule",
            title,
            NOT_CHECKED,
            f"{where_kind}: schedule {schedule.kind!r} is not modelled ({why}; {', '.join(MODELLED)} are)",
            RULE,
            schedule.source,
        )
    try:
        options = resolve_options(
            schedule.kind, schedule.options, schedule.peak if schedule.peak > 0 else 1.0
        )
    except ScheduleOptionError as exc:
        return RunRow("lr-schedule", title, NOT_CHECKED, f"{schedule.source}: {exc}", RULE, schedule.source)
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
    described = _described(schedule, warmup, total, total_where, options)
    beyond = int((f.steps > total + 1).sum())
    worst, offset, dev = _fit(f, schedule.kind, schedule.peak, warmup, total, options)
    figures: dict[str, Any] = {
        "configured": {
            "kind": schedule.kind,
            "peak": schedule.peak,
            "warmup": warmup,
            "total": total,
            "options": options,
        },
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
    k = step - offset
    expected = "none (past the configured total)"
    if 0 <= k <= total:
        at_k = lr_factor(schedule.kind, np.array([k]), warmup, total, options, schedule.peak)[0]
        expected = f"{schedule.peak * at_k:.4g}"
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
        for w in dict.fromkeys([warmup, obs_warm, max(obs_warm - 1, 0)]):  # the configured warmup first
            if _fits(f, kind, obs_peak, w, total):
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


DRAWN_POINTS = 4000  # the configured curve of a long schedule is drawn at this many steps (and its corners)


def _drawn_schedule(
    kind: str, peak: float, warmup: int, total: int, options: Mapping[str, Any], offset: int
) -> tuple[np.ndarray, np.ndarray]:
    """(logged step, configured LR): every step of a short schedule; :data:`DRAWN_POINTS` evenly spaced
    steps and the corners (warmup's end, a stable phase's ends) of a long one."""
    steps = np.arange(total + 1)
    if total + 1 > DRAWN_POINTS:
        corners = [0, warmup - 1, warmup, total]
        if kind == "warmup_stable_decay":
            stable = options["num_stable_steps"]
            stable = int(stable) if stable is not None else total - warmup - int(options["num_decay_steps"])
            corners += [warmup + stable - 1, warmup + stable]
        grid = np.linspace(0, total, DRAWN_POINTS).astype(np.int64)
        steps = np.unique(np.clip(np.concatenate([grid, corners]), 0, total))
    return steps + offset, peak * lr_factor(kind, steps, warmup, total, options, peak)


def expected_curve(row: RunRow | None) -> tuple[np.ndarray, np.ndarray] | None:
    """The configured LR a schedule row compared against, at the alignment it found, to draw beside the
    logged one (see :func:`_drawn_schedule`); None when the row compared nothing."""
    if row is None or "configured" not in row.figures:
        return None
    c = row.figures["configured"]
    offset = int(row.figures.get("offset", 0))
    return _drawn_schedule(c["kind"], c["peak"], int(c["warmup"]), int(c["total"]), c["options"], offset)


def configured_curve(schedule: Schedule, total: int, offset: int = 0) -> tuple[np.ndarray, np.ndarray] | None:
    """The LR ``schedule`` sets over ``total`` steps, as logged with ``offset`` (see :func:`_drawn_schedule`);
    None when it is not modelled or its kwargs would be refused."""
    if schedule.kind not in MODELLED or schedule.peak <= 0 or total < 1:
        return None
    try:
        options = resolve_options(schedule.kind, schedule.options, schedule.peak)
    except ScheduleOptionError:
        return None
    return _drawn_schedule(schedule.kind, schedule.peak, schedule.warmup(total), total, options, offset)


def read_args_text(text: str) -> dict[str, Any] | None:
    """The TrainingArguments JSON transformers' TensorBoard callback writes as the ``args`` text (or None)."""
    import json

    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) and "lr_scheduler_type" in data else None
