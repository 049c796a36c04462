"""Evaluation batch size ≠ micro batch size under gradient accumulation.

axolotl warns "eval_batch_size != micro_batch_size. This can lead to VRAM instability" (evaluation
allocates other shapes than the training step, on top of the accumulated gradients), and the loss
that trainers report is a mean of per-batch means: with another batch size the padding and the
weighting of examples change, so the eval loss is not the quantity the training loss measures. The
check scores the same examples both ways with the audit's model and reports the gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nbkit.audit.check import Check, CheckConfig, Checked, CheckMetrics, NotRunnable
from nbkit.audit.sft import pooled_loss
from nbkit.experiment import param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "eval-batch", "eval batch size ↔ micro batch size under accumulation"


@dataclass
class EvalBatchConfig(CheckConfig):
    micro_batch_size: int = param(2, min=1, max=64)
    eval_batch_size: int = param(8, min=0, max=256, label="eval batch size (0 = micro batch size)")
    grad_accumulation: int = param(4, min=1, max=64)
    examples: int = param(8, min=2, max=1024, label="examples scored")

    @classmethod
    def smoke(cls):
        return cls(examples=4)

    @classmethod
    def audit_values(cls, audit):
        t, tr = audit.trainer, audit.train
        return {
            "micro_batch_size": tr.micro_batch_size,
            "grad_accumulation": tr.grad_accumulation,
            "eval_batch_size": t.eval_batch_size or 0,
        }


@dataclass(frozen=True, kw_only=True)
class EvalBatchMetrics(CheckMetrics):
    """The eval and micro batch sizes under gradient accumulation."""

    micro_batch_size: int
    eval_batch_size: int
    grad_accumulation: int


FIX = (
    "set eval_batch_size equal to micro_batch_size (TRL: per_device_eval_batch_size = "
    "per_device_train_batch_size)"
)


def mean_of_batch_means(losses: list[tuple[float, int]], batch_size: int) -> float:
    """The loss as trainers report it: the mean over batches of each batch's token-mean loss."""

    means = [pooled_loss(losses[i : i + batch_size]) for i in range(0, len(losses), batch_size)]
    return sum(means) / len(means)


def check_eval_batch(cfg: EvalBatchConfig, measured: dict | None = None) -> Finding:
    """warn: eval batch ≠ micro batch with accumulation > 1 (axolotl itself only warns); pass otherwise."""
    eval_bs = cfg.eval_batch_size or cfg.micro_batch_size
    figures = {
        "micro_batch_size": cfg.micro_batch_size,
        "eval_batch_size": eval_bs,
        "gradient_accumulation_steps": cfg.grad_accumulation,
    }
    if measured:
        figures.update(measured)
    if eval_bs == cfg.micro_batch_size or cfg.grad_accumulation <= 1:
        why = "equal batch sizes" if eval_bs == cfg.micro_batch_size else "no gradient accumulation"
        return Finding(
            SLUG, TITLE, "pass", f"{why}: evaluation runs the shapes training runs", figures, fix=FIX
        )
    gap = (
        (
            f"; the same {measured['examples_scored']} examples score {measured['loss_at_micro_batch']:.4f} "
            "at batch "
            f"{cfg.micro_batch_size} and {measured['loss_at_eval_batch']:.4f} at batch {eval_bs}"
        )
        if measured
        else ""
    )
    return Finding(
        SLUG,
        TITLE,
        "warn",
        f"eval_batch_size {eval_bs} ≠ micro_batch_size {cfg.micro_batch_size} with "
        f"{cfg.grad_accumulation} accumulation steps: evaluation allocates other shapes than training (VRAM "
        "spikes) and "
        f"its loss averages other batches{gap}",
        figures,
        fix=FIX,
    )


def measure(cfg: EvalBatchConfig, ctx: AuditContext, live=None) -> Checked[EvalBatchMetrics]:
    """The eval batch size against the micro batch size; the loss gap measured on the model."""
    eval_bs = cfg.eval_batch_size or cfg.micro_batch_size
    measured = None
    if eval_bs != cfg.micro_batch_size and cfg.grad_accumulation > 1:
        try:
            ex, _ = ctx.examples(cfg.examples, SLUG)
            losses = ctx.base_example_losses(ex[: cfg.examples], ctx.config.template)
            measured = {
                "examples_scored": len(losses),
                "loss_at_micro_batch": mean_of_batch_means(losses, cfg.micro_batch_size),
                "loss_at_eval_batch": mean_of_batch_means(losses, eval_bs),
            }
        except NotRunnable:  # the verdict comes from the config; the measured gap needs the model
            measured = None
    metrics = EvalBatchMetrics(
        micro_batch_size=cfg.micro_batch_size,
        eval_batch_size=eval_bs,
        grad_accumulation=cfg.grad_accumulation,
    )
    return Checked(check_eval_batch(cfg, measured), metrics)


CHECK = Check.of(SLUG, TITLE, EvalBatchConfig, EvalBatchMetrics, measure, number=18, needs="trainer")
