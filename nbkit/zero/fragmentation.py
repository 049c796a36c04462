"""Allocator fragmentation vs checkpoint interval (KISS audit §4.3).

On CUDA the caching allocator reports reserved vs allocated bytes, inactive split blocks and
allocation retries; ``cuda_runs`` trains a Llama (by default Llama-2-7B's layer shapes — hidden
4096, MLP 11008, vocabulary 32000 — ``num_hidden_layers`` deep, in bf16 with AdamW), saves a
checkpoint every ``interval`` steps (the field notes compare 50 with 200), and samples those figures
every step, with and without ``expandable_segments``. A checkpoint first copies the model and
optimizer state into fresh buffers on the GPU (as a ZeRO stack gathers its state before saving),
so it allocates through the caching allocator; each seed's runs go in a shuffled order. The gap ratio is
``nbkit.device.gap_ratio``: (reserved − allocated) / reserved, the one definition nbkit uses.

What a GPU run with the default ``FragmentationConfig`` measures: 400 steps, checkpoints every 50
and every 200 steps, the 2-layer 7B-shaped model (≈0.67 B parameters, ≈8 GiB of bf16 weights and
Adam states, so it fits one GPU without ZeRO), batch 4 × up to 512 tokens of varying length; per
step the gap ratio, inactive split bytes and allocation retries. The field notes' 37 % / 4 % OOM
rates are not measured: a rate of out-of-memory failures needs many long runs near the memory limit.

On CPU there is no caching allocator: every such figure is reported as unavailable (by
``nbkit.device``'s CPU probe, with the reason), and the run shows what a CPU can account for —
tensor bytes by category from ``track_tensors`` on a tiny Llama — never a made-up ratio.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from typing import Any

from nbkit.device import gap_ratio, memory_probe, track_tensors
from nbkit.model_files import tiny_llama
from nbkit.zero.memory import llama2_7b_config


def build_model(cfg, device):
    """The model a fragmentation run trains: Llama-2-7B's shapes (bf16) or a tiny Llama (fp32)."""
    import torch

    if cfg.model == "Llama-2-7B":
        from transformers import LlamaForCausalLM

        config = llama2_7b_config(num_hidden_layers=cfg.num_hidden_layers)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            with torch.device(device):
                model = LlamaForCausalLM(config).to(torch.bfloat16)
        return model, config.vocab_size
    model = tiny_llama(
        seed=cfg.seed,
        device=device,
        hidden_size=cfg.hidden_size,
        intermediate_size=2 * cfg.hidden_size,
        num_hidden_layers=cfg.num_hidden_layers,
        vocab_size=512,
    )
    return model, 512


def checkpoint_on_device(model, opt, path) -> int:
    """Save a checkpoint the way a ZeRO stack does: first gather the state into fresh buffers on the
    training device — as DeepSpeed's ``stage3_gather_16bit_weights_on_model_save`` gathers the 16-bit
    weights and ``state_dict`` consolidation copies the optimizer state — then write those to ``path``
    and free them. The copies go through the device's allocator (on CUDA: the caching allocator), the
    path by which checkpointing can fragment it; a bare ``torch.save`` of the live tensors copies them
    to the host and allocates nothing on the device. Returns the bytes copied on the device."""
    import torch

    with torch.no_grad():
        weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
        state = {
            i: {k: v.detach().clone() if torch.is_tensor(v) else v for k, v in s.items()}
            for i, s in enumerate(opt.state.values())
        }
    copied = sum(t.numel() * t.element_size() for t in weights.values())
    copied += sum(
        v.numel() * v.element_size() for s in state.values() for v in s.values() if torch.is_tensor(v)
    )
    torch.save({"model": weights, "opt": state}, path)
    del weights, state
    return copied


def run_order(cfg) -> list[tuple[int, bool, int]]:
    """(seed, expandable_segments, interval) of every run: seed by seed, each seed's runs in an order
    shuffled by that seed, so no interval always runs first and run order (a warmer allocator, a
    fuller disk cache) cannot masquerade as the interval's effect."""
    import random

    order = []
    for k in range(cfg.seeds):
        seed = cfg.seed + k
        runs = [(seed, bool(e), int(i)) for e in cfg.expandable_segments for i in cfg.intervals]
        random.Random(seed).shuffle(runs)
        order += runs
    return order


def train_with_checkpoints(cfg, interval: int, device, sample, ckpt_dir) -> list[dict[str, Any]]:
    """``cfg.steps`` AdamW steps, a device-side checkpoint (:func:`checkpoint_on_device`) every
    ``interval`` steps, ``sample()`` after each step."""
    import torch

    model, vocab = build_model(cfg, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(cfg.seed)
    series = []
    for step in range(cfg.steps):
        # Varying sequence lengths make differently sized activations, the usual fragmentation source.
        seq = int(torch.randint(cfg.seq_len // 2, cfg.seq_len + 1, (1,), generator=g))
        ids = torch.randint(0, vocab, (cfg.batch, seq), generator=g).to(device)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        saved = (step + 1) % interval == 0
        if saved:
            checkpoint_on_device(model, opt, f"{ckpt_dir}/ckpt.pt")
        series.append(dict(sample(), step=step, checkpoint=saved))
    del model, opt
    return series


def cpu_accounting(cfg) -> dict[str, Any]:
    """No caching allocator on CPU: name the unavailable figures; account one step's tensor bytes."""
    import plotly.graph_objects as go
    import torch

    probe = memory_probe(torch.device("cpu"))
    tiny = dataclasses.replace(cfg, model="tiny Llama", seq_len=min(cfg.seq_len, 128))
    model, vocab = build_model(tiny, "cpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(
        0, vocab, (tiny.batch, tiny.seq_len), generator=torch.Generator().manual_seed(cfg.seed)
    )
    # One step first so Adam's states exist; MemTracker then accounts one full step
    # (it supports a single iteration per tracking block).
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    with track_tensors(model, opt) as mem:
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    cats = sorted(mem.peak)
    fig = go.Figure(
        [
            go.Bar(x=cats, y=[mem.peak[c] / 2**10 for c in cats], name="peak"),
            go.Bar(x=cats, y=[mem.current.get(c, 0) / 2**10 for c in cats], name="after the step"),
        ]
    )
    fig.update_layout(
        title=f"CPU: tensor bytes of a tiny Llama (hidden {tiny.hidden_size}) by category — "
        "fragmentation figures need CUDA",
        yaxis_title="KiB",
        barmode="group",
    )
    return {
        "unavailable": probe.snapshot().unavailable,
        "tensor_bytes_peak": dict(mem.peak),
        "tensor_bytes_current": dict(mem.current),
        "rss_bytes": probe.snapshot().figures,
        "figure": fig,
    }


def cuda_runs(cfg, device, live=None, stop=None) -> dict[str, Any]:
    """One training run per (expandable_segments, interval, seed); the allocator's figures every step.
    Seeds ``cfg.seed`` … ``cfg.seed + cfg.seeds − 1`` (model and data) are the independent runs a claim's
    interval is taken over: one run's per-step figures share its allocator state. After each seed's runs
    ``stop(runs so far)`` may end the loop."""
    import plotly.graph_objects as go
    import torch

    probe = memory_probe(device)
    runs = []
    with tempfile.TemporaryDirectory(prefix="nbkit-frag-") as ckpt_dir:
        try:
            planned = run_order(cfg)
            for order, (seed, expandable, interval) in enumerate(planned):
                torch.cuda.empty_cache()
                torch.cuda.memory._set_allocator_settings(
                    f"expandable_segments:{'True' if expandable else 'False'}"
                )
                torch.cuda.reset_peak_memory_stats(device)
                base_retries = torch.cuda.memory_stats(device).get("num_alloc_retries", 0)

                def sample(base_retries=base_retries):
                    s = probe.snapshot().figures
                    return {
                        "gap_ratio": gap_ratio(s),
                        "inactive_split": s["inactive_split"],
                        "num_alloc_retries": s["num_alloc_retries"] - base_retries,
                        "reserved": s["reserved"],
                    }

                t = time.perf_counter()
                series = train_with_checkpoints(
                    dataclasses.replace(cfg, seed=seed), interval, device, sample, ckpt_dir
                )
                if live is not None and seed == cfg.seed:
                    live.extend(
                        f"every {interval} · expandable={expandable}",
                        [s["step"] for s in series],
                        [s["gap_ratio"] for s in series],
                    )
                    live.flush()
                ratios = [s["gap_ratio"] for s in series]
                runs.append(
                    {
                        "interval": interval,
                        "expandable_segments": expandable,
                        "seed": seed,
                        "order": order,
                        "series": series,
                        "gap_ratios": ratios,
                        "mean_gap_ratio": sum(ratios) / len(ratios),
                        "checkpoints": sum(s["checkpoint"] for s in series),
                        "max_inactive_split": max(s["inactive_split"] for s in series),
                        "alloc_retries": series[-1]["num_alloc_retries"],
                        "wall_s": time.perf_counter() - t,
                    }
                )
                last_of_seed = order + 1 == len(planned) or planned[order + 1][0] != seed
                if last_of_seed and stop is not None and stop(runs):
                    break
        finally:
            torch.cuda.memory._set_allocator_settings("expandable_segments:False")
    fig = go.Figure()
    for r in (r for r in runs if r["seed"] == cfg.seed):
        fig.add_scatter(
            x=[s["step"] for s in r["series"]],
            y=r["gap_ratios"],
            mode="lines",
            name=f"every {r['interval']} · expandable={r['expandable_segments']}",
        )
    fig.update_layout(
        title="(reserved − allocated) / reserved per step", xaxis_title="step", yaxis_title="gap ratio"
    )
    model = (
        f"{cfg.model} shapes, {cfg.num_hidden_layers} layer(s)"
        if cfg.model == "Llama-2-7B"
        else f"tiny Llama (hidden {cfg.hidden_size})"
    )
    return {"runs": runs, "figure": fig, "model": model}
