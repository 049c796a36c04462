"""Model-state memory per device: the ZeRO paper's formulas beside DeepSpeed's own estimators.

The paper (Rajbhandari et al., 2020, §3.1/Fig. 1) counts mixed-precision Adam as 2Ψ (fp16 params)
+ 2Ψ (fp16 grads) + KΨ optimizer states with K = 12 (fp32 master params, momentum, variance):

* stage 0 (plain DP): (2 + 2 + K)Ψ = 16Ψ
* stage 1, P_os:      2Ψ + 2Ψ + KΨ/N
* stage 2, P_os+g:    2Ψ + (2 + K)Ψ/N
* stage 3, P_os+g+p:  (2 + 2 + K)Ψ/N

fp32 training is counted the way DeepSpeed holds it (as the ladder measures it): 4-byte params and
grads; K = 8 at stage 0 (torch Adam's two moments) and K = 12 at stages 1-3 (DeepSpeed adds an fp32
master partition even for an fp32 model). Offloading moves the optimizer states (and at stage 3
the parameters) to CPU memory.

DeepSpeed's estimators (``estimate_zero2_model_states_mem_needs`` / ``..._zero3_...``) count
differently — 18Ψ/N on the GPU (they add fp32 gradients), the largest layer's 4-byte gather at
stage 3, and a 1.5 ``additional_buffer_factor`` on CPU memory only; their ``*_all_cold`` printouts
label GiB (2**30) figures "GB". Both are shown, side by side, never blended.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbkit.errors import UsageError
from nbkit.model_files import smollm2_135m_config, tiny_llama_config

STAGES = (0, 1, 2, 3)
GIB = 2**30
GB = 10**9


@dataclass(frozen=True)
class ModelSize:
    name: str
    n_params: int
    largest_layer_params: int


def llama2_7b_config(num_hidden_layers: int = 32):
    """Llama-2-7B's architecture (meta-llama/Llama-2-7b-hf config.json values), built locally."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=32,
        num_key_value_heads=32,
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
    )


def model_size(config_or_model: Any, name: str | None = None) -> ModelSize:
    """Parameter count (tied weights once) and the largest single layer, without allocating weights.

    A transformers config is instantiated on the meta device, so a 7B model costs no memory.
    """
    import torch

    if isinstance(config_or_model, torch.nn.Module):
        model = config_or_model
        label = name or type(model).__name__
    else:
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config_or_model)
        label = name or getattr(config_or_model, "model_type", "model")
    unique = {id(p): p.numel() for p in model.parameters()}
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    return ModelSize(label, int(sum(unique.values())), int(largest))


def bytes_per_param(precision: str, stage: int) -> tuple[int, int, int]:
    """(params, grads, optimizer-state) bytes per parameter for ``precision`` at ``stage``."""
    if precision in ("bf16", "fp16", "mixed"):
        return 2, 2, 12
    if precision == "fp32":
        return 4, 4, 8 if stage == 0 else 12
    raise ValueError(f"precision must be 'bf16', 'fp16', 'mixed' or 'fp32', got {precision!r}")


def formula_bytes(
    n_params: int,
    world_size: int,
    stage: int,
    *,
    precision: str = "bf16",
    offload_optimizer: bool = False,
    offload_param: bool = False,
    trainable_params: int | None = None,
    frozen_bytes: float | None = None,
) -> dict[str, float]:
    """Per-device bytes of params / grads / optimizer states by the paper's formula (+ CPU bytes when
    offloaded).

    ``trainable_params`` (default: all ``n_params``) is the count with gradients and optimizer states — a
    LoRA run's adapter; the other parameters are frozen and held as ``frozen_bytes`` in all (default: the
    training precision's bytes each; a QLoRA run's 4-bit weights are fewer). ZeRO partitions gradients and
    optimizer states of the trainable parameters only, and at stage 3 every parameter, frozen ones too.
    """
    if stage not in STAGES:
        raise ValueError(f"stage must be 0, 1, 2 or 3, got {stage!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if offload_param and stage != 3:
        raise ValueError("offload_param needs stage 3 (DeepSpeed rejects it at stages 0-2)")
    if offload_optimizer and stage == 0:
        raise ValueError("offload_optimizer needs stage 1, 2 or 3")
    p, g, k = bytes_per_param(precision, stage)
    n = float(world_size)
    psi = float(n_params if trainable_params is None else trainable_params)
    if not 0 <= psi <= n_params:
        raise ValueError(f"trainable_params must be in [0, n_params={n_params}], got {trainable_params}")
    held = p * psi + (p * (float(n_params) - psi) if frozen_bytes is None else float(frozen_bytes))
    params = held / n if stage == 3 else held
    grads = g * psi / n if stage >= 2 else g * psi
    optim = k * psi / n if stage >= 1 else k * psi
    out = {"params": params, "grads": grads, "optimizer": optim, "cpu": 0.0}
    if offload_optimizer:
        out["cpu"] += optim
        out["optimizer"] = 0.0
    if offload_param:
        out["cpu"] += params
        out["params"] = 0.0
    out["total"] = out["params"] + out["grads"] + out["optimizer"]
    return out


def nodes(world_size: int, gpus_per_node: int | None) -> tuple[int, int]:
    """(GPUs per node, nodes) of a data-parallel world; one node when it has ``gpus_per_node`` GPUs or
    fewer."""
    gpus = min(gpus_per_node or world_size, world_size)
    if world_size % gpus:
        raise ValueError(f"world_size {world_size} is not a multiple of gpus_per_node {gpus}")
    return gpus, world_size // gpus


def deepspeed_estimate(
    size: ModelSize,
    world_size: int,
    stage: int,
    *,
    offload_optimizer: bool = False,
    offload_param: bool = False,
    gpus_per_node: int | None = None,
    additional_buffer_factor: float = 1.5,
) -> dict[str, Any]:
    """DeepSpeed's own estimate (device and CPU bytes) — it has estimators for stages 2 and 3 only.

    Its CPU figure is per node (``gpus_per_node`` ranks share one host); the device figure per GPU.
    """
    gpus, num_nodes = nodes(world_size, gpus_per_node)
    if stage == 2:
        from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

        cpu, dev = estimate_zero2_model_states_mem_needs(
            size.n_params,
            num_gpus_per_node=gpus,
            num_nodes=num_nodes,
            cpu_offload=offload_optimizer,
            additional_buffer_factor=additional_buffer_factor,
        )
        return {"device": float(dev), "cpu": float(cpu), "note": "estimate_zero2_model_states_mem_needs"}
    if stage == 3:
        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs

        cpu, dev, _largest = estimate_zero3_model_states_mem_needs(
            size.n_params,
            size.largest_layer_params,
            num_gpus_per_node=gpus,
            num_nodes=num_nodes,
            cpu_offload=offload_optimizer,
            cpu_offload_params=offload_param,
            zero_init=True,
            additional_buffer_factor=additional_buffer_factor,
        )
        return {"device": float(dev), "cpu": float(cpu), "note": "estimate_zero3_model_states_mem_needs"}
    return {"device": None, "cpu": None, "note": f"DeepSpeed has no estimator for stage {stage}"}


def memory_table(
    size: ModelSize,
    world_size: int,
    *,
    precision: str = "bf16",
    offload_optimizer: bool = False,
    offload_param: bool = False,
    stages=STAGES,
    gpus_per_node: int | None = None,
):
    """One row per stage: formula bytes (params/grads/optimizer/cpu) and DeepSpeed's estimate, in GiB.

    Formula CPU bytes are per GPU; DeepSpeed's CPU estimate is per node (``gpus_per_node`` GPUs)."""
    import pandas as pd

    rows = []
    for stage in stages:
        off_opt = offload_optimizer and stage >= 1
        off_par = offload_param and stage == 3
        f = formula_bytes(
            size.n_params,
            world_size,
            stage,
            precision=precision,
            offload_optimizer=off_opt,
            offload_param=off_par,
        )
        ds = deepspeed_estimate(
            size,
            world_size,
            stage,
            offload_optimizer=off_opt,
            offload_param=off_par,
            gpus_per_node=gpus_per_node,
        )
        rows.append(
            {
                "stage": stage,
                "world_size": world_size,
                "offload_optimizer": off_opt,
                "offload_param": off_par,
                "params_gib": f["params"] / GIB,
                "grads_gib": f["grads"] / GIB,
                "optimizer_gib": f["optimizer"] / GIB,
                "formula_device_gib": f["total"] / GIB,
                "formula_cpu_gib": f["cpu"] / GIB,
                "deepspeed_device_gib": None if ds["device"] is None else ds["device"] / GIB,
                "deepspeed_cpu_gib_per_node": None if ds["cpu"] is None else ds["cpu"] / GIB,
                "deepspeed_source": ds["note"],
            }
        )
    return pd.DataFrame(rows)


def memory_figure(table, title: str = ""):
    """Stacked bars (params, grads, optimizer states per device) with DeepSpeed's estimate as markers."""
    import plotly.graph_objects as go

    x = [f"stage {s}" for s in table["stage"]]
    fig = go.Figure()
    for col, name in (
        ("params_gib", "params"),
        ("grads_gib", "grads"),
        ("optimizer_gib", "optimizer states"),
    ):
        # Plain lists: nbkit.live copies trace data with ``list(t.y or ())``, which numpy arrays refuse.
        fig.add_bar(x=x, y=table[col].tolist(), name=f"formula: {name}")
    if table["formula_cpu_gib"].sum() > 0:
        fig.add_bar(
            x=x,
            y=table["formula_cpu_gib"].tolist(),
            name="formula: offloaded to CPU",
            marker_pattern_shape="/",
            opacity=0.5,
        )
    ds = [None if v != v else v for v in table["deepspeed_device_gib"].tolist()]  # NaN → gap
    fig.add_scatter(
        x=x,
        y=ds,
        mode="markers",
        marker={"symbol": "diamond", "size": 12, "color": "black"},
        name="DeepSpeed estimate (device)",
    )
    fig.update_layout(barmode="stack", title=title, yaxis_title="GiB per device", xaxis_title="ZeRO stage")
    return fig


PRESETS = {"Llama-2-7B": llama2_7b_config, "SmolLM2-135M": smollm2_135m_config}


def config_from_path(path_or_id: str, *, where: str = "model"):
    """A transformers config from a preset name (``PRESETS``), a local HF model directory, a bare
    ``config.json`` or a hub id.

    Only the architecture is read (no weights). A hub id needs the network; offline it fails with
    one line naming it.
    """
    if path_or_id in PRESETS:
        return PRESETS[path_or_id]()
    path = Path(path_or_id).expanduser()
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise UsageError(
                f"{where}: {path.parent} has no config.json; expected a Hugging Face model directory"
            )
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UsageError(f"{where}: {path}: not a JSON config ({exc})") from None
        if not isinstance(data, dict) or "model_type" not in data:
            raise UsageError(f"{where}: {path}: no 'model_type' key; expected a transformers config.json")
        from transformers import AutoConfig

        try:
            return AutoConfig.for_model(**data)
        except (ValueError, KeyError) as exc:
            raise UsageError(f"{where}: {path}: {exc}") from None
    if (
        "/" in str(path_or_id)
        and not str(path_or_id).startswith((".", "/", "~"))
        and str(path_or_id).count("/") == 1
    ):
        from transformers import AutoConfig

        try:
            return AutoConfig.from_pretrained(str(path_or_id))
        except OSError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(
                f"{where}: hub id {path_or_id!r} could not be fetched (offline?): {first}"
            ) from None
    raise UsageError(
        f"{where}: {path_or_id}: no such file or directory (expected a HF model directory, a config.json "
        f"or a hub id)"
    )


def model_config(model: dict[str, Any]):
    """The transformers config a ladder spec's ``model`` entry describes: the tiny Llama at its size, or
    a user's architecture already scaled (``{"kind": "config", "config": {...}}``)."""
    if model.get("kind") == "config":
        from transformers import AutoConfig

        return AutoConfig.for_model(**model["config"])
    return tiny_llama_config(**{k: v for k, v in model.items() if k != "kind"})
