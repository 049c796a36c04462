"""The field notes' fine-tuning claims next to this run's measurements, decided by named rules.

Each ``verdict_*`` takes the typed metrics of one check (``XMetrics``, the fields the check fills on
CPU and on CUDA alike) and returns a :class:`~nbkit.claims.Verdict`; its rule and tolerance are in its
docstring. Every rule is two-sided — it can say holds, refuted or inconclusive — and a figure the run
did not produce is "inconclusive" (or "needs GPU" where only CUDA can measure it). :func:`claims`
assembles the rows from the metrics of the good config's checks and of the broken one's data-schema
check; :func:`claims_of` reads those from the two audit contexts.

Two rows of the old table are gone: "missing-field share is a useful headline" (the field notes
define it as a metric; nothing can refute a definition) and "ZeRO-3 slices by flat shape, ignoring KV
head groups" (the layout is computed from DeepSpeed's flat-partition rule, so its verdict would only
restate the model of it). For the same reason there is no row for "a persistence threshold of 1e9
replicates every tensor": the zero3-layout check applies DeepSpeed's rule (numel ≤ threshold persists),
so at 1e9 the row could only hold; the check still shows the layout.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, TypeVar

from nbkit.audit.check import CheckMetrics
from nbkit.audit.checks.attention import AttentionMetrics
from nbkit.audit.checks.data_schema import DataSchemaMetrics
from nbkit.audit.checks.ddp_eval import DdpEvalMetrics
from nbkit.audit.checks.dtypes import DtypesMetrics
from nbkit.audit.checks.fragmentation import FragmentationMetrics
from nbkit.audit.checks.grad_accumulation import GradAccumulationMetrics
from nbkit.audit.checks.kiss import KissMetrics
from nbkit.audit.checks.label_alignment import LabelAlignmentMetrics
from nbkit.audit.checks.lora_binding import LoraBindingMetrics
from nbkit.audit.checks.loss_mask import LossMaskMetrics
from nbkit.audit.checks.reward_weights import RewardWeightsMetrics
from nbkit.audit.checks.schedulers import SchedulersMetrics
from nbkit.audit.experiments import AuditContext
from nbkit.claims import (
    HOLDS,
    INCONCLUSIVE,
    REFUTED,
    Claim,
    Verdict,
    decide_at_least,
    decide_at_most,
    decide_close,
    fmt_interval,
    needs_gpu,
    rate_interval,
)
from nbkit.zero.claims import GAP_MIN_DIFF, verdict_gap_difference  # one fragmentation claim, one verdict

M = TypeVar("M", bound=CheckMetrics)

# The figure keys of the dtype probes the claims judge (the check writes one per op and dtype pair).
BADDBMM = "baddbmm [float32 inputs under torch.bfloat16 autocast]"
INDEX_ADD = "index_add_ [torch.bfloat16 cache, torch.bfloat16 source]"
INDEX_COPY = "index_copy_ [torch.bfloat16 cache, float32 source]"


def _missing(what: str) -> Verdict:
    return Verdict(INCONCLUSIVE, f"{what} was not measured in this run")


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else float("nan")


def _or(m: M | None, Metrics: type[M]) -> M:
    """``m``, or metrics of a check that did not run (every figure ``None``)."""
    return m if m is not None else Metrics()


def _d(v: Any) -> Any:
    """``v``, or "—" when it was not measured."""
    return "—" if v is None else v


# -- kiss-lora ------------------------------------------------------------------------------------


def verdict_trainable_share(m: KissMetrics | None, variant: str, claimed: float) -> Verdict:
    """``{variant}_trainable_share_pct`` equals the field notes' share within ±25 % of it (PEFT's exact
    count)."""
    m = _or(m, KissMetrics)
    share = m.kiss_trainable_share_pct if variant == "kiss" else m.over_trainable_share_pct
    return decide_close(_num(share), claimed, 0.25, relative=True, what=f"{variant} trainable share %")


def verdict_param_ratio(m: KissMetrics | None) -> Verdict:
    """Over-parameterised / KISS trainable parameters equals 3.2 within ±25 %."""
    return decide_close(
        _num(_or(m, KissMetrics).param_ratio_over_vs_kiss),
        3.2,
        0.25,
        relative=True,
        what="trainable-parameter ratio",
    )


def verdict_kiss_steps(m: KissMetrics | None) -> Verdict:
    """KISS reaches the validation-loss target in fewer steps than the over-parameterised LoRA.

    Counted per seed (each seed its own split, initialisation and batch order): which variant reached
    the target first. Rule: the share of decided seeds where KISS was first has a Wilson 95 % interval
    at or above 0.5 (holds) or wholly below 0.5 (refuted); else inconclusive — also when no seed was
    decided (ties at the same evaluation step and seeds where neither got there are not counted, as
    in a sign test). One seed can never decide (its interval spans 0.5); four unanimous seeds can.
    """
    m = _or(m, KissMetrics)
    if m.seeds_kiss_first is None or m.seeds_over_first is None:
        return _missing("steps to the validation target over seeds")
    k, o = int(m.seeds_kiss_first), int(m.seeds_over_first)
    ties, neither = int(m.seeds_tie or 0), int(m.seeds_neither or 0)
    rest = f"; {ties} tied, {neither} reached by neither" if ties or neither else ""
    if k + o == 0:
        return Verdict(
            INCONCLUSIVE,
            f"no seed decided which variant is faster ({ties} tied, {neither} reached by neither) — raise "
            "the budget",
        )
    lo, hi = rate_interval(k, k + o)
    return decide_at_least(
        (lo, hi),
        0.5,
        what=f"share of seeds where KISS reached the target first ({k} of {k + o}{rest})",
        n_hint=f"{k + o} decided seeds; more seeds would narrow it",
    )


def verdict_peak_ratio(m: KissMetrics | None) -> Verdict:
    """KISS / over-parameterised peak memory equals 28.1/42.3 = 0.66 within ±0.10."""
    return decide_close(
        _num(_or(m, KissMetrics).peak_ratio_kiss_vs_over), 0.66, 0.10, what="peak-memory ratio"
    )


# -- lora-binding ---------------------------------------------------------------------------------


def verdict_binding_asserts(m: LoraBindingMetrics | None) -> Verdict:
    """The field notes' two shape asserts hold on every adapted module (``k/n modules``): holds when
    k = n > 0, refuted when k < n, inconclusive when nothing was adapted or not measured."""
    text = _or(m, LoraBindingMetrics).field_note_asserts_hold_on
    if not text:
        return _missing("the asserts")
    k, n = (int(x) for x in str(text).split()[0].split("/"))
    if n == 0:
        return Verdict(INCONCLUSIVE, "no module was adapted")
    if k == n:
        return Verdict(HOLDS, f"both asserts pass on all {n} adapted modules")
    return Verdict(
        REFUTED,
        f"the asserts pass on {k} of {n} modules: PEFT stores A as (r, in) and B as (out, r), the transposes "
        "of the notes' layout",
    )


def verdict_scaling(m: LoraBindingMetrics | None) -> Verdict:
    """The scale PEFT applies equals α (the notes' W0 + α·ΔW) within 1e-9 relative; α/r ≠ α refutes."""
    m = _or(m, LoraBindingMetrics)
    alpha = _num(m.alpha)
    if math.isnan(alpha):
        return _missing("the scaling")
    return decide_close(_num(m.scaling_applied), alpha, 1e-9, relative=True, what="applied scale")


# -- label-alignment ------------------------------------------------------------------------------


def verdict_zh_labels(m: LabelAlignmentMetrics | None) -> Verdict:
    """Chinese tokenisation breaks span labels: holds when the round-trip boundary F1 is ≤ 90 %,
    refuted when it is above (the notes report 71.3 %)."""
    return decide_at_most(
        _num(_or(m, LabelAlignmentMetrics).zh_boundary_f1_pct), 90.0, what="Chinese boundary F1 %"
    )


def verdict_en_offsets(m: LabelAlignmentMetrics | None) -> Verdict:
    """Byte-level offsets carry the leading space: the untrimmed English boundary F1 is at least
    1 point below the trimmed one (holds), else refuted."""
    m = _or(m, LabelAlignmentMetrics)
    trimmed, untrimmed = _num(m.en_boundary_f1_pct), _num(m.en_untrimmed_offsets_f1_pct)
    return decide_at_least(trimmed - untrimmed, 1.0, what="F1 lost to untrimmed offsets (points)")


# -- attention ------------------------------------------------------------------------------------


def verdict_flash_speedup(m: AttentionMetrics | None) -> Verdict:
    """FlashAttention over math SDPA throughput equals 3.8× within ±25 % on CUDA, judged on the range
    across repetitions (``flash_over_math_cuda_low/high``); needs a GPU when the run had none."""
    m = _or(m, AttentionMetrics)
    if m.flash_over_math_cuda is None:
        if str(m.device or "").startswith("cuda"):
            return _missing("the CUDA flash/math ratio")
        return needs_gpu("FlashAttention throughput")
    lo, hi = m.flash_over_math_cuda_low, m.flash_over_math_cuda_high
    value = (lo, hi) if lo is not None and hi is not None else m.flash_over_math_cuda
    return decide_close(value, 3.8, 0.25, relative=True, what=f"flash/math at L={m.flash_over_math_L}")


# -- grad-accumulation ----------------------------------------------------------------------------


def verdict_sqrt_l(m: GradAccumulationMetrics | None) -> Verdict:
    """Accumulation must scale with √L: the fitted exponent of gradient variance vs length is −0.5
    within ±0.25. Holds when the slope's 95 % bootstrap interval (independent variance estimates, one
    per disjoint pair of gradient samples, resampled within each length) lies inside [−0.75, −0.25],
    refuted when it misses that band entirely (e.g. ≈ −1,
    the linear rule, or ≥ 0), else inconclusive."""
    m = _or(m, GradAccumulationMetrics)
    lo, hi = _num(m.noise_variance_slope_ci_low), _num(m.noise_variance_slope_ci_high)
    if math.isnan(_num(m.noise_variance_slope)):
        return _missing("the variance slope")
    if math.isnan(lo) or math.isnan(hi):
        return Verdict(
            INCONCLUSIVE,
            f"slope {m.noise_variance_slope:.2f} from {m.noise_lengths} lengths has no interval — n too "
            "small; fit ≥ 3 lengths of ≥ 6 samples (3 independent pairs)",
        )
    return decide_close(
        (lo, hi), -0.5, 0.25, what="variance exponent", n_hint="more lengths or samples per length narrow it"
    )


def verdict_token_count_normalisation(m: GradAccumulationMetrics | None) -> Verdict:
    """Accumulated micro-batch means equal the one-batch gradient only with token-count normalisation.

    Holds when token-count normalisation matches (rel. err < 1e-4) and the mean of micro-batch means
    does not (> 1e-3); refuted when token-count normalisation misses (≥ 1e-3) or the mean of means
    matches too (< 1e-4); inconclusive in between.
    """
    m = _or(m, GradAccumulationMetrics)
    em, et = _num(m.rel_err_per_microbatch_mean), _num(m.rel_err_token_count)
    if math.isnan(em) or math.isnan(et):
        return _missing("the accumulation errors")
    if et < 1e-4 and em > 1e-3:
        return Verdict(HOLDS, f"token-count error {et:.1e} < 1e-4; mean-of-means error {em:.2%} > 0.1 %")
    if et >= 1e-3 or em < 1e-4:
        return Verdict(REFUTED, f"token-count error {et:.1e}, mean-of-means error {em:.1e}")
    return Verdict(
        INCONCLUSIVE,
        f"errors {et:.1e} / {em:.1e} fall between the tolerances (micro-batches of near-equal token counts?)",
    )


# -- dtypes ---------------------------------------------------------------------------------------


def verdict_op_dtype(v: str | None, key: str, expected: str) -> Verdict:
    """The op's result dtype ``v`` (the probe named ``key``) is ``expected``: holds when equal, refuted
    on another dtype or an error, inconclusive when the probe did not run."""
    if v is None:
        return _missing(key)
    if v == expected:
        return Verdict(HOLDS, f"{key} → {v}")
    return Verdict(REFUTED, f"{key} → {str(v)[:80]}, not {expected}")


def verdict_index_copy_recast(v: str | None, key: str) -> Verdict:
    """``index_copy_`` silently recasts a source of another dtype: holds when it returns a dtype ``v``,
    refuted when it raises (torch refuses the mismatch), inconclusive when the probe did not run."""
    if v is None:
        return _missing(key)
    if "Error" in str(v) or "must have the same" in str(v):
        return Verdict(REFUTED, f"index_copy_ raises on the mismatch: {str(v)[:80]}")
    return Verdict(HOLDS, f"index_copy_ accepted the mismatch and returned {v}")


def verdict_kv_cache_boundary(m: DtypesMetrics | None) -> Verdict:
    """The KV cache crosses the bf16/float32 boundary without a declaration: holds when keys and
    values differ in dtype or either is float32 under low-precision autocast, refuted when both are
    the low-precision dtype."""
    m = _or(m, DtypesMetrics)
    kd, vd = m.kv_cache_keys_dtype, m.kv_cache_values_dtype
    if kd is None or vd is None:
        return _missing("the KV-cache dtypes")
    if kd != vd or "float32" in str(kd) or "float32" in str(vd):
        return Verdict(HOLDS, f"cache keys {kd}, values {vd}")
    return Verdict(REFUTED, f"cache keys and values both {kd}: no boundary crossed")


# -- data-schema, loss-mask (broken config) --------------------------------------------------------


def verdict_lax_coercion(m: DataSchemaMetrics | None) -> Verdict:
    """Lax parsing silently coerces "42" for an int field: holds when the broken file (which has such
    values) shows ≥ 1 coercion that strict mode rejects, refuted at 0."""
    counts = _or(m, DataSchemaMetrics).issue_counts
    if counts is None:
        return _missing("the issue counts")
    return decide_at_least(float(counts.get("coerced (strict rejects)", 0)), 1.0, what="coerced values")


def verdict_mask_check_catches_leak(m: LossMaskMetrics | None) -> Verdict:
    """The field notes' two asserts — ``len(input_ids) == len(labels)`` and "the unmasked labels are
    exactly the target tokens" (decoded labels == target text) — catch template/mask leaks.

    Judged on ``field_note_asserts``: the two asserts run on leaking examples of each class the SFT
    path can produce (end-of-turn masked by ``labels[labels == pad] = -100`` with pad == eos, a target
    cut by truncation, prompt tokens trained, the mask boundary off by one) and on the clean examples.
    Holds when every leaking example fails at least one assert and every clean one passes both;
    refuted when some leaking example passes both (a leak they miss) or a clean one fails (a false
    alarm); inconclusive when no leaking example could be built.
    """
    probe = _or(m, LossMaskMetrics).field_note_asserts
    if not probe:
        return _missing("the field notes' asserts on leaking examples")
    classes = probe.get("leaks", {})
    built = {c: v for c, v in classes.items() if v.get("examples", 0) > 0}
    if not built:
        return Verdict(INCONCLUSIVE, "no leaking example could be built from this data and template")
    missed = {c: v["examples"] - v["caught"] for c, v in built.items() if v["caught"] < v["examples"]}
    clean_n, clean_fail = int(probe.get("clean_examples", 0)), int(probe.get("clean_failing", 0))
    caught = ", ".join(
        f"{c} {v['caught']}/{v['examples']} (length {v['length_fires']}, decode {v['decode_fires']})"
        for c, v in built.items()
    )
    if missed:
        return Verdict(
            REFUTED,
            "leaks that pass both asserts: "
            + ", ".join(f"{c}: {m}" for c, m in missed.items())
            + f" — caught: {caught}",
        )
    if clean_fail:
        return Verdict(
            REFUTED,
            f"the asserts fail {clean_fail} of {clean_n} clean examples (false alarms); caught: {caught}",
        )
    return Verdict(
        HOLDS, f"every leaking example fails an assert ({caught}); {clean_n} clean examples pass both"
    )


# -- reward-weights -------------------------------------------------------------------------------


def verdict_kurtosis_rises(m: RewardWeightsMetrics | None) -> Verdict:
    """Reward kurtosis rises when sampling concentrates (notes: 2.1 → 5.7): on one model's scored
    responses, the weighted kurtosis under the concentrated sampler (``concentrated_beta``/``_gamma``,
    broken.yaml's β = 8, γ = 0) exceeds the uniform one by ≥ 1 (holds); refuted when it does not."""
    m = _or(m, RewardWeightsMetrics)
    ku, kw = _num(m.kurtosis_uniform), _num(m.kurtosis_concentrated)
    return decide_at_least(kw - ku, 1.0, what="kurtosis rise")


def verdict_kl_threshold(m: RewardWeightsMetrics | None) -> Verdict:
    """KL > 0.18 separates a concentrated sampler from a calm one, on the same model and responses:
    holds when the concentrated sampler's KL (broken.yaml's β, γ) is above 0.18 and the configured
    (calm) one's at or below; refuted when both fall on the same side; inconclusive when the calm one
    is flagged and the concentrated one not."""
    m = _or(m, RewardWeightsMetrics)
    kg, kb = _num(m.kl_sampled_vs_reward), _num(m.kl_concentrated)
    if math.isnan(kg) or math.isnan(kb):
        return _missing("KL of both samplers")
    if kb > 0.18 >= kg:
        return Verdict(HOLDS, f"KL {kb:.3f} (concentrated, flagged) vs {kg:.3f} (configured)")
    if (kb > 0.18) == (kg > 0.18):
        return Verdict(REFUTED, f"both on the same side of 0.18: configured {kg:.3f}, concentrated {kb:.3f}")
    return Verdict(
        INCONCLUSIVE, f"the configured sampler is flagged ({kg:.3f}) and the concentrated one not ({kb:.3f})"
    )


# -- zero3-layout, schedulers ---------------------------------------------------------------------


# The persistence claim is measured by the ZeRO ladder (notebook 02, nbkit.zero.claims.verdict_persistence):
# the zero3-layout check applies DeepSpeed's rule, and a rule restated cannot refute itself.


def verdict_warmup_first_stage_only(m: SchedulersMetrics | None) -> Verdict:
    """Under SequentialLR(OneCycleLR, StepLR) the warmup ramps in the first stage only: holds at 0
    rising ramps in stage 2, refuted when stage 2 ramps again."""
    w2 = _or(m, SchedulersMetrics).field_note_scenario_warmup_ramps_in_stage2
    if w2 is None:
        return _missing("the warmup ramps")
    return (
        Verdict(HOLDS, "no warmup ramp in stage 2")
        if w2 == 0
        else Verdict(REFUTED, f"{w2} warmup ramp(s) in stage 2")
    )


# -- fragmentation --------------------------------------------------------------------------------


def verdict_fragmentation(m: FragmentationMetrics | None) -> Verdict:
    """Checkpointing more often fragments more (notes: gap 0.42 at 50 vs 0.18 at 200 steps): the ZeRO
    theme's verdict of the same claim (``nbkit.zero.claims.verdict_gap_difference``, one threshold) on
    the per-repeat difference of mean gap ratios (configured − reference), each repeat its own run pair;
    one run pair: inconclusive. Needs CUDA's caching allocator."""
    m = _or(m, FragmentationMetrics)
    if m.gap_ratio_configured is None:
        device = "cuda" if m.device is None else m.device
        return (
            needs_gpu("the caching allocator's gap ratio")
            if not device.startswith("cuda")
            else _missing("the gap ratio")
        )
    diffs = m.gap_ratio_diff_per_repeat or [m.gap_ratio_configured - _num(m.gap_ratio_reference)]
    return verdict_gap_difference(diffs, what=f"gap({m.configured_interval}) − gap({m.reference_interval})")


# -- ddp-eval -------------------------------------------------------------------------------------


def verdict_eval_allreduce(m: DdpEvalMetrics | None) -> Verdict:
    """Evaluating with gradients enabled (forward only) makes DDP all-reduce: holds at ≥ 1 extra
    all-reduce in that scenario, refuted at 0."""
    return decide_at_least(
        _num(_or(m, DdpEvalMetrics).grad_no_backward_extra_allreduces), 1.0, what="extra all-reduces"
    )


def verdict_eval_backward_breaks_reducer(m: DdpEvalMetrics | None) -> Verdict:
    """An eval backward outside no_sync corrupts the reducer: holds when that scenario raised a
    reducer error, refuted when it ran clean."""
    m = _or(m, DdpEvalMetrics)
    if m.backward_extra_allreduces is None:
        return _missing("the backward scenario")
    err = m.backward_error
    return (
        Verdict(HOLDS, f"reducer error: {err}")
        if err
        else Verdict(REFUTED, "the eval backward ran without a reducer error")
    )


# -- the table ------------------------------------------------------------------------------------


def _fmt(v: Any, spec: str = ".3g") -> str:
    if v is None:
        return "—"
    return format(v, spec) if isinstance(v, float) else str(v)


def claims(
    kiss: KissMetrics | None = None,
    binding: LoraBindingMetrics | None = None,
    labels: LabelAlignmentMetrics | None = None,
    attention: AttentionMetrics | None = None,
    grad: GradAccumulationMetrics | None = None,
    dtypes: DtypesMetrics | None = None,
    loss_mask: LossMaskMetrics | None = None,
    reward: RewardWeightsMetrics | None = None,
    schedulers: SchedulersMetrics | None = None,
    fragmentation: FragmentationMetrics | None = None,
    ddp: DdpEvalMetrics | None = None,
    broken_schema: DataSchemaMetrics | None = None,
) -> list[Claim]:
    """The claims rows from the good config's checks and the broken config's data-schema check.

    Every row measured on a model names it (each metrics' ``model``; the field notes' figures are
    about their own model, not this one); a check that did not run leaves its rows "not measured"."""
    # kiss-lora may train another model than the audit's (its ``model``): the others name the audit's.
    good = (binding, labels, attention, grad, dtypes, loss_mask, reward, schedulers, fragmentation, ddp)
    good_model = next((m.model for m in good if m is not None and m.model), "")
    k, lb, la = _or(kiss, KissMetrics), _or(binding, LoraBindingMetrics), _or(labels, LabelAlignmentMetrics)
    at, ga, dt = (
        _or(attention, AttentionMetrics),
        _or(grad, GradAccumulationMetrics),
        _or(dtypes, DtypesMetrics),
    )
    rw_g, sc = _or(reward, RewardWeightsMetrics), _or(schedulers, SchedulersMetrics)
    fr, dd = _or(fragmentation, FragmentationMetrics), _or(ddp, DdpEvalMetrics)
    ds_b, lm = _or(broken_schema, DataSchemaMetrics), _or(loss_mask, LossMaskMetrics)
    lm_probe = lm.field_note_asserts or {}
    kiss_decided = int(k.seeds_kiss_first or 0) + int(k.seeds_over_first or 0)
    kiss_n = (
        f"{_d(k.seeds)} seeds ({kiss_decided} decided), each its own split, init and batch order; "
        f"≤ {k.budget_steps} steps per variant"
    )
    kiss_interval = (
        fmt_interval(rate_interval(int(k.seeds_kiss_first or 0), kiss_decided)) if kiss_decided else ""
    )
    on_good = f" [{good_model}]" if good_model else ""
    on_broken = f" [{broken_schema.model}]" if broken_schema is not None and broken_schema.model else ""
    on_kiss = f" [{k.model}]" if k.model else on_good
    seed0 = k.per_seed[0].get("seed", "—") if k.per_seed else 0
    rows = [
        Claim.from_verdict(
            verdict_trainable_share(k, "kiss", 0.12),
            key="kiss-share",
            claim="KISS q/v rank-8 LoRA trains 0.12 % of the parameters",
            field_note="0.12 %",
            measured=f"{_fmt(k.kiss_trainable_share_pct)} %",
            rule="within ±25 % of 0.12 %",
            n="exact count (PEFT)",
        ),
        Claim.from_verdict(
            verdict_trainable_share(k, "over", 0.87),
            key="over-share",
            claim="q/v/o rank-64 LoRA trains 0.87 % of the parameters",
            field_note="0.87 %",
            measured=f"{_fmt(k.over_trainable_share_pct)} %",
            rule="within ±25 % of 0.87 %",
            n="exact count (PEFT)",
        ),
        Claim.from_verdict(
            verdict_param_ratio(k),
            key="param-ratio",
            claim="q/v/o rank-64 has 3.2× the trainable parameters of q/v rank-8",
            field_note="3.2×",
            measured=f"{_fmt(k.param_ratio_over_vs_kiss)}×",
            rule="within ±25 % of 3.2",
            n="exact count (PEFT)",
        ),
        Claim.from_verdict(
            verdict_kiss_steps(k),
            key="kiss-steps",
            claim="KISS reaches the validation-loss target in fewer steps",
            field_note="890 vs 2140 steps",
            measured=f"KISS first in {_d(k.seeds_kiss_first)}, over-parameterised first in "
            f"{_d(k.seeds_over_first)} of "
            f"{_d(k.seeds)} seeds (seed {seed0}: "
            f"{k.kiss_steps_to_target} vs {k.over_steps_to_target} steps){on_kiss}",
            rule="share of decided seeds with KISS first, Wilson 95 % interval ≥ 0.5 holds, < 0.5 refutes; "
            "ties and seeds neither reached are not counted",
            n=kiss_n,
            interval=kiss_interval,
        ),
        Claim.from_verdict(
            verdict_peak_ratio(k),
            key="kiss-peak",
            claim="KISS peak memory is 0.66 of the over-parameterised run's",
            field_note="28.1 / 42.3 GB = 0.66",
            measured=f"{_fmt(k.peak_ratio_kiss_vs_over)} ({_d(k.peak_measured_as)})",
            rule="within ±0.10 of 0.66",
            n="one optimiser step per variant",
        ),
        Claim.from_verdict(
            verdict_binding_asserts(lb),
            key="binding-asserts",
            claim="A.shape[1]==B.shape[0] and W0.shape==(A.shape[0], B.shape[1]) validate LoRA binding",
            field_note="asserts pass",
            measured=str(_d(lb.field_note_asserts_hold_on)),
            rule="all modules pass holds; any module failing refutes",
            n=f"{lb.adapted_modules if lb.adapted_modules is not None else 0} adapted modules",
        ),
        Claim.from_verdict(
            verdict_scaling(lb),
            key="lora-scaling",
            claim="the update is W0 + α·ΔW (scaling α)",
            field_note="scale = α",
            measured=f"scale {_fmt(lb.scaling_applied)} (α = {_fmt(lb.alpha)}, r = {lb.r})",
            rule="applied scale equals α (1e-9 rel.)",
            n="every adapted module",
        ),
        Claim.from_verdict(
            verdict_zh_labels(la),
            key="zh-labels",
            claim="Chinese tokenisation breaks span labels",
            field_note="coverage 63.7 %, boundary F1 71.3 %",
            measured=f"boundary F1 {_fmt(la.zh_boundary_f1_pct)} %",
            rule="F1 ≤ 90 % holds, > 90 % refutes",
            n=f"{la.zh_spans} Chinese spans",
        ),
        Claim.from_verdict(
            verdict_en_offsets(la),
            key="en-offsets",
            claim="(measured here) byte-level offsets carry the leading space",
            field_note="—",
            measured=f"untrimmed {_fmt(la.en_untrimmed_offsets_f1_pct)} % vs trimmed "
            f"{_fmt(la.en_boundary_f1_pct)} %",
            rule="untrimmed F1 ≥ 1 point below trimmed holds, else refuted",
            n=f"{la.en_spans} English spans",
        ),
        Claim.from_verdict(
            verdict_flash_speedup(at),
            key="flash-speedup",
            claim="FlashAttention-2 gives 3.8× the throughput of naive attention",
            field_note="3.8×",
            measured=f"{_fmt(at.flash_over_math_cuda)}× at L={at.flash_over_math_L} ({_d(at.timing_dtype)})"
            if at.flash_over_math_cuda is not None
            else "—",
            rule="range across repetitions within ±25 % of 3.8× (CUDA)",
            n=f"{at.flash_over_math_reps or 0} repetitions",
            interval=fmt_interval((at.flash_over_math_cuda_low, at.flash_over_math_cuda_high), level=None)
            if at.flash_over_math_cuda_low is not None and at.flash_over_math_cuda_high is not None
            else "",
        ),
        Claim.from_verdict(
            verdict_sqrt_l(ga),
            key="sqrt-l",
            claim="accumulation steps must scale with √L (gradient variance ∝ L^-0.5)",
            field_note="exponent −0.5",
            measured=f"variance ∝ L^{_fmt(ga.noise_variance_slope, '.2f')}",
            rule="95 % interval of the exponent inside −0.5 ± 0.25 holds, outside refutes",
            n=f"{ga.noise_lengths} lengths × {ga.noise_samples_per_length} gradient samples = "
            f"{(ga.noise_samples_per_length or 0) // 2} independent pairs per length ({ga.gradients_of})",
            interval=fmt_interval(
                (_num(ga.noise_variance_slope_ci_low), _num(ga.noise_variance_slope_ci_high))
            ),
        ),
        Claim.from_verdict(
            verdict_token_count_normalisation(ga),
            key="token-count",
            claim="(issue) micro-batch means equal the large batch only with token-count normalisation",
            field_note="—",
            measured=f"mean-of-means err {_fmt(ga.rel_err_per_microbatch_mean)}, token-count err "
            f"{_fmt(ga.rel_err_token_count)}",
            rule="token-count err < 1e-4 and mean-of-means > 1e-3 holds; token-count ≥ 1e-3 or mean-of-means "
            "< 1e-4 refutes",
            n=f"{ga.tokens_per_microbatch} tokens per micro-batch",
        ),
    ]
    for key, name, value, claim, note, expect in (
        (
            "baddbmm",
            BADDBMM,
            dt.baddbmm_fp32_inputs_bf16_autocast,
            "torch.baddbmm executes in float32 under bf16 autocast",
            "float32",
            "torch.float32",
        ),
        ("index-add", INDEX_ADD, dt.index_add_bf16_source, "index_add_ keeps bf16", "bf16", "torch.bfloat16"),
    ):
        rows.append(
            Claim.from_verdict(
                verdict_op_dtype(value, name, expect),
                key=key,
                claim=claim,
                field_note=note,
                measured=_fmt(value),
                rule=f"result dtype {expect} holds, another dtype or an error refutes",
                n="one op call (deterministic)",
            )
        )
    counts = ds_b.issue_counts or {}
    rows += [
        Claim.from_verdict(
            verdict_index_copy_recast(dt.index_copy_fp32_source, INDEX_COPY),
            key="index-copy",
            claim="index_copy_ silently recasts a non-matching source (hence the explicit .to())",
            field_note="silent recast",
            measured=_fmt(dt.index_copy_fp32_source)[:70],
            rule="returns a dtype holds, raises refutes",
            n="one op call (deterministic)",
        ),
        Claim.from_verdict(
            verdict_kv_cache_boundary(dt),
            key="kv-cache",
            claim="the KV cache crosses the bf16/float32 boundary without a declaration",
            field_note="implicit upcast",
            measured=f"keys {dt.kv_cache_keys_dtype}, values {dt.kv_cache_values_dtype}",
            rule="keys/values in different dtypes or float32 holds; both low precision refutes",
            n="one forward with cache",
        ),
        Claim.from_verdict(
            verdict_lax_coercion(ds_b),
            key="lax-coercion",
            claim="lax parsing silently coerces '42' for an int field (strict rejects)",
            field_note="coercion happens",
            measured=f"{counts.get('coerced (strict rejects)', '—')} coerced value(s) in the broken file",
            rule="≥ 1 coercion holds, 0 refutes",
            n=f"{ds_b.lines if ds_b.lines is not None else 0} lines",
        ),
        Claim.from_verdict(
            verdict_mask_check_catches_leak(lm),
            key="mask-leak",
            claim="len(input_ids)==len(labels) and decoded labels == target catch template/mask leaks",
            field_note="the check catches leaks",
            measured=(
                "caught "
                + ", ".join(
                    f"{c} {v['caught']}/{v['examples']} (length assert {v['length_fires']})"
                    for c, v in lm_probe.get("leaks", {}).items()
                )
                + "; clean examples failing: "
                f"{lm_probe.get('clean_failing')}/{lm_probe.get('clean_examples')}" + on_good
            )
            if lm_probe
            else "—",
            rule="every leaking example fails an assert and every clean one passes both holds; a leak "
            "passing both, or a clean example failing, refutes",
            n=f"{lm_probe.get('clean_examples', '—')} examples × {len(lm_probe.get('leaks', {}))} leak "
            "classes (the leaks sft.py and collators produce)",
        ),
        Claim.from_verdict(
            verdict_kurtosis_rises(rw_g),
            key="kurtosis",
            claim="reward kurtosis rises when sampling concentrates",
            field_note="2.1 → 5.7",
            measured=f"{_fmt(rw_g.kurtosis_uniform, '.2f')} → {_fmt(rw_g.kurtosis_concentrated, '.2f')} "
            f"(uniform → β={rw_g.concentrated_beta}, γ={rw_g.concentrated_gamma}){on_good}",
            rule="rise ≥ 1 holds, < 1 refutes (one exact figure of these responses)",
            n=f"{_d(rw_g.n_examples)} scored responses, one model",
        ),
        Claim.from_verdict(
            verdict_kl_threshold(rw_g),
            key="kl-threshold",
            claim="KL > 0.18 flags a significant shift",
            field_note="0.18",
            measured=f"KL {_fmt(rw_g.kl_concentrated)} at β={rw_g.concentrated_beta}, "
            f"γ={rw_g.concentrated_gamma} "
            f"vs {_fmt(rw_g.kl_sampled_vs_reward)} at β={rw_g.beta}, γ={rw_g.gamma}{on_good}",
            rule="concentrated above and configured at or below 0.18 holds; both on one side refutes",
            n=f"{_d(rw_g.n_examples)} scored responses, both samplers on the same ones",
        ),
        Claim.from_verdict(
            verdict_warmup_first_stage_only(sc),
            key="warmup-stage",
            claim="under SequentialLR(OneCycleLR, StepLR) the warmup applies to the first stage only",
            field_note="stage 2 gets 0 warmup steps",
            measured=f"{_d(sc.field_note_scenario_warmup_ramps_in_stage2)} warmup ramp(s) in stage 2",
            rule="0 ramps in stage 2 holds, ≥ 1 refutes",
            n="300 scheduler steps (deterministic)",
        ),
        Claim.from_verdict(
            verdict_fragmentation(fr),
            key="fragmentation",
            claim="checkpointing more often fragments the allocator more",
            field_note="gap 0.42 every 50 steps vs 0.18 every 200",
            measured=(
                f"{_fmt(fr.gap_ratio_configured)} every {fr.configured_interval} vs "
                f"{_fmt(fr.gap_ratio_reference)} every {fr.reference_interval}"
                if fr.gap_ratio_configured is not None
                else "—"
            ),
            rule=f"t-interval across run pairs of the mean gap-ratio difference ≥ {GAP_MIN_DIFF:.2f} holds, "
            f"< {GAP_MIN_DIFF:.2f} refutes; one run pair: inconclusive",
            n=f"{_d(fr.repeats)} run pairs × {_d(fr.steps)} steps",
            interval=fmt_interval((fr.gap_ratio_diff_ci_low, fr.gap_ratio_diff_ci_high))
            if fr.gap_ratio_diff_ci_low is not None and fr.gap_ratio_diff_ci_high is not None
            else "",
        ),
        Claim.from_verdict(
            verdict_eval_allreduce(dd),
            key="eval-allreduce",
            claim="evaluating with gradients enabled makes DDP trigger all-reduce",
            field_note="all-reduce triggered",
            measured=f"{_fmt(dd.grad_no_backward_extra_allreduces)} extra all-reduces (forward only)",
            rule="≥ 1 extra all-reduce holds, 0 refutes",
            n=f"2 ranks × {_d(dd.train_steps)} steps",
        ),
        Claim.from_verdict(
            verdict_eval_backward_breaks_reducer(dd),
            key="eval-backward",
            claim="an eval backward without no_sync corrupts the reducer state",
            field_note="reducer error",
            measured=str(
                dd.backward_error or ("no error" if dd.backward_extra_allreduces is not None else "—")
            ),
            rule="a reducer error holds, a clean run refutes",
            n=f"2 ranks × {_d(dd.train_steps)} steps",
        ),
    ]
    kiss_keys, broken_keys = {"kiss-share", "over-share", "param-ratio", "kiss-peak"}, {"lax-coercion"}
    ddp_keys = {
        "eval-allreduce",
        "eval-backward",
    }  # a tiny Llama with a value head on two gloo ranks, whatever the config
    model_free = {
        "baddbmm",
        "index-add",
        "index-copy",
        "warmup-stage",
    }  # torch ops and schedulers: no model involved
    named = []
    for row in rows:
        if row.key in model_free:
            named.append(row)
            continue
        on = (
            on_kiss
            if row.key in kiss_keys
            else on_broken
            if row.key in broken_keys
            else " [tiny Llama, 2 ranks]"
            if row.key in ddp_keys
            else on_good
        )
        named.append(
            row if not on or on in row.measured else dataclasses.replace(row, measured=row.measured + on)
        )
    return named


def _metrics(ctx: AuditContext | None, slug: str) -> Any:
    r = ctx.results.get(slug) if ctx is not None else None
    return r.metrics if r is not None else None


def claims_of(good: AuditContext, broken: AuditContext | None = None) -> list[Claim]:
    """:func:`claims` of the checks run in the good config's context and the broken config's (the loss
    mask of the broken config stands in when the good one did not run it)."""
    return claims(
        kiss=_metrics(good, "kiss-lora"),
        binding=_metrics(good, "lora-binding"),
        labels=_metrics(good, "label-alignment"),
        attention=_metrics(good, "attention"),
        grad=_metrics(good, "grad-accumulation"),
        dtypes=_metrics(good, "dtypes"),
        loss_mask=_metrics(good, "loss-mask") or _metrics(broken, "loss-mask"),
        reward=_metrics(good, "reward-weights"),
        schedulers=_metrics(good, "schedulers"),
        fragmentation=_metrics(good, "fragmentation"),
        ddp=_metrics(good, "ddp-eval"),
        broken_schema=_metrics(broken, "data-schema"),
    )


def headline(good: AuditContext, broken: AuditContext) -> dict[str, Any]:
    """The numbers a reader wants first: failures caught in the broken config, KISS vs over, the slope."""
    k: KissMetrics | None = _metrics(good, "kiss-lora")
    ga: GradAccumulationMetrics | None = _metrics(good, "grad-accumulation")
    return {
        "good_config_failures": sum(f.failed for f in good.findings()),
        "broken_config_failures": sum(f.failed for f in broken.findings()),
        "param_ratio_over_vs_kiss": k.param_ratio_over_vs_kiss if k else None,
        "kiss_steps_to_target": k.kiss_steps_to_target if k else None,
        "over_steps_to_target": k.over_steps_to_target if k else None,
        "noise_variance_slope": ga.noise_variance_slope if ga else None,
    }
