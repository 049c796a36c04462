"""The audit's checks in one registry, and the audit of a config: every check it allows, in one context.

``REGISTRY`` holds the eighteen checks (one module each under :mod:`nbkit.audit.checks`) by slug and by
number; :mod:`nbkit.audit.experiments` adds the experiments that run several of them and judges the
claims. :func:`run_audit` is what ``nbkit audit`` and ``nbkit diagnose`` run: each selected check with
the values its section of the context's config sets, a missing section reported as skipped (by the
check's own run: a notebook's panel reports it the same way).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckRegistry, finding_result, skipped
from nbkit.audit.checks import (
    attention,
    chat_template_eot,
    data_schema,
    ddp_eval,
    dtypes,
    eval_batch,
    fragmentation,
    grad_accumulation,
    kiss,
    label_alignment,
    lora_binding,
    loss_mask,
    packing_attention,
    reward_weights,
    schedulers,
    tied_embeddings,
    train_on_inputs,
    zero3_layout,
)
from nbkit.audit.context import STATUSES, AuditContext
from nbkit.errors import UsageError
from nbkit.findings import error_finding, findings_frame
from nbkit.result import Result

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["REGISTRY", "TRAINER_CHECKS", "AuditSummary", "run_audit", "run_check"]

REGISTRY = CheckRegistry("audit", summary="kiss-lora")
REGISTRY.register(kiss.CHECK)
REGISTRY.register(lora_binding.CHECK)
REGISTRY.register(label_alignment.CHECK)
REGISTRY.register(attention.CHECK)
REGISTRY.register(grad_accumulation.CHECK)
REGISTRY.register(dtypes.CHECK)
REGISTRY.register(data_schema.CHECK)
REGISTRY.register(loss_mask.CHECK)
REGISTRY.register(reward_weights.CHECK)
REGISTRY.register(zero3_layout.CHECK)
REGISTRY.register(schedulers.CHECK)
REGISTRY.register(fragmentation.CHECK)
REGISTRY.register(ddp_eval.CHECK)
REGISTRY.register(train_on_inputs.CHECK)
REGISTRY.register(chat_template_eot.CHECK)
REGISTRY.register(tied_embeddings.CHECK)
REGISTRY.register(packing_attention.CHECK)
REGISTRY.register(eval_batch.CHECK)

# The checks that read a trainer config's ``trainer`` section (axolotl / TRL keys).
TRAINER_CHECKS = (
    "train-on-inputs",
    "chat-template-eot",
    "tied-embeddings-lora",
    "packing-attention",
    "eval-batch",
)


def run_check(
    check: Check, ctx: AuditContext, live=None, *, catch: bool = True, **overrides: Any
) -> Result[Any]:
    """Run one check in ``ctx`` as a notebook's panel runs it (:meth:`nbkit.experiment.Registry.run`:
    the values its section of ``ctx.config`` sets, ``overrides``, a config without its section a skipped
    finding), keeping the result in ``ctx``; with ``catch`` an exception is an ``error`` finding of one
    line."""
    t0 = time.perf_counter()
    try:
        return REGISTRY.run(check.slug, ctx, live=live, **overrides)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        if not catch:
            raise
        f = error_finding(check.slug, check.title, exc, seconds=time.perf_counter() - t0)
    return ctx.keep(check.slug, finding_result(f, None, ctx.config.model.name))


@dataclass(frozen=True)
class AuditSummary:
    """The audit of one config: each finding as a dict (no evidence tables) and the status counts."""

    findings: list
    status_counts: dict


def run_audit(ctx: AuditContext, checks: list[str] | None = None) -> Result[AuditSummary]:
    """Run ``checks`` (slugs or numbers; default: the config's ``checks`` or all) in ``ctx`` → ``Result``:
    ``data`` the findings, ``table`` one row per finding, ``metrics`` the findings as dicts and the
    status counts. Each check's finding (and result, when it measured) is kept in ``ctx``."""
    from tqdm.auto import tqdm

    wanted = checks if checks is not None else (ctx.config.checks or REGISTRY.check_slugs)
    slugs = [REGISTRY.check(c).slug for c in wanted]
    if not slugs:
        raise UsageError("the selection of checks is empty")
    bar = tqdm(slugs, desc="audit", disable=not ctx.progress, leave=False)
    findings = []
    for slug in bar:
        bar.set_postfix_str(slug)
        check = REGISTRY.check(slug)
        if check.switched_off(ctx.config):  # a training check the config did not opt in to (minutes)
            why = f"the config's '{check.needs}' section to switch it on"
            result = ctx.keep(
                slug, finding_result(skipped(slug, check.title, why), None, ctx.config.model.name)
            )
        else:
            result = run_check(check, ctx)
        findings.append(result.data)
    counts = {s: sum(f.status == s for f in findings) for s in STATUSES}
    summary = AuditSummary([f.to_dict(with_table=False) for f in findings], counts)
    return Result(metrics=summary, table=findings_frame(findings), data=findings)


def findings_table(ctx: AuditContext) -> pd.DataFrame:
    """The findings of ``ctx``'s checks, one row each."""
    return findings_frame(ctx.findings())
