"""Allocator fragmentation vs checkpoint interval (KISS audit §4.3).

On CUDA the caching allocator reports reserved vs allocated bytes, inactive split blocks and
allocation retries; ``fragmentation_run`` trains a small Llama, saves a checkpoint every
``interval`` steps, and samples those figures each step, with and without
``expandable_segments`` (set through ``torch.cuda.memory._set_allocator_settings``). The seed's
"gap ratio" is (reserved − active) / reserved.

On CPU there is no caching allocator: every such figure is reported as unavailable (by
``nbkit.device``'s CPU probe, with the reason), and the run shows what a CPU can account for —
tensor bytes by category from ``track_tensors`` and process RSS — never a made-up ratio.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FragParams:
    intervals: tuple = field(default=(5, 20), metadata={"choices": [1, 2, 5, 10, 20, 50, 100, 200], "label": "checkpoint every N steps"})
    steps: int = field(default=20, metadata={"min": 2, "max": 2000})
    expandable_segments: tuple = field(default=(False, True), metadata={"choices": [False, True]})
    hidden_size: int = field(default=64, metadata={"min": 32, "max": 4096, "step": 32})
    num_hidden_layers: int = field(default=2, metadata={"min": 1, "max": 48})
    batch: int = field(default=4, metadata={"min": 1, "max": 64})
    seq_len: int = field(default=64, metadata={"min": 8, "max": 4096, "step": 8})
    seed: int = field(default=0, metadata={"hidden": True})
    device: str = field(default="auto", metadata={"choices": ["auto", "cpu", "cuda"]})


def _train(params: FragParams, interval: int, device, sample, ckpt_dir):
    import torch

    from nbkit.model_files import tiny_llama

    model = tiny_llama(seed=params.seed, device=device, hidden_size=params.hidden_size,
                       intermediate_size=2 * params.hidden_size, num_hidden_layers=params.num_hidden_layers,
                       vocab_size=512)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(params.seed)
    series = []
    for step in range(params.steps):
        # Varying sequence lengths make differently sized activations, the usual fragmentation source.
        seq = int(torch.randint(params.seq_len // 2, params.seq_len + 1, (1,), generator=g))
        ids = torch.randint(0, 512, (params.batch, seq), generator=g).to(device)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if (step + 1) % interval == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, f"{ckpt_dir}/ckpt.pt")
        series.append(dict(sample(), step=step))
    return series


def fragmentation_run(params: FragParams, live=None) -> dict[str, Any]:
    import torch

    from nbkit.device import memory_probe, pick_device, track_tensors

    device = pick_device(params.device)
    out: dict[str, Any] = {"device": str(device), "runs": []}
    with tempfile.TemporaryDirectory(prefix="nbkit-frag-") as ckpt_dir:
        if device.type != "cuda":
            probe = memory_probe(device)
            snap = probe.snapshot()
            out["unavailable"] = snap.unavailable
            out["needs_cuda"] = True
            from nbkit.model_files import tiny_llama

            model = tiny_llama(seed=params.seed, hidden_size=params.hidden_size, intermediate_size=2 * params.hidden_size,
                               num_hidden_layers=params.num_hidden_layers, vocab_size=512)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            ids = torch.randint(0, 512, (params.batch, params.seq_len), generator=torch.Generator().manual_seed(params.seed))
            # One step first so Adam's states exist; MemTracker then accounts one full step
            # (it supports a single iteration per tracking block).
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            with track_tensors(model, opt) as mem:
                model(input_ids=ids, labels=ids).loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            out["tensor_bytes_peak"] = dict(mem.peak)
            out["tensor_bytes_current"] = dict(mem.current)
            out["rss_bytes"] = probe.snapshot().figures
            import plotly.graph_objects as go

            cats = sorted(mem.peak)
            fig = go.Figure([go.Bar(x=cats, y=[mem.peak[c] / 2**10 for c in cats], name="peak"),
                             go.Bar(x=cats, y=[mem.current.get(c, 0) / 2**10 for c in cats], name="after the step")])
            fig.update_layout(title="CPU: tensor bytes by category (fragmentation figures need CUDA)", yaxis_title="KiB", barmode="group")
            out["figure"] = fig
            return out
        probe = memory_probe(device)
        for expandable in params.expandable_segments:
            torch.cuda.empty_cache()
            torch.cuda.memory._set_allocator_settings(f"expandable_segments:{'True' if expandable else 'False'}")
            for interval in params.intervals:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device)
                base_retries = torch.cuda.memory_stats(device).get("num_alloc_retries", 0)

                def sample(base_retries=base_retries):
                    s = probe.snapshot().figures
                    reserved = s["reserved"]
                    return {"gap_ratio": (reserved - s["active"]) / reserved if reserved else 0.0,
                            "fragmentation": s["fragmentation"], "inactive_split": s["inactive_split"],
                            "num_alloc_retries": s["num_alloc_retries"] - base_retries, "reserved": reserved}

                t = time.perf_counter()
                series = _train(params, int(interval), device, sample, ckpt_dir)
                name = f"every {interval} · expandable={expandable}"
                if live is not None:
                    live.extend(name, [s["step"] for s in series], [s["gap_ratio"] for s in series])
                    live.flush()
                out["runs"].append({"interval": int(interval), "expandable_segments": bool(expandable), "series": series,
                                    "mean_gap_ratio": sum(s["gap_ratio"] for s in series) / len(series),
                                    "max_inactive_split": max(s["inactive_split"] for s in series),
                                    "alloc_retries": series[-1]["num_alloc_retries"], "wall_s": time.perf_counter() - t})
        torch.cuda.memory._set_allocator_settings("expandable_segments:False")
    import plotly.graph_objects as go

    fig = go.Figure()
    for r in out["runs"]:
        fig.add_scatter(x=[s["step"] for s in r["series"]], y=[s["gap_ratio"] for s in r["series"]], mode="lines",
                        name=f"every {r['interval']} · expandable={r['expandable_segments']}")
    fig.update_layout(title="(reserved − active) / reserved per step", xaxis_title="step", yaxis_title="gap ratio")
    out["figure"] = fig
    out["needs_cuda"] = False
    return out
