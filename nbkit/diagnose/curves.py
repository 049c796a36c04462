"""Rules on a finished run's logged curves: loss spikes, non-finite values, grad-norm explosions, clipping,
overfitting onset and plateau.

Every rule is a named ``verdict_*`` function returning a :class:`~nbkit.diagnose.rows.RunRow` whose
status is ``found`` (the rule establishes the problem), ``clear`` (the same rule establishes there is
none) or ``undecided`` (the data cannot tell), with the rule in words. The thresholds are fixed here,
never fitted to the run they judge.

A curve's points are one run's logged steps: they are not independent replicates of anything, and
neighbouring points share their noise. The plateau's slope (≥ 10 logged losses) therefore comes with
an interval from the noise around the trend, widened for its lag-1 autocorrelation
(:func:`slope_interval`); the eval curve's few points get Theil–Sen's rank interval
(:func:`theil_sen_interval`), which one outlying evaluation cannot move; spikes are judged against a
robust scale (the median absolute deviation) that the spikes themselves cannot inflate, taken locally
(a run's early losses are noisier than its late ones).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from nbkit.claims import rate_interval
from nbkit.diagnose.rows import CLEAR, FOUND, NOT_CHECKED, UNDECIDED, RunRow

LOSS, EVAL_LOSS, GRAD_NORM, LEARNING_RATE = "loss", "eval_loss", "grad_norm", "learning_rate"

# Spikes: a point against the median of the points logged just before it, in robust σ.
WINDOW = 10  # logged points in the trailing median
SCALE_WINDOW = 50  # logged points whose differences give a point's robust σ
SPIKE_SIGMAS = 6.0
SPIKE_REL = 0.10  # and at least this share of the median above it (a near-noiseless curve has σ ≈ 0)
EXPLOSION_FACTOR = 5.0  # grad norm: at least this multiple of its trailing median
MIN_POINTS = 20  # fewer logged points than this: no robust scale, undecided

BAND = 0.02  # relative change over a window that counts as "no change" (overfitting, plateau)
PLATEAU_TAIL = 0.25  # the window: this share of the run's logged steps
PLATEAU_MIN_POINTS = 10
DECAYED = 0.5  # the LR below this share of its peak: a decaying schedule's tail
CLIP_MOST = 0.5  # clipping active on more than this share of steps: the clip sets the step size
LEVEL = 0.95


@dataclass(frozen=True, eq=False)
class Series:
    """One logged curve: ``steps`` (optimizer steps, ascending, unique) and ``values``, from ``source``."""

    name: str
    steps: np.ndarray
    values: np.ndarray
    source: str

    def finite(self) -> Series:
        keep = np.isfinite(self.values)
        return Series(self.name, self.steps[keep], self.values[keep], self.source)

    def __len__(self) -> int:
        return len(self.steps)


def series(name: str, points: dict[int, float], source: str) -> Series:
    """A :class:`Series` from ``{step: value}`` (steps sorted; a repeated step keeps its last value)."""
    steps = np.array(sorted(points), dtype=np.int64)
    return Series(name, steps, np.array([points[s] for s in steps], dtype=float), source)


@dataclass(frozen=True)
class Slope:
    slope: float
    lo: float
    hi: float
    n: int
    n_eff: float


def slope_interval(x: np.ndarray, y: np.ndarray, level: float = LEVEL) -> Slope:
    """Least-squares slope of ``y`` on ``x`` with a t interval from the noise around the trend.

    The slope is the straight line's (the window's average change). Its uncertainty comes from the noise,
    not from the trend's bend: the noise is what a quadratic fit leaves (a loss curve bends; a straight
    line's residuals would count the bend as noise), and a logged curve's noise is positively
    autocorrelated, so the variance is inflated by the standard AR(1) factor (1 + r₁)/(1 − r₁), r₁ the
    lag-1 autocorrelation of those residuals (never taken below 0), with n·(1 − r₁)/(1 + r₁) effective
    points for the t quantile. scipy's ``linregress`` gives neither correction, hence these few lines.
    Fewer than four effective points: an infinite interval."""

    from scipy import stats

    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    if n < 4 or np.ptp(x) == 0:
        return Slope(float("nan"), -math.inf, math.inf, n, float(n))
    slope = float(stats.linregress(x, y).slope)
    xc = (x - x.mean()) / np.ptp(x)
    resid = y - np.polyval(np.polyfit(xc, y, 2), xc)
    r1 = 0.0
    if np.std(resid) > 0:
        r1 = float(np.corrcoef(resid[:-1], resid[1:])[0, 1])
        r1 = min(max(r1, 0.0), 0.99) if math.isfinite(r1) else 0.0
    n_eff = n * (1 - r1) / (1 + r1)
    if n_eff < 4:
        return Slope(slope, -math.inf, math.inf, n, n_eff)
    sigma2 = float(resid @ resid) / (n - 3)
    se = math.sqrt(sigma2 / float(((x - x.mean()) ** 2).sum()) * (1 + r1) / (1 - r1))
    t = float(stats.t.ppf(0.5 + level / 2, n_eff - 3))
    return Slope(slope, slope - t * se, slope + t * se, n, n_eff)


def theil_sen_interval(x: np.ndarray, y: np.ndarray, level: float = LEVEL) -> Slope:
    """Theil–Sen slope (the median of the pairwise slopes) with its rank-based interval (scipy's
    ``theilslopes``). For the few points of an eval curve: one outlying evaluation cannot move it, and it
    needs no autocorrelation estimate, which a handful of points cannot give."""

    from scipy import stats

    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0:
        return Slope(float("nan"), -math.inf, math.inf, len(x), float(len(x)))
    res = stats.theilslopes(y, x, alpha=level)
    return Slope(float(res.slope), float(res.low_slope), float(res.high_slope), len(x), float(len(x)))


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%".replace("-", "−") if math.isfinite(x) else ("+∞" if x > 0 else "−∞")


def _num(x: float) -> str:
    return f"{x:.4g}"


def trailing_jumps(y: np.ndarray, window: int = WINDOW) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(differences from the trailing median, the trailing medians, the local robust σ of each) for points
    ``window``… of ``y``: each point minus the median of the ``window`` points before it; its σ is 1.4826 ×
    the median absolute deviation of the differences of the :data:`SCALE_WINDOW` points before it (the σ
    of a normal, which a few spikes cannot inflate; local, because a run's early losses are noisier than
    its late ones). The first ``window`` differences share the scale of the first 2 × ``window``."""

    med = np.array([np.median(y[i - window : i]) for i in range(window, len(y))])
    diff = y[window:] - med

    def mad(d: np.ndarray) -> float:
        return 1.4826 * float(np.median(np.abs(d - np.median(d))))

    sigma = np.array(
        [
            mad(diff[: 2 * window]) if i < window else mad(diff[max(0, i - SCALE_WINDOW) : i])
            for i in range(len(diff))
        ]
    )
    return diff, med, sigma


def _events(flagged: list[int]) -> list[list[int]]:
    """Consecutive flagged indices as one event each."""
    out: list[list[int]] = []
    for i in flagged:
        if out and i == out[-1][-1] + 1:
            out[-1].append(i)
        else:
            out.append([i])
    return out


SPIKE_RULE = (
    f"a spike is a logged loss above the median of the {WINDOW} losses logged before it by more than "
    f"{SPIKE_SIGMAS:g} robust σ (1.4826 × the median absolute deviation of those differences over the "
    f"{SCALE_WINDOW} points before it) "
    f"and by more than {SPIKE_REL:.0%} of that median; found when any, clear when none among ≥ {MIN_POINTS} "
    "finite logged losses, undecided with fewer"
)


def verdict_spikes(loss: Series | None) -> RunRow:
    """Loss spikes by robust deviation from a trailing median (:data:`SPIKE_RULE`)."""

    title = "loss spikes"
    if loss is None:
        return RunRow("loss-spikes", title, NOT_CHECKED, "no training loss logged", SPIKE_RULE)
    f = loss.finite()
    if len(f) < MIN_POINTS:
        return RunRow(
            "loss-spikes", title, UNDECIDED, f"only {len(f)} finite logged losses", SPIKE_RULE, loss.source
        )
    diff, med, sigma = trailing_jumps(f.values)
    flagged = [
        i for i in range(len(diff)) if diff[i] > SPIKE_SIGMAS * sigma[i] and diff[i] > SPIKE_REL * abs(med[i])
    ]
    events = []
    for ev in _events(flagged):
        peak = max(ev, key=lambda i: diff[i])
        events.append(
            {
                "step": int(f.steps[ev[0] + WINDOW]),
                "peak_step": int(f.steps[peak + WINDOW]),
                "loss": float(f.values[peak + WINDOW]),
                "median": float(med[peak]),
                "ratio": float(f.values[peak + WINDOW] / med[peak]) if med[peak] else math.inf,
                "sigmas": float(diff[peak] / sigma[peak]) if sigma[peak] > 0 else math.inf,
                "points": len(ev),
            }
        )
    z = np.divide(diff, sigma, out=np.zeros_like(diff), where=sigma > 0)
    figures = {"points": len(f), "largest_rise_sigmas": float(z.max()), "spikes": events}
    if not events:
        return RunRow(
            "loss-spikes",
            title,
            CLEAR,
            f"no spike among {len(f)} logged losses (the largest rise is {z.max():.1f} robust σ above its "
            "trailing median)",
            SPIKE_RULE,
            loss.source,
            figures=figures,
        )
    parts = [
        f"step {e['step']}: loss {_num(e['loss'])} = {e['ratio']:.2f}× its trailing median "
        f"{_num(e['median'])} ({e['sigmas']:.1f} robust σ"
        + (f", {e['points']} logged steps" if e["points"] > 1 else "")
        + ")"
        for e in events[:5]
    ]
    more = f"; and {len(events) - 5} more" if len(events) > 5 else ""
    return RunRow(
        "loss-spikes",
        title,
        FOUND,
        f"{len(events)} spike{'s' if len(events) > 1 else ''}: " + "; ".join(parts) + more,
        SPIKE_RULE,
        loss.source,
        steps=tuple(int(e["step"]) for e in events),
        figures=figures,
        fix="a spike right after a learning-rate change or at warmup's end points at the LR; isolated spikes "
        "at data-dependent steps point at a bad batch (log the batch ids of those steps)",
    )


NONFINITE_RULE = (
    "found when any logged training loss, eval loss or grad norm is NaN or ±inf; clear when every logged "
    "value is finite"
)


def verdict_nonfinite(curves: dict[str, Series]) -> RunRow:
    """Non-finite loss, eval loss or grad norm at any logged step."""

    title = "non-finite loss or grad norm"
    present = [curves[k] for k in (LOSS, EVAL_LOSS, GRAD_NORM) if k in curves]
    if not present:
        return RunRow("non-finite", title, NOT_CHECKED, "no loss or grad norm logged", NONFINITE_RULE)
    bad = {s.name: s.steps[~np.isfinite(s.values)] for s in present}
    bad = {k: v for k, v in bad.items() if len(v)}
    source = ", ".join(sorted({s.source for s in present}))
    note = (
        " (the HF Trainer's logging_nan_inf_filter, on by default, replaces a non-finite step loss by the "
        "logging window's mean, so a NaN step can hide in the loss; the grad norm is logged unfiltered)"
    )
    if not bad:
        counts = ", ".join(f"{len(s)} {s.name}" for s in present)
        return RunRow(
            "non-finite",
            title,
            CLEAR,
            f"every logged value is finite ({counts}){note}",
            NONFINITE_RULE,
            source,
        )
    parts = [
        f"{name} at {len(steps)} step{'s' if len(steps) > 1 else ''}, first at step {int(steps[0])}"
        + (
            f" ({', '.join(str(int(s)) for s in steps[:8])}{'…' if len(steps) > 8 else ''})"
            if len(steps) > 1
            else ""
        )
        for name, steps in bad.items()
    ]
    first = min(int(v[0]) for v in bad.values())
    return RunRow(
        "non-finite",
        title,
        FOUND,
        "non-finite " + "; ".join(parts),
        NONFINITE_RULE,
        source,
        steps=tuple(sorted({int(s) for v in bad.values() for s in v[:50]})),
        figures={k: [int(s) for s in v] for k, v in bad.items()} | {"first_step": first},
        fix="lower the learning rate or use bf16 instead of fp16; check the batch at the first non-finite "
        "step",
    )


EXPLOSION_RULE = (
    f"an explosion is a logged grad norm more than {EXPLOSION_FACTOR:g}× the median of the {WINDOW} logged "
    f"before it, more than {SPIKE_SIGMAS:g} robust σ (as for spikes) above it on the log scale, and above "
    f"the run's median grad norm; found when any, clear when none among ≥ {MIN_POINTS} finite positive "
    "grad norms, undecided with fewer"
)


def verdict_explosions(grad: Series | None) -> RunRow:
    """Grad-norm explosions: the spike rule on log(grad norm), with a multiple floor."""

    title = "grad-norm explosions"
    if grad is None:
        return RunRow("grad-explosions", title, NOT_CHECKED, "no grad norm logged", EXPLOSION_RULE)
    f = grad.finite()
    keep = f.values > 0
    steps, vals = f.steps[keep], f.values[keep]
    if len(vals) < MIN_POINTS:
        return RunRow(
            "grad-explosions",
            title,
            UNDECIDED,
            f"only {len(vals)} finite positive grad norms logged",
            EXPLOSION_RULE,
            grad.source,
        )
    diff, med, sigma = trailing_jumps(np.log(vals))
    floor = math.log(EXPLOSION_FACTOR)
    # A 50× jump of a norm that stays far below the run's usual size (a memorising run's 1e-7) is noise.
    typical = float(np.median(vals))
    flagged = [
        i
        for i in range(len(diff))
        if diff[i] > SPIKE_SIGMAS * sigma[i] and diff[i] > floor and vals[i + WINDOW] > typical
    ]
    events = []
    for ev in _events(flagged):
        peak = max(ev, key=lambda i: diff[i])
        events.append(
            {
                "step": int(steps[ev[0] + WINDOW]),
                "grad_norm": float(vals[peak + WINDOW]),
                "median": float(math.exp(med[peak])),
                "ratio": float(math.exp(diff[peak])),
            }
        )
    figures = {"points": len(vals), "explosions": events}
    if not events:
        return RunRow(
            "grad-explosions",
            title,
            CLEAR,
            f"no explosion among {len(vals)} logged grad norms (largest "
            f"{math.exp(float(diff.max())):.2f}× its trailing median)",
            EXPLOSION_RULE,
            grad.source,
            figures=figures,
        )
    parts = [
        f"step {e['step']}: grad norm {_num(e['grad_norm'])} = {e['ratio']:.1f}× its trailing median "
        f"{_num(e['median'])}"
        for e in events[:5]
    ]
    return RunRow(
        "grad-explosions",
        title,
        FOUND,
        f"{len(events)} explosion{'s' if len(events) > 1 else ''}: "
        + "; ".join(parts)
        + (f"; and {len(events) - 5} more" if len(events) > 5 else ""),
        EXPLOSION_RULE,
        grad.source,
        steps=tuple(int(e["step"]) for e in events),
        figures=figures,
        fix="set max_grad_norm (gradient clipping) if it is off; lower the learning rate around those steps",
    )


CLIP_RULE = (
    "clipping is active at a logged step when its grad norm (the Trainer logs the norm before clipping) "
    f"exceeds max_grad_norm; found when the Wilson {LEVEL:.0%} interval of the active share lies above "
    f"{CLIP_MOST:.0%} (the clip, not the LR schedule, then sets most update sizes), clear when it lies "
    "below, undecided when it straddles"
)


def verdict_clipping(grad: Series | None, max_grad_norm: float | None, where: str = "") -> RunRow:
    """How often clipping was active, when ``max_grad_norm`` is known (never assumed)."""

    title = "gradient clipping activity"
    if max_grad_norm is None:
        return RunRow(
            "clipping",
            title,
            NOT_CHECKED,
            "max_grad_norm unknown: pass --config (no default is assumed)",
            CLIP_RULE,
        )
    if max_grad_norm <= 0:
        return RunRow(
            "clipping", title, NOT_CHECKED, f"clipping off ({where} = {max_grad_norm:g})", CLIP_RULE
        )
    if grad is None:
        return RunRow("clipping", title, NOT_CHECKED, "no grad norm logged", CLIP_RULE)
    f = grad.finite()
    n = len(f)
    if n == 0:
        return RunRow("clipping", title, UNDECIDED, "no finite grad norm logged", CLIP_RULE, grad.source)
    active = f.values > max_grad_norm
    k = int(active.sum())
    lo, hi = rate_interval(k, n, LEVEL)
    text = (
        f"clipping active at {k} of {n} logged steps ({k / n:.0%}, {LEVEL:.0%} interval {lo:.0%}–{hi:.0%}) "
        f"at max_grad_norm {max_grad_norm:g} ({where})"
    )
    if k:
        text += f"; first at step {int(f.steps[active][0])}"
    figures = {"active": k, "logged": n, "share": k / n, "interval": [lo, hi], "max_grad_norm": max_grad_norm}
    status = FOUND if lo > CLIP_MOST else CLEAR if hi < CLIP_MOST else UNDECIDED
    return RunRow(
        "clipping",
        title,
        status,
        text,
        CLIP_RULE,
        grad.source,
        figures=figures,
        fix="lower the learning rate (or raise max_grad_norm) so that clipping catches outliers, not every "
        "step",
    )


OVERFIT_RULE = (
    "onset = the step of the lowest eval loss; found when the eval loss's rise from there to the last "
    f"evaluation (Theil–Sen slope × span with its {LEVEL:.0%} interval, relative to the lowest eval "
    f"loss) lies above +{BAND:.0%} while the training loss's slope over the same steps lies "
    f"below 0; clear when the lowest eval loss is the last or that rise lies below +{BAND:.0%}; undecided "
    "otherwise or with fewer than 3 evaluations after the onset"
)


def verdict_overfitting(train: Series | None, eval_loss: Series | None) -> RunRow:
    """Overfitting onset: eval loss bottoms out and rises while the training loss still falls."""

    title = "overfitting onset"
    if eval_loss is None:
        return RunRow("overfitting", title, NOT_CHECKED, "no eval loss logged", OVERFIT_RULE)
    e = eval_loss.finite()
    source = eval_loss.source + (
        f", {train.source}" if train is not None and train.source != eval_loss.source else ""
    )
    if len(e) < 4:
        return RunRow(
            "overfitting", title, UNDECIDED, f"only {len(e)} evaluations logged", OVERFIT_RULE, source
        )
    m = int(np.argmin(e.values))
    onset, lowest = int(e.steps[m]), float(e.values[m])
    after = len(e) - 1 - m
    figures: dict = {"onset_step": onset, "lowest_eval_loss": lowest, "evaluations_after": after}
    if after == 0:
        return RunRow(
            "overfitting",
            title,
            CLEAR,
            f"the eval loss is lowest at the last evaluation (step {onset}, {_num(lowest)}): no onset",
            OVERFIT_RULE,
            source,
            figures=figures,
        )
    if after < 3:
        return RunRow(
            "overfitting",
            title,
            UNDECIDED,
            f"the eval loss is lowest at step {onset} ({_num(lowest)}) with only {after} evaluation"
            f"{'s' if after > 1 else ''} after it",
            OVERFIT_RULE,
            source,
            figures=figures,
        )
    x, y = e.steps[m:], e.values[m:]
    span = float(x[-1] - x[0])
    s = theil_sen_interval(x, y)
    scale = abs(lowest) or float(np.mean(np.abs(y))) or 1.0
    rise = (s.slope * span / scale, s.lo * span / scale, s.hi * span / scale)
    per_k = 1000.0
    figures |= {
        "eval_slope_per_1000_steps": [s.slope * per_k, s.lo * per_k, s.hi * per_k],
        "relative_rise": list(rise),
        "last_eval_step": int(x[-1]),
    }
    text = (
        f"the eval loss is lowest at step {onset} ({_num(lowest)}); over the {after} evaluations to step "
        f"{int(x[-1])} it changes by {_pct(rise[0])} ({LEVEL:.0%} interval {_pct(rise[1])} to "
        f"{_pct(rise[2])}; slope {_num(s.slope * per_k)} per 1000 steps, interval {_num(s.lo * per_k)} "
        f"to {_num(s.hi * per_k)})"
    )
    if rise[1] > BAND:
        if train is None:
            return RunRow(
                "overfitting",
                title,
                UNDECIDED,
                text + "; no training loss to compare",
                OVERFIT_RULE,
                source,
                figures=figures,
            )
        t = train.finite()
        keep = (t.steps >= onset) & (t.steps <= x[-1])
        ts = theil_sen_interval(t.steps[keep], t.values[keep])
        figures["train_slope_per_1000_steps"] = [ts.slope * per_k, ts.lo * per_k, ts.hi * per_k]
        trend = (
            f"the training loss over the same steps: slope {_num(ts.slope * per_k)} per 1000 steps "
            f"(interval {_num(ts.lo * per_k)} to {_num(ts.hi * per_k)})"
        )
        if ts.hi < 0:
            return RunRow(
                "overfitting",
                title,
                FOUND,
                f"onset at step {onset}: {text}, while {trend}",
                OVERFIT_RULE,
                source,
                steps=(onset,),
                figures=figures,
                fix=f"keep the checkpoint nearest step {onset} (load_best_model_at_end with "
                "metric_for_best_model='eval_loss'), stop earlier, or add data / regularisation",
            )
        return RunRow(
            "overfitting",
            title,
            UNDECIDED,
            f"{text}, but {trend} — not falling, so not the overfitting pattern (see the spike and "
            "plateau rows)",
            OVERFIT_RULE,
            source,
            figures=figures,
        )
    if rise[2] < BAND:
        return RunRow("overfitting", title, CLEAR, text, OVERFIT_RULE, source, figures=figures)
    return RunRow("overfitting", title, UNDECIDED, text, OVERFIT_RULE, source, figures=figures)


PLATEAU_RULE = (
    f"window = the last {PLATEAU_TAIL:.0%} of the logged steps, ending where the logged LR last stood at ≥ "
    f"{DECAYED:.0%} of its peak (a decaying schedule's tail, where a flattening loss is the schedule ending, "
    f"is left out); found (plateau) when the {LEVEL:.0%} interval of the training loss's relative change "
    "over the window (slope × span ÷ mean loss; interval from the noise around the trend, widened for its "
    f"autocorrelation) lies within ±{BAND:.0%}; clear when it lies below −{BAND:.0%} (still improving) or "
    f"above +{BAND:.0%} (rising: not a plateau); undecided otherwise or with fewer than "
    f"{PLATEAU_MIN_POINTS} points in the window"
)


def verdict_plateau(train: Series | None, lr: Series | None = None) -> RunRow:
    """A plateau: no improvement over the last part of training while the LR was still high."""

    title = "plateau"
    if train is None:
        return RunRow("plateau", title, NOT_CHECKED, "no training loss logged", PLATEAU_RULE)
    t = train.finite()
    if len(t) < PLATEAU_MIN_POINTS:
        return RunRow(
            "plateau", title, UNDECIDED, f"only {len(t)} finite logged losses", PLATEAU_RULE, train.source
        )
    first, last = int(t.steps[0]), int(t.steps[-1])
    end, tail_note = last, ""
    source = train.source
    if lr is not None:
        f = lr.finite()
        if len(f) >= 2:
            peak = float(f.values.max())
            if peak > 0 and f.values[-1] < DECAYED * peak:
                high = f.steps[(f.values >= DECAYED * peak)]
                end = int(high[-1])
                tail_note = (
                    f"; steps after {end} left out: the LR falls below {DECAYED:.0%} of its peak "
                    f"{_num(peak)} there"
                )
                source += f", {lr.source}"
    start = end - PLATEAU_TAIL * (last - first)
    keep = (t.steps > start) & (t.steps <= end)
    x, y = t.steps[keep], t.values[keep]
    figures: dict = {"window": [float(start), end], "points": int(keep.sum())}
    if len(x) < PLATEAU_MIN_POINTS:
        return RunRow(
            "plateau",
            title,
            UNDECIDED,
            f"only {len(x)} logged losses in the window (steps {math.floor(start) + 1}–{end}){tail_note}",
            PLATEAU_RULE,
            source,
            figures=figures,
        )
    s = slope_interval(x, y)
    span = float(x[-1] - x[0])
    level = float(np.mean(np.abs(y))) or 1.0
    rel = (s.slope * span / level, s.lo * span / level, s.hi * span / level)
    figures["relative_change"] = list(rel)
    text = (
        f"over steps {int(x[0])}–{int(x[-1])} ({len(x)} logged losses) the training loss changes by "
        f"{_pct(rel[0])} ({LEVEL:.0%} interval {_pct(rel[1])} to {_pct(rel[2])}){tail_note}"
    )
    if rel[1] > -BAND and rel[2] < BAND:
        return RunRow(
            "plateau",
            title,
            FOUND,
            f"plateau from step {int(x[0])}: {text}",
            PLATEAU_RULE,
            source,
            steps=(int(x[0]),),
            figures=figures,
            fix="stop earlier (the last part of the budget bought nothing), or raise the learning rate / "
            "change the schedule if the loss is still above where it should be",
        )
    if rel[2] < -BAND:
        return RunRow(
            "plateau", title, CLEAR, f"still improving: {text}", PLATEAU_RULE, source, figures=figures
        )
    if rel[1] > BAND:
        return RunRow(
            "plateau", title, CLEAR, f"rising, not a plateau: {text}", PLATEAU_RULE, source, figures=figures
        )
    return RunRow("plateau", title, UNDECIDED, text, PLATEAU_RULE, source, figures=figures)
