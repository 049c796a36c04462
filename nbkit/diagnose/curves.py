"""Rules on a run's logged curves: loss spikes, non-finite values, grad-norm explosions, clipping,
overfitting onset (per eval set), plateau, and progress over the run.

Every rule is a named ``verdict_*`` function returning a :class:`~nbkit.diagnose.rows.RunRow` whose
status is ``found`` (the rule establishes the problem), ``clear`` (the same rule establishes there is
none) or ``undecided`` (the data cannot tell), with the rule in words. The thresholds are fixed here,
never fitted to the run they judge. Each takes a :class:`Series` or the points logged so far as
``(step, value)`` pairs (a callback judging a run while it trains), so a partial series is judged by the
same rule as a finished one.

A curve's points are one run's logged steps: they are not independent replicates of anything, and
neighbouring points share their noise. The plateau's slope (≥ 10 logged losses) therefore comes with
an interval from the noise around the trend, widened for its lag-1 autocorrelation
(:func:`slope_interval`); the eval curve's few points get Theil–Sen's rank interval
(:func:`theil_sen_interval`), which one outlying evaluation cannot move; whether the evaluations after
the lowest one sit above the level around it by more than flat noise puts them is a Monte Carlo test
against flat noisy curves of the same shape (:func:`step_up_chance`: the lowest of n noisy evaluations is
the luckiest draw, and how far the rest sit above it has no closed form); spikes are judged against
a robust scale (the median absolute deviation) that the spikes themselves cannot inflate, taken locally
(a run's early losses are noisier than its late ones) and never below the logging resolution (a loss
logged to 4 decimals moves in steps of 0.0001, which is not noise of zero).

Changes of a positive loss are ratios (a log-ratio shown as ×r or ±%, from fitted start and end values),
so no change reads below −100 %. A loss that is ~0 or changes sign by design (an RL objective such as TRL's
GRPO loss) has no ratio: the rules that need one say so instead of judging it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from nbkit.claims import rate_interval
from nbkit.diagnose.names import EVAL_LOSS, GRAD_NORM, KIND_WORDS, LEARNING_RATE, LOSS, OTHER_LOSS
from nbkit.diagnose.rows import CLEAR, FOUND, NOT_CHECKED, UNDECIDED, RunRow

__all__ = ["EVAL_LOSS", "GRAD_NORM", "LEARNING_RATE", "LOSS"]

# The libraries whose logging conventions a series follows (its ``convention``): rules that depend on
# one say which they assume.
HF_TRAINER = "HF Trainer"
LIGHTNING = "Lightning"
TENSORBOARD = "TensorBoard"
MLFLOW = "MLflow"
EXPORT = "CSV/JSONL export"

# Spikes: a point against the median of the points logged just before it, in robust σ.
WINDOW = 10  # logged points in the trailing median
SCALE_WINDOW = 50  # logged points whose differences give a point's robust σ
SPIKE_SIGMAS = 6.0
SPIKE_REL = 0.10  # and at least this share of the median above it (a near-noiseless curve has σ ≈ 0)
EXPLOSION_FACTOR = 5.0  # grad norm: at least this multiple of its trailing median
MIN_POINTS = 20  # fewer logged points than this: no robust scale, undecided

BAND = 0.02  # relative change over a window that counts as "no change" (overfitting, plateau, progress)
STEP_BAND = 0.05  # the later evaluations' median above the level around the lowest: a step up (overfitting)
AROUND = 2  # that level: the mean log eval loss of the lowest and (up to) this many evaluations before it
# Flat noisy eval curves read as overfitting at most STEP_FALSE + RISE_FALSE of the time: the step-up test's
# share and the rise test's.
STEP_FALSE = 0.03
RISE_FALSE = 0.01
STEP_DRAWS = 20_000  # flat noisy curves simulated per shape for the step-up test's chance
THEIL_SEN_POINTS = 500  # a longer curve's Theil–Sen slope is taken on this many medians of consecutive runs
PLATEAU_TAIL = 0.25  # the window: this share of the run's logged steps
PLATEAU_MIN_POINTS = 10
PROGRESS_SHARE = 0.10  # progress: the first and last this share of the logged losses …
PROGRESS_MIN = 8  # … at least this many each (a median interval at 97.5 % needs 7)
PROGRESS_FEW = 5  # fewer logged losses than 2 × PROGRESS_MIN (one per epoch): a line through them, from 5
DECAYED = 0.5  # the LR below this share of its peak: a decaying schedule's tail
CLIP_MOST = 0.5  # clipping active on more than this share of steps: the clip sets the step size
# torch's GradScaler starts at 2**16 and halves the scale at each overflow, skipping that step: a model whose
# gradients fit fp16 overflows at most ~16 times before the scale settles, at the run's first steps.
FP16_WARMUP_STEPS = 20
LEVEL = 0.95
RESOLUTION_FLOOR = 3  # a loss whose median is at most this many logging steps has converged to ~0


@dataclass(frozen=True, eq=False)
class Series:
    """One logged curve: ``steps`` (optimizer steps, ascending, unique) and ``values`` of one ``kind``
    (:data:`~nbkit.diagnose.names.KINDS`), read from ``source``; ``logged`` is its name as logged,
    ``eval_set`` the eval set it belongs to ('' for the run's one eval loss), ``convention`` the library
    whose logging convention it follows (:data:`HF_TRAINER`, :data:`LIGHTNING`, …; '' unknown)."""

    kind: str
    steps: np.ndarray
    values: np.ndarray
    source: str
    logged: str = ""
    eval_set: str = ""
    convention: str = ""

    def finite(self) -> Series:
        keep = np.isfinite(self.values)
        return Series(
            self.kind,
            self.steps[keep],
            self.values[keep],
            self.source,
            self.logged,
            self.eval_set,
            self.convention,
        )

    @property
    def what(self) -> str:
        """The series in words: "eval loss (eval set squad)"."""
        if self.kind == OTHER_LOSS:
            return self.logged
        return KIND_WORDS.get(self.kind, self.kind) + (
            f" (eval set {self.eval_set})" if self.eval_set else ""
        )

    def __len__(self) -> int:
        return len(self.steps)


def series(kind: str, points: dict[int, float], source: str, **kw: str) -> Series:
    """A :class:`Series` from ``{step: value}`` (steps sorted; a repeated step keeps its last value)."""
    steps = np.array(sorted(points), dtype=np.int64)
    return Series(kind, steps, np.array([points[s] for s in steps], dtype=float), source, **kw)


def as_series(kind: str, s: Series | Iterable[tuple[int, float]] | None, source: str = "") -> Series | None:
    """``s`` as a :class:`Series`: a Series as it is, or the ``(step, value)`` pairs logged so far."""
    if s is None or isinstance(s, Series):
        return s
    return series(kind, {int(step): float(v) for step, v in s}, source or "logged so far")


def plural(n: int, word: str, many: str = "") -> str:
    """``n`` and the word in number: 1 evaluation, 3 evaluations (``many``: an irregular plural)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


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
    needs no autocorrelation estimate, which a handful of points cannot give. More than
    :data:`THEIL_SEN_POINTS` points are first summarised as that many medians of consecutive runs
    (``n_eff`` says how many points the interval rests on)."""

    from scipy import stats

    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    if n < 3 or np.ptp(x) == 0:
        return Slope(float("nan"), -math.inf, math.inf, n, float(n))
    if n > THEIL_SEN_POINTS:
        # All pairwise slopes of a long curve (a million logged losses) would not fit in memory: the line is
        # taken through the medians of consecutive equal runs, each as robust as the points it summarises.
        runs = np.array_split(np.arange(n), THEIL_SEN_POINTS)
        x = np.array([np.median(x[r]) for r in runs])
        y = np.array([np.median(y[r]) for r in runs])
    res = stats.theilslopes(y, x, alpha=level)
    return Slope(float(res.slope), float(res.low_slope), float(res.high_slope), n, float(len(x)))


def median_bounds(x: np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """(median, lower, upper): one-sided ``level`` bounds of the median from order statistics (the k-th
    smallest with P(Binomial(n, ½) < k) ≤ 1 − ``level``; the same from the top), for the two one-sided
    questions a rule asks — is it above a floor, is it below it. (−∞, ∞) with fewer than five values."""

    from scipy import stats

    x = np.sort(np.asarray(x, dtype=float))
    n = len(x)
    med = float(np.median(x)) if n else float("nan")
    # The k-th smallest bounds the median from below when k − 1 or fewer lie below it with chance ≤ 1 − level.
    k = 0
    while n and stats.binom.cdf(k, n, 0.5) <= 1 - level:
        k += 1
    if k == 0:
        return med, -math.inf, math.inf
    return med, float(x[k - 1]), float(x[n - k])


def median_interval(x: np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """(median, lo, hi): the distribution-free order-statistic interval of the median (scipy's
    ``quantile_test``), which assumes nothing about the values' spread; (−∞, ∞) with fewer than six
    values, where no pair of order statistics reaches ``level``."""

    from scipy import stats

    x = np.asarray(x, dtype=float)
    med = float(np.median(x)) if len(x) else float("nan")
    if len(x) < 6:
        return med, -math.inf, math.inf
    ci = stats.quantile_test(x, q=med, p=0.5).confidence_interval(level)
    lo, hi = float(ci.low), float(ci.high)
    return med, (lo if math.isfinite(lo) else -math.inf), (hi if math.isfinite(hi) else math.inf)


def resolution(values: np.ndarray) -> float:
    """The logging resolution: the smallest step between distinct logged values (1e-4 for a loss logged
    to 4 decimals, as the HF Trainer rounds its ``loss``); 0 with fewer than two distinct values."""
    u = np.unique(np.asarray(values, dtype=float)[np.isfinite(values)])
    if len(u) < 2:
        return 0.0
    gaps = np.diff(u)
    # Float round-off splits one decimal step into neighbours a few ulps apart: ignore gaps below 1e-9 of
    # the values' scale.
    gaps = gaps[gaps > 1e-9 * float(np.max(np.abs(u)))]
    return float(gaps.min()) if len(gaps) else 0.0


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%".replace("-", "−") if math.isfinite(x) else ("+∞" if x > 0 else "−∞")


def _ratio(log_ratio: float) -> str:
    """A log-ratio as the factor it multiplies by: ×0.91 (never below ×0, so never below −100 %)."""
    if not math.isfinite(log_ratio):
        return "×∞" if log_ratio > 0 else "×0"
    r = math.exp(log_ratio)
    return f"×{r:.3f}" if 0.9 < r < 1.1 else f"×{r:.2f}" if r >= 0.1 else f"×{r:.2g}"


def _num(x: float) -> str:
    return f"{x:.4g}"


def _ratio_ready(s: Series, what: str) -> tuple[Series, str]:
    """``s`` ready for the rules that judge ratios, or why it is not: (the series, "") when every value is
    positive; a non-negative loss logged as 0 is a value rounded below half the logging resolution (a
    loss logged to 4 decimals reads 0 once it falls under 0.00005), read as that half, and said so;
    (``s``, why) when it takes negative values — an RL objective that is ~0 or changes sign by design."""
    bad = s.values < 0
    if bad.any():
        i = int(np.argmax(bad))
        return s, (
            f"the {what} takes negative values ({int(bad.sum())} of {len(s)}, e.g. "
            f"{_num(float(s.values[i]))} at step {int(s.steps[i])}): a change relative to its level is "
            "undefined for a loss that is ~0 or changes sign by design (an RL objective such as TRL's GRPO "
            "loss; judge such a run by its reward)"
        )
    zero = s.values == 0
    if not zero.any():
        return s, ""
    q = resolution(s.values)
    if q <= 0:
        return s, f"the {what} is logged as 0 throughout: nothing to judge"
    values = np.where(zero, q / 2, s.values)
    return dataclasses.replace(s, values=values), ""


def _zeros_note(s: Series, what: str) -> str:
    """What a row says when :func:`_ratio_ready` read logged zeros as half the resolution."""
    zero = int((s.values == 0).sum())
    if not zero:
        return ""
    return (
        f"; {plural(zero, 'logged 0')} of the {what} read as {_num(resolution(s.values) / 2)} (half the "
        "logging resolution: rounded below it, not 0)"
    )


def trailing_jumps(
    y: np.ndarray, window: int = WINDOW, floor: float = 0.0, scale_above: float = -math.inf
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(differences from the trailing median, the trailing medians, the local robust σ of each) for points
    ``window``… of ``y``: each point minus the median of the ``window`` points before it; its σ is 1.4826 ×
    the median absolute deviation of the differences of the :data:`SCALE_WINDOW` points before it (the σ
    of a normal, which a few spikes cannot inflate; local, because a run's early losses are noisier than
    its late ones), never below ``floor`` (the logging resolution: a quantised curve's σ is not 0). The
    first ``window`` differences share the scale of the first 2 × ``window``. ``scale_above``: the σ only of
    the points whose difference exceeds it, NaN elsewhere — a rule that judges only the points that rose
    far enough need not pay for the others.

    Vectorised (a long run logs a million points; one median per point in Python took minutes there): the
    trailing medians and each scale window's centre are pandas' rolling medians; the deviations from a
    window's own centre have no rolling method, so their medians are taken over numpy's sliding-window
    views, in chunks that bound the memory."""

    y = np.asarray(y, dtype=float)
    n = len(y) - window
    if n <= 0:
        return np.empty(0), np.empty(0), np.empty(0)
    import pandas as pd

    med = pd.Series(y[:-1]).rolling(window).median().to_numpy()[window - 1 :]
    diff = y[window:] - med
    wanted = diff > scale_above
    sigma = np.full(n, np.nan)
    first = min(window, n)
    if wanted[:first].any():
        sigma[:first] = _mad(diff[: 2 * window])
    # Points window … SCALE_WINDOW − 1 see a growing window (all the differences before them): few, looped.
    for i in range(window, min(SCALE_WINDOW, n)):
        if wanted[i]:
            sigma[i] = _mad(diff[:i])
    rows = np.flatnonzero(wanted[SCALE_WINDOW:])  # row j: the σ of point SCALE_WINDOW + j
    if len(rows):
        views = np.lib.stride_tricks.sliding_window_view(diff[:-1], SCALE_WINDOW)  # row j: diff[j : j + 50]
        every = len(rows) == len(views)
        centres = (
            pd.Series(diff[:-1]).rolling(SCALE_WINDOW).median().to_numpy()[SCALE_WINDOW - 1 :]
            if every
            else None
        )
        for lo in range(0, len(rows), _CHUNK):
            part = rows[lo : lo + _CHUNK]
            block = views[lo : lo + _CHUNK] if every else views[part]
            centre = centres[lo : lo + _CHUNK] if centres is not None else _row_medians(np.array(block))
            sigma[SCALE_WINDOW + part] = 1.4826 * _row_medians(np.abs(block - centre[:, None]))
    return diff, med, np.maximum(sigma, floor)


_CHUNK = 20_000  # sliding windows per block when taking the local scale (20,000 × 50 values: 8 MB)


def _row_medians(a: np.ndarray) -> np.ndarray:
    """Each row's median, as np.median takes it (the mean of the two middle values of an even count),
    partitioning ``a`` in place: one partition instead of np.median's copy and checks, per block."""
    k = a.shape[1]
    mid = [(k - 1) // 2, k // 2]
    a.partition(mid, axis=1)
    return (a[:, mid[0]] + a[:, mid[1]]) / 2


def _mad(d: np.ndarray) -> float:
    """1.4826 × the median absolute deviation: a normal's σ, which a few outliers cannot inflate."""
    return 1.4826 * float(np.median(np.abs(d - np.median(d)))) if len(d) else float("nan")


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
    f"on the log scale (a loss's batch-to-batch noise is a ratio: a 2× jump is as large at 0.1 as at 2), a "
    f"spike is a logged training loss above the median of the {WINDOW} losses logged before it by more "
    f"than {SPIKE_SIGMAS:g} robust σ (1.4826 × the median absolute deviation of those differences over the "
    f"{SCALE_WINDOW} points before it, never below the logging resolution relative to that median: the "
    "smallest step between logged values, 0.0001 for the HF Trainer's loss rounded to 4 decimals) "
    f"and by more than {SPIKE_REL:.0%} of that median; found when any, clear when none among ≥ {MIN_POINTS} "
    "finite logged losses, undecided with fewer; a logged 0 is read as half the logging resolution; not "
    "checked for a loss that takes negative values"
)


def verdict_spikes(loss: Series | Sequence[tuple[int, float]] | None) -> RunRow:
    """Loss spikes by robust deviation of the log loss from its trailing median (:data:`SPIKE_RULE`)."""

    title = "loss spikes"
    loss = as_series(LOSS, loss)
    if loss is None:
        return RunRow("loss-spikes", title, NOT_CHECKED, "no training loss logged", SPIKE_RULE)
    f = loss.finite()
    if len(f) < MIN_POINTS:
        return RunRow(
            "loss-spikes",
            title,
            UNDECIDED,
            f"only {plural(len(f), 'finite logged loss', 'finite logged losses')}",
            SPIKE_RULE,
            loss.source,
        )
    f, why = _ratio_ready(f, "training loss")
    if why:
        return RunRow("loss-spikes", title, NOT_CHECKED, why, SPIKE_RULE, loss.source)
    zeros = _zeros_note(loss.finite(), "training loss")
    q = resolution(loss.finite().values)
    rel = math.log1p(SPIKE_REL)
    diff, med, sigma = trailing_jumps(np.log(f.values), scale_above=rel)  # σ of the rises above 10 % only
    level = np.exp(med)
    sigma = np.maximum(sigma, np.log1p(q / level))  # a step of the resolution at this level is not noise 0
    risen = diff > rel
    flagged = np.flatnonzero(risen & (diff > SPIKE_SIGMAS * sigma)).tolist()
    events = []
    for ev in _events(flagged):
        peak = max(ev, key=lambda i: diff[i])
        events.append(
            {
                "step": int(f.steps[ev[0] + WINDOW]),
                "peak_step": int(f.steps[peak + WINDOW]),
                "loss": float(f.values[peak + WINDOW]),
                "median": float(level[peak]),
                "ratio": float(math.exp(diff[peak])),
                "sigmas": float(diff[peak] / sigma[peak]),
                "points": len(ev),
            }
        )
    z = np.divide(diff, sigma, out=np.zeros_like(diff), where=risen & (sigma > 0))
    figures = {
        "points": len(f),
        "largest_rise_sigmas": float(z.max()) if len(z) else 0.0,
        "resolution": q,
        "spikes": events,
    }
    if not events:
        largest = (
            f"of the rises of more than {SPIKE_REL:.0%} above the trailing median, the largest is "
            f"{z.max():.1f} robust σ"
            if risen.any()
            else f"no logged loss rose more than {SPIKE_REL:.0%} above its trailing median"
        )
        return RunRow(
            "loss-spikes",
            title,
            CLEAR,
            f"no spike among {len(f)} logged losses ({largest}){zeros}",
            SPIKE_RULE,
            loss.source,
            figures=figures,
        )
    parts = [
        f"step {e['step']}: loss {_num(e['loss'])} = {e['ratio']:.2f}× its trailing median "
        f"{_num(e['median'])} ({e['sigmas']:.1f} robust σ of the log loss"
        + (f", {e['points']} logged steps" if e["points"] > 1 else "")
        + ")"
        for e in events[:5]
    ]
    more = f"; and {len(events) - 5} more" if len(events) > 5 else ""
    return RunRow(
        "loss-spikes",
        title,
        FOUND,
        f"{plural(len(events), 'spike')}: " + "; ".join(parts) + more + zeros,
        SPIKE_RULE,
        loss.source,
        steps=tuple(int(e["step"]) for e in events),
        figures=figures,
        fix="a spike right after a learning-rate change or at warmup's end points at the LR; isolated spikes "
        "at data-dependent steps point at a bad batch (log the batch ids of those steps)",
    )


NONFINITE_RULE = (
    "found when any logged training loss, eval loss or grad norm is NaN or ±inf (as written in the log: "
    "nan, NaN, inf, Infinity; an empty cell is a value not logged), except non-finite grad norms only "
    f"within the first {FP16_WARMUP_STEPS} steps of an fp16 run, which are torch's GradScaler warming up "
    "its loss scale (benign: those steps are skipped); undecided for that pattern when the run's precision "
    "is not known; clear when every logged value is finite"
)
_HF_FILTER_NOTE = (
    " (the HF Trainer's logging_nan_inf_filter, on by default, replaces a non-finite step loss by the "
    "logging window's mean, so a NaN step can hide in its loss; its grad norm is logged unfiltered)"
)


def verdict_nonfinite(
    curves: dict[str, Series] | Iterable[Series], precision: str | None = None, where: str = ""
) -> RunRow:
    """Non-finite loss, eval loss or grad norm at any logged step; ``precision`` ("fp16", "bf16", "fp32"
    or None: not known) and ``where`` it was read tell a GradScaler's warm-up from a fault."""

    title = "non-finite loss or grad norm"
    present = [
        s
        for s in (curves.values() if isinstance(curves, dict) else curves)
        if s.kind in (LOSS, EVAL_LOSS, GRAD_NORM, OTHER_LOSS)
    ]
    if not present:
        return RunRow("non-finite", title, NOT_CHECKED, "no loss or grad norm logged", NONFINITE_RULE)
    bad = [(s, s.steps[~np.isfinite(s.values)]) for s in present]
    bad = [(s, steps) for s, steps in bad if len(steps)]
    source = ", ".join(dict.fromkeys(s.source for s in present))
    hf = any(s.kind == LOSS and s.convention == HF_TRAINER for s in present)
    note = _HF_FILTER_NOTE if hf else ""
    if not bad:
        counts = ", ".join(f"{len(s)} {s.what}" for s in present)
        return RunRow(
            "non-finite",
            title,
            CLEAR,
            f"every logged value is finite ({counts}){note}",
            NONFINITE_RULE,
            source,
        )
    parts = [
        f"{s.what}{f' ({s.logged})' if s.logged != s.what else ''} at "
        f"{plural(len(steps), 'step')}, first at step {int(steps[0])}"
        + (
            f" ({', '.join(str(int(x)) for x in steps[:8])}{'…' if len(steps) > 8 else ''})"
            if len(steps) > 1
            else ""
        )
        for s, steps in bad
    ]
    first = min(int(steps[0]) for _, steps in bad)
    text = "non-finite " + "; ".join(parts)
    figures = {f"{s.kind}:{s.logged}": [int(x) for x in steps] for s, steps in bad} | {"first_step": first}
    steps = tuple(sorted({int(x) for _, v in bad for x in v[:50]}))
    warmup = all(s.kind == GRAD_NORM for s, _ in bad) and all(int(v[-1]) <= FP16_WARMUP_STEPS for _, v in bad)
    if warmup and precision == "fp16":
        return RunRow(
            "non-finite",
            title,
            CLEAR,
            f"{text}, only within the first {FP16_WARMUP_STEPS} steps of this fp16 run ({where}): torch's "
            "GradScaler warming up its loss scale, skipping those steps (benign)",
            NONFINITE_RULE,
            source,
            figures=figures | {"fp16_warmup": True},
        )
    if warmup and precision is None:
        return RunRow(
            "non-finite",
            title,
            UNDECIDED,
            f"{text}, only within the first {FP16_WARMUP_STEPS} steps: in an fp16 run that is torch's "
            "GradScaler warming up its loss scale (benign), otherwise a fault; the run's precision is not "
            "known here (pass --config with its fp16/bf16 setting)",
            NONFINITE_RULE,
            source,
            steps=steps,
            figures=figures,
        )
    fix = "lower the learning rate; check the batch at the first non-finite step"
    if precision == "fp16":
        fix += "; past the loss scaler's warm-up, fp16 overflows point at bf16 (same range as fp32)"
    elif precision is None:
        fix += "; if the run used fp16, bf16 (same range as fp32) removes overflows"
    return RunRow(
        "non-finite",
        title,
        FOUND,
        text + note,
        NONFINITE_RULE,
        source,
        steps=steps,
        figures=figures,
        fix=fix,
    )


EXPLOSION_RULE = (
    f"an explosion is a logged grad norm more than {EXPLOSION_FACTOR:g}× the median of the {WINDOW} logged "
    f"before it, more than {SPIKE_SIGMAS:g} robust σ (as for spikes) above it on the log scale, and above "
    f"the run's median grad norm; found when any, clear when none among ≥ {MIN_POINTS} finite positive "
    "grad norms, undecided with fewer"
)


def verdict_explosions(
    grad: Series | Sequence[tuple[int, float]] | None, max_grad_norm: float | None = None
) -> RunRow:
    """Grad-norm explosions: the spike rule on log(grad norm), with a multiple floor. ``max_grad_norm``
    (None: not known; ≤ 0: clipping off) shapes the advice, never the verdict."""

    title = "grad-norm explosions"
    grad = as_series(GRAD_NORM, grad)
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
            f"only {plural(len(vals), 'finite positive grad norm')} logged",
            EXPLOSION_RULE,
            grad.source,
        )
    logv = np.log(vals)
    floor = math.log(EXPLOSION_FACTOR)
    diff, med, sigma = trailing_jumps(logv, floor=resolution(logv), scale_above=floor)
    # A 50× jump of a norm that stays far below the run's usual size (a memorising run's 1e-7) is noise.
    typical = float(np.median(vals))
    flagged = np.flatnonzero(
        (diff > SPIKE_SIGMAS * sigma) & (diff > floor) & (vals[WINDOW:] > typical)
    ).tolist()
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
    if max_grad_norm is not None and max_grad_norm > 0:
        fix = (
            f"clipping was on (max_grad_norm {max_grad_norm:g}), so these steps' updates were clipped: the "
            "logged norm is before clipping; lower the learning rate or find the batches at those steps"
        )
    elif max_grad_norm is not None:
        fix = "clipping is off: set max_grad_norm (e.g. 1.0); lower the learning rate around those steps"
    else:
        fix = (
            "lower the learning rate around those steps; if clipping was off, set max_grad_norm (its setting "
            "is not known here: pass --config)"
        )
    return RunRow(
        "grad-explosions",
        title,
        FOUND,
        f"{plural(len(events), 'explosion')}: "
        + "; ".join(parts)
        + (f"; and {len(events) - 5} more" if len(events) > 5 else ""),
        EXPLOSION_RULE,
        grad.source,
        steps=tuple(int(e["step"]) for e in events),
        figures=figures,
        fix=fix,
    )


CLIP_RULE = (
    "clipping is active at a logged step when its grad norm exceeds max_grad_norm (the logged norm taken "
    "as before clipping: what the HF Trainer logs, Lightning's grad_norm() and torch's clip_grad_norm_ "
    f"return); found when the Wilson {LEVEL:.0%} interval of the active share lies above {CLIP_MOST:.0%} "
    "(the clip, not the LR schedule, then sets most update sizes), clear when it lies below, undecided "
    "when it straddles"
)


def verdict_clipping(
    grad: Series | Sequence[tuple[int, float]] | None, max_grad_norm: float | None, where: str = ""
) -> RunRow:
    """How often clipping was active, when ``max_grad_norm`` is known (never assumed)."""

    title = "gradient clipping activity"
    grad = as_series(GRAD_NORM, grad)
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
        f"clipping active at {k} of {plural(n, 'logged step')} ({k / n:.0%}, {LEVEL:.0%} interval "
        f"{lo:.0%}–{hi:.0%}) at max_grad_norm {max_grad_norm:g} ({where})"
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


@dataclass(frozen=True)
class StepUp:
    """How far the evaluations after the lowest sit above it, against flat noise (:func:`step_up`)."""

    over_level: float  # the later evaluations' median over the level around the lowest (log-ratio)
    over_lowest: float  # … over the lowest itself (log-ratio, ≥ 0)
    scale: float  # the later evaluations' scatter (log scale)
    chance: float  # flat noisy curves of this shape step up at least as far (over the level) this often
    luck: float  # … and their later median lies this far above their lowest, typically (log-ratio)
    draws: int


def _upward_trend(x: np.ndarray, y: np.ndarray) -> float:
    """The one-sided p-value of an upward trend of ``y`` along ``x``: Kendall's τ (scipy; exact for a
    few points without ties), which assumes nothing about the noise's law, unlike Theil–Sen's interval,
    whose normal approximation is too narrow on the handful of evaluations after a lowest."""
    from scipy import stats

    if len(x) < 3 or np.ptp(y) == 0:
        return 1.0
    p = float(stats.kendalltau(x, y, alternative="greater").pvalue)
    return p if math.isfinite(p) else 1.0


def step_up(later: np.ndarray, around: np.ndarray, floor: float = 0.0) -> StepUp:
    """The later evaluations' median over the mean of the evaluations ``around`` the lowest (the lowest
    last), all log eval losses, in units of the later evaluations' own scatter (1.4826 × their median
    absolute deviation, never below ``floor``), and the chance that flat noisy curves of the same shape —
    as many evaluations around and after their lowest, independent draws of one normal — step up as far
    (:func:`_step_null`, a fixed seed). A Monte Carlo test, because the statistic's law under flat noise
    depends on the lowest of n draws and on a median absolute deviation of a few points, which have no
    closed form together."""

    med = float(np.median(later))
    over_level = med - float(np.mean(around))
    scale = max(_mad(later), floor)
    z = over_level / scale if scale > 0 else (math.inf if over_level > 0 else 0.0)
    null, gaps = _step_null(len(later), len(around) - 1)
    chance = (int(len(null) - np.searchsorted(null, z, side="left")) + 1) / (len(null) + 1)
    return StepUp(
        over_level, med - float(around[-1]), scale, chance, float(np.median(gaps)) * scale, len(null)
    )


@lru_cache(maxsize=256)
def _step_null(later: int, before: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`step_up`'s statistic on flat normal curves (sorted), and their later median's gap above their
    lowest in the same units: ``before`` + 1 + ``later`` independent draws with their lowest moved to
    position ``before`` — drawn i.i.d., the lowest is equally likely anywhere and the others stay i.i.d.
    around it, so this is the law given where the lowest fell. :data:`STEP_DRAWS` curves (at least 2,000
    and 2,000,000 values for a long curve); the seed is the shape, so a run always reads the same chance."""
    n = before + 1 + later
    draws = min(STEP_DRAWS, max(2_000, 2_000_000 // n))
    rng = np.random.default_rng([later, before])
    stats, gaps = [], []
    per_block = max(1, 2_000_000 // n)  # curves per block: 16 MB of draws
    for lo in range(0, draws, per_block):
        z = rng.standard_normal((min(per_block, draws - lo), n))
        rows = np.arange(len(z))
        low = np.argmin(z, axis=1)
        z[rows, low], z[rows, before] = z[rows, before], z[rows, low]
        tail = z[:, before + 1 :]
        med = np.median(tail, axis=1)
        scale = 1.4826 * np.median(np.abs(tail - med[:, None]), axis=1)
        stats.append((med - z[:, : before + 1].mean(axis=1)) / scale)
        gaps.append((med - z[:, before]) / scale)
    return np.sort(np.concatenate(stats)), np.concatenate(gaps)


OVERFIT_RULE = (
    "judged per eval set (the HF Trainer's eval_<set>_loss for each of a dict of eval datasets; each val / "
    "valid / eval loss, or validation dataloader, a Lightning or TensorBoard run logs); onset = the step "
    "of the lowest eval loss; after it the eval loss steps up when the median of the later evaluations "
    f"lies above the level around the lowest (the mean log eval loss of the lowest and the {AROUND} "
    f"evaluations before it: one lucky evaluation does not set it) by more than {STEP_BAND:.0%}, and — in "
    "units of the later evaluations' own scatter, 1.4826 × their median absolute deviation — further than "
    f"flat noisy curves of the same shape step up in {STEP_FALSE:.0%} of {STEP_DRAWS:,} simulated draws; "
    "it rises when the later evaluations trend upwards (Kendall's τ, one-sided p ≤ "
    f"{RISE_FALSE:g}) and the Theil–Sen line through them rises by more than {BAND:.0%} over the span at "
    f"the low end of its {LEVEL:.0%} interval (so flat noisy curves read as overfitting at most "
    f"{STEP_FALSE + RISE_FALSE:.0%} of the time); found when it steps up or rises while the training loss's "
    "Theil–Sen slope over the same steps lies below 0; clear when the lowest eval loss is the last, or when "
    "the later evaluations' median (its one-sided "
    f"{LEVEL:.0%} order-statistic bound; with fewer than 5 later evaluations, every one of them) lies "
    f"within {STEP_BAND:.0%} of the lowest beyond the gap flat noise of their scatter typically leaves "
    f"above the lowest of a curve, and the line's interval lies below +{BAND:.0%}; undecided otherwise or "
    "with fewer than 3 evaluations after the onset"
)


def _keep_best(convention: str, logged: str, onset: int) -> str:
    """Where to keep the best checkpoint, in the convention of the library that logged the eval loss."""
    if convention == LIGHTNING:
        return (
            f"keep the checkpoint nearest step {onset} (ModelCheckpoint(monitor={logged!r}, mode='min'), or "
            f"EarlyStopping on it), stop earlier, or add data / regularisation"
        )
    if convention == HF_TRAINER:
        return (
            f"keep the checkpoint nearest step {onset} (load_best_model_at_end with metric_for_best_model="
            f"{logged!r}), stop earlier, or add data / regularisation"
        )
    return f"keep the checkpoint nearest step {onset}, stop earlier, or add data / regularisation"


def verdict_overfitting(
    train: Series | Sequence[tuple[int, float]] | None,
    eval_loss: Series | Sequence[tuple[int, float]] | None,
) -> RunRow:
    """Overfitting onset on one eval set: its loss bottoms out and steps up or rises while the training
    loss still falls (:data:`OVERFIT_RULE`)."""

    train = as_series(LOSS, train)
    eval_loss = as_series(EVAL_LOSS, eval_loss)
    which = eval_loss.eval_set if eval_loss is not None else ""
    key = "overfitting" + (f":{which}" if which else "")
    title = "overfitting onset" + (f" (eval set {which})" if which else "")
    if eval_loss is None:
        return RunRow(key, title, NOT_CHECKED, "no eval loss logged", OVERFIT_RULE)
    e = eval_loss.finite()
    source = eval_loss.source + (
        f", {train.source}" if train is not None and train.source != eval_loss.source else ""
    )
    if len(e) < 4:
        return RunRow(
            key, title, UNDECIDED, f"only {plural(len(e), 'evaluation')} logged", OVERFIT_RULE, source
        )
    e, why = _ratio_ready(e, "eval loss")
    if why:
        return RunRow(key, title, NOT_CHECKED, why, OVERFIT_RULE, source)
    m = int(np.argmin(e.values))
    onset, lowest = int(e.steps[m]), float(e.values[m])
    after = len(e) - 1 - m
    figures: dict = {"onset_step": onset, "lowest_eval_loss": lowest, "evaluations_after": after}
    if after == 0:
        return RunRow(
            key,
            title,
            CLEAR,
            f"the eval loss is lowest at the last evaluation (step {onset}, {_num(lowest)}): no onset",
            OVERFIT_RULE,
            source,
            figures=figures,
        )
    if after < 3:
        return RunRow(
            key,
            title,
            UNDECIDED,
            f"the eval loss is lowest at step {onset} ({_num(lowest)}) with only "
            f"{plural(after, 'evaluation')} after it",
            OVERFIT_RULE,
            source,
            figures=figures,
        )
    logy = np.log(e.values)
    x, ly = e.steps[m:], logy[m:]
    span = float(x[-1] - x[0])
    # The trend through the later evaluations only: a line from the lowest point rises by the lowest's luck.
    s = theil_sen_interval(x[1:], ly[1:])
    rise = (s.slope * span, s.lo * span, s.hi * span)  # log-ratios, last vs onset along the line
    trend_p = _upward_trend(x[1:], ly[1:])
    later = ly[1:]
    around = logy[max(0, m - AROUND) : m + 1]
    # A quantised eval loss (logged to a few decimals) can have later evaluations that agree exactly: their
    # scatter is then at least the logging resolution, not 0.
    up = step_up(later, around, floor=resolution(e.values) / lowest)
    _, _, over_hi = median_bounds(later - ly[0])
    intercept = float(np.median(ly[1:] - s.slope * (x[1:] - x[0])))  # the line, at the onset's step
    fitted_start, fitted_end = math.exp(intercept), math.exp(intercept + s.slope * span)
    level = math.exp(float(np.mean(around)))
    figures |= {
        "last_eval_step": int(x[-1]),
        "log_rise": list(rise),
        "upward_trend_p": trend_p,
        "level_around_lowest": level,
        "later_median_log_ratio_over_level": up.over_level,
        "later_median_log_ratio_over_lowest": up.over_lowest,
        "later_scatter_log": up.scale,
        "flat_chance": up.chance,
        "flat_typical_gap_log": up.luck,
    }
    before = len(around) - 1
    text = (
        f"the eval loss is lowest at step {onset} ({_num(lowest)}); the median of the "
        f"{plural(after, 'evaluation')} to step {int(x[-1])} is {_ratio(up.over_lowest)} it and "
        f"{_ratio(up.over_level)} the level around it ({_num(level)}: the lowest"
        + (f" and the {plural(before, 'evaluation')} before it" if before else "")
        + f"), scattering ±{math.expm1(up.scale):.1%} among themselves — flat noisy curves of this shape "
        f"step up that far in {up.chance:.1%} of {up.draws:,} simulated draws; along the fitted line they go "
        f"{_num(fitted_start)} → {_num(fitted_end)} ({_ratio(rise[0])}, interval {_ratio(rise[1])}–"
        f"{_ratio(rise[2])}; upward trend p = {trend_p:.2g})"
    )
    steps_up = up.chance <= STEP_FALSE and up.over_level > math.log1p(STEP_BAND)
    rises = trend_p <= RISE_FALSE and rise[1] > math.log1p(BAND)
    if steps_up or rises:
        if train is None:
            return RunRow(
                key,
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
        per_k = 1000.0
        figures["train_slope_per_1000_steps"] = [ts.slope * per_k, ts.lo * per_k, ts.hi * per_k]
        trend = (
            f"the training loss over the same steps: slope {_num(ts.slope * per_k)} per 1000 steps "
            f"(interval {_num(ts.lo * per_k)} to {_num(ts.hi * per_k)})"
        )
        if ts.hi < 0:
            how = "steps up and stays up" if steps_up else "rises"
            return RunRow(
                key,
                title,
                FOUND,
                f"onset at step {onset}, then the eval loss {how}: {text}, while {trend}",
                OVERFIT_RULE,
                source,
                steps=(onset,),
                figures=figures,
                fix=_keep_best(eval_loss.convention, eval_loss.logged or "eval_loss", onset),
            )
        return RunRow(
            key,
            title,
            UNDECIDED,
            f"{text}, but {trend} — not falling, so not the overfitting pattern (see the spike and "
            "plateau rows)",
            OVERFIT_RULE,
            source,
            figures=figures,
        )
    # Clear when the later evaluations sit no further above the lowest than the band and the gap flat noise
    # of their scatter typically leaves above the luckiest evaluation (with too few to bound their median:
    # every one of them).
    allowed = math.log1p(STEP_BAND) + up.luck
    within = over_hi < allowed if math.isfinite(over_hi) else float((later - ly[0]).max()) < allowed
    if rise[2] < math.log1p(BAND) and within:
        return RunRow(key, title, CLEAR, text, OVERFIT_RULE, source, figures=figures)
    return RunRow(key, title, UNDECIDED, text, OVERFIT_RULE, source, figures=figures)


PLATEAU_RULE = (
    f"window = the last {PLATEAU_TAIL:.0%} of the logged steps, ending where the logged LR last stood at ≥ "
    f"{DECAYED:.0%} of its peak (a decaying schedule's tail, where a flattening loss is the schedule ending, "
    f"is left out); found (plateau) when the {LEVEL:.0%} interval of the training loss's change over the "
    "window (the slope of log loss × span: end over start of the fitted line; interval from the noise "
    f"around the trend, widened for its autocorrelation) lies within ±{BAND:.0%}; clear when it lies below "
    f"−{BAND:.0%} (still improving) or above +{BAND:.0%} (rising: not a plateau); undecided otherwise or "
    f"with fewer than {PLATEAU_MIN_POINTS} points in the window; not checked for a loss that takes negative "
    f"values or whose median in the window is at most {RESOLUTION_FLOOR} logging steps (converged to ~0); a "
    "logged 0 is read as half the logging resolution"
)


def verdict_plateau(
    train: Series | Sequence[tuple[int, float]] | None,
    lr: Series | Sequence[tuple[int, float]] | None = None,
) -> RunRow:
    """A plateau: no improvement over the last part of training while the LR was still high."""

    title = "plateau"
    train = as_series(LOSS, train)
    lr = as_series(LEARNING_RATE, lr)
    if train is None:
        return RunRow("plateau", title, NOT_CHECKED, "no training loss logged", PLATEAU_RULE)
    t = train.finite()
    if len(t) < PLATEAU_MIN_POINTS:
        return RunRow(
            "plateau",
            title,
            UNDECIDED,
            f"only {plural(len(t), 'finite logged loss', 'finite logged losses')}",
            PLATEAU_RULE,
            train.source,
        )
    q = resolution(t.values)
    t, why = _ratio_ready(t, "training loss")
    if why:
        return RunRow("plateau", title, NOT_CHECKED, why, PLATEAU_RULE, train.source)
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
            f"only {plural(len(x), 'logged loss', 'logged losses')} in the window "
            f"(steps {math.floor(start) + 1}–{end}){tail_note}",
            PLATEAU_RULE,
            source,
            figures=figures,
        )
    if q > 0 and float(np.median(y)) <= RESOLUTION_FLOOR * q:
        return RunRow(
            "plateau",
            title,
            NOT_CHECKED,
            f"over steps {int(x[0])}–{int(x[-1])} the training loss sits at its logging resolution (median "
            f"{_num(float(np.median(y)))}, logged in steps of {_num(q)}): it has converged to ~0, and no "
            f"change can be read{tail_note}",
            PLATEAU_RULE,
            source,
            figures=figures,
        )
    ly = np.log(y)
    s = slope_interval(x, ly)
    span = float(x[-1] - x[0])
    rel = (s.slope * span, s.lo * span, s.hi * span)  # log-ratios: fitted end over fitted start
    centre = float(ly.mean()) + s.slope * (x[0] - float(x.mean()))
    fit0, fit1 = math.exp(centre), math.exp(centre + s.slope * span)
    figures["log_change"] = list(rel)
    figures["fitted"] = [fit0, fit1]
    text = (
        f"over steps {int(x[0])}–{int(x[-1])} ({len(x)} logged losses) the fitted training loss goes "
        f"{_num(fit0)} → {_num(fit1)} ({_ratio(rel[0])}, {LEVEL:.0%} interval {_ratio(rel[1])}–"
        f"{_ratio(rel[2])}){tail_note}"
    )
    band = math.log1p(BAND)
    if rel[1] > -band and rel[2] < band:
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
    if rel[2] < -band:
        return RunRow(
            "plateau", title, CLEAR, f"still improving: {text}", PLATEAU_RULE, source, figures=figures
        )
    if rel[1] > band:
        return RunRow(
            "plateau", title, CLEAR, f"rising, not a plateau: {text}", PLATEAU_RULE, source, figures=figures
        )
    return RunRow("plateau", title, UNDECIDED, text, PLATEAU_RULE, source, figures=figures)


PROGRESS_RULE = (
    f"the training loss's level at the end of the run against its start: the median of the last "
    f"{PROGRESS_SHARE:.0%} of the logged losses over the median of the first {PROGRESS_SHARE:.0%} (at least "
    f"{PROGRESS_MIN} each), with an interval from the two medians' distribution-free intervals (each at "
    f"{math.sqrt(LEVEL):.1%}, so both hold together at {LEVEL:.0%}; a spike or a heavy tail cannot widen "
    f"them); found (no progress) when the interval lies above ×{1 - BAND:g} (the loss fell by less than "
    f"{BAND:.0%}, or rose), clear when it lies below, undecided when it straddles; with "
    f"{PROGRESS_FEW}–{2 * PROGRESS_MIN - 1} finite logged losses (one per epoch) the same on the change of "
    f"the Theil–Sen line through the log loss over the run and its {LEVEL:.0%} interval, undecided with "
    f"fewer; not checked for a loss that takes negative values; a logged 0 "
    "is read as half the logging resolution"
)


def _few_losses_progress(t: Series, title: str, zeros: str) -> RunRow:
    """Progress from a handful of logged losses (one per epoch): the Theil–Sen line through the log loss,
    its change over the run and that change's interval."""
    x, ly = t.steps.astype(float), np.log(t.values)
    s = theil_sen_interval(x, ly)
    span = float(x[-1] - x[0])
    change = (s.slope * span, s.lo * span, s.hi * span)
    start = math.exp(float(np.median(ly - s.slope * (x - x[0]))))
    text = (
        f"only {len(t)} logged losses: the Theil–Sen line through them goes {_num(start)} → "
        f"{_num(start * math.exp(change[0]))} over steps {int(x[0])}–{int(x[-1])} ({_ratio(change[0])}, "
        f"{LEVEL:.0%} interval {_ratio(change[1])}–{_ratio(change[2])}){zeros}"
    )
    figures = {"log_change": list(change), "points": len(t), "line": True}
    band = math.log1p(-BAND)
    status = FOUND if change[1] > band else CLEAR if change[2] < band else UNDECIDED
    return RunRow(
        "progress",
        title,
        status,
        text,
        PROGRESS_RULE,
        t.source,
        steps=(int(t.steps[0]),) if status == FOUND else (),
        figures=figures,
        fix=PROGRESS_FIX,
    )


PROGRESS_FIX = (
    "check that the optimizer steps the parameters being trained (requires_grad, its param groups, a frozen "
    "base with no adapter attached), that the learning rate is not ~0, and that the labels reach the loss "
    "(all -100 / masked labels give a constant loss)"
)


def verdict_progress(train: Series | Sequence[tuple[int, float]] | None) -> RunRow:
    """No progress over the run: the training loss ends where it started (:data:`PROGRESS_RULE`)."""

    title = "progress over the run"
    train = as_series(LOSS, train)
    if train is None:
        return RunRow("progress", title, NOT_CHECKED, "no training loss logged", PROGRESS_RULE)
    t = train.finite()
    if len(t) < PROGRESS_FEW:
        return RunRow(
            "progress",
            title,
            UNDECIDED,
            f"only {plural(len(t), 'finite logged loss', 'finite logged losses')}",
            PROGRESS_RULE,
            train.source,
        )
    zeros = _zeros_note(t, "training loss")
    t, why = _ratio_ready(t, "training loss")
    if why:
        return RunRow("progress", title, NOT_CHECKED, why, PROGRESS_RULE, train.source)
    if len(t) < 2 * PROGRESS_MIN:
        return _few_losses_progress(t, title, zeros)
    w = max(PROGRESS_MIN, round(PROGRESS_SHARE * len(t)))
    a, b = np.log(t.values[:w]), np.log(t.values[-w:])
    joint = math.sqrt(LEVEL)
    ma, a_lo, a_hi = median_interval(a, joint)
    mb, b_lo, b_hi = median_interval(b, joint)
    diff, lo, hi = mb - ma, b_lo - a_hi, b_hi - a_lo
    s0, s1 = int(t.steps[w - 1]), int(t.steps[-w])
    figures = {"log_change": [diff, lo, hi], "window_points": w, "start": math.exp(ma), "end": math.exp(mb)}
    if np.ptp(t.values) == 0:
        text = f"all {len(t)} logged losses are {_num(float(t.values[0]))}: the loss never moved"
    else:
        text = (
            f"the training loss goes from {_num(math.exp(ma))} (median of the first {w} logged, to step "
            f"{s0}) to {_num(math.exp(mb))} (the last {w}, from step {s1}): {_ratio(diff)} "
            f"({LEVEL:.0%} interval {_ratio(lo)}–{_ratio(hi)}){zeros}"
        )
    band = math.log1p(-BAND)
    if lo > band:
        return RunRow(
            "progress",
            title,
            FOUND,
            text,
            PROGRESS_RULE,
            train.source,
            steps=(int(t.steps[0]),),
            figures=figures,
            fix=PROGRESS_FIX,
        )
    if hi < band:
        return RunRow("progress", title, CLEAR, text, PROGRESS_RULE, train.source, figures=figures)
    return RunRow("progress", title, UNDECIDED, text, PROGRESS_RULE, train.source, figures=figures)
