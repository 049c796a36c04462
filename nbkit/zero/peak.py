"""Per-rank peak memory: a measured waterfall, and a prediction from the model config and ds_config.

Measured, per rank and rung (``nbkit.zero.worker``): the runtime **baseline** before the model exists
(process RSS on CPU, allocated bytes on CUDA), the model states read from DeepSpeed's buffers
(**params**, **grads**, **optimizer**), the communication **buffers** (ZeRO-1/2's gradient bucket),
the **activations** autograd saves for backward (counted by ``SavedActivations``, each storage once,
parameters excluded) and the **peak** during the training steps (RSS polled every 20 ms on CPU,
``max_memory_allocated`` on CUDA). What the parts do not explain — temporaries, allocator slack,
memory the runtime grew — is **unexplained** = peak − baseline − the parts. ``init_peak_bytes`` is
the peak up to the end of ``deepspeed.initialize``, so a reader sees whether the peak came from
initialisation (the client's fp32 weights still alive beside DeepSpeed's 16-bit copy) or the steps.

Predicted (``predict_peak``, from the model config and ds_config alone): baseline + the ZeRO paper's
model states for the stage + buckets + the larger of two moments — the end of backward (the
activations of one micro-batch, counted by running the model's forward **on the meta device**, plus
stage 3's gathered 16-bit parameters) and the optimizer step (``step_temporaries``: the fp32 copies of
the gradients DeepSpeed makes for its fp32 master weights). On CPU ranks the launcher fixes glibc's
mmap threshold so RSS follows live bytes (otherwise freed tensors stay in the heap and the "peak"
is whatever the allocator kept), and the ranks use a fused AdamW (like DeepSpeed's own optimizers:
no temporaries as large as the flat partition). Stage 3's backward holds more than modelled
(gradients of gathered layers waiting for their reduce-scatter), so it is predicted low.
``bench/zero_peak.py`` measures predicted ÷ measured per stage (figures in bench/RESULTS.md).
"""

from __future__ import annotations

from typing import Any

from nbkit.zero.memory import formula_bytes, model_config

WATERFALL = ("baseline", "params", "grads", "optimizer", "buffers", "activations", "unexplained")


class SavedActivations:
    """``with SavedActivations(model) as acts: loss = model(...)`` → ``acts.bytes`` saved for backward.

    Uses autograd's saved-tensor hooks, so it sees exactly what backward will need; tensors that are
    (views of) the model's parameters are not activations and are skipped; works on meta tensors.
    """

    def __init__(self, model=None):
        self.bytes = 0
        self._seen: set[int] = set()
        params = list(model.parameters()) if model is not None else []
        # By identity too: ZeRO-3 swaps a gathered tensor into ``param.data`` for the forward.
        self._param_ids = {id(p) for p in params}
        self._params = {p.untyped_storage()._cdata for p in params}
        self._ctx = None

    def _pack(self, t):
        if id(t) in self._param_ids or (t._base is not None and id(t._base) in self._param_ids):
            return t
        st = t.untyped_storage()
        key = st._cdata
        if key not in self._seen and key not in self._params:
            self._seen.add(key)
            self.bytes += int(st.nbytes())
        return t

    def __enter__(self):
        import torch

        self._ctx = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)


_ACT_CACHE: dict[tuple, int] = {}


def meta_causal_lm(model_cfg: dict[str, Any], precision: str, lora: dict[str, Any] | None = None):
    """The ladder's model on the meta device in ``precision``; with ``lora`` ({"r", "targets", "dropout"})
    wrapped
    by PEFT as the run wraps it (frozen base, trainable adapters), so autograd saves what a LoRA backward
    needs."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(model_config(model_cfg)).to(dtype)
        if lora is not None:
            from peft import LoraConfig, get_peft_model

            targets = lora["targets"]
            model = get_peft_model(
                model,
                LoraConfig(
                    r=int(lora["r"]),
                    lora_alpha=2 * int(lora["r"]),
                    target_modules=targets if isinstance(targets, str) else list(targets),
                    lora_dropout=float(lora.get("dropout", 0.0)),
                    bias="none",
                ),
            )
    return model


def predict_activation_bytes(
    model_cfg: dict[str, Any],
    micro_batch: int,
    seq_len: int,
    precision: str,
    lora: dict[str, Any] | None = None,
) -> int:
    """Bytes saved for backward by one micro-batch of the ladder's model, from its config alone (meta device);
    with ``lora``, of the PEFT-wrapped model (a frozen weight's matmul keeps no input; the adapters keep
    theirs
    and the r-dim intermediate)."""
    import json

    import torch

    key = (
        json.dumps(model_cfg, sort_keys=True),
        micro_batch,
        seq_len,
        precision,
        json.dumps(lora, sort_keys=True),
    )
    if key not in _ACT_CACHE:
        model = meta_causal_lm(model_cfg, precision, lora)
        with torch.device("meta"):
            ids = torch.zeros((micro_batch, seq_len), dtype=torch.long)
        with SavedActivations(model) as acts:
            model(input_ids=ids, labels=ids)
        _ACT_CACHE[key] = acts.bytes
    return _ACT_CACHE[key]


def bucket_bytes(
    stage: int,
    ds_zero: dict[str, Any],
    largest_layer_params: int,
    precision: str,
    *,
    n_params: int | None = None,
) -> int:
    """Communication buffers a rank holds: the gradient reduce bucket (stages 1–2; DeepSpeed's default
    5e8 elements, two of them with ``overlap_comm``) and, at stage 3, the largest layer's parameters
    gathered for its forward. With ``n_params`` (CPU ranks) a bucket counts only as far as gradients
    fill it: ``torch.empty`` on CPU maps pages the OS backs only once written, while CUDA's allocator
    reserves the whole bucket."""
    elem = 4 if precision == "fp32" else 2
    if stage in (1, 2):
        size = int(ds_zero.get("reduce_bucket_size", 5e8))
        if n_params is not None:
            size = min(size, int(n_params))
        return size * elem * (2 if ds_zero.get("overlap_comm") else 1)
    if stage == 3:
        return int(largest_layer_params) * elem
    return 0


def step_temporaries(stage: int, n_params: int, world_size: int, precision: str) -> float:
    """Bytes the optimizer step allocates on top of the model states (DeepSpeed 0.19, read from its code
    and confirmed with a dispatch-mode tensor tracker):

    * stage 0, 16-bit: ``FP16_UnfusedOptimizer.step`` casts every 16-bit gradient to an fp32 copy for the
      fp32 master weights — 4Ψ while the 16-bit gradients still live (none in fp32: the optimizer steps
      the model's own parameters);
    * stages 1–2: the rank's gradient partition is flattened (a 16-bit copy, 2Ψ/N) and cast to fp32
      (4Ψ/N) — both alive at the cast;
    * stage 3: the fp32 gradient of each optimizer sub-group (4Ψ/N with one sub-group).

    The optimizer itself (fused AdamW, like DeepSpeed's FusedAdam/CPUAdam) updates in place.
    """
    psi, n = float(n_params), float(world_size)
    half = precision != "fp32"
    if stage == 0:
        return 4 * psi if half else 0.0
    if stage in (1, 2):
        return (2 + 4) * psi / n if half else 4 * psi / n
    return 4 * psi / n


def gathered_bytes(
    stage: int,
    n_params: int,
    world_size: int,
    precision: str,
    ds_zero: dict[str, Any],
    param_bytes: float | None = None,
) -> float:
    """Stage 3's full 16-bit parameters gathered during forward and backward (beside the rank's shard,
    which lives in its own buffer): DeepSpeed keeps up to ``stage3_max_live_parameters`` elements (default
    1e9) of them alive, so a
    model smaller than that holds all of them at once. ``param_bytes``: all parameters' bytes when not every
    one is 16-bit (QLoRA's 4-bit weights), the live share of them gathered."""
    if stage != 3:
        return 0.0
    live = min(float(n_params), float(ds_zero.get("stage3_max_live_parameters", 1e9)))
    if param_bytes is not None:
        return float(param_bytes) * live / float(n_params)
    return (4 if precision == "fp32" else 2) * live


def predict_peak(
    *,
    n_params: int,
    largest_layer_params: int,
    stage: int,
    world_size: int,
    precision: str,
    ds_zero: dict[str, Any],
    activation_bytes: int,
    baseline_bytes: int,
    offload_optimizer: bool = False,
    offload_param: bool = False,
    device: str = "cuda",
    trainable_params: int | None = None,
    frozen_bytes: float | None = None,
) -> dict[str, float]:
    """Each part of a rank's predicted peak (bytes) and their ``total`` (``device``: the ranks' device type).

    ``trainable_params`` / ``frozen_bytes`` (default: every parameter trains) as in ``formula_bytes``: a LoRA
    run's gradients, buckets, optimizer states and step temporaries count its adapter only.

    The peak is the larger of two moments: the end of backward (model states + buffers + the saved
    activations + stage 3's gathered parameters) and the optimizer step (model states + buffers + the
    step's temporaries); ``phase`` names the larger, and only its own extra part is non-zero.
    """
    f = formula_bytes(
        n_params,
        world_size,
        stage,
        precision=precision,
        offload_optimizer=offload_optimizer,
        offload_param=offload_param,
        trainable_params=trainable_params,
        frozen_bytes=frozen_bytes,
    )
    trainable = n_params if trainable_params is None else trainable_params
    elem = 4 if precision == "fp32" else 2
    all_bytes = None if frozen_bytes is None else elem * trainable + float(frozen_bytes)
    parts = {
        "baseline": float(baseline_bytes),
        "params": f["params"],
        "grads": f["grads"],
        # on a CPU the "device" and the offload target are the same RAM
        "optimizer": f["optimizer"] + f["cpu"],
        "buffers": float(
            bucket_bytes(
                stage,
                ds_zero,
                largest_layer_params,
                precision,
                n_params=trainable if device == "cpu" else None,
            )
            if stage != 3
            else 0
        ),
    }
    backward = {
        "activations": float(activation_bytes),
        "gathered": max(
            gathered_bytes(stage, n_params, world_size, precision, ds_zero, all_bytes),
            float(bucket_bytes(stage, ds_zero, largest_layer_params, precision) if stage == 3 else 0),
        ),
    }
    step = {"step_temporaries": step_temporaries(stage, trainable, world_size, precision)}
    phase = "backward" if sum(backward.values()) >= sum(step.values()) else "optimizer_step"
    for key, value in {**backward, **step}.items():
        parts[key] = value if key in (backward if phase == "backward" else step) else 0.0
    parts["total"] = sum(parts.values())
    parts["phase"] = phase
    return parts


def measured_waterfall(row: dict[str, Any]) -> dict[str, float]:
    """A rank-rung row's measured parts (bytes); ``unexplained`` = peak − baseline − the parts."""
    b = row["bytes"]
    parts = {
        "baseline": float(row["baseline_bytes"]),
        "params": float(b["params"]),
        "grads": float(b["grads"]),
        "optimizer": float(b["optimizer"]),
        "buffers": float(b.get("buffers", 0)),
        "activations": float(row["activation_bytes"]),
    }
    parts["unexplained"] = float(row["peak_bytes"]) - sum(parts.values())
    return parts


def waterfall_figure(table: list[dict[str, Any]]):
    """Stacked per-rank measured parts per rung, with the predicted peak as a marker."""
    import plotly.graph_objects as go

    x = [f"{t['rung']}<br>rank {t['rank']}" for t in table]
    fig = go.Figure()
    for part in WATERFALL:
        fig.add_bar(x=x, y=[t["waterfall"][part] / 2**20 for t in table], name=part)
    fig.add_scatter(
        x=x,
        y=[t["predicted_peak_bytes"] / 2**20 for t in table],
        mode="markers",
        name="predicted peak",
        marker={"symbol": "line-ew-open", "size": 30, "line": {"width": 3}, "color": "black"},
    )
    fig.update_layout(
        barmode="relative",
        title="Per-rank peak memory, part by part (measured) vs predicted",
        yaxis_title="MiB per rank",
    )
    return fig


SAVING = 0.02  # a stage "saves" memory when every rank's peak growth is ≥ 2 % below stage 0's


def _mean(xs):
    return sum(xs) / len(xs)


def crossover_rows(
    size: str, table: list[dict[str, Any]], peak: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """One row per stage at one model size: measured and predicted per-rank peak (mean over ranks), their
    ratio, the same for the growth above the runtime baseline, and this stage's growth ÷ stage 0's."""
    out = []
    base = peak["stage0"]["growth"]
    for stage in range(4):
        p = peak.get(f"stage{stage}")
        if p is None:
            continue
        ts = [t for t in table if t["rung"] == f"stage{stage}"]
        baseline = _mean([t["baseline_bytes"] for t in ts])
        pred, meas = _mean(p["predicted"]), _mean(p["measured"])
        states = _mean([t["formula_bytes"] for t in ts])
        ratios = [g / b for g, b in zip(p["growth"], base, strict=False)]
        phases = ts[0].get("phase_peak_bytes") or {}
        measured_phase = max((k for k in phases if k != "between_steps"), key=phases.get, default="")
        out.append(
            {
                "size": size,
                "n_params": ts[0]["n_params"],
                "stage": stage,
                "predicted_mib": pred / 2**20,
                "measured_mib": meas / 2**20,
                "pred_over_meas": pred / meas,
                "growth_mib": _mean(p["growth"]) / 2**20,
                "growth_pred_over_meas": (pred - baseline) / (meas - baseline),
                "growth_vs_stage0_min": min(ratios),
                "growth_vs_stage0_max": max(ratios),
                "model_states_mib": states / 2**20,
                "model_states_share": states / meas,
                "predicted_phase": ts[0]["predicted"].get("phase", ""),
                "measured_phase": measured_phase,
            }
        )
    return out


def crossover_sizes(rows: list[dict[str, Any]]) -> dict[str, str | None]:
    """Per stage 1–3: the smallest size from which it saves ≥ 2 % of stage 0's peak growth on every rank,
    at that size and every larger one (sizes ordered by Ψ); None when it never does within the sweep."""
    out: dict[str, str | None] = {}
    for stage in (1, 2, 3):
        rs = sorted((r for r in rows if r["stage"] == stage), key=lambda r: r["n_params"])
        found = None
        for r in reversed(rs):
            if r["growth_vs_stage0_max"] > 1 - SAVING:
                break
            found = r["size"]
        out[f"stage{stage}"] = found
    return out


def crossover_figure(rows: list[dict[str, Any]], crossover: dict[str, str | None], bucket_elements: int):
    """Measured per-rank peak growth per stage against Ψ (solid), predicted (dashed), the crossover sizes
    named."""
    import plotly.graph_objects as go

    fig = go.Figure()
    colors = ("#636efa", "#ef553b", "#00cc96", "#ab63fa")
    for stage in range(4):
        rs = sorted((r for r in rows if r["stage"] == stage), key=lambda r: r["n_params"])
        if not rs:
            continue
        x = [r["n_params"] for r in rs]
        fig.add_scatter(
            x=x,
            y=[r["growth_mib"] for r in rs],
            mode="lines+markers",
            name=f"stage {stage} measured",
            line={"color": colors[stage]},
            text=[r["size"] for r in rs],
        )
        fig.add_scatter(
            x=x,
            y=[r["growth_mib"] * r["growth_pred_over_meas"] for r in rs],
            mode="lines",
            name=f"stage {stage} predicted",
            line={"color": colors[stage], "dash": "dash"},
        )
    for i, (stage, size) in enumerate(crossover.items()):
        hit = next((r for r in rows if r["size"] == size and r["stage"] == int(stage[-1])), None)
        if hit:
            fig.add_vline(
                x=hit["n_params"],
                line_dash="dot",
                line_color=colors[int(stage[-1])],
                annotation_text=f"ZeRO-{stage[-1]} pays from Ψ = {hit['n_params'] / 1e6:.1f} M ({size})",
                annotation_position="top left",
                annotation_y=1 - 0.08 * i,
            )
    named = ", ".join(f"ZeRO-{k[-1]}: {v or 'not within the sweep'}" for k, v in crossover.items())
    fig.update_layout(
        title=f"Per-rank peak growth above the runtime vs parameters (bucket {bucket_elements:,} elements) "
        f"— {named}",
        xaxis={"type": "log", "title": "parameters Ψ"},
        yaxis_title="MiB per rank above the runtime baseline",
    )
    return fig
