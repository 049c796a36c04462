"""LoRA ``modules_to_save`` on tied embeddings — the tie is silently broken.

On a model with ``tie_word_embeddings`` (SmolLM2, Llama-3.2-1B/3B, Gemma, Qwen2.5-0.5B …) the input
embedding and the LM head are one tensor. ``lora_modules_to_save: [embed_tokens, lm_head]`` (common
next to ``lora_target_linear: true`` when new tokens are added) makes PEFT train a separate full copy
of each: after training the two differ, the adapter stores both, and merging writes an untied model.
The check wraps the model's architecture (built on the meta device: no memory) with PEFT exactly as
configured and reports whether the trainable copies are still one tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nbkit.audit.check import Check, Checked, CheckMetrics, TrainerCheckConfig
from nbkit.experiment import param
from nbkit.findings import Finding
from nbkit.model_files import meta_model

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "tied-embeddings-lora", "modules_to_save ↔ tied embeddings"


@dataclass
class TiedEmbeddingsConfig(TrainerCheckConfig):
    target_linear: bool = param(False, help="axolotl lora_target_linear / PEFT target_modules 'all-linear'")
    modules_to_save: str = param("embed_tokens,lm_head", help="lora_modules_to_save, comma separated")
    ensure_weight_tying: bool = param(False, help="PEFT LoraConfig(ensure_weight_tying=True)")


@dataclass(frozen=True, kw_only=True)
class TiedEmbeddingsMetrics(CheckMetrics):
    """Whether the model ties its embeddings, how many embeddings ``modules_to_save`` lists, and how many
    trainable embedding copies PEFT makes of them (0 when nothing was wrapped)."""

    tie_word_embeddings: bool
    embeddings_saved: int
    trainable_embedding_copies: int


EMBEDDING_NAMES = ("embed_tokens", "lm_head", "wte", "embed_in", "embed_out", "word_embeddings")
FIX = (
    "keep the tie: PEFT LoraConfig(ensure_weight_tying=True) (PEFT ≥ 0.18), or drop embed_tokens/lm_head "
    "from modules_to_save "
    "(train new tokens with trainable_token_indices instead)"
)


def wrap_and_compare(
    model_config, target_modules, modules_to_save: list[str], ensure_weight_tying: bool = False
) -> dict:
    """PEFT-wrap the architecture on the meta device; are the trainable input and output embeddings one
    tensor?"""
    import warnings

    from peft import LoraConfig, get_peft_model

    model = meta_model(model_config)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        peft_model = get_peft_model(
            model,
            LoraConfig(
                r=8,
                target_modules=target_modules,
                modules_to_save=modules_to_save,
                ensure_weight_tying=ensure_weight_tying,
            ),
        )

    def active(module):
        inner = getattr(module, "modules_to_save", None)
        return (inner["default"] if inner is not None and "default" in inner else module).weight

    inp, out = active(peft_model.get_input_embeddings()), active(peft_model.get_output_embeddings())
    copies = {id(p): p for p in (inp, out) if p.requires_grad}  # a tied pair is one tensor, counted once
    return {
        "tied_after_wrap": inp is out,
        "trainable_embedding_copies": len(copies),
        "trainable_embedding_params": sum(p.numel() for p in copies.values()),
        "peft_warning": next((str(w.message).split(".")[0] for w in caught if "tie" in str(w.message)), ""),
    }


def check_tied_embeddings(model_config, cfg: TiedEmbeddingsConfig, measured: dict | None = None) -> Finding:
    """fail: tied model, an embedding in modules_to_save, and the wrapped copies not one tensor; pass
    otherwise."""
    tied = bool(getattr(model_config, "tie_word_embeddings", False))
    saved = [m.strip() for m in cfg.modules_to_save.split(",") if m.strip()]
    on_embeddings = [m for m in saved if m.split(".")[-1] in EMBEDDING_NAMES]
    figures = {
        "tie_word_embeddings": tied,
        "target_linear": cfg.target_linear,
        "modules_to_save": ", ".join(saved) or "none",
        "ensure_weight_tying": cfg.ensure_weight_tying,
    }
    if measured:
        figures.update(measured)
    if not tied:
        return Finding(
            SLUG,
            TITLE,
            "pass",
            "the model's embeddings are not tied: separate copies in modules_to_save are what it has anyway",
            figures,
            fix=FIX,
        )
    if not on_embeddings:
        return Finding(
            SLUG,
            TITLE,
            "pass",
            "tied embeddings, and no embedding in modules_to_save: the tie stays",
            figures,
            fix=FIX,
        )
    if measured and measured["tied_after_wrap"]:
        return Finding(
            SLUG,
            TITLE,
            "pass",
            f"tied embeddings with {', '.join(on_embeddings)} in modules_to_save, and PEFT keeps one "
            "trainable "
            "tensor",
            figures,
            fix=FIX,
        )
    n = measured["trainable_embedding_copies"] if measured else 0
    how = (
        f"PEFT trains {'a separate copy' if n == 1 else f'{n} separate copies'} "
        f"({measured['trainable_embedding_params']:,} parameters)"
        if measured
        else "each listed embedding gets its own trainable copy"
    )
    return Finding(
        SLUG,
        TITLE,
        "fail",
        f"tie_word_embeddings is true and modules_to_save lists {', '.join(on_embeddings)}"
        f"{' with all-linear LoRA targets' if cfg.target_linear else ''}: {how}; input embedding and LM head "
        "drift apart and "
        "the merged model is untied",
        figures,
        fix=FIX,
    )


def measure(cfg: TiedEmbeddingsConfig, ctx: AuditContext, live=None) -> Checked[TiedEmbeddingsMetrics]:
    """PEFT applied as configured to the model's architecture on the meta device: is the tie kept?"""
    config = ctx.model_config()
    saved = [m.strip() for m in cfg.modules_to_save.split(",") if m.strip()]
    measured = None
    if getattr(config, "tie_word_embeddings", False) and any(
        m.split(".")[-1] in EMBEDDING_NAMES for m in saved
    ):
        targets = "all-linear" if cfg.target_linear else list(ctx.config.lora.target_modules)
        measured = wrap_and_compare(config, targets, saved, cfg.ensure_weight_tying)
    metrics = TiedEmbeddingsMetrics(
        tie_word_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
        embeddings_saved=sum(m.split(".")[-1] in EMBEDDING_NAMES for m in saved),
        trainable_embedding_copies=int(measured["trainable_embedding_copies"]) if measured else 0,
    )
    return Checked(check_tied_embeddings(config, cfg, measured), metrics)


CHECK = Check.of(
    SLUG, TITLE, TiedEmbeddingsConfig, TiedEmbeddingsMetrics, measure, number=16, needs="trainer"
)
