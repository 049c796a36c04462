"""Shared pieces for the audit checks: the small SFT task, the tiny tokenizer, prompt features.

The SFT task is generated deterministically (string transformations and small sums a 135M model can
learn in a few dozen CPU steps), so kiss-lora has a validation-loss target that is reachable and
reproducible. The tiny tokenizer is a byte-level BPE trained here on bundled text with SmolLM2's
special-token layout (``<|im_end|>`` = id 2 = eos = pad), so fast tests exercise the same pad = eos
pitfalls as the real tokenizer without loading it.
"""

from __future__ import annotations

import functools
import json
import random
import string
from functools import lru_cache
from pathlib import Path
from typing import Any

from nbkit.model_files import load_smollm2, tiny_llama

EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2 as in SmolLM2
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_WORDS = (
    "apple river stone cloud paper garden window silver orange planet music letter forest bridge candle "
    "yellow winter summer rocket pencil island mirror thunder coffee lantern"
).split()


def make_sft_examples(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` instruction/response pairs from four deterministic task families."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 4
        words = rng.sample(_WORDS, rng.randint(2, 4))
        if kind == 0:
            instruction, response = (
                f"Write these words in upper case: {' '.join(words)}",
                " ".join(w.upper() for w in words),
            )
        elif kind == 1:
            instruction, response = (
                f"Reverse the order of these words: {' '.join(words)}",
                " ".join(reversed(words)),
            )
        elif kind == 2:
            a, b = rng.randint(10, 99), rng.randint(10, 99)
            instruction, response = f"What is {a} plus {b}?", f"{a} plus {b} is {a + b}."
        else:
            word = rng.choice(_WORDS)
            instruction, response = f"Spell the word {word} with dashes.", "-".join(word)
        out.append(
            {
                "id": i,
                "instruction": instruction,
                "response": response,
                "source": ["upper", "reverse", "sum", "spell"][kind],
            }
        )
    return out


def read_jsonl_plain(path: Path) -> list[dict[str, Any]]:
    """Read a JSONL file known to be clean (bundled data); bad lines raise naming the line."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: not JSON ({exc.msg} at column {exc.colno})") from None
    return rows


def _tokenizer_corpus() -> list[str]:
    texts = [f"{e['instruction']} {e['response']}" for e in make_sft_examples(400, seed=1)]
    ner = EXAMPLES_DIR / "ner.jsonl"
    if ner.is_file():
        texts += [row["text"] for row in read_jsonl_plain(ner)]
    # English prose from the stdlib's own docs: always present offline.
    from pydoc_data.topics import topics

    texts += [topics[k] for k in sorted(topics)[:40]]
    texts.append(string.printable)
    return texts


@lru_cache(maxsize=2)
def tiny_tokenizer(vocab_size: int = 512):
    """A byte-level BPE ``PreTrainedTokenizerFast`` with SmolLM2's special ids and a ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_tokenizer_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        unk_token="<|endoftext|>",
    )
    fast.chat_template = CHATML_TEMPLATE
    return fast


def load_model_and_tokenizer(name: str, device, dtype=None, seed: int = 0):
    """(model, tokenizer) for ``"smollm2"`` (the real model) or ``"tiny"`` (random GQA Llama)."""

    if name == "smollm2":
        return load_smollm2(device, dtype)
    tok = tiny_tokenizer()
    model = tiny_llama(
        seed=seed,
        device=device,
        vocab_size=len(tok),
        num_attention_heads=6,
        num_key_value_heads=2,
        hidden_size=96,
        intermediate_size=192,
    )
    if dtype is not None:
        model.to(dtype)
    model.eval()
    return model, tok


# ---------------------------------------------------------------------------------------------
# prompt template -> (input_ids, labels)


def template_fields(fmt: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(fmt) if name]


def build_features(tokenizer, example: dict[str, Any], template) -> dict[str, Any]:
    """Tokenise one example the usual SFT way: prompt tokens get label -100, target tokens their id.

    Returns input_ids, labels and ``target_text`` (what the unmasked labels should decode to).
    ``template.mask_pad_labels`` reproduces the common collator line ``labels[labels == pad] = -100``,
    which also masks the end-of-turn token whenever pad == eos.
    """
    prompt_value = example[template.prompt_field]
    response = example[template.response_field]
    if template.kind == "chat":
        messages = ([{"role": "system", "content": template.system}] if template.system else []) + [
            {"role": "user", "content": prompt_value}
        ]
        prompt_text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        full_text = tokenizer.apply_chat_template(
            messages + [{"role": "assistant", "content": response}], tokenize=False
        )
    else:
        fmt = template.format
        cut = (
            fmt.index("{" + template.response_field + "}")
            if "{" + template.response_field + "}" in fmt
            else len(fmt)
        )
        prompt_text = fmt[:cut].format(**example)
        full_text = fmt.format(**example) + tokenizer.eos_token
    if not full_text.startswith(prompt_text):
        raise ValueError("the rendered prompt is not a prefix of the rendered conversation")
    target_text = full_text[len(prompt_text) :]
    prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    target_ids = tokenizer(target_text, add_special_tokens=False)["input_ids"]
    input_ids = (prompt_ids + target_ids)[: template.max_length]
    labels = ([-100] * len(prompt_ids) + list(target_ids))[: template.max_length]
    if template.mask_pad_labels and tokenizer.pad_token_id is not None:
        labels = [
            -100 if tid == tokenizer.pad_token_id else lab
            for tid, lab in zip(input_ids, labels, strict=False)
        ]
    return {
        "input_ids": input_ids,
        "labels": labels,
        "target_text": target_text,
        "n_prompt": len(prompt_ids),
        "n_target": len(target_ids),
    }


def pad_batch(features: list[dict[str, Any]], pad_id: int):
    """Right-pad a list of features into tensors (labels padded with -100)."""
    import torch

    width = max(len(f["input_ids"]) for f in features)
    ids = torch.full((len(features), width), pad_id, dtype=torch.long)
    labels = torch.full((len(features), width), -100, dtype=torch.long)
    mask = torch.zeros((len(features), width), dtype=torch.long)
    for i, f in enumerate(features):
        n = len(f["input_ids"])
        ids[i, :n] = torch.tensor(f["input_ids"])
        labels[i, :n] = torch.tensor(f["labels"])
        mask[i, :n] = 1
    return ids, labels, mask


def target_logits(model, ids, labels, mask):
    """Logits of the trained (label ≠ -100) positions only, and the token each one predicts.

    Returns ``(logits (N, vocab), targets (N,), keep (batch, seq) bool)``, positions in row-major order
    (``keep.nonzero()[:, 0]`` gives each one's row). The logit at t predicts label t + 1, as
    transformers shifts them. Why: a prompt needs no logits, only its response does (SmolLM2's chat
    prompt is ~40 tokens, the response ~11); ``logits_to_keep`` as a boolean mask runs the 49k × 576
    LM head and the log-softmax on those positions alone — the same numbers up to float rounding.
    """
    import torch

    keep = torch.zeros_like(labels, dtype=torch.bool)
    keep[:, :-1] = labels[:, 1:] != -100
    logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=keep).logits
    return logits, labels[:, 1:][keep[:, :-1]], keep


def example_losses(
    model, tokenizer, examples, template, batch_size: int = 8, workers: int | None = None
) -> list[tuple[float, int]]:
    """(summed token loss, trained-token count) per example, in one pass over the examples.

    Right padding under a causal mask leaves each example's token losses as they are (up to float
    rounding), so the figures do not depend on how the examples are batched: one pass serves every
    grouping (eval-batch's two batch sizes, kiss-lora's validation loss, reward-weights' scores).
    ``workers``: batches scored side by side in threads (default :func:`concurrent_workers`); the
    batches are the same, so the figures are those of one batch after the other.
    """
    import torch

    feats = [build_features(tokenizer, ex, template) for ex in examples]
    dev = next(model.parameters()).device

    def score(i):
        with torch.inference_mode():  # thread-local: entered in the thread that runs the batch
            ids, labels, mask = (
                t.to(dev) for t in pad_batch(feats[i : i + batch_size], tokenizer.pad_token_id or 0)
            )
            logits, targets, keep = target_logits(model, ids, labels, mask)
            tok = torch.nn.functional.cross_entropy(logits.float(), targets, reduction="none")
            sums = torch.zeros(ids.shape[0], device=dev).index_add_(0, keep.nonzero()[:, 0], tok)
            return list(zip(sums.tolist(), keep.sum(1).tolist(), strict=True))

    starts = range(0, len(feats), batch_size)
    n = concurrent_workers(len(starts), dev) if workers is None else workers
    return [
        row for rows in run_concurrently([functools.partial(score, i) for i in starts], n) for row in rows
    ]


def pooled_loss(losses: list[tuple[float, int]]) -> float:
    """The token-mean loss of a group of :func:`example_losses` entries (as one batch would report it)."""
    return sum(s for s, _ in losses) / max(1, sum(n for _, n in losses))


# ---------------------------------------------------------------------------------------------
# independent model computations side by side


def concurrent_workers(tasks: int, device) -> int:
    """How many of ``tasks`` independent model computations to run at once (Python threads).

    On CPU: the cores this process may use — the runner's share (``OMP_NUM_THREADS``) when set, else
    the usable cores — divided by torch's intra-op threads. Why threads rather than more intra-op
    threads: torch ops release the GIL, so two single-threaded computations keep two cores busy
    with no OpenMP barrier between them, whereas intra-op threads on shared cores spin at every barrier.
    Single-threaded kernels are deterministic, so each computation gives the numbers it gives alone.
    Other devices: 1 (one CUDA stream, and the CUDA memory peak is per device).
    """
    import os

    import torch

    if tasks < 2 or getattr(device, "type", str(device)) != "cpu":
        return 1
    share = os.environ.get("OMP_NUM_THREADS", "")
    cores = (
        int(share)
        if share.isdigit() and int(share) > 0
        else len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count() or 1
    )
    return max(1, min(tasks, cores // max(1, torch.get_num_threads())))


def run_concurrently(fns, workers: int) -> list:
    """``[f() for f in fns]``, ``workers`` at a time in threads; results in order, the first error re-raised.

    On an error or Ctrl-C the calls not yet started are cancelled and the caller does not wait for
    the running ones (they finish their current computation in the background).
    """
    fns = list(fns)
    if workers <= 1 or len(fns) <= 1:
        return [f() for f in fns]
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nbkit-audit")
    try:
        futures = [pool.submit(f) for f in fns]
        out = [fut.result() for fut in futures]
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return out
