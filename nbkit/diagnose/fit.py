"""Will it fit: each rank's predicted peak for the user's setup, from notebook 02's memory model, against the
GPU.

The prediction is :func:`nbkit.zero.peak.predict_peak` — model states by the ZeRO paper's formula for the
stage, precision and offload, the gradient buckets, and the larger of the end of backward (the saved
activations of one micro-batch, counted by running the model's forward on the meta device, plus stage
3's gathered parameters) and the optimizer step's temporaries — with the user's model, sequence length,
micro batch, ZeRO stage, offload and buckets (``"auto"`` buckets as the trainer fills them). Attention
is counted as the run computes it on a GPU: SDPA and flash-attention kernels save q, k, v, the output
and a log-sum-exp per query, not the S×S scores the meta device's math path would (eager attention keeps
them, and is counted so). With activation checkpointing the activations are the parts outside the checkpointed
decoder layers (counted
on the meta device with checkpointing on), each layer's input, and one layer's recomputed activations.

The verdict reads the model's measured accuracy (``peak_accuracy.json``, written from
``bench/zero_peak.py``: predicted ÷ measured peak per stage at CPU scale): it fits when even the worst
measured under-prediction fits, does not fit when even the worst over-prediction does not, and is
inconclusive in between. On a GPU the figure is a prediction: the CUDA context, NCCL buffers and the
allocator's cached-but-free blocks are outside the model.

When it does not fit, the changes are tried one at a time in order of what they cost in step time
(the next ZeRO stage, activation checkpointing, a smaller micro batch with the accumulation that keeps
the global batch, optimizer offload, parameter offload) and, when none is enough alone, accumulated in
that order.

LoRA and QLoRA (:class:`Adapter`) run through the same model: the base weights are frozen and held in the
training precision (QLoRA: every linear layer of the decoder blocks in 4-bit NF4 — half a byte per weight
plus one absmax per 64 weights, fp32, or with double quantisation an 8-bit absmax and one fp32 constant per
256 blocks — while embeddings, lm_head, norms and biases stay 16-bit, as bitsandbytes converts them); only
the adapter's ``r·(in + out)`` per targeted linear layer has gradients and optimizer states, which ZeRO-1/2
partition, and ZeRO-3 partitions every parameter, frozen ones too. Activations are counted on the meta
device with PEFT's wrapped model. The full-fine-tuning accuracy does not cover it, so an adapter's verdict
uses that band widened by a stated, unmeasured ``ADAPTER_TOLERANCE`` each way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from nbkit.claims import HOLDS, INCONCLUSIVE, REFUTED, Verdict
from nbkit.zero.memory import model_size
from nbkit.zero.peak import SavedActivations, meta_causal_lm, predict_activation_bytes, predict_peak

GIB = 2**30
ACCURACY_FILE = Path(__file__).with_name("peak_accuracy.json")


@cache
def accuracy() -> dict[str, Any]:
    """The memory model's measured predicted ÷ measured peak per stage (``peak_accuracy.json``, from
    ``bench/zero_peak.py``)."""
    data = json.loads(ACCURACY_FILE.read_text(encoding="utf-8"))
    for stage in ("0", "1", "2", "3"):
        lo, hi = data["pred_over_meas"][stage]
        if not 0 < lo <= hi:
            raise ValueError(f"{ACCURACY_FILE}: pred_over_meas[{stage}] must be 0 < lo <= hi, got {lo}, {hi}")
    return data


# Not measured: an adapter run's predicted ÷ measured peak. Its verdict widens the full-fine-tuning band by
# this
# fraction each way (a stated tolerance, so a setup within it of the GPU's memory is inconclusive).
ADAPTER_TOLERANCE = 0.10
NF4_BLOCK = 64  # bitsandbytes' 4-bit blocksize (weights per absmax)
DQ_BLOCK = 256  # double quantisation's blocksize (absmaxes per fp32 constant)


@dataclass(frozen=True)
class Adapter:
    """A LoRA (``kind="lora"``) or QLoRA (``"qlora"``: 4-bit NF4 base) adapter as the trainer config states
    it."""

    kind: str
    r: int
    targets: tuple[str, ...] | str  # module names (PEFT matches the name's last part), or "all-linear"
    dropout: float = 0.0
    double_quant: bool = True
    quant_storage: str | None = None  # bnb_4bit_quant_storage (ZeRO-3 needs it equal to the training dtype)

    def describe(self) -> str:
        where = "every linear layer" if self.targets == "all-linear" else ",".join(self.targets)
        quant = f", NF4{' double-quant' if self.double_quant else ''}" if self.kind == "qlora" else ""
        return f"{'QLoRA' if self.kind == 'qlora' else 'LoRA'} r={self.r} on {where}{quant}"

    def peft(self) -> dict[str, Any]:
        return {
            "r": self.r,
            "targets": self.targets if isinstance(self.targets, str) else list(self.targets),
            "dropout": self.dropout,
        }


def nf4_bytes_per_weight(double_quant: bool) -> float:
    """Bytes per 4-bit weight with its quantisation constants (bitsandbytes' blockwise NF4)."""
    if double_quant:
        return 0.5 + 1 / NF4_BLOCK + 4 / (NF4_BLOCK * DQ_BLOCK)
    return 0.5 + 4 / NF4_BLOCK


_SHAPES: dict[str, tuple[int, tuple[tuple[str, int, int], ...]]] = {}


def _linear_shapes(config) -> tuple[int, tuple[tuple[str, int, int], ...]]:
    """(all parameters, each decoder-block linear layer's (name, in, out)) of the model, on the meta
    device."""
    import torch
    from transformers import AutoModelForCausalLM

    key = config.to_json_string(use_diff=False)
    if key in _SHAPES:
        return _SHAPES[key]
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    n = int(config.num_hidden_layers)
    layers = next((m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == n), None)
    if layers is None:
        raise ValueError(f"{type(model).__name__}: no list of {n} decoder layers")
    linears = tuple(
        (name, m.in_features, m.out_features)
        for name, m in layers.named_modules()
        if isinstance(m, torch.nn.Linear)
    )
    _SHAPES[key] = (sum({id(p): p.numel() for p in model.parameters()}.values()), linears)
    return _SHAPES[key]


def adapter_params(config, adapter: Adapter, precision: str) -> tuple[int, float]:
    """(trainable adapter parameters, bytes of the frozen base model's parameters) — hand-counted from the
    model's shapes, the way PEFT
    adds ``lora_A`` (r × in) and ``lora_B`` (out × r) to each targeted linear layer of the decoder blocks."""
    n_params, linears = _linear_shapes(config)
    hit = [
        (i, o)
        for name, i, o in linears
        if adapter.targets == "all-linear" or name.rsplit(".", 1)[-1] in adapter.targets
    ]
    if not hit:
        raise ValueError(
            f"LoRA targets {adapter.targets!r} match no linear layer of the decoder blocks "
            f"(they have: {sorted({n.rsplit('.', 1)[-1] for n, _, _ in linears})})"
        )
    trainable = sum(adapter.r * (i + o) for i, o in hit)
    elem = 4 if precision == "fp32" else 2
    if adapter.kind != "qlora":
        return trainable, float(elem * n_params)
    quantised = sum(
        i * o for _, i, o in linears
    )  # weights only: biases, norms, embeddings and lm_head stay 16-bit
    return trainable, quantised * nf4_bytes_per_weight(adapter.double_quant) + elem * (n_params - quantised)


@dataclass(frozen=True)
class Plan:
    """What fixes a rank's memory: the ZeRO layout, precision, batch and checkpointing."""

    stage: int
    precision: str  # "bf16" | "fp16" | "fp32"
    micro_batch: int
    grad_accum: int
    seq_len: int
    checkpointing: bool
    offload_optimizer: bool
    offload_param: bool
    world_size: int
    attention: str = "fused"  # "fused" (flash / memory-efficient kernel) or "eager" (S×S scores kept)
    adapter: Adapter | None = None  # None: full fine-tuning

    def describe(self) -> str:
        off = [x for x, on in (("optimizer", self.offload_optimizer), ("params", self.offload_param)) if on]
        return (
            f"{self.adapter.describe() + ', ' if self.adapter else ''}ZeRO-{self.stage}, {self.precision}, "
            f"micro {self.micro_batch} × accumulation {self.grad_accum} × {self.world_size} GPUs, "
            f"{self.seq_len} tokens, {self.attention} attention, checkpointing "
            f"{'on' if self.checkpointing else 'off'}, "
            f"offload {'+'.join(off) or 'none'}"
        )


@dataclass(frozen=True)
class Prediction:
    plan: Plan
    parts: dict[str, Any]  # predict_peak's parts (bytes) and phase

    @property
    def peak_gib(self) -> float:
        return float(self.parts["total"]) / GIB


@dataclass(frozen=True)
class ModelShape:
    config: Any
    n_params: int
    largest_layer_params: int


def model_shape(config) -> ModelShape:

    size = model_size(config)
    return ModelShape(config, size.n_params, size.largest_layer_params)


_CKPT_CACHE: dict[tuple, int] = {}


FUSED = "nbkit_fused"


def _register_fused_attention() -> None:
    """An attention implementation that saves for backward what a fused kernel saves — q, k, v, the output
    and the fp32 log-sum-exp per query (FlashAttention / PyTorch's flash and memory-efficient SDPA) — and
    computes nothing: the meta-device count of a GPU run. The meta device runs SDPA's math path, which
    keeps the S×S scores a GPU kernel never stores. Hand-written because no library exposes a kernel's
    saved tensors as a transformers attention function."""
    import torch
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    if FUSED in AttentionInterface._global_mapping:
        return

    class _Fused(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):
            out = torch.empty_like(q)
            lse = torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
            ctx.save_for_backward(q, k, v, out, lse)
            return out

        @staticmethod
        def backward(ctx, grad):
            q, k, v, _, _ = ctx.saved_tensors
            return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)

    def fused(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        return _Fused.apply(query, key, value).transpose(1, 2).contiguous(), None

    AttentionInterface.register(FUSED, fused)
    AttentionMaskInterface.register(FUSED, ALL_MASK_ATTENTION_FUNCTIONS["flash_attention_2"])


def _model_cfg(config, attention: str) -> dict[str, Any]:
    d = config.to_dict()
    if attention == "fused":
        _register_fused_attention()
        d["attn_implementation"] = FUSED
    elif attention == "eager":
        d["attn_implementation"] = "eager"
    return {"kind": "config", "config": d}


def activation_bytes(
    config,
    micro_batch: int,
    seq_len: int,
    precision: str,
    checkpointing: bool,
    attention: str = "fused",
    lora: dict[str, Any] | None = None,
) -> int:
    """Saved activations of one micro-batch: notebook 02's meta-device count (``predict_activation_bytes``)
    with the
    run's attention (``fused``: a flash / memory-efficient kernel, what SDPA and flash_attention_2 run on a
    GPU;
    ``eager``: the S×S scores kept); with checkpointing, see the module docstring; ``lora``: PEFT's wrapped
    model."""

    model_cfg = _model_cfg(config, attention)
    full = predict_activation_bytes(model_cfg, micro_batch, seq_len, precision, lora)
    if not checkpointing:
        return full
    key = (
        json.dumps(model_cfg, sort_keys=True, default=str),
        micro_batch,
        seq_len,
        precision,
        json.dumps(lora, sort_keys=True),
    )
    if key not in _CKPT_CACHE:
        _CKPT_CACHE[key] = _outside_layers_bytes(
            model_cfg, int(config.num_hidden_layers), micro_batch, seq_len, precision, lora
        )
    outside = _CKPT_CACHE[key]
    layers = int(getattr(config, "num_hidden_layers", 1) or 1)
    per_layer = max(0, full - outside) / layers
    elem = 2 if precision in ("bf16", "fp16") else 4
    layer_inputs = layers * micro_batch * seq_len * int(config.hidden_size) * elem
    return int(outside + layer_inputs + per_layer)


def _outside_layers_bytes(
    model_cfg: dict[str, Any],
    n_layers: int,
    micro_batch: int,
    seq_len: int,
    precision: str,
    lora: dict[str, Any] | None = None,
) -> int:
    """Bytes saved for backward outside the decoder layers (meta device): the parts checkpointing leaves
    whole.

    Each decoder layer runs inside its own (identity) saved-tensor hooks, which take precedence over the
    counter's, so only the embedding, final norm, head and loss are counted — the same forward as the
    full count, without transformers' checkpoint wrapper (whose cache handling cannot run on meta tensors).
    """
    import torch

    model = meta_causal_lm(model_cfg, precision, lora)
    with torch.device("meta"):
        ids = torch.zeros((micro_batch, seq_len), dtype=torch.long)
    layers = next(
        (m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == n_layers), None
    )
    if layers is None:
        raise ValueError(f"{type(model).__name__}: no list of {n_layers} decoder layers to checkpoint")
    stack = []

    def enter(module, args):
        ctx = torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)
        ctx.__enter__()
        stack.append(ctx)

    def leave(module, args, output):
        stack.pop().__exit__(None, None, None)

    handles = [
        h
        for layer in layers
        for h in (layer.register_forward_pre_hook(enter), layer.register_forward_hook(leave))
    ]
    try:
        with SavedActivations(model) as acts:
            model(input_ids=ids, labels=ids)
    finally:
        for h in handles:
            h.remove()
    return acts.bytes


def predict(shape: ModelShape, plan: Plan, ds_zero: dict[str, Any]) -> Prediction:
    """Each part of one rank's predicted peak (bytes) for ``plan`` — :func:`nbkit.zero.peak.predict_peak` on a
    GPU rank."""

    ad = plan.adapter
    trainable, frozen = (
        adapter_params(shape.config, ad, plan.precision) if ad else (None, None)
    )  # first: names unmatched targets
    acts = activation_bytes(
        shape.config,
        plan.micro_batch,
        plan.seq_len,
        plan.precision,
        plan.checkpointing,
        plan.attention,
        ad.peft() if ad else None,
    )
    zero = {
        k: v for k, v in ds_zero.items() if not isinstance(v, str)
    }  # an unfilled "auto" → DeepSpeed's default
    parts = predict_peak(
        n_params=shape.n_params + (trainable or 0),
        largest_layer_params=shape.largest_layer_params,
        stage=plan.stage,
        world_size=plan.world_size,
        precision=plan.precision,
        ds_zero=zero,
        activation_bytes=acts,
        baseline_bytes=0,
        offload_optimizer=plan.offload_optimizer and plan.stage >= 1,
        offload_param=plan.offload_param and plan.stage == 3,
        device="cuda",
        trainable_params=trainable,
        frozen_bytes=frozen,
    )
    if ad:
        parts["trainable_params"] = trainable
    return Prediction(plan, parts)


def gib_text(x: float) -> str:
    """GiB for a reader: one decimal from 10 GiB up, three significant digits below (a small model's peak is
    MiB)."""
    return f"{x:.1f}" if abs(x) >= 10 else f"{x:.3g}"


def band_name(plan: Plan) -> str:
    return (
        "measured-accuracy band"
        if plan.adapter is None
        else f"band (measured full-fine-tuning range ± a stated {ADAPTER_TOLERANCE:.0%})"
    )


def verdict_fits(
    predicted_gib: float,
    gpu_gib: float,
    ratio: tuple[float, float],
    band_label: str = "measured-accuracy band",
) -> Verdict:
    """Does one rank's peak fit in ``gpu_gib``? ``ratio`` is the measured (lo, hi) of predicted ÷ measured
    peak at this stage.

    The true peak lies in [predicted / hi, predicted / lo]: holds when its top fits, refuted when its
    bottom does not, inconclusive when the GPU's memory falls inside that band.
    """
    lo, hi = ratio
    low, high = predicted_gib / hi, predicted_gib / lo
    band = (
        f"predicted {gib_text(predicted_gib)} GiB, {band_label} {gib_text(low)}–{gib_text(high)} GiB, GPU "
        f"{gpu_gib:g} GiB"
    )
    if high <= gpu_gib:
        return Verdict(HOLDS, f"{band}: fits with {gib_text(gpu_gib - high)} GiB to spare at the band's top")
    if low > gpu_gib:
        return Verdict(REFUTED, f"{band}: short by {gib_text(low - gpu_gib)} GiB even at the band's bottom")
    return Verdict(INCONCLUSIVE, f"{band}: the GPU's memory lies inside the model's measured error")


def stage_ratio(stage: int) -> tuple[float, float]:
    lo, hi = accuracy()["pred_over_meas"][str(stage)]
    return float(lo), float(hi)


def plan_ratio(plan: Plan) -> tuple[float, float]:
    """The band the verdict uses: the stage's measured range, widened by ``ADAPTER_TOLERANCE`` for an adapter
    (not measured)."""
    lo, hi = stage_ratio(plan.stage)
    if plan.adapter is None:
        return lo, hi
    return round(lo * (1 - ADAPTER_TOLERANCE), 4), round(hi * (1 + ADAPTER_TOLERANCE), 4)


def changes(plan: Plan) -> list[tuple[str, Plan]]:
    """Single changes that lower a rank's peak, cheapest in step time first."""
    out: list[tuple[str, Plan]] = []
    if plan.stage < 3 and plan.world_size > 1:  # one GPU: ZeRO has nothing to partition across
        out.append((f"ZeRO stage {plan.stage + 1}", replace(plan, stage=plan.stage + 1)))
    if not plan.checkpointing:
        out.append(
            ("activation checkpointing (gradient_checkpointing: true)", replace(plan, checkpointing=True))
        )
    m = plan.micro_batch
    for smaller in sorted((d for d in range(1, m) if m % d == 0), reverse=True):
        ga = plan.grad_accum * (m // smaller)
        out.append(
            (
                f"micro batch {smaller} with accumulation {ga} (same global batch)",
                replace(plan, micro_batch=smaller, grad_accum=ga),
            )
        )
    if plan.adapter is not None and plan.adapter.kind == "lora":
        out.append(
            (
                "QLoRA instead of LoRA (adapter: qlora, load_in_4bit: true)",
                replace(plan, adapter=replace(plan.adapter, kind="qlora")),
            )
        )
    if not plan.offload_optimizer:
        st = max(plan.stage, 1)
        out.append(
            (
                "optimizer offload to CPU" + (" (needs ZeRO-1)" if plan.stage == 0 else ""),
                replace(plan, stage=st, offload_optimizer=True),
            )
        )
    if not plan.offload_param:
        out.append(
            (
                "parameter offload to CPU" + ("" if plan.stage == 3 else " (needs ZeRO-3)"),
                replace(plan, stage=3, offload_param=True),
            )
        )
    return out


def fixes(shape: ModelShape, plan: Plan, ds_zero: dict[str, Any], gpu_gib: float) -> list[dict[str, Any]]:
    """The changes that make ``plan`` fit, each with its predicted peak; cumulative when no single change is
    enough."""
    rows = []
    for what, p in changes(plan):
        pred = predict(shape, p, ds_zero)
        v = verdict_fits(pred.peak_gib, gpu_gib, plan_ratio(p), band_name(p))
        rows.append(
            {
                "change": what,
                "plan": p.describe(),
                "predicted_peak_gib": pred.peak_gib,
                "verdict": v.verdict,
                "why": v.why,
            }
        )
    fitting = [r for r in rows if r["verdict"] == HOLDS]
    if fitting:
        return fitting
    # none alone: accumulate the non-batch changes in cost order; after each, try the micro batches (largest
    # first)
    current, applied = plan, []
    while True:
        steps = [(w, p) for w, p in changes(current) if "micro batch" not in w]
        if not steps:
            return []
        what, current = steps[0]
        applied.append(what)
        for w, p in [(what, current)] + [
            (f"{what} + {w}", p) for w, p in changes(current) if "micro batch" in w
        ]:
            pred = predict(shape, p, ds_zero)
            v = verdict_fits(pred.peak_gib, gpu_gib, plan_ratio(p), band_name(p))
            if v.verdict == HOLDS:
                label = " + ".join(applied[:-1] + [w])
                return [
                    {
                        "change": label,
                        "plan": p.describe(),
                        "predicted_peak_gib": pred.peak_gib,
                        "verdict": v.verdict,
                        "why": v.why,
                    }
                ]
