"""Dtype transitions under bf16 autocast — module outputs, the KV cache, and three ops.

Forward hooks record the dtype of every module's first tensor input and output during one
autocast forward with ``use_cache=True``; a module whose input is the low-precision dtype and
whose output is float32 is an upcast nobody declared. The KV cache tensors are read after the
forward. The field notes' per-op claims (``baddbmm``, ``index_add_``, ``index_copy_``) are run on this
torch build, on this device, with and without autocast.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, Checked, CheckMetrics
from nbkit.experiment import param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "dtypes", "dtype transitions"


@dataclass
class DtypesConfig(CheckConfig):
    autocast_dtype: str = param("bfloat16", choices=["bfloat16", "float16", "none"])

    @classmethod
    def audit_values(cls, audit):
        return {"autocast_dtype": audit.train.autocast_dtype}


@dataclass(frozen=True)
class OpOutcome:
    """One op call on this torch build and device: the dtype it returned, or the error it raised (the
    other is "")."""

    case: str
    dtype: str
    error: str

    @property
    def shown(self) -> str:
        """The dtype, or the error when it raised."""
        return self.dtype or self.error


@dataclass(frozen=True, kw_only=True)
class DtypesMetrics(CheckMetrics):
    """What the field notes' ops do under low precision on this device (each call's result dtype or
    error: ``index_add_`` with a source of the cache's own dtype — the notes' table row — and with a
    float32 source, plain and under autocast — the notes' prose), the KV cache's dtypes after an
    autocast forward, and the module outputs upcast without a declaration."""

    device: str
    autocast_dtype: str
    baddbmm_fp32_inputs_under_autocast: OpOutcome
    index_add_low_source: OpOutcome
    index_add_fp32_source: OpOutcome
    index_add_fp32_source_under_autocast: OpOutcome
    index_copy_fp32_source: OpOutcome
    kv_cache_keys_dtype: str
    kv_cache_values_dtype: str
    logits_dtype: str
    silent_upcasts: int


def _first_tensor(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, (list, tuple)):
        for o in obj:
            t = _first_tensor(o)
            if t is not None:
                return t
    if isinstance(obj, dict):
        for o in obj.values():
            t = _first_tensor(o)
            if t is not None:
                return t
    if hasattr(obj, "logits"):
        return obj.logits
    return None


def kv_cache_dtypes(cache) -> dict[str, list[str]]:
    """dtypes of the key and value tensors a transformers cache holds (any cache layout)."""
    import torch

    out: dict[str, list[str]] = {"keys": [], "values": []}
    layers = getattr(cache, "layers", None)
    if layers is not None:
        for layer in layers:
            for name in ("keys", "values"):
                t = getattr(layer, name, None)
                if isinstance(t, torch.Tensor):
                    out[name].append(str(t.dtype))
        return out
    for item in cache:
        for name, t in zip(("keys", "values"), item, strict=False):
            if isinstance(t, torch.Tensor):
                out[name].append(str(t.dtype))
    return out


def trace_module_dtypes(model, input_ids, device, autocast_dtype) -> dict[str, Any]:
    import torch

    records = []
    hooks = []

    def make_hook(name, module):
        def hook(mod, args, kwargs, output):
            ti = _first_tensor(list(args) + list(kwargs.values()))
            to = _first_tensor(output)
            records.append(
                (
                    name,
                    type(mod).__name__,
                    str(ti.dtype) if ti is not None else None,
                    str(to.dtype) if to is not None else None,
                )
            )

        return hook

    for name, module in model.named_modules():
        if name:
            hooks.append(module.register_forward_hook(make_hook(name, module), with_kwargs=True))
    try:
        with torch.no_grad(), torch.autocast(device_type=device.type, dtype=autocast_dtype):
            out = model(input_ids=input_ids.to(device), use_cache=True)
    finally:
        for h in hooks:
            h.remove()
    return {
        "records": records,
        "logits": str(out.logits.dtype),
        "kv": kv_cache_dtypes(getattr(out, "cache", None) or out.past_key_values),
    }


def op_dtype_probes(device, low) -> list[dict[str, Any]]:
    """The field notes' ops, each in the situations the field notes describe, on this torch and device."""
    import torch

    rows = []

    def probe(op, case, fn, key=""):
        try:
            res = fn()
            rows.append({"op": op, "case": case, "result dtype": str(res.dtype), "error": "", "key": key})
        except Exception as exc:
            rows.append(
                {
                    "op": op,
                    "case": case,
                    "result dtype": "",
                    "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}",
                    "key": key,
                }
            )

    d = device
    b32 = lambda *s: torch.randn(*s, device=d)  # noqa: E731
    probe(
        "baddbmm",
        f"{low} inputs, no autocast",
        lambda: torch.baddbmm(b32(2, 4, 4).to(low), b32(2, 4, 8).to(low), b32(2, 8, 4).to(low)),
    )

    def bad_auto():
        with torch.autocast(device_type=d.type, dtype=low):
            return torch.baddbmm(b32(2, 4, 4), b32(2, 4, 8), b32(2, 8, 4))

    probe("baddbmm", f"float32 inputs under {low} autocast", bad_auto, "baddbmm_fp32_inputs_under_autocast")
    idx = torch.tensor([0, 2], device=d)
    probe(
        "index_add_",
        f"{low} cache, {low} source",
        lambda: torch.zeros(4, 3, device=d, dtype=low).index_add_(0, idx, b32(2, 3).to(low)),
        "index_add_low_source",
    )
    probe(
        "index_add_",
        f"{low} cache, float32 source",
        lambda: torch.zeros(4, 3, device=d, dtype=low).index_add_(0, idx, b32(2, 3)),
        "index_add_fp32_source",
    )

    def add_auto():
        with torch.autocast(device_type=d.type, dtype=low):
            return torch.zeros(4, 3, device=d, dtype=low).index_add_(0, idx, b32(2, 3))

    probe(
        "index_add_",
        f"{low} cache, float32 source, under {low} autocast",
        add_auto,
        "index_add_fp32_source_under_autocast",
    )
    probe(
        "index_copy_",
        f"{low} cache, {low} source",
        lambda: torch.zeros(4, 3, device=d, dtype=low).index_copy_(0, idx, b32(2, 3).to(low)),
    )
    probe(
        "index_copy_",
        f"{low} cache, float32 source",
        lambda: torch.zeros(4, 3, device=d, dtype=low).index_copy_(0, idx, b32(2, 3)),
        "index_copy_fp32_source",
    )
    probe(
        "index_copy_",
        f"{low} cache, float32 source .to(cache.dtype) (the field notes' fix)",
        lambda: torch.zeros(4, 3, device=d, dtype=low).index_copy_(0, idx, b32(2, 3).to(low)),
    )
    return rows


def check_dtype_transitions(
    model, tokenizer, *, device, autocast_dtype: str = "bfloat16", seq_len: int = 16
) -> Checked[DtypesMetrics]:
    import plotly.graph_objects as go
    import torch

    if autocast_dtype == "none":
        return Checked(
            Finding(SLUG, TITLE, "skipped", "autocast disabled in the config (train.autocast_dtype: none)")
        )
    low = getattr(torch, autocast_dtype)
    if device.type == "cpu" and low == torch.float16:
        low = torch.bfloat16  # CPU autocast supports bf16 (and fp16 only on newer builds); say so below
    text = "The quick brown fox jumps over the lazy dog. " * 8
    ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"][:seq_len]])
    model = model.eval()
    tr = trace_module_dtypes(model, ids, device, low)
    lowname = str(low)
    upcasts = Counter()
    example = {}
    by_class = defaultdict(Counter)
    for name, cls, din, dout in tr["records"]:
        by_class[cls][f"{din}→{dout}"] += 1
        if din == lowname and dout == "torch.float32":
            upcasts[cls] += 1
            example.setdefault(cls, name)
    kv_keys = ", ".join(sorted(set(tr["kv"]["keys"])))
    kv_values = ", ".join(sorted(set(tr["kv"]["values"])))
    ops = op_dtype_probes(device, low)
    table = [
        {"module class": cls, "input→output dtype": k, "modules": v}
        for cls, c in sorted(by_class.items())
        for k, v in c.items()
    ]
    probed = {
        row["key"]: OpOutcome(row["case"], row["result dtype"], row["error"]) for row in ops if row["key"]
    }
    metrics = DtypesMetrics(
        device=str(device),
        autocast_dtype=lowname,
        baddbmm_fp32_inputs_under_autocast=probed["baddbmm_fp32_inputs_under_autocast"],
        index_add_low_source=probed["index_add_low_source"],
        index_add_fp32_source=probed["index_add_fp32_source"],
        index_add_fp32_source_under_autocast=probed["index_add_fp32_source_under_autocast"],
        index_copy_fp32_source=probed["index_copy_fp32_source"],
        kv_cache_keys_dtype=kv_keys,
        kv_cache_values_dtype=kv_values,
        logits_dtype=tr["logits"],
        silent_upcasts=sum(upcasts.values()),
    )
    figures: dict[str, Any] = {
        "autocast_dtype": lowname,
        "modules_traced": len(tr["records"]),
        "silent_upcasts": dict(upcasts),
        "kv_cache_keys_dtype": kv_keys,
        "kv_cache_values_dtype": kv_values,
        "logits_dtype": tr["logits"],
    }
    for row in ops:
        figures[f"{row['op']} [{row['case']}]"] = row["result dtype"] or row["error"]
    problems = []
    if upcasts:
        problems.append(
            "bf16→float32 upcasts in "
            + ", ".join(f"{cls}×{n} (e.g. {example[cls]})" for cls, n in upcasts.items())
        )
    for part, got in (("keys", kv_keys), ("values", kv_values)):
        if got != lowname:
            problems.append(
                f"KV cache {part} are {got} under {lowname} autocast (float32 doubles their memory; the "
                "cache update switches dtype)"
            )
    status = "warn" if problems else "pass"
    summary = "; ".join(problems) if problems else f"no silent upcasts; KV cache stays {lowname}"
    classes = sorted(by_class)
    fig = go.Figure()
    for trans in sorted({k for c in by_class.values() for k in c}):
        fig.add_bar(x=classes, y=[by_class[c].get(trans, 0) for c in classes], name=trans)
    fig.update_layout(
        title=f"module input→output dtypes under {lowname} autocast", barmode="stack", yaxis_title="modules"
    )
    finding = Finding(
        SLUG,
        TITLE,
        status,
        summary,
        figures,
        table
        + [
            {
                "module class": f"op {r['op']}",
                "input→output dtype": r["case"],
                "modules": r["result dtype"] or r["error"],
            }
            for r in ops
        ],
        fix="cast RMSNorm weights / rotary tables to the compute dtype, or keep the cache in float32 on "
        "purpose and budget its memory",
        figure=fig,
    )
    return Checked(finding, metrics)


def measure(cfg: DtypesConfig, ctx: AuditContext, live=None) -> Checked[DtypesMetrics]:
    """Module and KV-cache dtypes of one autocast forward, and the field notes' op probes."""
    model, tok = ctx.model_and_tokenizer()
    return check_dtype_transitions(model, tok, device=ctx.torch_device, autocast_dtype=cfg.autocast_dtype)


CHECK = Check.of(SLUG, TITLE, DtypesConfig, DtypesMetrics, measure, number=6)
