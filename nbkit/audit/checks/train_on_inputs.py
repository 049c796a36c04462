"""``train_on_inputs: true`` on a chat dataset — the loss also trains the user's turns.

axolotl's ``train_on_inputs`` (default false) decides whether prompt tokens carry a loss. On a
conversation (``type: chat_template``, ``sharegpt`` …) true means the model is also trained to
write the *user's* messages and the system prompt: it learns to continue both sides of the chat.
The check renders the conversations with the model's own chat template and measures which share of
the loss-bearing tokens would then be prompt tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nbkit.audit.check import Check, Checked, CheckMetrics, NotRunnable, TrainerCheckConfig
from nbkit.audit.sections import is_chat_type
from nbkit.audit.sft import build_features
from nbkit.experiment import param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "train-on-inputs", "train_on_inputs ↔ chat dataset"


@dataclass
class TrainOnInputsConfig(TrainerCheckConfig):
    train_on_inputs: bool = param(False, help="axolotl train_on_inputs: the loss also covers the prompt")
    dataset_types: str = param("chat_template", help="datasets[].type, comma separated ('' = not known)")
    examples: int = param(48, min=1, max=1024, label="examples rendered")

    @classmethod
    def smoke(cls):
        return cls(examples=8)


@dataclass(frozen=True, kw_only=True)
class TrainOnInputsMetrics(CheckMetrics):
    """``train_on_inputs`` and how many of the configured datasets are conversations."""

    train_on_inputs: bool
    chat_datasets: int


FIX = (
    "set train_on_inputs: false for chat datasets (axolotl then trains roles_to_train, the assistant by "
    "default)"
)


def prompt_share(tokenizer, examples, template) -> tuple[float, int]:
    """(% of tokens that are prompt — system/user turns and headers — when every token is trained,
    examples)."""

    prompt = total = 0
    for ex in examples:
        f = build_features(
            tokenizer,
            ex,
            template.model_copy(update={"kind": "chat", "max_length": 10**6, "mask_pad_labels": False}),
        )
        prompt += f["n_prompt"]
        total += f["n_prompt"] + f["n_target"]
    return (100.0 * prompt / total if total else 0.0), len(examples)


def dataset_types(cfg: TrainOnInputsConfig) -> tuple[list[str], list[str]]:
    """(every dataset type the config names, the chat ones among them)."""
    types = [t.strip() for t in cfg.dataset_types.split(",") if t.strip()]
    return types, [t for t in types if is_chat_type(t)]


def check_train_on_inputs(cfg: TrainOnInputsConfig, share: tuple[float, int] | None = None) -> Finding:
    """fail: train_on_inputs with a chat dataset; pass: off, or only non-chat (completion, alpaca)
    datasets."""
    types, chat = dataset_types(cfg)
    figures = {
        "train_on_inputs": cfg.train_on_inputs,
        "dataset_types": ", ".join(types) or "not known",
        "chat_datasets": len(chat),
    }
    if share is not None:
        figures["prompt_share_of_trained_tokens_pct"], figures["examples_rendered"] = (
            round(share[0], 1),
            share[1],
        )
    if not cfg.train_on_inputs:
        return Finding(
            SLUG,
            TITLE,
            "pass",
            "train_on_inputs is false: only the trained roles' tokens carry a loss",
            figures,
            fix=FIX,
        )
    if not chat:
        return Finding(
            SLUG,
            TITLE,
            "pass",
            f"train_on_inputs is true on non-chat data ({figures['dataset_types']}): the whole text is the "
            "target, as in continued pre-training",
            figures,
            fix=FIX,
        )
    measured = (
        (
            f"; rendered with the model's chat template, {share[0]:.0f} % of the trained tokens would be "
            "system/user turns "
            f"({share[1]} examples)"
        )
        if share is not None
        else ""
    )
    return Finding(
        SLUG,
        TITLE,
        "fail",
        f"train_on_inputs: true with chat dataset(s) {', '.join(chat)}: the model is trained to write "
        f"the user's turns too{measured}",
        figures,
        fix=FIX,
    )


def measure(cfg: TrainOnInputsConfig, ctx: AuditContext, live=None) -> Checked[TrainOnInputsMetrics]:
    """``train_on_inputs`` against the dataset types; the prompt share of the trained tokens measured."""
    if not cfg.dataset_types.strip():
        raise NotRunnable("datasets[].type (the config names no dataset type)")
    share = None
    if cfg.train_on_inputs and dataset_types(cfg)[1]:
        try:
            _, tok = ctx.model_and_tokenizer()
            ex, _ = ctx.examples(1, SLUG)
            share = prompt_share(tok, ex[: cfg.examples], ctx.config.template)
        except NotRunnable:  # the verdict comes from the config; the measured share needs a tokenizer
            share = None
    metrics = TrainOnInputsMetrics(
        train_on_inputs=cfg.train_on_inputs, chat_datasets=len(dataset_types(cfg)[1])
    )
    return Checked(check_train_on_inputs(cfg, share), metrics)


CHECK = Check.of(SLUG, TITLE, TrainOnInputsConfig, TrainOnInputsMetrics, measure, number=14, needs="trainer")
