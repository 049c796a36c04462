"""Bench: how small can kiss-lora's run be and still reach the same verdict?

Trains KISS (q/v r8) and the over-parameterised LoRA (q/v/o r64) in lock-step on the audit's model,
evaluating after **every** step on the validation set, and prints per step each variant's
validation loss on the full set and on its first half — so one run shows at which step, and with
which validation size, the comparison (which variant reaches 0.5 × the untrained loss first) is
decided, at each batch size asked for. Seeds give the spread of the decision step. Caveat (measured):
the half-set figures keep the training split of ``--val``; a run with a smaller ``val_size`` also trains
on other examples (the check holds out the first ``val_size``), so they do not predict it — notebook
04 at val_size 8 tied at step 12 where this bench's half set said step 4.

    .venv/bin/python bench/audit_kiss_budget.py [--model smollm2] [--steps 6] [--batch 8 4] [--val 16]
        [--seeds 0] [--threads 1]
"""

from __future__ import annotations

import argparse
import time


def per_example_losses(model, batches) -> list[tuple[float, int]]:
    """(summed token loss, token count) per example, in order (labels shifted as transformers does)."""
    import torch

    out = []
    with torch.no_grad():
        for ids, labels, mask in batches:
            logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
            tgt = labels[:, 1:]
            loss = torch.nn.functional.cross_entropy(
                logits.transpose(1, 2), tgt, ignore_index=-100, reduction="none"
            )
            for row in range(ids.shape[0]):
                keep = tgt[row] != -100
                out.append((float(loss[row][keep].sum()), int(keep.sum())))
    return out


def mean_loss(pairs) -> float:
    return sum(s for s, _ in pairs) / max(1, sum(n for _, n in pairs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, nargs="+", default=[8, 4])
    ap.add_argument("--val", type=int, default=16)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    import torch

    from nbkit.audit.checks.kiss import KISS, OVER, VariantTrainer
    from nbkit.audit.config import TemplateSection
    from nbkit.audit.sft import build_features, load_model_and_tokenizer, make_sft_examples, pad_batch

    torch.set_num_threads(args.threads)
    model, tok = load_model_and_tokenizer(args.model, torch.device("cpu"))
    template, examples = TemplateSection(), make_sft_examples(160)
    val_ex = examples[: args.val]
    vfeats = [build_features(tok, e, template) for e in val_ex]
    vb = [pad_batch(vfeats[i : i + 8], tok.pad_token_id) for i in range(0, len(vfeats), 8)]
    t0 = time.perf_counter()
    start = per_example_losses(model.eval(), vb)
    half = args.val // 2
    base = {"full": mean_loss(start), "half": mean_loss(start[:half])}
    print(
        f"untrained val loss: {base['full']:.4f} ({args.val} examples), {base['half']:.4f} (first {half}); "
        f"one val pass {time.perf_counter() - t0:.1f} s"
    )
    for seed in args.seeds:
        for batch in args.batch:
            trainers = [
                VariantTrainer(
                    model,
                    tok,
                    v,
                    examples[args.val :],
                    val_ex,
                    template,
                    batch_size=batch,
                    lr=args.lr,
                    target=None,
                    device=torch.device("cpu"),
                    seed=seed,
                )
                for v in (KISS, OVER)
            ]
            first = {}
            for step in range(1, args.steps + 1):
                row = []
                for t in trainers:
                    t0 = time.perf_counter()
                    t.advance(1)
                    train_s = time.perf_counter() - t0
                    losses = per_example_losses(t.model.eval(), vb)
                    for which, pairs in (("full", losses), ("half", losses[:half])):
                        v = mean_loss(pairs)
                        if v <= 0.5 * base[which]:
                            first.setdefault((t.run.variant.name, which), step)
                    row.append(
                        f"{t.run.variant.name}: {mean_loss(losses):.4f} / {mean_loss(losses[:half]):.4f} "
                        f"({train_s:.1f} s/step)"
                    )
                print(f"seed {seed} batch {batch} step {step}: " + " | ".join(row), flush=True)
            for which in ("full", "half"):
                k, o = first.get((KISS.name, which)), first.get((OVER.name, which))
                print(
                    f"seed {seed} batch {batch} val {'all' if which == 'full' else half}: "
                    f"steps to 0.5 × untrained — KISS {k}, over {o}"
                )


if __name__ == "__main__":
    main()
