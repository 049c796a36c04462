"""The curve rules applied to a run's series: one function for a finished run (``nbkit diagnose RUN_DIR``)
and a run that is still training (:mod:`nbkit.callbacks`), so the two always apply the same rules to the
same series, named the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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
    verdict_progress,
    verdict_spikes,
)
from nbkit.diagnose.rows import RunRow
from nbkit.diagnose.schedule import Schedule, verdict_schedule

# The row keys of the curve rules (a keyed row adds ":<eval set>"), in the order they are judged.
CURVE_KEYS = (
    "loss-spikes",
    "non-finite",
    "grad-explosions",
    "clipping",
    "overfitting",
    "lr-schedule",
    "plateau",
    "progress",
)


def curve_rows(
    curves: Mapping[str, Series],
    others: Iterable[Series] = (),
    *,
    schedule: Schedule | None,
    total: int | None,
    total_where: str,
    max_grad_norm: float | None = None,
    clip_where: str = "",
    precision: str | None = None,
    precision_where: str = "",
    check_lr: bool = True,
) -> list[RunRow]:
    """Every curve rule on ``curves`` — keyed as :func:`nbkit.diagnose.artefacts.choose` keys them: a kind,
    or ``eval_loss:<set>`` for each of several eval sets — and ``others`` (loss-like series no rule but the
    non-finite one reads). ``schedule``: what the trainer config names; ``max_grad_norm`` (None: not known,
    ≤ 0: clipping off) and where it was read; ``precision`` ("fp16", "bf16", "fp32", None: not known) and
    where it was read tell the loss scaler's warm-up from a fault. ``check_lr=False`` leaves the LR row
    out (a run whose schedule is its own objects, with nothing named to compare with). Overfitting is
    judged once per eval set."""

    train, grad, lr = curves.get(LOSS), curves.get(GRAD_NORM), curves.get(LEARNING_RATE)
    evals = [s for s in curves.values() if s.kind == EVAL_LOSS]
    rows = [
        verdict_spikes(train),
        verdict_nonfinite([*curves.values(), *others], precision, precision_where),
        verdict_explosions(grad, max_grad_norm),
        verdict_clipping(grad, max_grad_norm, clip_where),
        *([verdict_overfitting(train, e) for e in evals] or [verdict_overfitting(train, None)]),
    ]
    if check_lr:
        rows.append(verdict_schedule(lr, schedule, total, total_where))
    rows += [verdict_plateau(train, lr), verdict_progress(train)]
    return rows
