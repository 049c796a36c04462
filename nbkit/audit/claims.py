"""The field notes' fine-tuning claims, each a declared spec judged on the typed metrics of the audit's
experiments (:class:`~nbkit.claims.ClaimSpec`, registered with the audit's registry).

Each claim has a named ``verdict_*`` function (its rule in its docstring, two-sided: holds, refuted or
inconclusive from the same inputs), a ``read_*`` function from the metrics of the experiments it reads
to the verdict's arguments, and its kind: ``measured`` (this run measured it; a noisy one has an
interval over the units that vary and a design whose operating characteristics the ledger shows),
``arithmetic`` (PEFT's exact count on an architecture), ``library fact`` (what a library does by its
own convention: PEFT's layout and scaling, a tokenizer's offsets, torch's dtype rules) or
``demonstration`` (a fixture written to show a failure). ``judge(ctx)`` gives the ledger and
``headline(ctx)`` the headline numbers.

Rows measured on a model name it: the field notes' figures are about their own model (DeepSeek-LLM-7B on
an A100), so a trainable share is counted on that model's architecture, and a figure that only the
audit's model can give says so. Left out, with the reason: "missing-field share is a useful headline"
(a definition; nothing can refute it), "ZeRO-3 slices by flat shape, ignoring KV head groups" and "a
persistence threshold of 1e9 replicates every tensor" (the zero3-layout check applies DeepSpeed's own
rule, so a verdict would only restate it; notebook 02's ladder measures persistence), and "checkpointing
more often fragments the allocator" (notebook 02 judges it, on the one fragmentation experiment the
audit's check also runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from nbkit.audit.checks.attention import AttentionMetrics
from nbkit.audit.checks.ddp_eval import DdpEvalMetrics
from nbkit.audit.checks.dtypes import DtypesMetrics
from nbkit.audit.checks.grad_accumulation import (
    GradAccumulationConfig,
    GradAccumulationMetrics,
    slope_interval,
)
from nbkit.audit.checks.kiss import KISS_FULL_SEEDS, NOTES_MODEL, KissMetrics
from nbkit.audit.checks.label_alignment import LabelAlignmentMetrics
from nbkit.audit.checks.lora_binding import LoraBindingMetrics
from nbkit.audit.checks.loss_mask import LeakClass, LossMaskMetrics
from nbkit.audit.checks.reward_weights import REWARD_FULL_RESPONSES, RewardWeightsConfig, RewardWeightsMetrics
from nbkit.audit.checks.schedulers import SchedulersMetrics
from nbkit.audit.experiments import REGISTRY, ConfigAuditMetrics
from nbkit.claims import (
    ARITHMETIC,
    DEMONSTRATION,
    HOLDS,
    INCONCLUSIVE,
    LIBRARY_FACT,
    MEASURED,
    REFUTED,
    ClaimSpec,
    Design,
    HeadlineSpec,
    Reading,
    Rule,
    Verdict,
    decide_at_least,
    decide_at_most,
    decide_close,
    exact_value,
    fmt_interval,
    mean_interval,
    needs_gpu,
    normal_units,
)

__all__ = ["REGISTRY", "headline", "judge"]

# The field notes' figures, each written once.
KISS_SHARE_PCT, OVER_SHARE_PCT, PARAM_RATIO = 0.12, 0.87, 3.2  # §1: trainable shares, 3.2× parameters
KISS_STEPS, OVER_STEPS = 890, 2140  # §1: validation-loss convergence steps
PEAK_KISS_GB, PEAK_OVER_GB = 28.1, 42.3  # §1: A100 memory
ZH_F1_PCT = 71.3  # §2.2: Chinese span boundary F1 after tokenisation
FLASH_SPEEDUP = 3.8  # §2.3: FlashAttention-2 over naive attention
SQRT_L_EXPONENT = -0.5  # §2.4: accumulation scaled by √L keeps gradient variance constant
KURTOSIS_COLD, KURTOSIS_CONCENTRATED = 2.1, 5.7  # §3.3: reward kurtosis, uniform → concentrated sampling
KL_THRESHOLD, SHRINK_THRESHOLD = 0.18, 0.42  # §3.3: "significant shift", "over-fitting" CI shrink

# A rule's threshold between the notes' figure and no effect sits halfway between them (on the log
# scale for a ratio): the point a run of the notes' effect and a run of none are equally far from.
STEP_RATIO = KISS_STEPS / OVER_STEPS
STEP_RATIO_THRESHOLD = math.sqrt(STEP_RATIO)
ZH_F1_THRESHOLD = (ZH_F1_PCT + 100.0) / 2  # halfway to a lossless round trip
KURTOSIS_RISE = KURTOSIS_CONCENTRATED - KURTOSIS_COLD
KURTOSIS_THRESHOLD = KURTOSIS_RISE / 2
# "Within ±25 %" of a figure the notes state: the audit's one relative tolerance for a ratio.
RELATIVE_TOLERANCE = 0.25


def _pct(x: float, spec: str = ".3g") -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _z(level: float) -> float:
    from scipy import stats

    return float(stats.norm.ppf((1 + level) / 2))


# -- kiss-lora: trainable shares (arithmetic on the notes' model) -----------------------------------


def verdict_trainable_share(share_pct: float, claimed: float) -> Verdict:
    """The trainable share equals the field notes' within ±25 % of it (PEFT's exact count): holds inside
    the band, refuted outside."""
    return decide_close(share_pct, claimed, RELATIVE_TOLERANCE, relative=True, what="trainable share %")


def read_kiss_share(kiss: KissMetrics) -> Reading:
    return Reading(
        args=(kiss.notes_kiss_share_pct, KISS_SHARE_PCT),
        measured=f"{_pct(kiss.notes_kiss_share_pct)} % on {kiss.notes_model} "
        f"({_pct(kiss.kiss_trainable_share_pct)} % on {kiss.model})",
        n=f"exact count (PEFT, {kiss.notes_model}'s architecture on the meta device)",
    )


def read_over_share(kiss: KissMetrics) -> Reading:
    return Reading(
        args=(kiss.notes_over_share_pct, OVER_SHARE_PCT),
        measured=f"{_pct(kiss.notes_over_share_pct)} % on {kiss.notes_model} "
        f"({_pct(kiss.over_trainable_share_pct)} % on {kiss.model})",
        n=f"exact count (PEFT, {kiss.notes_model}'s architecture on the meta device)",
    )


def verdict_param_ratio(ratio: float) -> Verdict:
    """Over-parameterised / KISS trainable parameters equals 3.2 within ±25 %: holds inside, refuted
    outside."""
    return decide_close(
        ratio, PARAM_RATIO, RELATIVE_TOLERANCE, relative=True, what="trainable-parameter ratio"
    )


def read_param_ratio(kiss: KissMetrics) -> Reading:
    return Reading(
        args=(kiss.notes_param_ratio,),
        measured=f"{_pct(kiss.notes_param_ratio)}× on {kiss.notes_model} "
        f"({_pct(kiss.param_ratio_over_vs_kiss)}× on {kiss.model})",
        n=f"exact count (PEFT, {kiss.notes_model}'s architecture on the meta device)",
    )


# -- kiss-lora: steps to the target, peak memory (measured) -----------------------------------------


def verdict_kiss_steps(log_ratios: Sequence[float], level: float = 0.95) -> Verdict:
    """KISS reaches the validation-loss target in markedly fewer steps than the over-parameterised LoRA.

    Each seed (its own split, initialisation and batch order) gives one log steps ratio KISS / over;
    the t interval of their mean, exponentiated, is the interval of the geometric-mean ratio. Holds
    when it lies at or below √(890/2140) = 0.645 — halfway on the log scale between the notes' ratio
    0.42 and no difference (1) — refuted when it lies wholly above, else inconclusive (also with fewer
    than two seeds, or seeds whose ratios all tie: no interval)."""
    lo, hi = mean_interval(log_ratios, level)
    interval = (math.exp(lo), math.exp(hi)) if not math.isnan(lo) else (math.nan, math.nan)
    return decide_at_most(
        interval,
        STEP_RATIO_THRESHOLD,
        what="geometric-mean steps ratio KISS / over-parameterised",
        n_hint=f"{len(log_ratios)} seeds; more seeds narrow it",
    )


def read_kiss_steps(kiss: KissMetrics) -> Reading:
    ratios = kiss.log_step_ratios
    lo, hi = mean_interval(ratios)
    steps = ", ".join(f"{r.kiss_steps}/{r.over_steps}" for r in kiss.runs)
    mean = math.exp(sum(ratios) / len(ratios)) if ratios else math.nan
    return Reading(
        args=(ratios,),
        measured=f"{_pct(mean)} (KISS/over steps per seed: {steps}) [{kiss.model}]",
        n=f"{len(kiss.runs)} seeds ({len(ratios)} with a ratio), each its own split, init and batch order; "
        f"≤ {kiss.budget_steps} steps each",
        interval=fmt_interval((math.exp(lo), math.exp(hi))) if not math.isnan(lo) else "",
    )


def units_kiss(cfg: Any) -> int:
    return int(cfg.seeds)


def verdict_peak_ratio(ratio: float) -> Verdict:
    """KISS / over-parameterised peak memory of one optimiser step equals 28.1/42.3 = 0.66 within ±0.10:
    holds inside, refuted outside."""
    return decide_close(ratio, PEAK_KISS_GB / PEAK_OVER_GB, 0.10, what="peak-memory ratio")


def read_peak_ratio(kiss: KissMetrics) -> Reading:
    return Reading(
        args=(kiss.peak_ratio_kiss_vs_over,),
        measured=f"{_pct(kiss.peak_ratio_kiss_vs_over)} [{kiss.model}; {kiss.peak_measured_as}]",
        n="one optimiser step per variant (exact tensor bytes; the notes' 7B model was not run)",
    )


# -- lora-binding, label-alignment ------------------------------------------------------------------


def verdict_binding_asserts(hold: int, adapted: int) -> Verdict:
    """The field notes' two shape asserts hold on every adapted module: holds when they pass on all
    ``adapted`` > 0 modules, refuted when any fails, inconclusive when nothing was adapted."""
    if adapted == 0:
        return Verdict(INCONCLUSIVE, "no module was adapted")
    if hold == adapted:
        return Verdict(HOLDS, f"both asserts pass on all {adapted} adapted modules")
    return Verdict(
        REFUTED,
        f"the asserts pass on {hold} of {adapted} modules: PEFT stores A as (r, in) and B as (out, r), the "
        "transposes of the notes' layout",
    )


def read_binding_asserts(binding: LoraBindingMetrics) -> Reading:
    return Reading(
        args=(binding.field_note_asserts_hold_on, binding.adapted_modules),
        measured=f"{binding.field_note_asserts_hold_on}/{binding.adapted_modules} modules [{binding.model}]",
        n=f"{binding.adapted_modules} adapted modules",
    )


def verdict_scaling(applied: float, alpha: float) -> Verdict:
    """The scale PEFT applies equals α (the notes' W0 + α·ΔW) within 1e-9 relative: holds at α, refuted at
    another scale (α/r), inconclusive when not measured."""
    return decide_close(applied, alpha, 1e-9, relative=True, what="applied scale")


def read_scaling(binding: LoraBindingMetrics) -> Reading:
    return Reading(
        args=(binding.scaling_applied, binding.alpha),
        measured=f"scale {_pct(binding.scaling_applied)} (α = {binding.alpha:g}, r = {binding.r}) "
        f"[{binding.model}]",
        n="every adapted module",
    )


def verdict_zh_labels(f1_pct: float) -> Verdict:
    """Chinese tokenisation breaks span labels: holds when the round-trip boundary F1 is at most 85.7 % —
    halfway between the notes' 71.3 % and a lossless round trip — refuted above it."""
    return decide_at_most(f1_pct, ZH_F1_THRESHOLD, what="Chinese boundary F1 %")


def read_zh_labels(labels: LabelAlignmentMetrics) -> Reading:
    zh = labels.zh
    return Reading(
        args=(zh.boundary_f1_pct if zh else math.nan,),
        measured=f"boundary F1 {_pct(zh.boundary_f1_pct) if zh else '—'} % [{labels.model}]",
        n=f"{zh.spans if zh else 0} Chinese spans in {zh.sentences if zh else 0} sentences "
        "(exact for this file)",
    )


def verdict_en_offsets(trimmed_pct: float, untrimmed_pct: float) -> Verdict:
    """Byte-level offsets carry the leading space: the untrimmed English boundary F1 is at least 1 point
    below the trimmed one (holds), else refuted."""
    return decide_at_least(trimmed_pct - untrimmed_pct, 1.0, what="F1 lost to untrimmed offsets (points)")


def read_en_offsets(labels: LabelAlignmentMetrics) -> Reading:
    en = labels.en
    trimmed, untrimmed = (en.boundary_f1_pct, en.untrimmed_offsets_f1_pct) if en else (math.nan, math.nan)
    return Reading(
        args=(trimmed, untrimmed),
        measured=f"untrimmed {_pct(untrimmed)} % vs trimmed {_pct(trimmed)} % [{labels.model}]",
        n=f"{en.spans if en else 0} English spans",
    )


# -- attention, grad-accumulation -------------------------------------------------------------------


def verdict_flash_speedup(device: str, ratios: Sequence[float], level: float = 0.95) -> Verdict:
    """FlashAttention over math SDPA throughput equals 3.8× within ±25 % on CUDA: each interleaved
    repetition gives one math/flash time ratio; the t interval of their mean log, exponentiated, lying
    inside [2.85, 4.75] holds, missing it refutes, else inconclusive. Needs a GPU when the run had none
    (a CPU's kernels are not the claim)."""
    if not device.startswith("cuda"):
        return needs_gpu("FlashAttention throughput")
    lo, hi = mean_interval([math.log(r) for r in ratios if r > 0], level)
    interval = (math.exp(lo), math.exp(hi)) if not math.isnan(lo) else (math.nan, math.nan)
    return decide_close(
        interval, FLASH_SPEEDUP, RELATIVE_TOLERANCE, relative=True, what="flash/math throughput ratio"
    )


def read_flash_speedup(attention: AttentionMetrics) -> Reading:
    ratios = [r for r in attention.flash_over_math_per_rep if r > 0]
    lo, hi = mean_interval([math.log(r) for r in ratios])
    mean = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else math.nan
    load = "/".join(f"{x:.1f}" for x in attention.load_average)
    return Reading(
        args=(attention.device, ratios),
        measured=f"{_pct(mean)}× at L={attention.flash_over_math_L} ({attention.timing_dtype}, "
        f"{attention.device}; load average {load}) [{attention.model}]",
        n=f"{len(ratios)} interleaved repetitions",
        interval=fmt_interval((math.exp(lo), math.exp(hi))) if not math.isnan(lo) else "",
    )


def verdict_sqrt_l(
    lengths: Sequence[int], estimates: Sequence[Sequence[float]], level: float = 0.95
) -> Verdict:
    """Accumulation must scale with √L: gradient-noise variance ∝ L^−0.5. Each length has independent
    variance estimates (one per disjoint pair of micro-batch gradients: the unit, n per length); the t
    interval of the fitted
    exponent (:func:`nbkit.audit.checks.grad_accumulation.slope_interval`) inside [−0.75, −0.25] holds,
    missing it entirely refutes (≈ −1 is the linear rule), else inconclusive."""
    slope, lo, hi = slope_interval(lengths, estimates, level)
    if math.isnan(lo) or math.isnan(hi):
        return Verdict(
            INCONCLUSIVE,
            f"exponent {slope:.2f} has no interval — fit ≥ 3 lengths of ≥ 2 independent estimates each",
        )
    return decide_close(
        (lo, hi), SQRT_L_EXPONENT, 0.25, what="variance exponent", n_hint="more pairs per length narrow it"
    )


def read_sqrt_l(grad: GradAccumulationMetrics) -> Reading:
    slope, lo, hi = slope_interval(grad.noise_lengths, grad.noise_estimates)
    return Reading(
        args=(grad.noise_lengths, grad.noise_estimates),
        measured=f"variance ∝ L^{slope:.2f} [{grad.model}]",
        n=f"{len(grad.noise_lengths)} lengths × {grad.pairs_per_length} independent pairs of gradient "
        f"samples ({grad.gradients_of})",
        interval=fmt_interval((lo, hi)),
    )


def units_sqrt_l(cfg: GradAccumulationConfig) -> int:
    return int(cfg.noise_samples) // 2


def verdict_token_count(rel_err_token_count: float, rel_err_mean_of_means: float) -> Verdict:
    """Accumulated micro-batch means equal the one-batch gradient only with token-count normalisation.

    Holds when token-count normalisation matches (rel. err < 1e-4) and the mean of micro-batch means
    does not (> 1e-3); refuted when token-count normalisation misses (≥ 1e-3) or the mean of means
    matches too (< 1e-4); inconclusive in between.
    """
    et, em = rel_err_token_count, rel_err_mean_of_means
    if math.isnan(em) or math.isnan(et):
        return Verdict(INCONCLUSIVE, "the accumulation errors were not measured")
    if et < 1e-4 and em > 1e-3:
        return Verdict(HOLDS, f"token-count error {et:.1e} < 1e-4; mean-of-means error {em:.2%} > 0.1 %")
    if et >= 1e-3 or em < 1e-4:
        return Verdict(REFUTED, f"token-count error {et:.1e}, mean-of-means error {em:.1e}")
    return Verdict(
        INCONCLUSIVE,
        f"errors {et:.1e} / {em:.1e} fall between the tolerances (micro-batches of near-equal token counts?)",
    )


def read_token_count(grad: GradAccumulationMetrics) -> Reading:
    return Reading(
        args=(grad.rel_err_token_count, grad.rel_err_per_microbatch_mean),
        measured=f"mean-of-means err {_pct(grad.rel_err_per_microbatch_mean)}, token-count err "
        f"{_pct(grad.rel_err_token_count)} [{grad.model}]",
        n=f"{list(grad.tokens_per_microbatch)} tokens per micro-batch (exact gradients)",
    )


# -- dtypes -----------------------------------------------------------------------------------------


def verdict_op_dtype(result: str, expected: str) -> Verdict:
    """The op's result dtype is ``expected``: holds when equal, refuted on another dtype or an error."""
    if result == expected:
        return Verdict(HOLDS, f"result dtype {result}")
    return Verdict(REFUTED, f"{result[:80]}, not {expected}")


def read_baddbmm(dtypes: DtypesMetrics) -> Reading:
    return Reading(
        args=(dtypes.baddbmm_fp32_inputs_under_autocast.shown, "torch.float32"),
        measured=f"{dtypes.baddbmm_fp32_inputs_under_autocast.shown} ({dtypes.device}, "
        f"{dtypes.autocast_dtype} autocast)",
        n="one op call on this torch build (deterministic)",
    )


def verdict_index_add_keeps(result: str, low: str) -> Verdict:
    """``index_add_`` keeps a low-precision cache's dtype when the source is float32: holds when it
    accepts the float32 source and returns the cache's dtype, refuted when it raises or returns another."""
    if result == low:
        return Verdict(HOLDS, f"index_add_ accepted a float32 source and kept {low}")
    return Verdict(REFUTED, f"index_add_ with a float32 source: {result[:90]}")


def read_index_add(dtypes: DtypesMetrics) -> Reading:
    return Reading(
        args=(dtypes.index_add_fp32_source.shown, dtypes.autocast_dtype),
        measured=f"float32 source: {dtypes.index_add_fp32_source.shown[:70]} ({dtypes.autocast_dtype} "
        f"source: {dtypes.index_add_low_source.shown})",
        n="one op call on this torch build (deterministic)",
    )


def verdict_index_copy_recast(result: str) -> Verdict:
    """``index_copy_`` silently recasts a source of another dtype: holds when it returns a dtype, refuted
    when it raises (torch refuses the mismatch)."""
    if "Error" in result or "must have the same" in result or "expected to have the same" in result:
        return Verdict(REFUTED, f"index_copy_ raises on the mismatch: {result[:80]}")
    return Verdict(HOLDS, f"index_copy_ accepted the mismatch and returned {result}")


def read_index_copy(dtypes: DtypesMetrics) -> Reading:
    return Reading(
        args=(dtypes.index_copy_fp32_source.shown,),
        measured=dtypes.index_copy_fp32_source.shown[:70],
        n="one op call on this torch build (deterministic)",
    )


def verdict_kv_cache_boundary(keys: str, values: str) -> Verdict:
    """The KV cache crosses the bf16/float32 boundary without a declaration: holds when the cache holds
    its keys and values in different dtypes after a low-precision autocast forward, refuted when both are
    one dtype."""
    if keys != values:
        return Verdict(HOLDS, f"cache keys {keys}, values {values}")
    return Verdict(REFUTED, f"cache keys and values both {keys}: no boundary crossed inside the cache")


def read_kv_cache(dtypes: DtypesMetrics) -> Reading:
    return Reading(
        args=(dtypes.kv_cache_keys_dtype, dtypes.kv_cache_values_dtype),
        measured=f"keys {dtypes.kv_cache_keys_dtype}, values {dtypes.kv_cache_values_dtype} under "
        f"{dtypes.autocast_dtype} autocast [{dtypes.model}]",
        n="one forward with cache (deterministic)",
    )


def _draw_kv(rng: Any, value: float, n: int) -> tuple:
    """An exact measurement: keys and values in two dtypes (the claim true, value 1) or one (value 0)."""
    return ("torch.float32", "torch.bfloat16") if value >= 0.5 else ("torch.bfloat16", "torch.bfloat16")


# -- data: a broken config's coercions, the loss mask's leaks ---------------------------------------


def verdict_lax_coercion(coerced: int) -> Verdict:
    """Lax parsing silently coerces "42" for an int field: holds when the file (broken.yaml's, written
    with such values) shows ≥ 1 coercion that strict mode rejects, refuted at 0."""
    return decide_at_least(float(coerced), 1.0, what="coerced values")


def read_lax_coercion(audit: ConfigAuditMetrics) -> Reading:
    schema = audit.data_schema
    return Reading(
        args=(schema.coerced_values if schema is not None else math.nan,),
        measured=f"{schema.coerced_values if schema is not None else '—'} coerced value(s) in {audit.file}'s "
        "data",
        n=f"{schema.lines if schema is not None else 0} lines",
    )


def verdict_mask_leak(classes: Sequence[LeakClass], clean_examples: int, clean_failing: int) -> Verdict:
    """The field notes' two asserts — ``len(input_ids) == len(labels)`` and "the positions whose label is
    not -100 are exactly the target tokens' positions" — catch template/mask leaks.

    Judged per leak class a check of one training example can see, on leaking variants of the examples
    (end-of-turn masked by pad == eos, a target cut by truncation, prompt tokens trained, the mask
    boundary off by one, labels shifted one position), and on the clean examples. Holds when every
    leaking example of every class fails an assert and every clean one passes both; refuted when a leak
    passes both (a class they miss) or a clean example fails (a false alarm); inconclusive when no
    leaking example could be built. The leaks no per-example check can see (a BPE merge across the
    boundary, a training template inference does not render) are reported beside it, not judged."""
    built = [c for c in classes if c.examples > 0]
    if not built:
        return Verdict(INCONCLUSIVE, "no leaking example could be built from this data and template")
    missed = [c for c in built if c.missed]
    if missed:
        return Verdict(
            REFUTED,
            "leaks that pass both asserts: " + ", ".join(f"{c.name} {c.missed}/{c.examples}" for c in missed),
        )
    if clean_failing:
        return Verdict(
            REFUTED, f"the asserts fail {clean_failing} of {clean_examples} clean examples (false alarms)"
        )
    return Verdict(
        HOLDS, f"every leaking example of {len(built)} classes fails an assert; {clean_examples} clean pass"
    )


def read_mask_leak(mask: LossMaskMetrics) -> Reading:
    per_class = ", ".join(
        f"{c.name} {c.caught}/{c.examples} (length {c.caught_by_length}, positions {c.caught_by_positions})"
        for c in mask.leak_classes
    )
    unseen = ", ".join(f"{u.name} {u.examples} examples (caught {u.caught})" for u in mask.unseen_leaks)
    return Reading(
        args=(mask.leak_classes, mask.clean_examples, mask.clean_failing),
        measured=f"caught {per_class}; clean failing {mask.clean_failing}/{mask.clean_examples}; not "
        f"visible in one example, not judged: {unseen} [{mask.model}]",
        n=f"{mask.clean_examples} examples × {len(mask.leak_classes)} leak classes (exact counts)",
    )


def _draw_mask_leak(rng: Any, value: float, n: int) -> tuple:
    """An exact measurement of one class of 100 leaking examples, ``value`` of them caught, and 100
    clean examples that pass."""
    caught = round(100 * value)
    return ((LeakClass("leak", 100, caught, 0, caught),), 100, 0)


# -- reward-weights ---------------------------------------------------------------------------------


def verdict_kurtosis_rises(rise: float, se: float, level: float = 0.95) -> Verdict:
    """Reward kurtosis rises when sampling concentrates (notes: 2.1 → 5.7, a rise of 3.6): on one model's
    scored responses, the weighted kurtosis under the concentrated sampler minus the uniform one, with
    its bootstrap standard error over the responses (normal interval). Holds when the interval lies at
    or above 1.8 — half the notes' rise —, refuted when it lies below, else inconclusive."""
    if math.isnan(rise) or math.isnan(se):
        return Verdict(INCONCLUSIVE, "the kurtosis rise or its standard error was not measured")
    z = _z(level)
    return decide_at_least(
        (rise - z * se, rise + z * se),
        KURTOSIS_THRESHOLD,
        what="kurtosis rise",
        n_hint="more scored responses narrow it",
    )


def read_kurtosis(reward: RewardWeightsMetrics) -> Reading:
    rise, se = reward.kurtosis_rise, reward.kurtosis_rise_se
    return Reading(
        args=(rise, se),
        measured=f"{_pct(reward.kurtosis_uniform, '.2f')} → {_pct(reward.kurtosis_concentrated, '.2f')} "
        f"(uniform → β={reward.concentrated_beta:g}, γ={reward.concentrated_gamma:g}; effective sample size "
        f"{_pct(reward.ess_concentrated, '.1f')} of {reward.n_examples}) [{reward.model}]",
        n=f"{reward.n_examples} scored responses, bootstrapped",
        interval=fmt_interval((rise - 1.96 * se, rise + 1.96 * se)),
    )


def units_responses(cfg: RewardWeightsConfig) -> int:
    return int(cfg.examples)


def _draw_estimate(spread: float) -> Any:
    """A draw of an estimate over ``n`` units with standard error ``spread / √n``: ``(estimate, se)``."""

    def draw(rng: Any, value: float, n: int) -> tuple:
        se = spread / math.sqrt(n)
        return (float(rng.normal(value, se)), se)

    return draw


def verdict_kl_threshold(log_ratio: float, se: float, level: float = 0.95) -> Verdict:
    """KL > 0.18 flags a significant shift — the shift the notes' other rule (CI shrink > 42 %) calls
    over-fitting: on one model's scored responses, the β at which KL crosses 0.18 and the β at which the
    shrink crosses 42 % agree within ±25 % (log ratio inside ±log 1.25, normal interval from the bootstrap
    standard error over the responses): holds inside, refuted when the interval misses the band, else
    inconclusive (also when a rule never flags)."""
    if math.isnan(log_ratio) or math.isnan(se):
        return Verdict(
            INCONCLUSIVE, "one of the rules never flags a sampler below β = 64, or no standard error"
        )
    z = _z(level)
    return decide_close(
        (log_ratio - z * se, log_ratio + z * se),
        0.0,
        math.log(1 + RELATIVE_TOLERANCE),
        what="log(β where KL > 0.18 / β where shrink > 42 %)",
        n_hint="more scored responses narrow it",
    )


def read_kl_threshold(reward: RewardWeightsMetrics) -> Reading:
    lr, se = reward.crossing_log_ratio, reward.crossing_log_ratio_se
    return Reading(
        args=(lr, se),
        measured=f"KL crosses {reward.kl_threshold:g} at β = {_pct(reward.kl_crossing_beta)}, the shrink "
        f"crosses {reward.shrink_threshold:.0%} at β = {_pct(reward.shrink_crossing_beta)} (γ = "
        f"{reward.gamma:g}) [{reward.model}]",
        n=f"{reward.n_examples} scored responses, bootstrapped",
        interval=fmt_interval((lr - 1.96 * se, lr + 1.96 * se)),
    )


# -- schedulers, ddp-eval ---------------------------------------------------------------------------


def verdict_warmup_first_stage_only(ramps_in_stage2: int) -> Verdict:
    """Under SequentialLR(OneCycleLR, StepLR) the warmup ramps in the first stage only: holds at 0 rising
    ramps in stage 2, refuted when stage 2 ramps again."""
    if ramps_in_stage2 == 0:
        return Verdict(HOLDS, "no warmup ramp in stage 2")
    return Verdict(REFUTED, f"{ramps_in_stage2} warmup ramp(s) in stage 2")


def read_warmup_stage(schedulers: SchedulersMetrics) -> Reading:
    jump = schedulers.field_note_scenario_lr_jump_at_milestone
    return Reading(
        args=(schedulers.field_note_scenario_warmup_ramps_in_stage2,),
        measured=f"{schedulers.field_note_scenario_warmup_ramps_in_stage2} warmup ramp(s) in stage 2; the LR "
        f"jumps ×{jump:.3g} in one step at the milestone",
        n="300 scheduler steps (deterministic)",
    )


def verdict_eval_allreduce(extra_allreduces: float) -> Verdict:
    """Evaluating with gradients enabled (forward only) makes DDP all-reduce: holds at ≥ 1 extra
    all-reduce in that scenario, refuted at 0."""
    return decide_at_least(extra_allreduces, 1.0, what="extra all-reduces")


def read_eval_allreduce(ddp: DdpEvalMetrics) -> Reading:
    s = ddp.of("grad_no_backward")
    return Reading(
        args=(s.extra_allreduces,),
        measured=f"{_pct(s.extra_allreduces)} extra all-reduces (forward only) [tiny Llama, 2 ranks]",
        n=f"2 ranks × {ddp.train_steps} steps (exact counts)",
    )


def verdict_eval_backward(error_without_head: str, error_with_head: str) -> Verdict:
    """An eval backward outside ``no_sync`` corrupts DDP's reducer — by itself, not through parameters
    the eval loss leaves unused: judged on the model whose every parameter gets a gradient (the LM
    without its value head). Holds when that run raises a reducer error, refuted when it runs clean
    (an error only with the value head is the unused head's, which ``find_unused_parameters`` fixes)."""
    if error_without_head:
        return Verdict(HOLDS, f"reducer error with every parameter used: {error_without_head[:120]}")
    with_head = f"with the value head: {error_with_head[:90]}" if error_with_head else "clean with it too"
    return Verdict(REFUTED, f"the eval backward runs clean when every parameter is used ({with_head})")


def read_eval_backward(ddp: DdpEvalMetrics) -> Reading:
    head = ddp.unused_head
    bare, with_head = (head.error_every_parameter_used, head.error) if head else ("", "")
    return Reading(
        args=(bare, with_head),
        measured=f"without the value head: {bare[:60] or 'no error'}; with it: "
        f"{with_head[:60] or 'no error'} [tiny Llama, 2 ranks]",
        n=f"2 ranks × {ddp.train_steps} steps, with and without the value head",
    )


def _draw_eval_backward(rng: Any, value: float, n: int) -> tuple:
    """An exact observation: a reducer error without the value head (value 1) or only with it (0)."""
    error = "Expected to have finished reduction in the prior iteration"
    return (error if value >= 0.5 else "", error)


def _draw_token_count(rng: Any, value: float, n: int) -> tuple:
    """An exact measurement: the token-count error ``value`` beside a mean-of-means error of 5 %."""
    return (value, 0.05)


# -- designs ----------------------------------------------------------------------------------------

# The spread of one unit of each noisy row, measured at defaults (bench/RESULTS.md has the commands).
# sd of one seed's log steps ratio KISS / over, 8 seeds at defaults, SmolLM2-135M
KISS_LOG_RATIO_SD = 0.31
NOISE_CV = 0.27  # coefficient of variation of one pair's variance estimate, all parameters, SmolLM2-135M
# Bootstrap standard error × √responses on SmolLM2-135M's scored responses: the kurtosis rise's falls
# faster than 1/√n as the concentrated sampler's effective sample size grows (47 at 48 responses, 18 at
# 160, 13 at 480): the value at 480 plans the full profile. The crossings' log β ratio's is steady (1.3).
KURTOSIS_SPREAD = 12.8
CROSSING_SPREAD = 1.3
FLASH_LOG_SD = 0.05  # sd of one repetition's log time ratio on a GPU (assumed, see the design)
KISS_FULL_MINUTES = 7.0
SQRT_L_FULL_MINUTES = 3.0
REWARD_FULL_MINUTES = 2.0


def _exact(effect: float, null: float, source: str, draw: Any = None) -> Design:
    """The design of an exact measurement (a count, a dtype, bytes): no sampling error, so its
    simulation only shows the rule separating the claim (``effect``) from its null."""
    return Design(
        effect=effect,
        null=null,
        unit="",
        spread=0.0,
        spread_source=f"exact: {source}",
        draw=draw or exact_value(),
        n=1,
        units=lambda cfg: 1,
    )


def _draw_noise(cv: float) -> Any:
    """A draw of ``n`` independent variance estimates per default length, each the length's variance
    L^exponent times a gamma factor of mean 1 and coefficient of variation ``cv``."""
    lengths = tuple(sorted(GradAccumulationConfig().noise_lengths))

    def draw(rng: Any, value: float, n: int) -> tuple:
        k = 1.0 / cv**2
        return (lengths, tuple(tuple(rng.gamma(k, L**value / k, n)) for L in lengths))

    return draw


def _draw_flash(rng: Any, value: float, n: int) -> tuple:
    """``n`` interleaved repetitions on a GPU at a true speed-up ``value``: log-normal per-rep ratios."""
    return ("cuda:0", list(math.exp(x) for x in rng.normal(math.log(value), FLASH_LOG_SD, n)))


KISS_DESIGN = Design(
    effect=math.log(STEP_RATIO),
    null=0.0,
    unit="seed",
    spread=KISS_LOG_RATIO_SD,
    spread_source="measured: sd of the per-seed log steps ratio over 8 seeds at defaults, SmolLM2-135M "
    "(bench/RESULTS.md)",
    draw=normal_units(KISS_LOG_RATIO_SD),
    n=4,
    units=units_kiss,
    full_n=KISS_FULL_SEEDS,
    full_minutes=KISS_FULL_MINUTES,
    full_minutes_source="extrapolated from the CPU-minutes per seed of 8 seeds at defaults, two variants "
    "side by side on 2 cores (bench/RESULTS.md)",
)
FLASH_DESIGN = Design(
    effect=FLASH_SPEEDUP,
    null=FLASH_SPEEDUP / 2,
    unit="interleaved repetition",
    spread=FLASH_LOG_SD,
    spread_source="assumed: kernel timings of a 2048-token causal attention on one GPU vary by a few per "
    "cent between interleaved repetitions; no GPU measured it here",
    draw=_draw_flash,
    n=20,
    units=lambda cfg: int(cfg.reps),
)
SQRT_L_DESIGN = Design(
    effect=SQRT_L_EXPONENT,
    null=-1.0,
    unit="gradient pair",
    spread=NOISE_CV,
    spread_source="measured: coefficient of variation of one pair's variance estimate, 8 pairs at each "
    "default length, every parameter of SmolLM2-135M (bench/RESULTS.md)",
    draw=_draw_noise(NOISE_CV),
    n=4,
    units=units_sqrt_l,
    full_n=16,
    full_minutes=SQRT_L_FULL_MINUTES,
    full_minutes_source="extrapolated from the CPU-seconds per gradient sample over 64 samples "
    "(bench/RESULTS.md)",
)
KURTOSIS_DESIGN = Design(
    effect=KURTOSIS_RISE,
    null=0.0,
    unit="scored response",
    spread=KURTOSIS_SPREAD,
    spread_source="measured: bootstrap standard error of the rise × √480 over 480 scored responses, "
    "SmolLM2-135M (bench/RESULTS.md)",
    draw=_draw_estimate(KURTOSIS_SPREAD),
    n=48,
    units=units_responses,
    full_n=REWARD_FULL_RESPONSES,
    full_minutes=REWARD_FULL_MINUTES,
    full_minutes_source="extrapolated from scoring 480 responses (bench/RESULTS.md)",
)
KL_DESIGN = Design(
    effect=0.0,
    null=math.log(2.0),
    unit="scored response",
    spread=CROSSING_SPREAD,
    spread_source="measured: bootstrap standard error of the log β ratio × √n at 48, 160 and 480 scored "
    "responses, SmolLM2-135M (bench/RESULTS.md)",
    draw=_draw_estimate(CROSSING_SPREAD),
    n=48,
    units=units_responses,
    full_n=REWARD_FULL_RESPONSES,
    full_minutes=REWARD_FULL_MINUTES,
    full_minutes_source="extrapolated from scoring 480 responses (bench/RESULTS.md)",
)


# -- the specs --------------------------------------------------------------------------------------

REGISTRY.claim(
    ClaimSpec(
        key="kiss-share",
        claim=f"KISS q/v rank-8 LoRA trains {KISS_SHARE_PCT} % of the parameters (of {NOTES_MODEL})",
        field_note=f"{KISS_SHARE_PCT} %",
        source="§1",
        kind=ARITHMETIC,
        reads=("kiss-lora",),
        read=read_kiss_share,
        verdict=verdict_trainable_share,
        rule=Rule(
            f"within ±25 % of {KISS_SHARE_PCT} %", "exact", "within", KISS_SHARE_PCT, RELATIVE_TOLERANCE
        ),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="over-share",
        claim=f"q/v/o rank-64 LoRA trains {OVER_SHARE_PCT} % of the parameters (of {NOTES_MODEL})",
        field_note=f"{OVER_SHARE_PCT} %",
        source="§1",
        kind=ARITHMETIC,
        reads=("kiss-lora",),
        read=read_over_share,
        verdict=verdict_trainable_share,
        rule=Rule(
            f"within ±25 % of {OVER_SHARE_PCT} %", "exact", "within", OVER_SHARE_PCT, RELATIVE_TOLERANCE
        ),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="param-ratio",
        claim=f"q/v/o rank-64 has {PARAM_RATIO}× the trainable parameters of q/v rank-8",
        field_note=f"{PARAM_RATIO}×",
        source="§1",
        kind=ARITHMETIC,
        reads=("kiss-lora",),
        read=read_param_ratio,
        verdict=verdict_param_ratio,
        rule=Rule(f"within ±25 % of {PARAM_RATIO}", "exact", "within", PARAM_RATIO, RELATIVE_TOLERANCE),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="kiss-steps",
        claim="KISS reaches the validation-loss target in fewer steps",
        field_note=f"{KISS_STEPS} vs {OVER_STEPS} steps (ratio {STEP_RATIO:.2f})",
        source="§1",
        kind=MEASURED,
        reads=("kiss-lora",),
        read=read_kiss_steps,
        verdict=verdict_kiss_steps,
        rule=Rule(
            "t interval over seeds of the geometric-mean steps ratio KISS / over "
            f"≤ {STEP_RATIO_THRESHOLD:.3f} "
            f"(halfway on the log scale between the notes' {STEP_RATIO:.2f} and 1) holds, > refutes",
            "t",
            "at most",
            STEP_RATIO_THRESHOLD,
            unit="seed",
        ),
        design=KISS_DESIGN,
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="kiss-peak",
        claim="KISS peak memory is 0.66 of the over-parameterised run's (on the audit's model: the notes' "
        "figure is their 7B model's on an A100)",
        field_note=f"{PEAK_KISS_GB} / {PEAK_OVER_GB} GB = {PEAK_KISS_GB / PEAK_OVER_GB:.2f}",
        source="§1",
        kind=MEASURED,
        reads=("kiss-lora",),
        read=read_peak_ratio,
        verdict=verdict_peak_ratio,
        rule=Rule("within ±0.10 of 0.66", "exact", "within", PEAK_KISS_GB / PEAK_OVER_GB, 0.10),
        design=_exact(
            PEAK_KISS_GB / PEAK_OVER_GB,
            1.0,
            "tensor bytes of one optimiser step (CUDA: the allocator's peak)",
        ),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="binding-asserts",
        claim="A.shape[1]==B.shape[0] and W0.shape==(A.shape[0], B.shape[1]) validate LoRA binding",
        field_note="asserts pass",
        source="§2.1",
        kind=LIBRARY_FACT,
        reads=("lora-binding",),
        read=read_binding_asserts,
        verdict=verdict_binding_asserts,
        rule=Rule("all adapted modules pass holds; any module failing refutes", "flag"),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="lora-scaling",
        claim="the update is W0 + α·ΔW (scaling α)",
        field_note="scale = α",
        source="§2.1",
        kind=LIBRARY_FACT,
        reads=("lora-binding",),
        read=read_scaling,
        verdict=verdict_scaling,
        rule=Rule("applied scale equals α (1e-9 relative) holds, another scale refutes", "exact", "within"),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="zh-labels",
        claim="Chinese tokenisation breaks span labels",
        field_note=f"boundary F1 {ZH_F1_PCT} % (coverage 63.7 %)",
        source="§2.2",
        kind=MEASURED,
        reads=("label-alignment",),
        read=read_zh_labels,
        verdict=verdict_zh_labels,
        rule=Rule(
            f"F1 ≤ {ZH_F1_THRESHOLD:.1f} % (halfway between the notes' {ZH_F1_PCT} % and a lossless "
            "round trip) "
            "holds, above refutes",
            "exact",
            "at most",
            ZH_F1_THRESHOLD,
        ),
        design=_exact(ZH_F1_PCT, 100.0, "the bundled file's spans through a deterministic tokenizer"),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="en-offsets",
        claim="byte-level offsets carry the leading space (the notebook's own claim)",
        field_note="—",
        source="notebook 04",
        kind=LIBRARY_FACT,
        reads=("label-alignment",),
        read=read_en_offsets,
        verdict=verdict_en_offsets,
        rule=Rule("untrimmed F1 ≥ 1 point below trimmed holds, else refuted", "exact", "at least", 1.0),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="flash-speedup",
        claim="FlashAttention-2 gives 3.8× the throughput of naive attention",
        field_note=f"{FLASH_SPEEDUP}×",
        source="§2.3",
        kind=MEASURED,
        reads=("attention",),
        read=read_flash_speedup,
        verdict=verdict_flash_speedup,
        rule=Rule(
            "t interval over interleaved repetitions of the flash/math time ratio within ±25 % of 3.8 holds, "
            "outside refutes (CUDA)",
            "t",
            "within",
            FLASH_SPEEDUP,
            RELATIVE_TOLERANCE,
            unit="interleaved repetition",
        ),
        design=FLASH_DESIGN,
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="sqrt-l",
        claim="accumulation steps must scale with √L (gradient variance ∝ L^-0.5)",
        field_note="exponent −0.5",
        source="§2.4",
        kind=MEASURED,
        reads=("grad-accumulation",),
        read=read_sqrt_l,
        verdict=verdict_sqrt_l,
        rule=Rule(
            "t interval of the exponent (within-length spread of independent estimates) inside −0.5 ± 0.25 "
            "holds, outside refutes",
            "t",
            "within",
            SQRT_L_EXPONENT,
            0.25,
            unit="gradient pair",
        ),
        design=SQRT_L_DESIGN,
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="token-count",
        claim="micro-batch means equal the large batch only with token-count normalisation (the notebook's "
        "own claim)",
        field_note="—",
        source="notebook 04",
        kind=MEASURED,
        reads=("grad-accumulation",),
        read=read_token_count,
        verdict=verdict_token_count,
        rule=Rule(
            "token-count err < 1e-4 and mean-of-means > 1e-3 holds; token-count ≥ 1e-3 or "
            "mean-of-means < 1e-4 refutes",
            "exact",
            "at most",
            1e-4,
        ),
        design=_exact(1e-7, 0.01, "relative errors of gradients computed in float32", _draw_token_count),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="baddbmm",
        claim="torch.baddbmm executes in float32 under bf16 autocast",
        field_note="float32",
        source="§2.5",
        kind=LIBRARY_FACT,
        reads=("dtypes",),
        read=read_baddbmm,
        verdict=verdict_op_dtype,
        rule=Rule("result dtype float32 holds, another dtype or an error refutes", "flag"),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="index-add",
        claim="index_add_ keeps a bf16 cache bf16 (a float32 update added in place)",
        field_note="keeps bf16",
        source="§2.5",
        kind=LIBRARY_FACT,
        reads=("dtypes",),
        read=read_index_add,
        verdict=verdict_index_add_keeps,
        rule=Rule("a float32 source accepted and bf16 kept holds; an error or another dtype refutes", "flag"),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="index-copy",
        claim="index_copy_ silently recasts a non-matching source (hence the explicit .to())",
        field_note="silent recast",
        source="§2.5",
        kind=LIBRARY_FACT,
        reads=("dtypes",),
        read=read_index_copy,
        verdict=verdict_index_copy_recast,
        rule=Rule("returns a dtype holds, raises refutes", "flag"),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="kv-cache",
        claim="the KV cache crosses the bf16/float32 boundary without a declaration",
        field_note="implicit upcast",
        source="§2.5",
        kind=MEASURED,
        reads=("dtypes",),
        read=read_kv_cache,
        verdict=verdict_kv_cache_boundary,
        rule=Rule("keys and values in different dtypes holds; one dtype refutes", "flag"),
        design=_exact(1.0, 0.0, "the cache's dtypes after one forward", _draw_kv),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="lax-coercion",
        claim="lax parsing silently coerces '42' for an int field (strict rejects)",
        field_note="coercion happens",
        source="§3.1",
        kind=DEMONSTRATION,
        reads=("audit",),
        read=read_lax_coercion,
        verdict=verdict_lax_coercion,
        rule=Rule(
            "≥ 1 coercion in the broken file (written with such values) holds, 0 refutes",
            "exact",
            "at least",
            1.0,
        ),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="mask-leak",
        claim="len(input_ids)==len(labels) and non -100 label positions == the target tokens' positions "
        "catch template/mask leaks",
        field_note="the check catches leaks",
        source="§3.2",
        kind=MEASURED,
        reads=("loss-mask",),
        read=read_mask_leak,
        verdict=verdict_mask_leak,
        rule=Rule(
            "every leaking example of every class a per-example check can see fails an assert and every "
            "clean one passes both holds; a leak passing both, or a clean example failing, refutes",
            "flag",
        ),
        design=_exact(1.0, 0.0, "counts of leaking examples the asserts catch, per class", _draw_mask_leak),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="kurtosis",
        claim="reward kurtosis rises when sampling concentrates",
        field_note=f"{KURTOSIS_COLD} → {KURTOSIS_CONCENTRATED}",
        source="§3.3",
        kind=MEASURED,
        reads=("reward-weights",),
        read=read_kurtosis,
        verdict=verdict_kurtosis_rises,
        rule=Rule(
            f"bootstrap interval of the rise (uniform → concentrated) ≥ {KURTOSIS_THRESHOLD:.1f} (half the "
            f"notes' {KURTOSIS_RISE:.1f}) holds, below refutes",
            "bootstrap",
            "at least",
            KURTOSIS_THRESHOLD,
            unit="scored response",
        ),
        design=KURTOSIS_DESIGN,
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="kl-threshold",
        claim=f"KL > {KL_THRESHOLD} flags a significant shift (the samplers the notes' CI shrink > "
        f"{SHRINK_THRESHOLD:.0%} flags)",
        field_note=f"{KL_THRESHOLD}",
        source="§3.3",
        kind=MEASURED,
        reads=("reward-weights",),
        read=read_kl_threshold,
        verdict=verdict_kl_threshold,
        rule=Rule(
            f"bootstrap interval of the β where KL > {KL_THRESHOLD} over the β where the shrink > "
            f"{SHRINK_THRESHOLD:.0%} within ±25 % of 1 holds, outside refutes",
            "bootstrap",
            "within",
            0.0,
            math.log(1 + RELATIVE_TOLERANCE),
            unit="scored response",
        ),
        design=KL_DESIGN,
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="warmup-stage",
        claim="under SequentialLR(OneCycleLR, StepLR) the warmup applies to the first stage only",
        field_note="stage 2 gets 0 warmup steps",
        source="§4.2",
        kind=LIBRARY_FACT,
        reads=("schedulers",),
        read=read_warmup_stage,
        verdict=verdict_warmup_first_stage_only,
        rule=Rule("0 ramps in stage 2 holds, ≥ 1 refutes (the milestone's one-step jump is shown)", "flag"),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="eval-allreduce",
        claim="evaluating with gradients enabled makes DDP trigger all-reduce",
        field_note="all-reduce triggered",
        source="§4.4",
        kind=MEASURED,
        reads=("ddp-eval",),
        read=read_eval_allreduce,
        verdict=verdict_eval_allreduce,
        rule=Rule("≥ 1 extra all-reduce holds, 0 refutes", "exact", "at least", 1.0),
        design=_exact(2.0, 0.0, "all-reduce calls counted by a communication hook"),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="eval-backward",
        claim="an eval backward without no_sync corrupts the reducer state",
        field_note="reducer error",
        source="§4.4",
        kind=MEASURED,
        reads=("ddp-eval",),
        read=read_eval_backward,
        verdict=verdict_eval_backward,
        rule=Rule(
            "a reducer error with every parameter used (no value head) holds; a clean run there refutes",
            "flag",
        ),
        design=_exact(1.0, 0.0, "a reducer error raised or not, per scenario", _draw_eval_backward),
    )
)

# -- the headline -----------------------------------------------------------------------------------

REGISTRY.headline_number(
    HeadlineSpec(
        "broken_config_failures",
        ("audit",),
        lambda audit: audit.failures,
        help="checks that fail on the deliberately broken config",
    )
)
REGISTRY.headline_number(
    HeadlineSpec(
        "kiss_steps_ratio",
        ("kiss-lora",),
        lambda kiss: (
            math.exp(sum(kiss.log_step_ratios) / len(kiss.log_step_ratios))
            if kiss.log_step_ratios
            else math.nan
        ),
        tolerance=0.5,
        relative=True,
        help="geometric-mean steps to the target, KISS / over-parameterised",
    )
)
REGISTRY.headline_number(
    HeadlineSpec(
        "notes_model_param_ratio",
        ("kiss-lora",),
        lambda kiss: kiss.notes_param_ratio,
        help=f"trainable parameters, q/v/o rank 64 over q/v rank 8, on {NOTES_MODEL}",
    )
)
REGISTRY.headline_number(
    HeadlineSpec(
        "noise_variance_slope",
        ("grad-accumulation",),
        lambda grad: grad.noise_variance_slope,
        tolerance=0.3,
        help="fitted exponent of gradient-noise variance vs sequence length",
    )
)
REGISTRY.headline_number(
    HeadlineSpec(
        "leak_classes_missed",
        ("loss-mask",),
        lambda mask: sum(1 for c in mask.leak_classes if c.missed),
        help="leak classes the field notes' two asserts let through",
    )
)

judge = REGISTRY.judge
headline = REGISTRY.headline
