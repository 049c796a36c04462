"""Sample packing without flash attention — packed examples attend to each other.

axolotl's ``sample_packing: true`` and TRL's ``packing: true`` put several examples in one row.
Only a varlen attention kernel (``flash_attention: true`` / ``attn_implementation:
flash_attention_2``, or flex attention) keeps them apart through the per-example position ids;
with a plain causal mask every example also attends to the ones packed before it. The check
measures that on the audit's model: the logits of an example packed after another, against the
same example alone, with the collator's all-ones attention mask and with position ids only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nbkit.audit.check import Check, Checked, CheckMetrics, NotRunnable, TrainerCheckConfig
from nbkit.experiment import param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "packing-attention", "Sample packing ↔ attention implementation"


ATTENTION_IMPLEMENTATIONS = [
    "flash_attention_2",
    "flash_attention_3",
    "flex_attention",
    "sdpa",
    "eager",
    "xformers",
]


@dataclass
class PackingAttentionConfig(TrainerCheckConfig):
    packing: bool = param(True, help="axolotl sample_packing / TRL packing")
    attn_implementation: str = param("sdpa", choices=ATTENTION_IMPLEMENTATIONS)


@dataclass(frozen=True, kw_only=True)
class PackingAttentionMetrics(CheckMetrics):
    """Packing, and whether the configured attention implementation keeps packed examples apart."""

    packing: bool
    varlen_kernel: bool


VARLEN = ("flash_attention_2", "flash_attention_3", "flex_attention")
FIX = (
    "with packing use flash_attention: true (axolotl) / attn_implementation='flash_attention_2' (TRL), or "
    "turn packing off"
)


def packed_contamination(model, tokenizer) -> dict:
    """max |Δ logit| of the second of two packed examples against it alone, per way the row is masked."""
    import torch

    first = tokenizer("Write these words in upper case: apple river", add_special_tokens=False)["input_ids"]
    second = tokenizer("What is 12 plus 30? 12 plus 30 is 42.", add_special_tokens=False)["input_ids"]
    dev = next(model.parameters()).device
    ids = torch.tensor([first + second], device=dev)
    pos = torch.tensor([list(range(len(first))) + list(range(len(second)))], device=dev)
    with torch.no_grad():
        alone = model(torch.tensor([second], device=dev)).logits[0].float()
        out = {}
        for how, kwargs in (
            ("all_ones_mask", {"attention_mask": torch.ones_like(ids)}),
            ("position_ids_only", {}),
        ):
            packed = model(ids, position_ids=pos, **kwargs).logits[0, len(first) :].float()
            out[f"max_logit_diff_{how}"] = float((packed - alone).abs().max())
    out["measured_attn_implementation"] = getattr(model.config, "_attn_implementation", "unknown")
    return out


def check_packing_attention(cfg: PackingAttentionConfig, measured: dict | None = None) -> Finding:
    """fail: packing with a non-varlen attention; pass: no packing, or packing with a varlen kernel."""
    figures = {"packing": cfg.packing, "attn_implementation": cfg.attn_implementation}
    if measured:
        figures.update(measured)
    if not cfg.packing:
        return Finding(SLUG, TITLE, "pass", "no packing: each row holds one example", figures, fix=FIX)
    if cfg.attn_implementation in VARLEN:
        return Finding(
            SLUG,
            TITLE,
            "pass",
            f"packing with {cfg.attn_implementation}: examples are kept apart by their position ids",
            figures,
            fix=FIX,
        )
    seen = (
        (
            f"; measured on this model ({measured['measured_attn_implementation']}): a packed example's "
            "logits move by up to "
            f"{measured['max_logit_diff_all_ones_mask']:.3g} with the collator's all-ones mask"
        )
        if measured
        else ""
    )
    return Finding(
        SLUG,
        TITLE,
        "fail",
        f"packing with {cfg.attn_implementation} attention: packed examples attend to the examples "
        f"before them in the row (cross-contamination){seen}",
        figures,
        fix=FIX,
    )


def measure(cfg: PackingAttentionConfig, ctx: AuditContext, live=None) -> Checked[PackingAttentionMetrics]:
    """Packing against the attention implementation; the contamination measured on the model."""
    measured = None
    if cfg.packing and cfg.attn_implementation not in VARLEN:
        try:
            measured = packed_contamination(*ctx.model_and_tokenizer())
        except NotRunnable:  # the verdict comes from the config; the measurement needs the model's weights
            measured = None
    metrics = PackingAttentionMetrics(packing=cfg.packing, varlen_kernel=cfg.attn_implementation in VARLEN)
    return Checked(check_packing_attention(cfg, measured), metrics)


CHECK = Check.of(
    SLUG, TITLE, PackingAttentionConfig, PackingAttentionMetrics, measure, number=17, needs="trainer"
)
