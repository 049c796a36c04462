"""Check 12: checkpoint interval ↔ CUDA allocator fragmentation (CUDA only).

Trains the model for a fixed number of steps while saving a checkpoint every ``interval`` steps,
and reads CUDA's caching-allocator statistics through ``nbkit.device.memory_probe`` (the same probe
the ZeRO notebook uses): reserved − allocated, inactive split bytes, allocation retries. On CPU
there is no caching allocator, so the check says so and reports no number.
"""

from __future__ import annotations

import io
from typing import Any

from nbkit.audit.findings import Finding


def fragmentation_run(model, tokenizer, examples, template, *, device, interval: int, steps: int, batch_size: int = 4, seed: int = 0) -> dict[str, Any]:
    import torch

    from nbkit.audit.sft import build_features, pad_batch
    from nbkit.device import memory_probe

    torch.manual_seed(seed)
    feats = [build_features(tokenizer, e, template) for e in examples]
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    probe = memory_probe(device)
    torch.cuda.empty_cache()
    probe.reset_peak()
    ratios = []
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
        snap = probe.snapshot().figures
        ratios.append(snap["fragmentation"] / snap["reserved"] if snap["reserved"] else 0.0)
    snap = probe.snapshot().figures
    return {"interval": interval, "mean_gap_ratio": sum(ratios) / len(ratios), "final_gap_ratio": ratios[-1],
            "inactive_split": snap["inactive_split"], "alloc_retries": snap["num_alloc_retries"], "peak_reserved": snap["peak_reserved"], "trace": ratios}


def check_fragmentation(model_factory, tokenizer, examples, template, *, device, interval: int, steps: int = 60, compare_interval: int | None = None) -> Finding:
    if device.type != "cuda":
        from nbkit.device import memory_probe

        why = memory_probe(device).snapshot().unavailable.get("fragmentation", "needs CUDA")
        return Finding(12, "Checkpoint interval ↔ fragmentation", "needs_gpu",
                       f"needs CUDA: {why}; not measured on {device.type} (no number is reported)",
                       {"device": str(device), "configured_interval": interval})
    import plotly.graph_objects as go

    other = compare_interval or max(steps, interval * 4)
    runs = [fragmentation_run(model_factory(), tokenizer, examples, template, device=device, interval=i, steps=steps) for i in (interval, other)]
    mine, ref = runs
    figures = {"configured_interval": interval, "reference_interval": other,
               "gap_ratio_configured": mine["mean_gap_ratio"], "gap_ratio_reference": ref["mean_gap_ratio"],
               "alloc_retries_configured": mine["alloc_retries"], "alloc_retries_reference": ref["alloc_retries"]}
    status = "warn" if mine["mean_gap_ratio"] > 0.35 or mine["alloc_retries"] > ref["alloc_retries"] else "pass"
    summary = f"reserved−allocated gap {mine['mean_gap_ratio']:.2f} of reserved at interval {interval} vs {ref['mean_gap_ratio']:.2f} at {other}"
    fig = go.Figure()
    for r in runs:
        fig.add_scatter(y=r["trace"], name=f"checkpoint every {r['interval']}")
    fig.update_layout(title="Check 12: (reserved − allocated) / reserved per step", xaxis_title="step", yaxis_title="gap ratio")
    return Finding(12, "Checkpoint interval ↔ fragmentation", status, summary, figures, [{k: v for k, v in r.items() if k != "trace"} for r in runs],
                   fix="save checkpoints from CPU copies / less often, or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", figure=fig)
