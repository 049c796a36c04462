"""The audit's checks by number and slug, in the field notes' order (14–18: the trainer-config checks).

What a config's ``checks`` list and ``--checks`` may name, readable without importing a single check:
the YAML config validates its ``checks`` against this list, and the registry holds every check it
registers to it (a check registered under another slug or number fails at import).
"""

from __future__ import annotations

CHECK_NAMES: dict[int, str] = {
    1: "kiss-lora",
    2: "lora-binding",
    3: "label-alignment",
    4: "attention",
    5: "grad-accumulation",
    6: "dtypes",
    7: "data-schema",
    8: "loss-mask",
    9: "reward-weights",
    10: "zero3-layout",
    11: "schedulers",
    12: "fragmentation",
    13: "ddp-eval",
    14: "train-on-inputs",
    15: "chat-template-eot",
    16: "tied-embeddings-lora",
    17: "packing-attention",
    18: "eval-batch",
}


def known() -> str:
    """Every check as "number slug", for error messages."""
    return ", ".join(f"{n} {s}" for n, s in CHECK_NAMES.items())


def check_slug(item: str | int) -> str:
    """The slug of a check named by slug or number (an int or a string of digits); ``KeyError``
    otherwise."""
    if isinstance(item, bool):
        raise KeyError(item)
    if isinstance(item, int) or (isinstance(item, str) and item.strip().isdigit()):
        return CHECK_NAMES[int(item)]
    if isinstance(item, str) and item.strip() in CHECK_NAMES.values():
        return item.strip()
    raise KeyError(item)
