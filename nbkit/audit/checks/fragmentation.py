"""Checkpoint interval ↔ CUDA allocator fragmentation (CUDA only).

Trains the model for the same number of steps twice — checkpointing every ``interval`` steps and
every ``reference_interval`` steps (the field notes: 50 vs 200) — and reads CUDA's caching
allocator after every step through ``nbkit.device.memory_probe`` (the probe the ZeRO notebook uses).
The gap ratio is ``nbkit.device.gap_ratio`` = (reserved − allocated) / reserved, nbkit's one
definition. The run is at least 2 × the larger interval long, so both runs checkpoint at least twice.
On CPU there is no caching allocator: the check says so and reports no number.
"""

from __future__ import annotations

import io
from typing import Any

from nbkit.audit.checks import REGISTRY, Check
from nbkit.audit.config import FragmentationConfig
from nbkit.findings import Finding

SLUG, TITLE = "fragmentation", "Checkpoint interval ↔ fragmentation"


def fragmentation_run(model, tokenizer, examples, template, *, device, interval: int, steps: int, batch_size: int = 4, seed: int = 0) -> dict[str, Any]:
    """Train ``steps`` steps, checkpointing every ``interval``; the gap ratio after every step."""
    import torch

    from nbkit.audit.sft import build_features, pad_batch
    from nbkit.device import gap_ratio, memory_probe

    torch.manual_seed(seed)
    feats = [build_features(tokenizer, e, template) for e in examples]
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    probe = memory_probe(device)
    torch.cuda.empty_cache()
    probe.reset_peak()
    ratios, checkpoints = [], 0
    model.train()
    for s in range(1, steps + 1):
        chunk = [feats[(s * batch_size + i) % len(feats)] for i in range(batch_size)]
        ids, labels, mask = pad_batch(chunk, tokenizer.pad_token_id)
        model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device)).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if s % interval == 0:
            buf = io.BytesIO()
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
            checkpoints += 1
        ratios.append(gap_ratio(probe.snapshot().figures))
    snap = probe.snapshot().figures
    return {"interval": interval, "checkpoints": checkpoints, "mean_gap_ratio": sum(ratios) / len(ratios), "final_gap_ratio": ratios[-1],
            "inactive_split": snap["inactive_split"], "alloc_retries": snap["num_alloc_retries"], "peak_reserved": snap["peak_reserved"], "trace": ratios}


def compare_traces(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """Figures of repeated (configured, reference) run pairs: mean gap ratios and the Student-t interval,
    across repeats, of the per-repeat difference of mean gap ratios.

    Why across repeats: the per-step gap ratios of one run are one allocator's history, each step
    depending on the last, so an interval over steps decides nothing; the repeats (each its own seed
    and fresh model copy) are the independent unit. One repeat gives no interval (nan, nan).
    """
    from nbkit.claims import mean_interval

    diffs = [mine["mean_gap_ratio"] - ref["mean_gap_ratio"] for mine, ref in pairs]
    lo, hi = mean_interval(diffs)
    mine, ref = pairs[0]
    mean = lambda key, i: sum(p[i][key] for p in pairs) / len(pairs)  # noqa: E731
    return {"configured_interval": mine["interval"], "reference_interval": ref["interval"], "steps": len(mine["trace"]), "repeats": len(pairs),
            "checkpoints_configured": mine["checkpoints"], "checkpoints_reference": ref["checkpoints"],
            "gap_ratio_configured": mean("mean_gap_ratio", 0), "gap_ratio_reference": mean("mean_gap_ratio", 1),
            "gap_ratio_diff_per_repeat": diffs, "gap_ratio_diff_ci_low": lo, "gap_ratio_diff_ci_high": hi,
            "alloc_retries_configured": mine["alloc_retries"], "alloc_retries_reference": ref["alloc_retries"]}  # fmt: skip


def check_fragmentation(model_factory, tokenizer, examples, template, *, device, interval: int, reference_interval: int = 200,
                        steps: int = 0, batch_size: int = 4, seed: int = 0, repeats: int = 3) -> Finding:
    steps = steps or 2 * max(interval, reference_interval)
    if device.type != "cuda":
        from nbkit.device import memory_probe

        why = memory_probe(device).snapshot().unavailable.get("fragmentation", "needs CUDA")
        return Finding(SLUG, TITLE, "needs_gpu",
                       f"needs CUDA: {why}; not measured on {device.type} (no number is reported). On a GPU it trains {steps} steps "
                       f"checkpointing every {interval} and every {reference_interval} steps and compares the gap ratios",
                       {"device": str(device), "configured_interval": interval, "reference_interval": reference_interval, "steps": steps})
    if steps < 2 * max(interval, reference_interval):
        raise ValueError(f"{steps} steps do not checkpoint twice at interval {max(interval, reference_interval)}; "
                         f"use ≥ {2 * max(interval, reference_interval)} (or steps 0)")
    import plotly.graph_objects as go

    pairs = [tuple(fragmentation_run(model_factory(), tokenizer, examples, template, device=device, interval=i, steps=steps, batch_size=batch_size,
                                     seed=seed + k) for i in (interval, reference_interval))
             for k in range(max(1, repeats))]  # fmt: skip
    runs = list(pairs[0])
    mine, ref = runs
    figures = compare_traces(pairs)
    status = "warn" if mine["mean_gap_ratio"] > 0.35 or mine["alloc_retries"] > ref["alloc_retries"] else "pass"
    summary = (f"reserved−allocated gap {mine['mean_gap_ratio']:.2f} of reserved checkpointing every {interval} steps vs "
               f"{ref['mean_gap_ratio']:.2f} every {reference_interval} ({steps} steps; difference over {len(pairs)} repeats "
               f"[{figures['gap_ratio_diff_ci_low']:.3f}, {figures['gap_ratio_diff_ci_high']:.3f}])")
    fig = go.Figure()
    for r in runs:
        fig.add_scatter(y=r["trace"], name=f"checkpoint every {r['interval']}")
    fig.update_layout(title="(reserved − allocated) / reserved per step", xaxis_title="step", yaxis_title="gap ratio")
    return Finding(SLUG, TITLE, status, summary, figures, [{k: v for k, v in r.items() if k != "trace"} for r in runs],
                   fix="save checkpoints from CPU copies / less often, or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", figure=fig)


def run(context, cfg: FragmentationConfig, live=None) -> Finding:
    if context.device.type != "cuda":
        return check_fragmentation(None, None, [], context.config.template, device=context.device, interval=cfg.interval,
                                   reference_interval=cfg.reference_interval, steps=cfg.run_steps)
    import copy

    model, tok = context.model_and_tokenizer()
    ex, _ = context.examples(8, SLUG)
    return check_fragmentation(lambda: copy.deepcopy(model), tok, ex, context.config.template, device=context.device, interval=cfg.interval,
                               reference_interval=cfg.reference_interval, steps=cfg.run_steps, batch_size=cfg.batch_size, seed=context.config.model.seed,
                               repeats=cfg.repeats)


CHECK = REGISTRY.register(Check(SLUG, TITLE, FragmentationConfig, run, number=12))
