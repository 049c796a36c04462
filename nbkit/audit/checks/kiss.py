"""KISS versus an over-parameterised LoRA, trained on the same task with the same budget."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, CheckMetrics
from nbkit.audit.checks.lora_binding import lora_config
from nbkit.audit.sft import (
    build_features,
    concurrent_workers,
    pad_batch,
    pooled_loss,
    run_concurrently,
    target_logits,
)
from nbkit.device import memory_probe
from nbkit.experiment import param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.experiments import AuditContext

SLUG, TITLE = "kiss-lora", "KISS vs over-parameterised LoRA"


@dataclass
class KissConfig(CheckConfig):
    """KISS (q/v rank 8) against an over-parameterised LoRA (q/v/o rank 64), trained with one budget."""

    budget_steps: int = param(30, min=2, max=400, label="steps per variant (budget)")
    lr: float = param(1e-3, min=1e-5, max=1e-1, log=True)
    val_loss_target: float = param(
        0.0, min=0.0, max=10.0, step=0.05, label="val-loss target (0 = ratio × start)"
    )
    target_ratio: float = param(
        0.5, min=0.05, max=0.95, step=0.05, label="target ratio of the untrained val loss"
    )
    batch_size: int = param(8, min=1, max=64)
    # Every seed draws its own validation split of val_size examples; the verdict counts, over `seeds`
    # repeats, which variant reached the target first at an evaluation (every eval_every steps).
    eval_every: int = param(5, min=1, max=100)
    val_size: int = param(16, min=4, max=256, label="validation examples")
    model: str = param("", choices=["", "tiny", "smollm2"], label="model ('' = the audit's)")
    # 4: the fewest repeats for which a unanimous result decides the Wilson 95 % rule on 0.5 (4 of 4: [0.51,
    # 1];
    # 3 of 3: [0.44, 1] straddles it). Each seed is a full comparison, so this is the cost of a verdict.
    seeds: int = param(
        4, min=1, max=20, help="repeats, each with its own split, initialisation and batch order"
    )
    stop_when_decided: bool = param(
        True, help="stop at the first evaluation where a variant reached the target"
    )

    @classmethod
    def smoke(cls):
        return cls(
            budget_steps=12,
            lr=0.01,
            target_ratio=0.9,
            batch_size=4,
            eval_every=4,
            val_size=8,
            model="tiny",
            seeds=2,
        )

    @classmethod
    def audit_values(cls, audit):
        k = audit.kiss
        # Training costs minutes: a YAML config opts in with its kiss section's budget; without one the check
        # is skipped.
        return {
            "budget_steps": k.budget_steps or 0,
            "lr": k.lr,
            "val_loss_target": k.val_loss_target or 0.0,
            "target_ratio": k.val_loss_target_ratio,
        }


@dataclass(frozen=True)
class KissMetrics(CheckMetrics):
    """Trainable shares and peaks of both variants, and which reached the validation target first, per
    seed."""

    kiss_trainable_share_pct: float | None = None
    over_trainable_share_pct: float | None = None
    param_ratio_over_vs_kiss: float | None = None
    peak_ratio_kiss_vs_over: float | None = None
    peak_measured_as: str | None = None
    budget_steps: int | None = None
    kiss_steps_to_target: int | None = None
    over_steps_to_target: int | None = None
    seeds: int | None = None
    seeds_kiss_first: int | None = None
    seeds_over_first: int | None = None
    seeds_tie: int | None = None
    seeds_neither: int | None = None
    per_seed: list | None = None


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


def target_loss(model, ids, labels, mask):
    """``model(..., labels=labels).loss`` (mean cross-entropy over the trained tokens) with the LM head run on
    the trained positions only (:func:`nbkit.audit.sft.target_logits`); returns (loss, trained-token
    count)."""
    import torch

    logits, targets, _ = target_logits(model, ids, labels, mask)
    return torch.nn.functional.cross_entropy(logits.float(), targets), int(targets.numel())


def _val_loss(model, val_batches, device) -> float:
    import torch

    total, count = 0.0, 0
    with torch.inference_mode():
        for ids, labels, mask in val_batches:
            loss, n = target_loss(model, ids.to(device), labels.to(device), mask.to(device))
            total += float(loss) * n
            count += n
    return total / max(count, 1)


class VariantTrainer:
    """One LoRA variant in training: ``advance(n)`` AdamW steps, ``evaluate()`` the validation loss.

    Several trainers advance in lock-step so the comparison can stop as soon as it is decided.
    """

    def __init__(
        self,
        base_model,
        tokenizer,
        variant: LoraVariant,
        train_ex,
        val_ex,
        template,
        *,
        batch_size: int,
        lr: float,
        target: float | None,
        device,
        seed: int,
        live=None,
    ):
        import torch
        from peft import get_peft_model

        torch.manual_seed(seed)
        self.model = get_peft_model(
            copy.deepcopy(base_model), lora_config(variant.r, variant.alpha, variant.targets, 0.0)
        ).to(device)
        trainable, total = self.model.get_nb_trainable_parameters()
        self.opt = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad], lr=lr)
        self.batches = _sft_batches(tokenizer, train_ex, template, batch_size, seed)
        vfeats = [build_features(tokenizer, e, template) for e in val_ex]
        self.val_batches = [
            pad_batch(vfeats[i : i + batch_size], tokenizer.pad_token_id)
            for i in range(0, len(vfeats), batch_size)
        ]
        self.run = VariantRun(variant, trainable, total, None, "")
        self.device, self.target, self.live, self.done = device, target, live, 0

    def _step(self, ids, labels, mask, full_logits: bool = False) -> float:
        self.model.train()
        ids, labels, mask = ids.to(self.device), labels.to(self.device), mask.to(self.device)
        # The step whose peak memory is measured computes every position's logits, as SFT trainers do;
        # the others only the trained positions' (the same loss, less work).
        if full_logits:
            loss = self.model(input_ids=ids, attention_mask=mask, labels=labels).loss
        else:
            loss = target_loss(self.model, ids, labels, mask)[0]
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return float(loss.detach())

    def advance(self, n: int):

        t0 = time.perf_counter()
        for _ in range(n):
            batch = next(self.batches)
            self.done += 1
            if self.done > 1:
                self._step(*batch)
            elif self.device.type == "cuda":  # peak memory of the first optimiser step
                probe = memory_probe(self.device)
                probe.reset_peak()
                self._step(*batch, full_logits=True)
                self.run.peak_bytes, self.run.peak_kind = probe.peak_bytes(), "cuda max_memory_allocated"
            else:
                self.run.peak_bytes = step_peak_bytes(
                    self.model, lambda b=batch: self._step(*b, full_logits=True)
                )
                self.run.peak_kind = (
                    "tensor bytes: params + peak of storages created in one step (grads, "
                    "optimizer state, activations)"
                )
        self.run.seconds += time.perf_counter() - t0

    def evaluate(self, known: float | None = None) -> float:
        """The validation loss now (``known``: already measured, e.g. the untrained loss, which every variant
        shares)."""
        t0 = time.perf_counter()
        v = _val_loss(self.model.eval(), self.val_batches, self.device) if known is None else known
        self.run.steps.append(self.done)
        self.run.val_loss.append(v)
        if self.target is not None and self.run.steps_to_target is None and v <= self.target:
            self.run.steps_to_target = self.done
        self.run.seconds += time.perf_counter() - t0
        return v

    def publish(self) -> None:
        """The newest validation point to the live plot (from the caller's thread: the trainers may run in
        worker threads)."""
        if self.live is not None:
            (self.live.add if self.done == 0 else self.live.extend)(
                self.run.variant.name, [self.run.steps[-1]], [self.run.val_loss[-1]]
            )


def compare_lora_variants(
    base_model,
    tokenizer,
    examples,
    template,
    cfg: KissConfig,
    *,
    device,
    seed: int = 0,
    variants=(KISS, OVER),
    live=None,
    progress=True,
    untrained: float | None = None,
    workers: int | None = None,
) -> Finding:
    """Train the variants in lock-step with the same budget; share, peak memory, steps to the val target.

    ``cfg`` gives the budget, batch size, learning rate, evaluation interval, validation size and target.
    Without a ``val_loss_target`` the target is ``target_ratio`` × the untrained validation loss
    (the same for both variants: they start from the same base weights and B = 0). With
    ``stop_when_decided`` training stops at the first evaluation where a variant has reached the
    target: the others have had exactly as many steps and have not, so which variant gets there
    first — the only thing the comparison decides — cannot change by training on. ``untrained``: the
    base model's validation loss when already measured (the audit context scores the base model once
    for every check that reads it). ``workers``: variants trained side by side in threads (default: on
    CPU as many as :func:`nbkit.audit.sft.concurrent_workers` allows; the figures are those of one after
    the other).
    """
    budget_steps, batch_size, lr, eval_every, val_size = (
        cfg.budget_steps,
        cfg.batch_size,
        cfg.lr,
        cfg.eval_every,
        cfg.val_size,
    )
    target, target_ratio, stop_when_decided = (
        cfg.val_loss_target or None,
        cfg.target_ratio,
        cfg.stop_when_decided,
    )
    import plotly.graph_objects as go

    if budget_steps < 2:
        raise ValueError(f"budget_steps must be ≥ 2, got {budget_steps}")
    val_ex, train_ex = examples[:val_size], examples[val_size:]
    if len(train_ex) < batch_size:
        raise ValueError(
            f"need at least {batch_size} training examples after the {val_size} held out, got {len(train_ex)}"
        )
    from tqdm.auto import tqdm

    # LoRA starts with B = 0 (and dropout 0 here), so every variant's untrained validation loss is the
    # base model's: measured once, it is the step-0 point of each curve and the target's reference.
    if untrained is None:
        vfeats = [build_features(tokenizer, e, template) for e in val_ex]
        vb = [
            pad_batch(vfeats[i : i + batch_size], tokenizer.pad_token_id)
            for i in range(0, len(vfeats), batch_size)
        ]
        untrained = _val_loss(base_model.to(device).eval(), vb, device)
    if target is None:
        target = target_ratio * untrained
    trainers = [
        VariantTrainer(
            base_model,
            tokenizer,
            v,
            train_ex,
            val_ex,
            template,
            batch_size=batch_size,
            lr=lr,
            target=target,
            device=device,
            seed=seed,
            live=live,
        )
        for v in variants
    ]
    for t in trainers:
        t.evaluate(known=untrained)
        t.publish()
    # The variants share nothing but the frozen base weights they read: on CPU they train side by
    # side in threads (each with torch's single intra-op thread, each computing what it computes alone).
    workers = concurrent_workers(len(trainers), device) if workers is None else workers
    bar = tqdm(total=budget_steps, desc="LoRA variants (lock-step)", disable=not progress, leave=False)
    done = 0
    while done < budget_steps:
        n = min(eval_every, budget_steps - done)
        run_concurrently([lambda t=t, n=n: (t.advance(n), t.evaluate()) for t in trainers], workers)
        for t in trainers:
            t.publish()
        done += n
        bar.update(n)
        bar.set_postfix(val=" / ".join(f"{t.run.val_loss[-1]:.3f}" for t in trainers))
        if stop_when_decided and any(t.run.steps_to_target is not None for t in trainers):
            break
    bar.close()
    runs = [t.run for t in trainers]
    kiss, over = runs[0], runs[-1]
    figures: dict[str, Any] = {
        "val_loss_target": target,
        "budget_steps": budget_steps,
        "steps_trained": done,
        "stopped_when_decided": done < budget_steps,
    }
    rows = []
    for run in runs:
        key = "kiss" if run is kiss else "over"
        figures[f"{key}_trainable_share_pct"] = run.share_pct
        figures[f"{key}_trainable_params"] = run.trainable
        figures[f"{key}_steps_to_target"] = run.steps_to_target
        figures[f"{key}_final_val_loss"] = run.val_loss[-1]
        figures[f"{key}_peak_bytes"] = run.peak_bytes
        rows.append(
            {
                "variant": run.variant.name,
                "trainable %": run.share_pct,
                "trainable params": run.trainable,
                "peak bytes": run.peak_bytes,
                "peak measured as": run.peak_kind,
                "steps to target": run.steps_to_target
                if run.steps_to_target is not None
                else f"not within {done}",
                "final val loss": run.val_loss[-1],
                # on CPU the two variants train at the same time (one thread each), so their wall times
                # overlap
                "wall s (own)": run.seconds,
            }
        )
    figures["param_ratio_over_vs_kiss"] = over.trainable / kiss.trainable
    if kiss.peak_bytes and over.peak_bytes:
        figures["peak_ratio_kiss_vs_over"] = kiss.peak_bytes / over.peak_bytes
    figures["peak_measured_as"] = kiss.peak_kind
    reached = [r for r in runs if r.steps_to_target is not None]
    if len(reached) == 2:
        faster = "KISS" if kiss.steps_to_target <= over.steps_to_target else "over-parameterised"
        summary = (
            f"both reach val loss {target:.3f}: KISS in {kiss.steps_to_target} steps, "
            f"over-parameterised in {over.steps_to_target} ({faster} first) with "
            f"{figures['param_ratio_over_vs_kiss']:.1f}× the trainable parameters"
        )
        status = "pass" if kiss.steps_to_target <= over.steps_to_target else "warn"
    elif not reached:
        summary = (
            f"neither variant reached val loss {target:.3f} within {done} steps (raise the budget); "
            f"trainable share {kiss.share_pct:.3f}% vs {over.share_pct:.3f}%"
        )
        status = "warn"
    else:
        only = reached[0]
        summary = (
            f"only {only.variant.name} reached val loss {target:.3f} (step {only.steps_to_target}) within "
            f"{done} steps"
            + (
                f" — stopped there: the comparison is decided (budget {budget_steps})"
                if done < budget_steps
                else ""
            )
        )
        status = "pass" if only is kiss else "warn"
    fig = go.Figure()
    for run in runs:
        fig.add_scatter(
            x=run.steps,
            y=run.val_loss,
            mode="lines+markers",
            name=f"{run.variant.name} ({run.share_pct:.2f}% trainable)",
        )
    fig.add_hline(y=target, line_dash="dot", annotation_text="val-loss target")
    fig.update_layout(
        title="validation loss, KISS vs over-parameterised LoRA",
        xaxis_title="step",
        yaxis_title="validation loss",
    )
    return Finding(
        SLUG,
        TITLE,
        status,
        summary,
        figures,
        rows,
        fix="prefer q/v rank-8 adapters unless a larger adapter reaches the target measurably sooner",
        figure=fig,
    )


def first_to_target(kiss: int | None, over: int | None) -> str:
    """Which variant reached the target first in one run: "kiss", "over", "tie" or "neither"."""
    if kiss is None and over is None:
        return "neither"
    if over is None or (kiss is not None and kiss < over):
        return "kiss"
    if kiss is None or over < kiss:
        return "over"
    return "tie"


def finding(cfg: KissConfig, ctx: AuditContext, live=None) -> Finding:
    """One comparison per seed (``cfg.seeds`` of them, from the audit's seed on): each seed draws its own
    train/validation split of the examples, LoRA initialisation and batch order, so the verdict rests on
    independent repeats; the first seed's run is the one shown (table, curves, the per-variant figures)."""
    import random

    if cfg.budget_steps < 2:
        return Finding(
            SLUG,
            TITLE,
            "skipped",
            "not run: needs kiss.budget_steps ≥ 2 (the training comparison costs minutes)",
        )

    model, tok = ctx.model_and_tokenizer(cfg.model)
    ex, note = ctx.examples(cfg.val_size + cfg.batch_size, SLUG)
    first, outcomes, per_seed = None, [], []
    for i in range(max(1, cfg.seeds)):
        seed = ctx.config.model.seed + i
        order = list(ex)
        random.Random(seed).shuffle(order)  # this seed's validation examples and training pool
        base = ctx.base_example_losses(order[: cfg.val_size], ctx.config.template, cfg.model)
        f = compare_lora_variants(
            model,
            tok,
            order,
            ctx.config.template,
            cfg,
            device=ctx.torch_device,
            seed=seed,
            live=live if i == 0 else None,
            progress=ctx.progress,
            untrained=pooled_loss(base),
        )
        outcome = first_to_target(f.figures["kiss_steps_to_target"], f.figures["over_steps_to_target"])
        outcomes.append(outcome)
        per_seed.append(
            {
                "seed": seed,
                "kiss_steps_to_target": f.figures["kiss_steps_to_target"],
                "over_steps_to_target": f.figures["over_steps_to_target"],
                "steps_trained": f.figures["steps_trained"],
                "first": outcome,
            }
        )
        first = first or f
    first.figures["model"] = cfg.model or ctx.config.model.name
    first.figures["seeds"] = len(outcomes)
    first.figures["per_seed"] = per_seed
    for name in ("kiss", "over", "tie", "neither"):
        first.figures[f"seeds_{name}_first" if name in ("kiss", "over") else f"seeds_{name}"] = (
            outcomes.count(name)
        )
    first.summary += (
        f"; over {len(outcomes)} seeds KISS first in {outcomes.count('kiss')}, the "
        f"over-parameterised LoRA in {outcomes.count('over')}"
    )
    if outcomes.count("tie") or outcomes.count("neither"):
        first.summary += f" ({outcomes.count('tie')} tied, {outcomes.count('neither')} reached by neither)"
    first.table = list(first.table) + [
        {
            "variant": f"seed {r['seed']}",
            "steps to target": f"KISS {r['kiss_steps_to_target']}, over {r['over_steps_to_target']}",
            "first": r["first"],
        }
        for r in per_seed
    ]
    first.summary += note
    return first


CHECK = Check.of(SLUG, TITLE, KissConfig, KissMetrics, finding, number=1)
