"""KISS versus an over-parameterised LoRA, trained on the same task with the same budget.

Each seed draws its own validation split, LoRA initialisation and batch order, and trains both variants
(each at its own learning rate) until both reach the validation-loss target: the unit the claim rests on
is the seed's steps-to-target ratio, KISS over the over-parameterised LoRA. The validation loss is
evaluated every ``eval_every`` steps; at the first evaluation at or below the target, the steps since the
one before are replayed one at a time from a snapshot (the same batches, the same optimiser state: the
same losses an evaluation after every step would see), and the first of them at or below the target is
the variant's steps to target — located to the step for a few extra steps, not an evaluation after
every step. The trainable shares are also counted on the field notes' model (DeepSeek-LLM-7B's
architecture, built on the meta device: no weights, no memory).
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, Checked, CheckMetrics
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
from nbkit.experiment import Replicates, param
from nbkit.findings import Finding
from nbkit.model_files import meta_model

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "kiss-lora", "KISS vs over-parameterised LoRA"
# The model the field notes fine-tuned: "DeepSeek" on an A100 (28–42 GB), i.e. the 7B base model.
NOTES_MODEL = "DeepSeek-LLM-7B"


def notes_model_config():
    """DeepSeek-LLM-7B-base's architecture (deepseek-ai/deepseek-llm-7b-base config.json values), built
    locally: what the field notes' trainable shares are counts of."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=102400,
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=30,
        num_attention_heads=32,
        num_key_value_heads=32,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
    )


@dataclass
class KissConfig(CheckConfig):
    """KISS (q/v rank 8) against an over-parameterised LoRA (q/v/o rank 64), trained with one budget."""

    budget_steps: int = param(60, min=2, max=400, label="steps per variant (budget)")
    # Each variant's rate: the fewest steps to the target on tuning seeds the notebook never judges, one
    # grid for both (1e-3, 3e-3, 1e-2; bench/audit_kiss_steps.py --tune, bench/RESULTS.md).
    kiss_lr: float = param(3e-3, min=1e-5, max=1e-1, log=True, label="KISS learning rate")
    over_lr: float = param(1e-3, min=1e-5, max=1e-1, log=True, label="over-parameterised learning rate")
    val_loss_target: float = param(
        0.0, min=0.0, max=10.0, step=0.05, label="val-loss target (0 = ratio × start)"
    )
    target_ratio: float = param(
        0.5, min=0.05, max=0.95, step=0.05, label="target ratio of the untrained val loss"
    )
    batch_size: int = param(8, min=1, max=64)
    # Evaluations every eval_every steps; a crossing is located to the step by replaying from a snapshot.
    # The target is a few steps away (bench/RESULTS.md): an evaluation after every step costs less than
    # a replay, and sees every step.
    eval_every: int = param(1, min=1, max=100)
    val_size: int = param(16, min=4, max=256, label="validation examples")
    model: str = param("", choices=["", "tiny", "smollm2"], label="model ('' = the audit's)")
    seeds: int = param(
        4, min=1, max=40, help="repeats, each with its own split, initialisation and batch order"
    )
    stop_when_reached: bool = param(True, help="stop once both variants reached the target")

    @classmethod
    def smoke(cls):
        return cls(
            budget_steps=12,
            kiss_lr=0.01,
            over_lr=0.01,
            target_ratio=0.9,
            batch_size=4,
            val_size=8,
            model="tiny",
            seeds=2,
        )

    @classmethod
    def audit_values(cls, audit):
        k = audit.kiss
        # A YAML config opts in to the training with its kiss section's budget (nbkit audit skips the check
        # otherwise); the section's learning rate is each variant's.
        return {
            "budget_steps": k.budget_steps or 0,
            "kiss_lr": k.lr,
            "over_lr": k.lr,
            "val_loss_target": k.val_loss_target or 0.0,
            "target_ratio": k.val_loss_target_ratio,
        }


@dataclass(frozen=True)
class KissRun:
    """One seed's comparison: the steps each variant took to reach the target (None: not within the
    steps trained) and how many steps were trained."""

    seed: int
    kiss_steps: int | None
    over_steps: int | None
    steps_trained: int

    def log_step_ratio(self, budget: int) -> float:
        """log(KISS steps / over-parameterised steps); a variant that never got there counts as the
        budget (a lower bound of its steps, so the ratio leans towards no difference); NaN when neither
        got there."""
        if self.kiss_steps is None and self.over_steps is None:
            return float("nan")
        return math.log((self.kiss_steps or budget) / (self.over_steps or budget))


@dataclass(frozen=True)
class LoraCounts:
    """PEFT's exact parameter counts of both variants on one architecture (built on the meta device):
    trainable and total (base + adapters) per variant, and the shape the counts follow from."""

    kiss_trainable: int
    kiss_total: int
    over_trainable: int
    over_total: int
    hidden_size: int
    kv_dim: int
    layers: int

    @property
    def kiss_share_pct(self) -> float:
        return 100.0 * self.kiss_trainable / self.kiss_total

    @property
    def over_share_pct(self) -> float:
        return 100.0 * self.over_trainable / self.over_total

    @property
    def param_ratio(self) -> float:
        return self.over_trainable / self.kiss_trainable


@dataclass(frozen=True, kw_only=True)
class KissMetrics(CheckMetrics):
    """Trainable shares of both variants on the trained model and on the field notes' model (with PEFT's
    exact counts there, ``notes_counts``), the over/KISS trainable-parameter ratio any Llama-style
    attention allows (``llama_ratio_range``, :func:`llama_param_ratio_range`), the peak memory ratio of
    one optimiser step, and each seed's steps to the validation target."""

    kiss_trainable_share_pct: float
    over_trainable_share_pct: float
    param_ratio_over_vs_kiss: float
    notes_model: str
    notes_kiss_share_pct: float
    notes_over_share_pct: float
    notes_param_ratio: float
    notes_counts: LoraCounts
    llama_ratio_range: tuple[float, float]
    peak_ratio_kiss_vs_over: float
    peak_measured_as: str
    budget_steps: int
    runs: tuple[KissRun, ...]

    @property
    def log_step_ratios(self) -> list[float]:
        """Each seed's log steps ratio (KISS / over), the seeds neither variant finished left out."""
        return [x for x in (r.log_step_ratio(self.budget_steps) for r in self.runs) if not math.isnan(x)]


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


def frozen_twin(model):
    """A copy of ``model`` whose parameters are new ``Parameter`` objects over the SAME storage (buffers and
    modules copied as ``copy.deepcopy`` copies them, tied weights stay tied).

    Why not ``copy.deepcopy``: a LoRA variant never writes its base weights (PEFT freezes them and only the
    adapters are trained), so copying them for every variant of every seed only cost memory and time (4
    bytes per base parameter each). The new ``Parameter`` objects keep PEFT's freezing off the caller's
    model (``requires_grad`` is per object); the values are the caller's, so every figure is the one a deep
    copy gives."""
    import torch

    memo = {id(p): torch.nn.Parameter(p.detach(), requires_grad=p.requires_grad) for p in model.parameters()}
    return copy.deepcopy(model, memo)


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

    Several trainers advance in lock-step so the comparison can stop as soon as it is decided. The
    trainable state before each ``advance`` and the batches it trained on are kept: when an evaluation
    finds the target reached, the steps since the last one are replayed one at a time from that state
    (the same batches, the same optimiser state: the same weights) to find the step that reached it.
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
        measure_peak: bool = True,
    ):
        import torch
        from peft import get_peft_model

        torch.manual_seed(seed)
        self.model = get_peft_model(
            frozen_twin(base_model), lora_config(variant.r, variant.alpha, variant.targets, 0.0)
        ).to(device)
        trainable, total = self.model.get_nb_trainable_parameters()
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.opt = torch.optim.AdamW(self.trainable, lr=lr)
        self.batches = _sft_batches(tokenizer, train_ex, template, batch_size, seed)
        vfeats = [build_features(tokenizer, e, template) for e in val_ex]
        self.val_batches = [
            pad_batch(vfeats[i : i + batch_size], tokenizer.pad_token_id)
            for i in range(0, len(vfeats), batch_size)
        ]
        self.run = VariantRun(variant, trainable, total, None, "" if measure_peak else "not measured")
        self.device, self.target, self.live, self.done = device, target, live, 0
        self.measure_peak = measure_peak
        self._snapshot: tuple | None = None
        self._since: list = []

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

    def _train_on(self, batch) -> None:
        """One step on ``batch``; a run's first step computes every position's logits and, with
        ``measure_peak``, is the one whose peak memory is measured."""
        self.done += 1
        if self.done > 1:
            self._step(*batch)
        elif not self.measure_peak or self.run.peak_bytes is not None:  # unmeasured, or a replay of it
            self._step(*batch, full_logits=True)
        elif self.device.type == "cuda":
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

    def _state(self) -> tuple:
        return (
            self.done,
            [p.detach().clone() for p in self.trainable],
            copy.deepcopy(self.opt.state_dict()),
        )

    def _restore(self, state: tuple) -> None:
        import torch

        done, params, opt_state = state
        with torch.no_grad():
            for p, saved in zip(self.trainable, params, strict=True):
                p.copy_(saved)
        self.opt.load_state_dict(copy.deepcopy(opt_state))
        self.done = done

    def advance(self, n: int):
        t0 = time.perf_counter()
        # the state before the steps, for a replay; one step needs none (an evaluation after it sees it)
        self._snapshot = self._state() if n > 1 else None
        self._since = [next(self.batches) for _ in range(n)]
        for batch in self._since:
            self._train_on(batch)
        self.run.seconds += time.perf_counter() - t0

    def _locate(self) -> int:
        """Replay the steps since the last evaluation one at a time from the snapshot before them; the
        first whose validation loss reaches the target (the last one, which did, if none before)."""
        assert self._snapshot is not None
        end, found, points = self.done, None, []
        self._restore(self._snapshot)
        for batch in self._since:
            self._train_on(batch)
            if found is None and self.done < end:
                v = _val_loss(self.model.eval(), self.val_batches, self.device)
                points.append((self.done, v))
                if self.target is not None and v <= self.target:
                    found = self.done
        at = len(self.run.steps) - 1  # the evaluation that found the target: the replayed points go before it
        self.run.steps[at:at] = [p[0] for p in points]
        self.run.val_loss[at:at] = [p[1] for p in points]
        return found if found is not None else end

    def evaluate(self, known: float | None = None) -> float:
        """The validation loss now (``known``: already measured, e.g. the untrained loss, which every variant
        shares); the first time it reaches the target, the exact step that reached it."""
        t0 = time.perf_counter()
        v = _val_loss(self.model.eval(), self.val_batches, self.device) if known is None else known
        self.run.steps.append(self.done)
        self.run.val_loss.append(v)
        if self.target is not None and self.run.steps_to_target is None and v <= self.target:
            self.run.steps_to_target = self._locate() if len(self._since) > 1 else self.done
        self.run.seconds += time.perf_counter() - t0
        return v

    def publish(self) -> None:
        """The newest validation points to the live plot (from the caller's thread: the trainers may run in
        worker threads)."""
        if self.live is not None:
            new = self.run.steps[self._published :], self.run.val_loss[self._published :]
            (self.live.add if self._published == 0 else self.live.extend)(self.run.variant.name, *new)
            self._published = len(self.run.steps)

    _published = 0


@dataclass
class Comparison:
    """One seed's comparison: the finding shown for it and the run of each variant (first: KISS, last:
    the over-parameterised LoRA)."""

    finding: Finding
    runs: list[VariantRun]
    steps_trained: int

    @property
    def kiss(self) -> VariantRun:
        return self.runs[0]

    @property
    def over(self) -> VariantRun:
        return self.runs[-1]


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
    measure_peak: bool = True,
) -> Comparison:
    """Train the variants with the same budget, each at its own learning rate (``cfg.kiss_lr`` for the
    first, ``cfg.over_lr`` for the others); trainable share, peak memory, steps to the validation target.

    Without a ``val_loss_target`` the target is ``target_ratio`` × the untrained validation loss (the
    same for both variants: they start from the same base weights and B = 0). With
    ``stop_when_reached`` a variant stops training once it has reached the target (its steps to target
    are all the comparison needs) and the run ends when every variant has. ``untrained``: the base
    model's validation loss when already measured (the audit context scores the base model once for
    every check that reads it). ``workers``: variants trained side by side in threads (default: on CPU
    as many as :func:`nbkit.audit.sft.concurrent_workers` allows; the figures are those of one after the
    other). ``measure_peak=False``: the first step's peak memory is not tracked (a seed whose peak nobody
    reads; the step itself, and every other figure, is the same).
    """
    import plotly.graph_objects as go
    from tqdm.auto import tqdm

    budget_steps, batch_size, eval_every, val_size = (
        cfg.budget_steps,
        cfg.batch_size,
        cfg.eval_every,
        cfg.val_size,
    )
    if budget_steps < 2:
        raise ValueError(f"budget_steps must be ≥ 2, got {budget_steps}")
    val_ex, train_ex = examples[:val_size], examples[val_size:]
    if len(train_ex) < batch_size:
        raise ValueError(
            f"need at least {batch_size} training examples after the {val_size} held out, got {len(train_ex)}"
        )
    # LoRA starts with B = 0 (and dropout 0 here), so every variant's untrained validation loss is the
    # base model's: measured once, it is the step-0 point of each curve and the target's reference.
    if untrained is None:
        vfeats = [build_features(tokenizer, e, template) for e in val_ex]
        vb = [
            pad_batch(vfeats[i : i + batch_size], tokenizer.pad_token_id)
            for i in range(0, len(vfeats), batch_size)
        ]
        untrained = _val_loss(base_model.to(device).eval(), vb, device)
    target = cfg.val_loss_target or cfg.target_ratio * untrained
    lrs = [cfg.kiss_lr] + [cfg.over_lr] * (len(variants) - 1)
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
            measure_peak=measure_peak,
        )
        for v, lr in zip(variants, lrs, strict=True)
    ]
    for t in trainers:
        t.evaluate(known=untrained)
        t.publish()
    # The variants share nothing but the frozen base weights they read: on CPU they train side by
    # side in threads (each with torch's single intra-op thread, each computing what it computes alone).
    workers = concurrent_workers(len(trainers), device) if workers is None else workers
    bar = tqdm(total=budget_steps, desc="LoRA variants", disable=not progress, leave=False)
    done = 0
    while done < budget_steps:
        n = min(eval_every, budget_steps - done)
        going = [t for t in trainers if not (cfg.stop_when_reached and t.run.steps_to_target is not None)]
        if not going:
            break
        run_concurrently([lambda t=t, n=n: (t.advance(n), t.evaluate()) for t in going], workers)
        for t in going:
            t.publish()
        done += n
        bar.update(n)
        bar.set_postfix(val=" / ".join(f"{t.run.val_loss[-1]:.3f}" for t in trainers))
    bar.close()
    runs = [t.run for t in trainers]
    kiss, over = runs[0], runs[-1]
    figures: dict[str, Any] = {"val_loss_target": target, "budget_steps": budget_steps, "steps_trained": done}
    rows = []
    for run, lr in zip(runs, lrs, strict=True):
        key = "kiss" if run is kiss else "over"
        figures[f"{key}_trainable_share_pct"] = run.share_pct
        figures[f"{key}_trainable_params"] = run.trainable
        figures[f"{key}_steps_to_target"] = run.steps_to_target
        figures[f"{key}_final_val_loss"] = run.val_loss[-1]
        figures[f"{key}_peak_bytes"] = run.peak_bytes
        rows.append(
            {
                "variant": run.variant.name,
                "lr": lr,
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
            f"the budget of {budget_steps} steps"
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
    finding = Finding(
        SLUG,
        TITLE,
        status,
        summary,
        figures,
        rows,
        fix="prefer q/v rank-8 adapters unless a larger adapter reaches the target measurably sooner",
        figure=fig,
    )
    return Comparison(finding, runs, done)


def notes_model_counts() -> LoraCounts:
    """PEFT's own count of both variants on the field notes' model's architecture, built on the meta
    device (no weights are loaded)."""
    from peft import get_peft_model

    config = notes_model_config()
    counts = []
    for v in (KISS, OVER):
        wrapped = get_peft_model(meta_model(config), lora_config(v.r, v.alpha, v.targets, 0.0))
        counts.append(wrapped.get_nb_trainable_parameters())
    (k, k_total), (o, o_total) = counts
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    return LoraCounts(
        kiss_trainable=k,
        kiss_total=k_total,
        over_trainable=o,
        over_total=o_total,
        hidden_size=config.hidden_size,
        kv_dim=config.hidden_size // heads * kv_heads,
        layers=config.num_hidden_layers,
    )


# Input + output width of each attention projection a variant adapts, in units of the hidden size d, as a
# function of x = d_kv / d (the key/value width over the hidden size): q and o map d → d, k and v d → d_kv.
ATTENTION_WIDTHS = {
    "q_proj": lambda x: 2.0,
    "k_proj": lambda x: 1.0 + x,
    "v_proj": lambda x: 1.0 + x,
    "o_proj": lambda x: 2.0,
}


def llama_param_ratio_range(kiss: LoraVariant = KISS, over: LoraVariant = OVER) -> tuple[float, float]:
    """The trainable-parameter ratio over / KISS on any Llama-style attention, as (lowest, highest).

    A rank-r LoRA on a d_in → d_out projection trains r·(d_in + d_out) parameters, in every layer alike,
    so the ratio depends on the ranks, the targets and x = d_kv / d alone — not on the depth or width.
    It is monotone in x, so its range over every shape (x from one key/value head towards 0 up to full
    multi-head attention, 1) lies between its values at x = 0 and x = 1; the end at 0 is a supremum.
    Written here because it is a closed form of PEFT's count, which needs a model per shape."""
    unknown = sorted(set(kiss.targets + over.targets) - set(ATTENTION_WIDTHS))
    if unknown:
        raise ValueError(f"no Llama attention width for {unknown}; known: {sorted(ATTENTION_WIDTHS)}")

    def ratio(x: float) -> float:
        def per_layer(v: LoraVariant) -> float:
            return v.r * sum(ATTENTION_WIDTHS[t](x) for t in v.targets)

        return per_layer(over) / per_layer(kiss)

    ends = (ratio(0.0), ratio(1.0))
    return (min(ends), max(ends))


def measure(cfg: KissConfig, ctx: AuditContext, live=None, stop=None) -> Checked[KissMetrics]:
    """One comparison per seed (at most ``cfg.seeds`` of them, from the audit's seed on): each seed draws
    its own train/validation split of the examples, LoRA initialisation and batch order, so the steps
    ratio rests on independent repeats; the first seed's run is the one shown (table, curves, the
    per-variant figures). ``stop(metrics of the seeds so far)``, asked after each seed, ends the loop once
    the claims it feeds are decided."""
    import random

    model, tok = ctx.model_and_tokenizer(cfg.model)
    ex, note = ctx.examples(cfg.val_size + cfg.batch_size, SLUG)
    notes = ctx.shared.cached(("notes-model-counts",), notes_model_counts)
    first, runs = None, []
    for i in range(max(1, cfg.seeds)):
        seed = ctx.config.model.seed + i
        order = list(ex)
        random.Random(seed).shuffle(order)  # this seed's validation examples and training pool
        base = ctx.base_example_losses(order[: cfg.val_size], ctx.config.template, cfg.model)
        c = compare_lora_variants(
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
            # the metrics report the first seed's peak memory: the others' first step is not tracked
            measure_peak=i == 0,
        )
        runs.append(KissRun(seed, c.kiss.steps_to_target, c.over.steps_to_target, c.steps_trained))
        first = first or c
        if stop is not None and stop(_kiss_metrics(cfg, ctx, first, runs, notes)):
            break
    assert first is not None
    metrics = _kiss_metrics(cfg, ctx, first, runs, notes)
    shown = first.finding
    ratios = metrics.log_step_ratios
    shown.figures.update(
        {
            "model": metrics.model,
            "seeds": len(runs),
            f"{NOTES_MODEL} KISS share %": notes.kiss_share_pct,
            f"{NOTES_MODEL} over share %": notes.over_share_pct,
        }
    )
    if ratios:
        shown.figures["geometric_mean_step_ratio"] = math.exp(sum(ratios) / len(ratios))
    shown.summary += f"; over {len(runs)} seeds the steps ratio KISS / over-parameterised is " + (
        f"{math.exp(sum(ratios) / len(ratios)):.2f} (geometric mean)"
        if ratios
        else "not measured (no variant reached the target)"
    )
    shown.table = list(shown.table) + [
        {"variant": f"seed {r.seed}", "steps to target": f"KISS {r.kiss_steps}, over {r.over_steps}"}
        for r in runs
    ]
    shown.summary += note
    return Checked(shown, metrics)


def _kiss_metrics(
    cfg: KissConfig, ctx: AuditContext, first: Comparison, runs: list, notes: LoraCounts
) -> KissMetrics:
    """The typed metrics of the seeds done so far (the first seed's run gives the per-variant figures)."""
    kiss, over = first.kiss, first.over
    return KissMetrics(
        kiss_trainable_share_pct=kiss.share_pct,
        over_trainable_share_pct=over.share_pct,
        param_ratio_over_vs_kiss=over.trainable / kiss.trainable,
        notes_model=NOTES_MODEL,
        notes_kiss_share_pct=notes.kiss_share_pct,
        notes_over_share_pct=notes.over_share_pct,
        notes_param_ratio=notes.param_ratio,
        notes_counts=notes,
        llama_ratio_range=llama_param_ratio_range(),
        peak_ratio_kiss_vs_over=kiss.peak_bytes / over.peak_bytes
        if kiss.peak_bytes and over.peak_bytes
        else float("nan"),
        peak_measured_as=kiss.peak_kind,
        budget_steps=cfg.budget_steps,
        runs=tuple(runs),
        model=cfg.model or ctx.config.model.name,
    )


# The seed is the unit of the steps-ratio claim: at most KissConfig.seeds at defaults, KISS_FULL_SEEDS in
# the full profile (what the claim needs to decide: docs/claims.md), the loop stopping once it is decided.
KISS_FULL_SEEDS = 16
CHECK = Check.of(
    SLUG,
    TITLE,
    KissConfig,
    KissMetrics,
    measure,
    number=1,
    needs="kiss",
    replicates=Replicates(
        "seed",
        "seeds",
        full=KISS_FULL_SEEDS,
        cost_s=65.0,
        cost_source="1.08 CPU-min per seed at defaults, both variants side by side on 2 cores "
        "(bench/RESULTS.md, the audit's noisy rows)",
        least=3,
    ),
)
