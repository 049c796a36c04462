"""Chat template ↔ the end-of-turn token in the loss mask.

axolotl's chat_template strategy trains the EOS token at the end of each trained turn
(``train_on_eos: turn``, the default) — where "EOS" is the tokenizer's ``eos_token`` (or
``eot_tokens``). When the template closes assistant turns with another token (Llama-3's
``<|eot_id|>`` under a base tokenizer whose eos is ``<|end_of_text|>``), that token is masked, and
the model never learns to end its turn. The check renders a conversation with the tokenizer's own
chat template, reads the token that closes the assistant turn, and compares it with what is trained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nbkit.audit.check import Check, Checked, CheckMetrics, NotRunnable, TrainerCheckConfig
from nbkit.audit.sections import is_chat_type
from nbkit.experiment import param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "chat-template-eot", "Chat template ↔ end-of-turn token in the loss mask"


@dataclass
class ChatTemplateEotConfig(TrainerCheckConfig):
    train_on_eos: str = param(
        "turn", choices=["turn", "all", "last", "none"], help="axolotl datasets[].train_on_eos"
    )
    eot_tokens: str = param(
        "", help="end-of-turn tokens trained on, comma separated ('' = the tokenizer's eos)"
    )
    chat_dataset: bool = param(True, help="the data is rendered with the chat template")

    @classmethod
    def audit_values(cls, audit):
        t = audit.trainer
        chat = any(is_chat_type(x) for x in t.dataset_types) if t.dataset_types else t.tool != "axolotl"
        return {**super().audit_values(audit), "chat_dataset": chat}


@dataclass(frozen=True, kw_only=True)
class ChatTemplateEotMetrics(CheckMetrics):
    """The token that closes the assistant turn in the tokenizer's chat template ("none" when no special
    token does) and the end-of-turn tokens the loss mask trains."""

    closing_token: str
    trained_eos_tokens: str


PROBE = "The capital of France is Paris."


def closing_token(tokenizer) -> tuple[str | None, str]:
    """(the special token that closes the assistant turn, the rendered conversation) — ``None`` when none
    does."""
    messages = [
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": PROBE},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    end = text.rindex(PROBE) + len(PROBE)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    special = set(tokenizer.all_special_ids) | {
        i for i, t in tokenizer.added_tokens_decoder.items() if t.special
    }
    for tid, (start, stop) in zip(enc["input_ids"], enc["offset_mapping"], strict=True):
        if start >= end and tid in special:
            return tokenizer.convert_ids_to_tokens(tid), text
        if (
            start >= end and text[start:stop].strip()
        ):  # ordinary text after the answer before any special token
            return None, text
    return None, text


def trained_eos_tokens(tokenizer, cfg: ChatTemplateEotConfig) -> list[str]:
    """The end-of-turn tokens the loss mask trains: the configured ones, else the tokenizer's eos."""
    return [t.strip() for t in cfg.eot_tokens.split(",") if t.strip()] or [tokenizer.eos_token]


def check_chat_template_eot(tokenizer, cfg: ChatTemplateEotConfig) -> Finding:
    """fail: the assistant turn's closing token is not trained (or the template emits none); pass: it is
    trained."""
    eot, text = closing_token(tokenizer)
    trained_set = trained_eos_tokens(tokenizer, cfg)
    figures = {
        "closing_token": eot or "none",
        "trained_eos_tokens": ", ".join(str(t) for t in trained_set),
        "train_on_eos": cfg.train_on_eos,
        "tokenizer_eos": tokenizer.eos_token,
    }
    table = [{"rendered conversation": text}]
    fix = (
        'train the token that closes the assistant turn: axolotl `eot_tokens: ["<that token>"]` (or set the '
        "tokenizer's eos_token "
        "to it with `special_tokens: {eos_token: …}`), keep train_on_eos turn/all; TRL: `eos_token` in "
        "SFTConfig"
    )
    if eot is None:
        return Finding(
            SLUG,
            TITLE,
            "fail",
            "the chat template closes the assistant turn with no special token: nothing teaches the model "
            "to stop",
            figures,
            table,
            fix=fix,
        )
    if cfg.train_on_eos == "none":
        return Finding(
            SLUG,
            TITLE,
            "fail",
            f"train_on_eos none: the assistant turn's closing token {eot!r} is masked",
            figures,
            table,
            fix=fix,
        )
    if eot not in trained_set:
        return Finding(
            SLUG,
            TITLE,
            "fail",
            f"the template closes assistant turns with {eot!r}, but the trained end-of-turn token is "
            f"{', '.join(map(repr, trained_set))}: {eot!r} stays masked and the model never learns to stop",
            figures,
            table,
            fix=fix,
        )
    return Finding(
        SLUG,
        TITLE,
        "pass",
        f"the assistant turn ends with {eot!r}, which is trained (train_on_eos {cfg.train_on_eos})",
        figures,
        table,
        fix=fix,
    )


def measure(cfg: ChatTemplateEotConfig, ctx: AuditContext, live=None) -> Checked[ChatTemplateEotMetrics]:
    """The token that closes the assistant turn, rendered with the tokenizer's own chat template."""
    if not cfg.chat_dataset:
        raise NotRunnable(
            "a chat dataset (datasets[].type chat_template/sharegpt): the data is not rendered with a chat "
            "template"
        )
    _, tok = ctx.model_and_tokenizer()
    if not getattr(tok, "chat_template", None):
        raise NotRunnable(
            "a tokenizer with a chat template (set chat_template in the config or the tokenizer)"
        )
    metrics = ChatTemplateEotMetrics(
        closing_token=closing_token(tok)[0] or "none",
        trained_eos_tokens=", ".join(str(t) for t in trained_eos_tokens(tok, cfg)),
    )
    return Checked(check_chat_template_eot(tok, cfg), metrics)


CHECK = Check.of(
    SLUG, TITLE, ChatTemplateEotConfig, ChatTemplateEotMetrics, measure, number=15, needs="trainer"
)
