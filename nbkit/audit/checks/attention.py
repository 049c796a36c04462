"""Which scaled-dot-product-attention kernel actually runs, and what context fits.

The backend is read from the profiler (the aten op the model's forward dispatches to), not from
settings. Per-backend throughput versus sequence length is timed on this device with the model's
head layout; on CPU the numbers are CPU numbers and the field notes' GPU claims (FlashAttention-2
tile sizes, 92.4 % utilisation, 3.8× over naive attention) stay "needs GPU". On CUDA the timing runs
in bf16 whatever the model's dtype: the CUDA flash kernel refuses float32, so a float32 model would
otherwise leave the speed-up unmeasured. The speed-up is stored under one key per device type
(``flash_over_math_cuda``), with the length it was timed at (``flash_over_math_L``).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, CheckMetrics
from nbkit.experiment import param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.experiments import AuditContext

SLUG, TITLE = "attention", "Attention backend and context"


@dataclass
class AttentionConfig(CheckConfig):
    seq_len: int = param(128, min=16, max=32768, label="train.seq_len")
    max_length: int = param(2048, choices=[256, 512, 1024, 2048, 4096], label="longest timed length")
    reps: int = param(3, min=1, max=20)

    @classmethod
    def smoke(cls):
        return cls(max_length=256, reps=2)

    @property
    def lengths(self) -> tuple[int, ...]:
        """The four lengths timed, ending at ``max_length``."""
        return tuple(L for L in (64, 128, 256, 512, 1024, 2048, 4096) if L <= self.max_length)[-4:]

    @classmethod
    def audit_values(cls, audit):
        return {"seq_len": audit.train.seq_len}


@dataclass(frozen=True)
class AttentionMetrics(CheckMetrics):
    """The device timed on and, on CUDA, flash over math SDPA throughput with its range over repetitions."""

    device: str | None = None
    timing_dtype: str | None = None
    flash_over_math_cuda: float | None = None
    flash_over_math_cuda_low: float | None = None
    flash_over_math_cuda_high: float | None = None
    flash_over_math_L: int | None = None
    flash_over_math_reps: int | None = None


# aten op -> backend name
SDPA_OPS = {
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash (CPU kernel)",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_efficient_attention": "memory-efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cuDNN",
    "aten::_scaled_dot_product_attention_math": "math (unfused)",
    "aten::_scaled_dot_product_attention_math_for_mps": "math (MPS)",
}


def backends_in_forward(model, input_ids, device) -> dict[str, int]:
    """SDPA kernels the model's forward dispatched to, with call counts (from torch.profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        model(input_ids=input_ids.to(device))
    found: dict[str, int] = {}
    for evt in prof.key_averages():
        if evt.key in SDPA_OPS:
            found[SDPA_OPS[evt.key]] = found.get(SDPA_OPS[evt.key], 0) + int(evt.count)
    return found


def time_backends(
    n_heads: int,
    n_kv: int,
    head_dim: int,
    lengths,
    device,
    dtype,
    *,
    reps: int = 3,
    batch: int = 1,
    causal: bool = True,
) -> list[dict[str, Any]]:
    """Median seconds per causal SDPA call per backend and length (tokens/s), model head layout."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = {"math (unfused)": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION}
    if device.type == "cuda":
        backends.update(
            {"memory-efficient": SDPBackend.EFFICIENT_ATTENTION, "cuDNN": SDPBackend.CUDNN_ATTENTION}
        )
    rows = []
    gen = torch.Generator(device="cpu").manual_seed(0)
    for L in lengths:
        q = torch.randn(batch, n_heads, L, head_dim, generator=gen).to(device, dtype)
        # K/V expanded to every query head (as the model's repeat_kv does): not every CUDA kernel
        # accepts enable_gqa, and the kernels are compared on the same work.
        k = (
            torch.randn(batch, n_kv, L, head_dim, generator=gen)
            .repeat_interleave(n_heads // n_kv, dim=1)
            .to(device, dtype)
        )
        v = (
            torch.randn(batch, n_kv, L, head_dim, generator=gen)
            .repeat_interleave(n_heads // n_kv, dim=1)
            .to(device, dtype)
        )
        for name, be in backends.items():
            try:
                with sdpa_kernel([be]):
                    times = []
                    for _ in range(reps + 1):
                        if device.type == "cuda":
                            torch.cuda.synchronize(device)
                        t0 = time.perf_counter()
                        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        if device.type == "cuda":
                            torch.cuda.synchronize(device)
                        times.append(time.perf_counter() - t0)
                sec = statistics.median(times[1:])
                rows.append(
                    {
                        "backend": name,
                        "L": L,
                        "dtype": str(dtype).replace("torch.", ""),
                        "seconds": sec,
                        "tokens_per_s": batch * L / sec,
                        "rep_seconds": times[1:],
                        "error": "",
                    }
                )
            except RuntimeError as exc:
                rows.append(
                    {
                        "backend": name,
                        "L": L,
                        "dtype": str(dtype).replace("torch.", ""),
                        "seconds": None,
                        "tokens_per_s": None,
                        "rep_seconds": [],
                        "error": str(exc).splitlines()[0][:100],
                    }
                )
    return rows


def flash_speedup(rows: list[dict[str, Any]], device_type: str) -> dict[str, Any]:
    """Flash over math throughput at the longest length where both ran: the median ratio and the
    range across repetitions (slowest flash vs fastest math, and the reverse)."""
    by = {(r["backend"], r["L"]): r for r in rows if r["tokens_per_s"]}
    common = [L for (be, L) in by if be == "flash" and ("math (unfused)", L) in by]
    if not common:
        return {}
    L = max(common)
    f, m = by[("flash", L)], by[("math (unfused)", L)]
    out: dict[str, Any] = {
        f"flash_over_math_{device_type}": m["seconds"] / f["seconds"],
        "flash_over_math_L": L,
        "flash_over_math_reps": min(len(f["rep_seconds"]), len(m["rep_seconds"])),
    }
    if f["rep_seconds"] and m["rep_seconds"]:
        out[f"flash_over_math_{device_type}_low"] = min(m["rep_seconds"]) / max(f["rep_seconds"])
        out[f"flash_over_math_{device_type}_high"] = max(m["rep_seconds"]) / min(f["rep_seconds"])
    return out


def check_attention_backend(
    model, tokenizer, *, device, seq_len: int, lengths=(128, 256, 512, 1024), reps: int = 3
) -> Finding:
    import plotly.graph_objects as go
    import torch

    cfg = model.config
    impl = getattr(cfg, "_attn_implementation", None)
    n_heads, n_kv = cfg.num_attention_heads, getattr(cfg, "num_key_value_heads", cfg.num_attention_heads)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    dtype = next(model.parameters()).dtype
    if device.type == "cuda" and dtype not in (torch.bfloat16, torch.float16):
        dtype = torch.bfloat16  # the CUDA flash kernel accepts bf16/fp16 only
    probe_len = min(64, seq_len)
    ids = torch.randint(3, cfg.vocab_size, (1, probe_len), generator=torch.Generator().manual_seed(0))
    used = backends_in_forward(model.eval(), ids, device)
    rows = time_backends(n_heads, n_kv, head_dim, list(lengths), device, dtype, reps=reps)
    max_pos = getattr(cfg, "max_position_embeddings", None)
    figures: dict[str, Any] = {
        "device": str(device),
        "attn_implementation": impl,
        "kernels_in_forward": used or "none found (eager attention: matmul + softmax)",
        "heads/kv_heads/head_dim": f"{n_heads}/{n_kv}/{head_dim}",
        "max_position_embeddings": max_pos,
        "configured_seq_len": seq_len,
    }
    ok = [r for r in rows if r["tokens_per_s"]]
    figures.update(flash_speedup(rows, device.type))
    figures["timing_dtype"] = str(dtype).replace("torch.", "")
    if device.type == "cuda":
        figures["gpu"] = torch.cuda.get_device_name(device)
        figures["field_note_tile_size_and_utilisation"] = (
            "not measurable through SDPA (kernel internals); profile with Nsight"
        )
    else:
        figures["gpu_throughput"] = (
            "needs CUDA: the field notes' tile sizes, 92.4 % utilisation and 3.8× claims are GPU measurements"
        )
    problems = []
    if max_pos and seq_len > max_pos:
        problems.append(f"train.seq_len {seq_len} exceeds the model's max_position_embeddings {max_pos}")
    if impl == "eager":
        problems.append("the model runs eager attention (materialises the L×L score matrix)")
    status = "fail" if any("exceeds" in p for p in problems) else ("warn" if problems else "pass")
    summary = (
        "; ".join(problems)
        if problems
        else (
            f"{impl} attention dispatches to {', '.join(used) or 'no SDPA kernel'} on {device.type}; seq_len "
            f"{seq_len} ≤ {max_pos}"
        )
    )
    fig = go.Figure()
    for be in sorted({r["backend"] for r in ok}):
        pts = [r for r in ok if r["backend"] == be]
        fig.add_scatter(
            x=[r["L"] for r in pts], y=[r["tokens_per_s"] for r in pts], mode="lines+markers", name=be
        )
    fig.update_layout(
        title=f"causal SDPA throughput vs length on {device.type} ({n_heads}/{n_kv} heads, d={head_dim})",
        xaxis_title="sequence length",
        yaxis_title="tokens / s",
        xaxis_type="log",
        yaxis_type="log",
    )
    return Finding(
        SLUG,
        TITLE,
        status,
        summary,
        figures,
        rows,
        fix="use attn_implementation='sdpa' and keep seq_len within max_position_embeddings (or configure "
        "RoPE scaling)",
        figure=fig,
    )


def finding(cfg: AttentionConfig, ctx: AuditContext, live=None) -> Finding:
    model, tok = ctx.model_and_tokenizer()
    return check_attention_backend(
        model, tok, device=ctx.torch_device, seq_len=cfg.seq_len, lengths=cfg.lengths, reps=cfg.reps
    )


CHECK = Check.of(SLUG, TITLE, AttentionConfig, AttentionMetrics, finding, number=4)
