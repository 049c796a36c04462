"""Checks 1 and 2: KISS vs over-parameterised LoRA (trained), and LoRA shape/scaling binding."""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Any

from nbkit.audit.findings import Finding


def _linear_modules(model) -> dict[str, Any]:
    import torch

    return {name: m for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}


def match_targets(model, target_modules: list[str]) -> dict[str, list[str]]:
    """Module names each target selects, with PEFT's rule (exact name or a '.target' suffix)."""
    names = list(_linear_modules(model))
    return {t: [n for n in names if n == t or n.endswith("." + t)] for t in target_modules}


def lora_config(r: int, alpha: float, targets: list[str], dropout: float = 0.0, use_rslora: bool = False):
    from peft import LoraConfig

    return LoraConfig(r=r, lora_alpha=alpha, target_modules=list(targets), lora_dropout=dropout, bias="none", use_rslora=use_rslora, task_type="CAUSAL_LM")


# ---------------------------------------------------------------------------------------------
# check 2


def check_lora_binding(model, r: int, alpha: float, target_modules: list[str], use_rslora: bool = False, seed: int = 0) -> Finding:
    """Shapes of A/B against every adapted base weight, the scaling PEFT applies, and the merge identity.

    The base ``model`` is deep-copied (PEFT mutates what it wraps). B is zero at init, so the merge
    check first fills A and B with seeded random values: W_merged must equal W0 + s·B·A.
    """
    import torch
    from peft import get_peft_model

    problems: list[str] = []
    matches = match_targets(model, target_modules)
    unmatched = [t for t, names in matches.items() if not names]
    if unmatched:
        problems.append(f"LoRA target(s) {unmatched} match no Linear module")
    linears = _linear_modules(model)
    over_rank = []
    for names in matches.values():
        for n in names:
            w = linears[n].weight
            cap = min(w.shape)
            if r > cap:
                over_rank.append({"module": n, "shape": tuple(w.shape), "rank_cap": cap})
    if over_rank:
        first = over_rank[0]
        problems.append(
            f"rank {r} exceeds min(d, k) of {len(over_rank)} module(s), e.g. {first['module']} {first['shape']}: "
            f"ΔW = B·A has rank ≤ {first['rank_cap']}, the extra {r - first['rank_cap']} ranks only add parameters"
        )
    usable = [t for t in target_modules if matches[t]]
    if not usable:
        return Finding(2, "LoRA shape binding", "fail", "; ".join(problems), {"targets_unmatched": unmatched}, fix="name modules that exist, e.g. q_proj, k_proj, v_proj, o_proj")
    peft_model = get_peft_model(copy.deepcopy(model), lora_config(r, alpha, usable, 0.0, use_rslora))
    trainable, total = peft_model.get_nb_trainable_parameters()
    expected_scale = alpha / math.sqrt(r) if use_rslora else alpha / r
    gen = torch.Generator().manual_seed(seed)
    rows, by_kind, w0 = [], {}, {}
    seed_assert_holds = 0
    shape_errors = 0
    scale_errors = 0
    for name, module in peft_model.named_modules():
        if not hasattr(module, "lora_A") or "default" not in getattr(module, "lora_A", {}):
            continue
        base_w = module.base_layer.weight
        a = module.lora_A["default"].weight
        b = module.lora_B["default"].weight
        d_out, d_in = base_w.shape
        ok = a.shape == (r, d_in) and b.shape == (d_out, r)
        shape_errors += not ok
        scale = float(module.scaling["default"])
        scale_errors += not math.isclose(scale, expected_scale, rel_tol=1e-9)
        # The seed's two asserts, applied literally to the tensors PEFT stores.
        seed_assert_holds += int(a.shape[1] == b.shape[0] and tuple(base_w.shape) == (a.shape[0], b.shape[1]))
        with torch.no_grad():
            a.copy_(torch.randn(a.shape, generator=gen) * 0.02)
            b.copy_(torch.randn(b.shape, generator=gen) * 0.02)
        w0[name] = (base_w.detach().clone(), a.detach().clone(), b.detach().clone(), scale)
        kind = name.rsplit(".", 1)[-1]
        if kind not in by_kind:
            by_kind[kind] = {
                "module": kind,
                "base W0 (out, in)": str(tuple(base_w.shape)),
                "lora_A (r, in)": str(tuple(a.shape)),
                "lora_B (out, r)": str(tuple(b.shape)),
                "scaling applied": scale,
                "α/r expected": expected_scale,
                "rank cap min(d,k)": min(base_w.shape),
                "count": 0,
                "trainable per module": a.numel() + b.numel(),
            }
        by_kind[kind]["count"] += 1
    merged = peft_model.merge_and_unload()
    merged_modules = dict(merged.named_modules())
    max_err = 0.0
    for name, (w, a, b, s) in w0.items():
        plain = name.replace("base_model.model.", "", 1)
        got = merged_modules[plain].weight.detach()
        max_err = max(max_err, float((got - (w + s * (b @ a))).abs().max()))
    if shape_errors:
        problems.append(f"{shape_errors} module(s) with A/B shapes that do not bind to W0")
    if scale_errors:
        problems.append(f"{scale_errors} module(s) whose scaling differs from α/r")
    if max_err > 1e-5:
        problems.append(f"merged weights differ from W0 + (α/r)·B·A by {max_err:.2e}")
    rows = list(by_kind.values())
    figures = {
        "adapted_modules": len(w0),
        "trainable_params": trainable,
        "total_params": total,
        "trainable_share_pct": 100.0 * trainable / total,
        "scaling_applied": rows[0]["scaling applied"] if rows else None,
        "alpha_over_r": expected_scale,
        "alpha": alpha,
        "r": r,
        "merge_max_abs_err": max_err,
        "seed_asserts_hold_on": f"{seed_assert_holds}/{len(w0)} modules",
        "targets_unmatched": unmatched,
        "modules_over_rank": len(over_rank),
    }
    status = "fail" if problems else "pass"
    summary = "; ".join(problems) if problems else (
        f"{len(w0)} adapted modules bind: A (r,in), B (out,r); scaling α/r = {expected_scale:g} applied; merge identity holds (max err {max_err:.1e})"
    )
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=[r_["module"] for r_ in rows], y=[r_["trainable per module"] * r_["count"] for r_ in rows], text=[r_["base W0 (out, in)"] for r_ in rows]))
    fig.update_layout(title="LoRA trainable parameters by module type (text: base W0 shape)", yaxis_title="parameters")
    return Finding(2, "LoRA shape binding", status, summary, figures, rows, fix="drop unmatched targets; keep r ≤ min(d,k) of every target (GQA k/v are narrower)" if problems else "", figure=fig)


# ---------------------------------------------------------------------------------------------
# check 1


@dataclass
class LoraVariant:
    name: str
    r: int
    alpha: float
    targets: list[str]


KISS = LoraVariant("KISS q/v r8", 8, 16.0, ["q_proj", "v_proj"])
OVER = LoraVariant("over q/v/o r64", 64, 128.0, ["q_proj", "v_proj", "o_proj"])


@dataclass
class VariantRun:
    variant: LoraVariant
    trainable: int
    total: int
    peak_bytes: int | None
    peak_kind: str
    steps: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    steps_to_target: int | None = None
    seconds: float = 0.0

    @property
    def share_pct(self) -> float:
        return 100.0 * self.trainable / self.total


def _sft_batches(tokenizer, examples, template, batch_size: int, seed: int):
    import random

    from nbkit.audit.sft import build_features, pad_batch

    feats = [build_features(tokenizer, e, template) for e in examples]
    rng = random.Random(seed)
    while True:
        order = list(range(len(feats)))
        rng.shuffle(order)
        for i in range(0, len(order) - batch_size + 1, batch_size):
            yield pad_batch([feats[j] for j in order[i : i + batch_size]], tokenizer.pad_token_id)


def step_peak_bytes(model, fn) -> int:
    """Peak tensor bytes of one call of ``fn``: parameter bytes + the peak of storages it creates.

    torch's MemTracker (nbkit.device.track_tensors) refuses modules with frozen parameters (it hooks
    every parameter's gradient), which is exactly a LoRA model; this small dispatch-mode tracker
    counts every new storage an op returns until it is freed, forward and backward alike.
    """
    import weakref

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class LiveBytes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.live = 0
            self.peak = 0
            self.seen: set[int] = set()

        def _free(self, key, n):
            if key in self.seen:
                self.seen.discard(key)
                self.live -= n

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor) and t.device.type != "meta":
                    st = t.untyped_storage()
                    key = st.data_ptr()
                    if key and key not in self.seen:
                        n = st.nbytes()
                        self.seen.add(key)
                        self.live += n
                        self.peak = max(self.peak, self.live)
                        weakref.finalize(st, self._free, key, n)
            return out

    static = sum(p.numel() * p.element_size() for p in model.parameters())
    tracker = LiveBytes()
    with tracker:
        fn()
    return static + tracker.peak


def _val_loss(model, val_batches, device) -> float:
    import torch

    total, count = 0.0, 0
    with torch.no_grad():
        for ids, labels, mask in val_batches:
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device))
            n = int((labels[:, 1:] != -100).sum())
            total += float(out.loss) * n
            count += n
    return total / max(count, 1)


def train_variant(base_model, tokenizer, variant: LoraVariant, train_ex, val_ex, template, *, budget_steps: int, batch_size: int,
                  lr: float, eval_every: int, target: float | None, device, seed: int, live=None, progress=True) -> VariantRun:
    """Train one LoRA variant for ``budget_steps`` AdamW steps; validation loss every ``eval_every``."""
    import torch
    from peft import get_peft_model
    from tqdm.auto import tqdm

    from nbkit.audit.sft import build_features, pad_batch
    from nbkit.device import memory_probe

    torch.manual_seed(seed)
    model = get_peft_model(copy.deepcopy(base_model), lora_config(variant.r, variant.alpha, variant.targets, 0.0)).to(device)
    trainable, total = model.get_nb_trainable_parameters()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    batches = _sft_batches(tokenizer, train_ex, template, batch_size, seed)
    vfeats = [build_features(tokenizer, e, template) for e in val_ex]
    val_batches = [pad_batch(vfeats[i : i + batch_size], tokenizer.pad_token_id) for i in range(0, len(vfeats), batch_size)]
    run = VariantRun(variant, trainable, total, None, "")

    def step(ids, labels, mask):
        model.train()
        loss = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device)).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss.detach())

    t0 = time.perf_counter()
    run.steps.append(0)
    run.val_loss.append(_val_loss(model.eval(), val_batches, device))
    if live is not None:
        live.add(variant.name, [0], [run.val_loss[0]])

    def measured_step(ids, labels, mask):
        # Peak memory of one optimiser step: CUDA's allocator peak, or tensor bytes on CPU.
        if device.type == "cuda":
            probe = memory_probe(device)
            probe.reset_peak()
            step(ids, labels, mask)
            run.peak_bytes, run.peak_kind = probe.peak_bytes(), "cuda max_memory_allocated"
        else:
            run.peak_bytes = step_peak_bytes(model, lambda: step(ids, labels, mask))
            run.peak_kind = "tensor bytes: params + peak of storages created in one step (grads, optimizer state, activations)"

    bar = tqdm(range(1, budget_steps + 1), desc=variant.name, disable=not progress, leave=False)
    for s in bar:
        (measured_step if s == 1 else step)(*next(batches))
        if s % eval_every == 0 or s == budget_steps:
            v = _val_loss(model.eval(), val_batches, device)
            run.steps.append(s)
            run.val_loss.append(v)
            if live is not None:
                live.extend(variant.name, [s], [v])
            bar.set_postfix(val=f"{v:.3f}")
            if target is not None and run.steps_to_target is None and v <= target:
                run.steps_to_target = s
    run.seconds = time.perf_counter() - t0
    return run


def compare_lora_variants(base_model, tokenizer, examples, template, *, budget_steps: int = 40, batch_size: int = 8, lr: float = 1e-3,
                          eval_every: int = 5, val_size: int = 16, target: float | None = None, target_ratio: float = 0.5,
                          device=None, seed: int = 0, variants=(KISS, OVER), live=None, progress=True) -> Finding:
    """Check 1: train each variant with the same budget; share, peak memory, steps to the val target.

    Without an explicit ``target`` the target is ``target_ratio`` × the untrained validation loss
    (the same for both variants: they start from the same base weights and B = 0).
    """
    import plotly.graph_objects as go

    from nbkit.device import pick_device

    device = device or pick_device("auto")
    if budget_steps < 2:
        raise ValueError(f"budget_steps must be ≥ 2, got {budget_steps}")
    val_ex, train_ex = examples[:val_size], examples[val_size:]
    if len(train_ex) < batch_size:
        raise ValueError(f"need at least {batch_size} training examples after the {val_size} held out, got {len(train_ex)}")
    if target is None:
        from nbkit.audit.sft import build_features, pad_batch

        vfeats = [build_features(tokenizer, e, template) for e in val_ex]
        vb = [pad_batch(vfeats[i : i + batch_size], tokenizer.pad_token_id) for i in range(0, len(vfeats), batch_size)]
        target = target_ratio * _val_loss(base_model.to(device).eval(), vb, device)
    runs = [
        train_variant(base_model, tokenizer, v, train_ex, val_ex, template, budget_steps=budget_steps, batch_size=batch_size, lr=lr,
                      eval_every=eval_every, target=target, device=device, seed=seed, live=live, progress=progress)
        for v in variants
    ]
    kiss, over = runs[0], runs[-1]
    figures: dict[str, Any] = {"val_loss_target": target, "budget_steps": budget_steps}
    rows = []
    for run in runs:
        key = "kiss" if run is kiss else "over"
        figures[f"{key}_trainable_share_pct"] = run.share_pct
        figures[f"{key}_trainable_params"] = run.trainable
        figures[f"{key}_steps_to_target"] = run.steps_to_target
        figures[f"{key}_final_val_loss"] = run.val_loss[-1]
        figures[f"{key}_peak_bytes"] = run.peak_bytes
        rows.append({"variant": run.variant.name, "trainable %": run.share_pct, "trainable params": run.trainable,
                     "peak bytes": run.peak_bytes, "peak measured as": run.peak_kind,
                     "steps to target": run.steps_to_target if run.steps_to_target is not None else f"not within {budget_steps}",
                     "final val loss": run.val_loss[-1], "seconds": run.seconds})
    figures["param_ratio_over_vs_kiss"] = over.trainable / kiss.trainable
    if kiss.peak_bytes and over.peak_bytes:
        figures["peak_ratio_kiss_vs_over"] = kiss.peak_bytes / over.peak_bytes
    figures["peak_measured_as"] = kiss.peak_kind
    reached = [r for r in runs if r.steps_to_target is not None]
    if len(reached) == 2:
        faster = "KISS" if kiss.steps_to_target <= over.steps_to_target else "over-parameterised"
        summary = f"both reach val loss {target:.3f}: KISS in {kiss.steps_to_target} steps, over-parameterised in {over.steps_to_target} ({faster} first) with {figures['param_ratio_over_vs_kiss']:.1f}× the trainable parameters"
        status = "pass" if kiss.steps_to_target <= over.steps_to_target else "warn"
    elif not reached:
        summary = f"neither variant reached val loss {target:.3f} within {budget_steps} steps (raise the budget); trainable share {kiss.share_pct:.3f}% vs {over.share_pct:.3f}%"
        status = "warn"
    else:
        only = reached[0]
        summary = f"only {only.variant.name} reached val loss {target:.3f} (step {only.steps_to_target}) within {budget_steps} steps"
        status = "pass" if only is kiss else "warn"
    fig = go.Figure()
    for run in runs:
        fig.add_scatter(x=run.steps, y=run.val_loss, mode="lines+markers", name=f"{run.variant.name} ({run.share_pct:.2f}% trainable)")
    fig.add_hline(y=target, line_dash="dot", annotation_text="val-loss target")
    fig.update_layout(title="Check 1: validation loss, KISS vs over-parameterised LoRA", xaxis_title="step", yaxis_title="validation loss")
    return Finding(1, "KISS vs over-parameterised LoRA", status, summary, figures, rows,
                   fix="prefer q/v rank-8 adapters unless a larger adapter reaches the target measurably sooner", figure=fig)
