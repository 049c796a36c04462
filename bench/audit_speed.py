"""Benchmark: cost of the fine-tune audit's static and tiny-model checks (target < 60 s on 2 cores).

Prints per-check seconds and the total, and — as a peer measured in the same run — the time of one
LoRA training step (forward + backward + AdamW) of the same tiny model, so the audit's cost reads
as "N training steps". ``--model smollm2`` runs the same checks on the real model (minus kiss-lora, the
training comparison).

    .venv/bin/python bench/audit_speed.py [--model tiny|smollm2] [--smoke] [--threads N] [--kiss-budget 30]

``--kiss-budget N`` also times kiss-lora on the model as notebook 04 runs it (budget N steps per
variant, lock-step, stopping at the first evaluation that decides) and prints the steps it took.
"""

from __future__ import annotations

import argparse
import time


def one_lora_step_seconds(model, tokenizer, reps: int = 3) -> float:
    import copy

    import torch
    from peft import get_peft_model

    from nbkit.audit.checks.lora_binding import lora_config
    from nbkit.audit.config import TemplateSection
    from nbkit.audit.sft import build_features, make_sft_examples, pad_batch

    peft_model = get_peft_model(copy.deepcopy(model), lora_config(8, 16, ["q_proj", "v_proj"]))
    opt = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=1e-3)
    ids, labels, mask = pad_batch(
        [build_features(tokenizer, e, TemplateSection()) for e in make_sft_examples(4)],
        tokenizer.pad_token_id,
    )
    times = []
    for _ in range(reps + 1):
        t0 = time.perf_counter()
        peft_model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
        times.append(time.perf_counter() - t0)
    return sorted(times[1:])[len(times[1:]) // 2]


def main() -> None:
    from nbkit.audit.config import load_config
    from nbkit.audit.context import AuditContext
    from nbkit.audit.registry import REGISTRY, run_audit
    from nbkit.audit.sft import EXAMPLES_DIR

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="tiny", choices=["tiny", "smollm2"])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: default)")
    ap.add_argument(
        "--kiss-budget", type=int, default=0, help="also time kiss-lora with this budget (0: skip)"
    )
    args = ap.parse_args()
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    cfg = load_config(EXAMPLES_DIR / ("good.yaml" if args.model == "tiny" else "good_smollm2.yaml"))
    ctx = AuditContext("cpu", smoke=args.smoke, config=cfg, progress=False)
    t0 = time.perf_counter()
    model, tok = ctx.model_and_tokenizer()
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    findings = run_audit(ctx, [s for s in REGISTRY.check_slugs if s != "kiss-lora"]).data
    total = time.perf_counter() - t0
    step = one_lora_step_seconds(model, tok)
    print(f"model {args.model}: load {load_s:.1f} s")
    for f in findings:
        print(f"  {f.check:<18} {f.status:<9} {f.seconds:7.2f} s  {f.title}")
    target = 60 if args.model == "tiny" else 300
    print(
        f"checks without kiss-lora total: {total:.1f} s  "
        f"(target < {target} s on {args.model}: {'met' if total < target else 'MISSED'})"
    )
    print(
        f"peer: one LoRA training step (batch 4) = {step:.3f} s → "
        f"the audit costs {total / step:.0f} training steps"
    )
    if args.kiss_budget:
        from nbkit.audit.registry import run_check

        t0 = time.perf_counter()
        check = REGISTRY.check("kiss-lora")
        result = run_check(check, ctx, budget_steps=args.kiss_budget, model=args.model)
        runs = result.metrics.runs if result.metrics is not None else ()
        print(
            f"kiss-lora: {time.perf_counter() - t0:.1f} s; steps to target per seed (KISS, over): "
            + ", ".join(f"({r.kiss_steps}, {r.over_steps})" for r in runs)
        )


if __name__ == "__main__":
    main()
