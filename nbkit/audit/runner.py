"""Run the checks a config allows: the registry, a shared context (model loaded once), the loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nbkit.audit.config import AuditConfig
from nbkit.audit.findings import Finding, error_finding

CHECK_NAMES = {
    1: "KISS vs over-parameterised LoRA",
    2: "LoRA shape binding",
    3: "Tokenizer ↔ label space",
    4: "Attention backend and context",
    5: "Gradient accumulation",
    6: "dtype transitions",
    7: "JSONL ↔ Pydantic",
    8: "Prompt template ↔ loss mask",
    9: "Sampling weights ↔ reward",
    10: "ZeRO-3 ↔ GQA layout",
    11: "Chained LR schedulers",
    12: "Checkpoint interval ↔ fragmentation",
    13: "Eval ↔ DDP synchronisation",
}


@dataclass
class Sizes:
    """Work sizes of the model-running checks (SMOKE / tiny vs the real CPU-scale run)."""

    attention_lengths: tuple = (128, 256, 512, 1024)
    attention_reps: int = 3
    noise_lengths: tuple = (16, 32, 64, 128)
    noise_samples: int = 8
    noise_params: str = "all"
    loss_mask_examples: int | None = None
    sampling_examples: int = 48
    ddp_steps: int = 6
    kiss_batch_size: int = 8
    kiss_eval_every: int = 5
    kiss_val_size: int = 16
    fragmentation_steps: int = 60
    accum_micro_batch_cap: int | None = None
    accum_steps_cap: int | None = None

    @classmethod
    def smoke(cls) -> Sizes:
        return cls(attention_lengths=(64, 256), attention_reps=2, noise_lengths=(16, 48), noise_samples=4, noise_params="last_layer",
                   loss_mask_examples=48, sampling_examples=12, ddp_steps=4, kiss_batch_size=4, kiss_eval_every=4, kiss_val_size=8,
                   fragmentation_steps=20, accum_micro_batch_cap=2, accum_steps_cap=2)


@dataclass
class AuditContext:
    config: AuditConfig
    device: Any = None
    sizes: Sizes = field(default_factory=Sizes)
    progress: bool = True
    _model: Any = None
    _tokenizer: Any = None
    _data: Any = None
    _data_finding: Finding | None = None

    def __post_init__(self):
        from nbkit.device import pick_device

        if self.device is None or isinstance(self.device, str):
            self.device = pick_device(self.device or "auto")

    def model_and_tokenizer(self):
        if self._model is None:
            import torch

            from nbkit.audit.sft import load_model_and_tokenizer

            dtype = getattr(torch, self.config.model.dtype)
            self._model, self._tokenizer = load_model_and_tokenizer(self.config.model.name, self.device, dtype, seed=self.config.model.seed)
        return self._model, self._tokenizer

    def data(self):
        """(finding of check 7, valid records). Falls back to the bundled SFT set when no data section."""
        if self._data is None:
            if self.config.data is None:
                from nbkit.audit.sft import make_sft_examples

                self._data_finding, self._data = None, make_sft_examples(160)
            else:
                from nbkit.audit.data import check_jsonl_schema

                d = self.config.data
                self._data_finding, rep = check_jsonl_schema(d.path, d.schema_ref, strict=d.strict, max_lines=d.max_lines)
                self._data = rep.records if rep is not None else []
        return self._data_finding, self._data

    def examples(self, minimum: int, what: str):
        _, recs = self.data()
        if len(recs) < minimum:
            from nbkit.audit.sft import make_sft_examples

            return make_sft_examples(max(minimum, 160)), f" (the config's data has only {len(recs)} valid records; used the bundled SFT set for {what})"
        return recs, ""


def _c1(ctx: AuditContext, live=None) -> Finding:
    from nbkit.audit.lora import compare_lora_variants

    k = ctx.config.kiss
    if k.budget_steps < 2:
        return Finding(1, CHECK_NAMES[1], "skipped", "kiss.budget_steps < 2: training comparison not requested (set kiss.budget_steps)")
    model, tok = ctx.model_and_tokenizer()
    ex, note = ctx.examples(ctx.sizes.kiss_val_size + ctx.sizes.kiss_batch_size, "check 1")
    f = compare_lora_variants(model, tok, ex, ctx.config.template, budget_steps=k.budget_steps, batch_size=ctx.sizes.kiss_batch_size, lr=k.lr,
                              eval_every=ctx.sizes.kiss_eval_every, val_size=ctx.sizes.kiss_val_size, target=k.val_loss_target, target_ratio=k.val_loss_target_ratio,
                              device=ctx.device, seed=ctx.config.model.seed, live=live, progress=ctx.progress)
    f.summary += note
    return f


def _c2(ctx, live=None):
    from nbkit.audit.lora import check_lora_binding

    model, _ = ctx.model_and_tokenizer()
    lo = ctx.config.lora
    return check_lora_binding(model, lo.r, lo.alpha, lo.target_modules, lo.use_rslora, seed=ctx.config.model.seed)


def _c3(ctx, live=None):
    from nbkit.audit.sft import EXAMPLES_DIR, read_jsonl_plain
    from nbkit.audit.tokens import check_label_alignment

    _, tok = ctx.model_and_tokenizer()
    path = ctx.config.data.ner_path if ctx.config.data is not None and ctx.config.data.ner_path else EXAMPLES_DIR / "ner.jsonl"
    f = check_label_alignment(tok, read_jsonl_plain(path))
    f.figures["ner_file"] = str(path.name)
    return f


def _c4(ctx, live=None):
    from nbkit.audit.attention import check_attention_backend

    model, tok = ctx.model_and_tokenizer()
    return check_attention_backend(model, tok, device=ctx.device, seq_len=ctx.config.train.seq_len, lengths=ctx.sizes.attention_lengths, reps=ctx.sizes.attention_reps)


def _c5(ctx, live=None):
    from nbkit.audit.gradients import check_grad_accumulation

    model, tok = ctx.model_and_tokenizer()
    t = ctx.config.train
    mb = min(t.micro_batch_size, ctx.sizes.accum_micro_batch_cap or t.micro_batch_size)
    ga = min(t.grad_accumulation, ctx.sizes.accum_steps_cap or t.grad_accumulation)
    ex, note = ctx.examples(mb * ga, "check 5")
    if (mb, ga) != (t.micro_batch_size, t.grad_accumulation):
        note += f" (smoke sizes: {ga} micro-batches of {mb} instead of {t.grad_accumulation} of {t.micro_batch_size})"
    f = check_grad_accumulation(model, tok, ex, ctx.config.template.model_copy(update={"mask_pad_labels": False}), micro_batch_size=mb,
                                grad_accumulation=ga, normalisation=t.loss_normalisation, lengths=ctx.sizes.noise_lengths,
                                noise_samples=ctx.sizes.noise_samples, device=ctx.device, seed=ctx.config.model.seed,
                                noise_params=ctx.sizes.noise_params, progress=ctx.progress)
    f.summary += note
    return f


def _c6(ctx, live=None):
    from nbkit.audit.dtypes import check_dtype_transitions

    model, tok = ctx.model_and_tokenizer()
    return check_dtype_transitions(model, tok, device=ctx.device, autocast_dtype=ctx.config.train.autocast_dtype)


def _c7(ctx, live=None):
    if ctx.config.data is None:
        return Finding(7, CHECK_NAMES[7], "skipped", "no data section in the config")
    f, _ = ctx.data()
    return f


def _c8(ctx, live=None):
    from nbkit.audit.template import check_loss_mask

    _, tok = ctx.model_and_tokenizer()
    ex, note = ctx.examples(1, "check 8")
    f = check_loss_mask(tok, ex, ctx.config.template, max_examples=ctx.sizes.loss_mask_examples)
    f.summary += note
    return f


def _c9(ctx, live=None):
    from nbkit.audit.sampling import check_sampling, response_scores

    if ctx.config.sampling is None:
        return Finding(9, CHECK_NAMES[9], "skipped", "no sampling section in the config")
    model, tok = ctx.model_and_tokenizer()
    ex, note = ctx.examples(8, "check 9")
    r, lp = response_scores(model, tok, ex[: ctx.sizes.sampling_examples], ctx.config.template, ctx.device)
    s = ctx.config.sampling
    f = check_sampling(r, lp, beta=s.beta, gamma=s.gamma, kl_threshold=s.kl_threshold, shrink_threshold=s.shrink_threshold)
    f.summary += note
    return f


def _c10(ctx, live=None):
    from nbkit.audit.zero3 import check_zero3

    ds = ctx.config.deepspeed
    if ds is None:
        return Finding(10, CHECK_NAMES[10], "skipped", "no deepspeed section in the config")
    model, _ = ctx.model_and_tokenizer()
    return check_zero3(model, threshold=ds.stage3_param_persistence_threshold, world_size=ds.world_size, zero_stage=ds.zero_stage)


def _c11(ctx, live=None):
    from nbkit.audit.schedulers import check_schedulers

    if ctx.config.scheduler is None:
        return Finding(11, CHECK_NAMES[11], "skipped", "no scheduler section in the config")
    return check_schedulers(ctx.config.scheduler)


def _c12(ctx, live=None):
    from nbkit.audit.fragmentation import check_fragmentation

    interval = ctx.config.checkpoint.interval if ctx.config.checkpoint else 50
    if ctx.device.type != "cuda":
        return check_fragmentation(None, None, [], ctx.config.template, device=ctx.device, interval=interval)
    import copy

    model, tok = ctx.model_and_tokenizer()
    ex, _ = ctx.examples(8, "check 12")
    return check_fragmentation(lambda: copy.deepcopy(model), tok, ex, ctx.config.template, device=ctx.device, interval=interval, steps=ctx.sizes.fragmentation_steps)


def _c13(ctx, live=None):
    from nbkit.audit.ddp import check_ddp_eval

    if ctx.config.eval is None:
        return Finding(13, CHECK_NAMES[13], "skipped", "no eval section in the config")
    return check_ddp_eval(ctx.config.eval, steps=ctx.sizes.ddp_steps, seed=ctx.config.model.seed)


CHECKS: dict[int, Callable[..., Finding]] = {1: _c1, 2: _c2, 3: _c3, 4: _c4, 5: _c5, 6: _c6, 7: _c7, 8: _c8, 9: _c9, 10: _c10, 11: _c11, 12: _c12, 13: _c13}


def run_check(ctx: AuditContext, check_id: int, live=None) -> Finding:
    """One check; any exception becomes an ``error`` finding (one line), never a crash."""
    if check_id not in CHECKS:
        raise ValueError(f"unknown check id {check_id}; known: {sorted(CHECKS)}")
    t0 = time.perf_counter()
    try:
        f = CHECKS[check_id](ctx, live=live)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        f = error_finding(check_id, CHECK_NAMES[check_id], exc)
    f.seconds = time.perf_counter() - t0
    return f


def run_audit(config: AuditConfig, checks=None, *, device=None, sizes: Sizes | None = None, progress: bool = True, context: AuditContext | None = None) -> list[Finding]:
    """Run ``checks`` (default: the config's ``checks`` or all 13) and return their findings."""
    from tqdm.auto import tqdm

    ids = list(checks or config.checks or sorted(CHECKS))
    unknown = [i for i in ids if i not in CHECKS]
    if unknown:
        raise ValueError(f"unknown check id(s) {unknown}; known: {sorted(CHECKS)}")
    ctx = context or AuditContext(config, device, sizes or Sizes(), progress)
    out = []
    bar = tqdm(ids, desc="audit", disable=not progress, leave=False)
    for i in bar:
        bar.set_postfix_str(CHECK_NAMES[i])
        out.append(run_check(ctx, i))
    return out
