"""What a logged name is: the pattern list ``nbkit diagnose RUN_DIR`` reads a run's series by.

Trackers and users spell the same quantity many ways — the HF Trainer's ``loss`` and ``eval_<set>_loss``,
Lightning's ``train_loss_step`` or ``val_loss_epoch``, a TensorBoard loop's ``Loss/train``, a W&B export's
``train/loss`` — so a name is read by its words, not matched against a fixed list. A name is split into
lower-case words at ``/ _ - . : ,``, brackets and spaces (``train/loss_step`` → train, loss, step), and it is:

========================  =======================================================================
train loss                the word ``loss`` with only train words (train, training), aggregation
                          words (step, batch, epoch, total, mean, avg), words naming the kind of
                          loss (nll, ce, cross entropy, mse, rmse, mae, l1, bce, huber, ctc, focal,
                          dice) and fillers (on, of, the, per): ``loss``, ``train_loss``,
                          ``train/loss_step``, ``train_loss_batch``, ``Loss/train``, ``training_loss``,
                          ``train/nll_loss`` (a name without a kind of loss is preferred when both
                          are logged: the typed one may be a component)
eval loss                 the word ``loss``, one eval word (eval, evaluation, val, valid, validation,
                          dev) and only the words above: ``eval_loss``, ``val_loss_epoch``,
                          ``loss/val``, ``validation/loss``, ``val/rmse_loss``; one eval set each:
                          ``eval_<set>_loss`` (the HF Trainer's name for each set of a dict of eval
                          datasets; ``eval/<set>_loss`` in its TensorBoard events) and Lightning's
                          ``…/dataloader_idx_<k>`` (one per validation dataloader); a test loss
                          (``test_loss``, ``Test loss (avg on test)``) as the eval set ``test``
                          when it is logged at 4 or more steps (evaluated along the run, not once
                          after it)
learning rate             ``lr`` or ``learning rate`` with only train and aggregation words
                          (``learning_rate``, ``train/lr``), and Lightning's LearningRateMonitor
                          ``lr-<Optimizer>`` (its first parameter group)
grad norm                 ``grad``/``gradient`` and ``norm`` with only train, aggregation and
                          norm-order words (2, 0, l2, total): ``grad_norm``, ``train/grad_norm``,
                          Lightning's ``grad_2.0_norm_total``; never a per-parameter norm
step (CSV / JSONL)        the column giving each row's optimizer step, first found of
                          ``trainer/global_step`` (Lightning's W&B logger), ``train/global_step``
                          (the HF Trainer's W&B logger), ``global_step``, ``step``, ``Step``,
                          ``_step`` (W&B's own row counter), ``iteration``, ``iter``, and
                          ``epoch`` last (a Keras CSVLogger's one row per epoch)
========================  =======================================================================

Names with other words — a loss component (``loss_kl``, ``val_loss_auto_0``), ``predict_loss``, a test loss
logged fewer than 4 times (the test split, evaluated once after training) — are not read; the report lists
the loss-like ones, and ``--series KIND=NAME`` names any logged series as one of these kinds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

LOSS, EVAL_LOSS, GRAD_NORM, LEARNING_RATE = "loss", "eval_loss", "grad_norm", "learning_rate"
KINDS = (LOSS, EVAL_LOSS, LEARNING_RATE, GRAD_NORM)
OTHER_LOSS = "other_loss"  # a loss-like name no kind reads (a GAN's gen/disc losses): checked for NaN only
KIND_WORDS = {
    LOSS: "train loss",
    EVAL_LOSS: "eval loss",
    LEARNING_RATE: "learning rate",
    GRAD_NORM: "grad norm",
}

TRAIN_WORDS = frozenset({"train", "training"})
EVAL_WORDS = frozenset({"eval", "evaluation", "val", "valid", "validation", "dev"})
AGG_WORDS = frozenset({"step", "batch", "epoch", "total", "mean", "avg"})
LOSS_TYPE_WORDS = frozenset(
    {"nll", "ce", "xent", "cross", "entropy", "crossentropy", "mse", "rmse", "mae", "l1", "bce", "huber"}
    | {"ctc", "focal", "dice"}
)
FILLER_WORDS = frozenset({"on", "of", "the", "per"})
TEST_WORDS = frozenset({"test"})
TEST_MIN_POINTS = 4  # a test loss logged this often was evaluated along the run: an eval curve
NORM_ORDER_WORDS = frozenset({"2", "0", "l2", "total"})
# The step column of a CSV or JSONL history, in order of preference: the trainer's own optimizer step first,
# W&B's row counter (it counts log calls, not optimizer steps) only when nothing better is there.
STEP_COLUMNS = (
    "trainer/global_step",
    "train/global_step",
    "global_step",
    "step",
    "Step",
    "_step",
    "iteration",
    "iter",
    "epoch",
)
LIGHTNING_LR = re.compile(r"^lr-[^/]+(/pg1)?$")
_HF_EVAL_SET = re.compile(r"^eval[/_](.+)_loss$")
_DATALOADER = re.compile(r"^(.*)[/_]dataloader_idx_(\d+)$")
_SPLIT = re.compile(r"[/_\-.\s()\[\]:,]+")


@dataclass(frozen=True)
class Named:
    """What a logged name was read as: its kind, its eval set ('' for the run's one eval loss), how it
    aggregates ('step', 'epoch' or '' — Lightning's ``_step``/``_epoch`` suffixes), the kind of loss its
    name states ('nll', 'rmse' …; '' none) and whether it is a test split's loss (read only when logged
    along the run)."""

    kind: str
    eval_set: str = ""
    agg: str = ""
    detail: str = ""
    test: bool = False


def words(name: str) -> list[str]:
    return [w for w in _SPLIT.split(name.lower()) if w]


def _agg(ws: list[str]) -> str:
    return "epoch" if "epoch" in ws else "step" if ("step" in ws or "batch" in ws) else ""


@lru_cache(maxsize=4096)
def classify(name: str) -> Named | None:
    """The kind ``name`` is read as (see the module's table), or None. Cached: a log names the same few
    series in every one of its entries (a million of them in a long run's trainer_state.json)."""

    if LIGHTNING_LR.match(name):
        return Named(LEARNING_RATE)
    m = _DATALOADER.match(name)
    if m:
        inner = classify(m.group(1))
        if inner is not None and inner.kind == EVAL_LOSS:
            return Named(EVAL_LOSS, f"dataloader_idx_{m.group(2)}", inner.agg, inner.detail, inner.test)
        return None
    ws = words(name)
    rest = set(ws) - AGG_WORDS - FILLER_WORDS
    if "loss" in rest:
        rest.discard("loss")
        detail = "_".join(w for w in ws if w in LOSS_TYPE_WORDS)
        core = rest - LOSS_TYPE_WORDS
        if core <= TRAIN_WORDS:
            return Named(LOSS, "", _agg(ws), detail)
        evals = core & EVAL_WORDS
        if len(evals) == 1 and core == evals:
            return Named(EVAL_LOSS, "", _agg(ws), detail)
        if core == TEST_WORDS:
            return Named(EVAL_LOSS, "test", _agg(ws), detail, test=True)
        m = _HF_EVAL_SET.match(name.lower())
        return Named(EVAL_LOSS, m.group(1)) if m else None
    if rest - TRAIN_WORDS <= {"lr"} and "lr" in rest:
        return Named(LEARNING_RATE)
    if rest - TRAIN_WORDS == {"learning", "rate"}:
        return Named(LEARNING_RATE)
    if {"grad", "gradient", "grads"} & rest and "norm" in rest:
        other = rest - TRAIN_WORDS - NORM_ORDER_WORDS - {"grad", "gradient", "grads", "norm"}
        if not other:
            return Named(GRAD_NORM)
    return None


@lru_cache(maxsize=4096)
def loss_like(name: str) -> bool:
    """A name with the word loss that :func:`classify` does not read (listed so a user can name it)."""
    return "loss" in words(name) and classify(name) is None


def parse_override(text: str) -> tuple[str, str]:
    """``KIND=NAME`` of ``--series`` as (kind, name); ValueError with what was expected."""
    kind, sep, name = text.partition("=")
    kind = kind.strip()
    if not sep or not name or kind not in KINDS:
        raise ValueError(
            f"expected KIND=NAME with KIND one of {', '.join(KINDS)} and NAME a logged series, got {text!r}"
        )
    return kind, name
