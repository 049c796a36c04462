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

Predicted (``predict_peak``): baseline + the ZeRO paper's model states for the stage + buckets
(``reduce_bucket_size`` elements at stages 1–2; the largest layer gathered at stage 3) + the
activations of one micro-batch, counted by running the model's forward **on the meta device** (no
memory, from the config alone). Where it misses: gradients at stages 0–1 are allocated while the
activations are being freed (so summing both over-predicts), the CPU allocator keeps freed
memory (so RSS can stay above what is live), and temporaries of initialisation and of the optimizer
step are not modelled — measured with ``bench/zero_peak.py``: within 3 % at 0.6 M parameters
(the baseline dominates), 17–21 % under at 19 M on CPU.
"""

from __future__ import annotations

from typing import Any

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


def predict_activation_bytes(model_cfg: dict[str, Any], micro_batch: int, seq_len: int, precision: str) -> int:
    """Bytes saved for backward by one micro-batch of the ladder's Llama, from its config alone (meta device)."""
    import torch

    from nbkit.model_files import tiny_llama_config

    key = (tuple(sorted(model_cfg.items())), micro_batch, seq_len, precision)
    if key not in _ACT_CACHE:
        from transformers import LlamaForCausalLM

        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
        with torch.device("meta"):
            model = LlamaForCausalLM(tiny_llama_config(**model_cfg)).to(dtype)
            ids = torch.zeros((micro_batch, seq_len), dtype=torch.long)
        with SavedActivations(model) as acts:
            model(input_ids=ids, labels=ids)
        _ACT_CACHE[key] = acts.bytes
    return _ACT_CACHE[key]


def bucket_bytes(stage: int, ds_zero: dict[str, Any], largest_layer_params: int, precision: str) -> int:
    """Communication buffers a rank holds: the gradient reduce bucket (stages 1–2; DeepSpeed's default
    5e8 elements) and, at stage 3, the largest layer's parameters gathered for its forward."""
    elem = 4 if precision == "fp32" else 2
    if stage in (1, 2):
        return int(ds_zero.get("reduce_bucket_size", 5e8)) * elem
    if stage == 3:
        return int(largest_layer_params) * elem
    return 0


def predict_peak(*, n_params: int, largest_layer_params: int, stage: int, world_size: int, precision: str,
                 ds_zero: dict[str, Any], activation_bytes: int, baseline_bytes: int,
                 offload_optimizer: bool = False, offload_param: bool = False) -> dict[str, float]:
    """Each part of a rank's predicted peak (bytes) and their ``total``."""
    from nbkit.zero.memory import formula_bytes

    f = formula_bytes(n_params, world_size, stage, precision=precision, offload_optimizer=offload_optimizer,
                      offload_param=offload_param)
    parts = {"baseline": float(baseline_bytes), "params": f["params"], "grads": f["grads"],
             # on a CPU the "device" and the offload target are the same RAM
             "optimizer": f["optimizer"] + f["cpu"],
             "buffers": float(bucket_bytes(stage, ds_zero, largest_layer_params, precision)),
             "activations": float(activation_bytes)}
    parts["total"] = sum(parts.values())
    return parts


def measured_waterfall(row: dict[str, Any]) -> dict[str, float]:
    """A rank-rung row's measured parts (bytes); ``unexplained`` = peak − baseline − the parts."""
    b = row["bytes"]
    parts = {"baseline": float(row["baseline_bytes"]), "params": float(b["params"]), "grads": float(b["grads"]),
             "optimizer": float(b["optimizer"]), "buffers": float(b.get("buffers", 0)), "activations": float(row["activation_bytes"])}
    parts["unexplained"] = float(row["peak_bytes"]) - sum(parts.values())
    return parts


def waterfall_figure(table: list[dict[str, Any]]):
    """Stacked per-rank measured parts per rung, with the predicted peak as a marker."""
    import plotly.graph_objects as go

    x = [f"{t['rung']}<br>rank {t['rank']}" for t in table]
    fig = go.Figure()
    for part in WATERFALL:
        fig.add_bar(x=x, y=[t["waterfall"][part] / 2**20 for t in table], name=part)
    fig.add_scatter(x=x, y=[t["predicted_peak_bytes"] / 2**20 for t in table], mode="markers", name="predicted peak",
                    marker={"symbol": "line-ew-open", "size": 30, "line": {"width": 3}, "color": "black"})
    fig.update_layout(barmode="relative", title="Per-rank peak memory, part by part (measured) vs predicted",
                      yaxis_title="MiB per rank")
    return fig
