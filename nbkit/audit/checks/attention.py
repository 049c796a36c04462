"""Which scaled-dot-product-attention kernel actually runs, and what context fits.

The backend is read from the profiler (the aten op the model's forward dispatches to), not from
settings. Per-backend throughput versus sequence length is timed on this device with the model's
head layout; on CPU the numbers are CPU numbers and the field notes' GPU claims (FlashAttention-2
tile sizes, 92.4 % utilisation, 3.8× over naive attention) stay "needs GPU". On CUDA the timing runs
in bf16 whatever the model's dtype: the CUDA flash kernel refuses float32, so a float32 model would
otherwise leave the speed-up unmeasured. The backends are timed interleaved — every repetition times
each backend once, in turn — so a change of load hits them alike; the speed-up is the per-repetition
ratio math/flash at the longest length both ran, and the machine's load average is recorded with it.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, Checked, CheckMetrics
from nbkit.experiment import param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "attention", "Attention backend and context"


@dataclass
class AttentionConfig(CheckConfig):
    seq_len: int = param(128, min=16, max=32768, label="train.seq_len")
    max_length: int = param(2048, choices=[256, 512, 1024, 2048, 4096], label="longest timed length")
    # 20 interleaved repetitions on CUDA: the speed-up's interval is over them (a t interval of the log
    # ratio). Off CUDA the speed-up is not the claim's (it needs a GPU): CPU_REPS draw the curve.
    reps: int = param(20, min=2, max=100, help="interleaved repetitions on CUDA (elsewhere at most 5)")

    @classmethod
    def smoke(cls):
        return cls(max_length=256, reps=3)

    @property
    def lengths(self) -> tuple[int, ...]:
        """The four lengths timed, ending at ``max_length``."""
        return tuple(L for L in (64, 128, 256, 512, 1024, 2048, 4096) if L <= self.max_length)[-4:]

    @classmethod
    def audit_values(cls, audit):
        return {"seq_len": audit.train.seq_len}


@dataclass(frozen=True, kw_only=True)
class AttentionMetrics(CheckMetrics):
    """The device timed on, the dtype, and flash over math SDPA throughput at the longest length both
    kernels ran: one ratio per interleaved repetition (empty when either kernel could not run), with
    the machine's 1-minute load average before and after the timing."""

    device: str
    timing_dtype: str
    flash_over_math_L: int
    flash_over_math_per_rep: tuple[float, ...]
    load_average: tuple[float, float]


# Repetitions off CUDA, where the timings only draw the throughput curve (the speed-up claim needs a GPU).
CPU_REPS = 5

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

    def call(be, q, k, v):
        with sdpa_kernel([be]):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            return time.perf_counter() - t0

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
        # A warm-up call per backend (its first call pays for kernel selection): a backend that cannot
        # run this shape or dtype says so here and is left out of the repetitions.
        errors: dict[str, str] = {}
        for name, be in backends.items():
            try:
                call(be, q, k, v)
            except RuntimeError as exc:
                errors[name] = str(exc).splitlines()[0][:100]
        times: dict[str, list[float]] = {name: [] for name in backends if name not in errors}
        order = list(times)
        for rep in range(reps):  # interleaved, the starting backend rotating: load hits every backend alike
            for name in order[rep % len(order) :] + order[: rep % len(order)]:
                times[name].append(call(backends[name], q, k, v))
        for name in backends:
            sec = statistics.median(times[name]) if name in times and times[name] else None
            rows.append(
                {
                    "backend": name,
                    "L": L,
                    "dtype": str(dtype).replace("torch.", ""),
                    "seconds": sec,
                    "tokens_per_s": batch * L / sec if sec else None,
                    "rep_seconds": times.get(name, []),
                    "error": errors.get(name, ""),
                }
            )
    return rows


def flash_speedup(rows: list[dict[str, Any]]) -> tuple[int, tuple[float, ...]]:
    """(the longest length where flash and math both ran, math/flash time of each interleaved
    repetition there); (0, ()) when they never both ran."""
    by = {(r["backend"], r["L"]): r for r in rows if r["tokens_per_s"]}
    common = [L for (be, L) in by if be == "flash" and ("math (unfused)", L) in by]
    if not common:
        return 0, ()
    L = max(common)
    f, m = by[("flash", L)]["rep_seconds"], by[("math (unfused)", L)]["rep_seconds"]
    return L, tuple(a / b for a, b in zip(m, f, strict=True))


def check_attention_backend(
    model, tokenizer, *, device, seq_len: int, lengths=(128, 256, 512, 1024), reps: int = 20
) -> Checked[AttentionMetrics]:
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
    load_before = os.getloadavg()[0]
    reps = reps if device.type == "cuda" else min(reps, CPU_REPS)
    rows = time_backends(n_heads, n_kv, head_dim, list(lengths), device, dtype, reps=reps)
    L, ratios = flash_speedup(rows)
    metrics = AttentionMetrics(
        device=str(device),
        timing_dtype=str(dtype).replace("torch.", ""),
        flash_over_math_L=L,
        flash_over_math_per_rep=ratios,
        load_average=(load_before, os.getloadavg()[0]),
    )
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
    figures.update(metrics.figures())
    if ratios:
        figures["flash_over_math_median"] = statistics.median(ratios)
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
    finding = Finding(
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
    return Checked(finding, metrics)


def measure(cfg: AttentionConfig, ctx: AuditContext, live=None) -> Checked[AttentionMetrics]:
    """The SDPA kernel the forward dispatches to, and each backend's throughput versus length."""
    model, tok = ctx.model_and_tokenizer()
    return check_attention_backend(
        model, tok, device=ctx.torch_device, seq_len=cfg.seq_len, lengths=cfg.lengths, reps=cfg.reps
    )


CHECK = Check.of(SLUG, TITLE, AttentionConfig, AttentionMetrics, measure, number=4)
