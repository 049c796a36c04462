"""Every audit row driven through every outcome at the notebook's real n (its first look and its budget
for a sequential row), through ``spec.decide`` as the judge runs it, on fabricated measurements with the
fields the checks write; every reader; the ledger judged through the registry from fabricated, typed
results kept in a context (smoke included); the headline; each noisy row's design at both profiles; the
replicate loops' stop hook; and the checks' own measurements the rows rest on."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from nbkit.audit import claims
from nbkit.audit.check import Check, Checked, CheckMetrics, CheckRegistry
from nbkit.audit.checks.attention import AttentionMetrics
from nbkit.audit.checks.data_schema import DataSchemaMetrics
from nbkit.audit.checks.ddp_eval import DdpEvalMetrics, EvalScenario, UnusedHeadError
from nbkit.audit.checks.dtypes import DtypesMetrics, OpOutcome
from nbkit.audit.checks.grad_accumulation import GradAccumulationMetrics
from nbkit.audit.checks.kiss import KissMetrics, KissRun, LoraCounts
from nbkit.audit.checks.label_alignment import LabelAlignmentMetrics, LanguageAlignment
from nbkit.audit.checks.lora_binding import LoraBindingMetrics
from nbkit.audit.checks.loss_mask import LEAK_CLASSES, LeakClass, LossMaskMetrics, UnseenLeak
from nbkit.audit.checks.reward_weights import RewardWeightsMetrics
from nbkit.audit.checks.schedulers import SchedulersMetrics
from nbkit.audit.context import AuditContext
from nbkit.audit.experiments import REGISTRY, CheckOutcome, ConfigAuditMetrics
from nbkit.claims import (
    ARITHMETIC,
    DEMONSTRATION,
    HOLDS,
    INCONCLUSIVE,
    LIBRARY_FACT,
    MEASURED,
    NEEDS_GPU,
    NOT_JUDGED,
    NOT_MEASURED,
    OWN,
    REFUTED,
    Replicates,
    exact_at_most,
    family_level,
)
from nbkit.claims.judge import replicates_of, size
from nbkit.experiment import param
from nbkit.findings import Finding
from nbkit.result import Result

NAN = float("nan")
LEVEL = family_level(REGISTRY.claims)  # the Bonferroni level of notebook 04's family: Holm's first
SPECS = {s.key: s for s in REGISTRY.claims}
ERR = "Expected to have finished reduction in the prior iteration"


def spec(key):
    return SPECS[key]


def budget(key, profile="default"):
    slug, rep = replicates_of(spec(key), REGISTRY.sizes)
    return rep.budget(REGISTRY[slug].config(False, profile)), rep.least


def decide(key, sample, level=LEVEL):
    return spec(key).decide(sample, level).verdict


# -- each noisy row through each outcome at its real n ---------------------------------------------------


@pytest.mark.parametrize(
    "key, up, down, wide, n_real",
    [
        # per-seed steps ratio KISS / over: the notes' 0.42; no difference; seeds that disagree
        ("kiss_steps", claims.STEP_RATIO, 1.0, (0.2, 3.0), None),
        # per-repetition flash / math ratio on CUDA: 3.8; 1.3; a spread across the band's edge (20 reps)
        ("flash_speedup", 3.8, 1.3, (2.0, 7.0), 20),
    ],
)
def test_the_ratio_rows_reach_every_outcome_at_their_real_n(key, up, down, wide, n_real):
    ns = budget(key)[::-1] if n_real is None else (n_real,)
    for n in ns:
        jitter = [1 + 0.001 * (i % 3 - 1) for i in range(n)]
        assert decide(key, [up * j for j in jitter]) == HOLDS
        assert decide(key, [down * j for j in jitter]) == REFUTED
        assert decide(key, [wide[i % 2] for i in range(n)]) == INCONCLUSIVE
    assert decide(key, [up]) == INCONCLUSIVE  # one unit: no interval
    assert decide(key, [up] * 3) == INCONCLUSIVE  # tied units: no zero-width interval


def _noise(exponent, pairs, spread=0.001, lengths=claims.NOISE_LENGTHS):
    """``pairs`` estimates per length of variance L^exponent, each off by a fixed fraction (no randomness)."""
    return (
        lengths,
        tuple(tuple(L**exponent * (1 + spread * (i % 3 - 1)) for i in range(pairs)) for L in lengths),
    )


def test_the_sqrt_l_row_reaches_every_outcome_at_its_first_look_and_budget():
    n_budget, least = budget("sqrt_l")
    for n in (least, n_budget):
        assert decide("sqrt_l", _noise(-0.5, n)) == HOLDS
        assert decide("sqrt_l", _noise(-1.0, n)) == REFUTED  # the linear rule
        assert decide("sqrt_l", _noise(0.0, n)) == REFUTED
        assert decide("sqrt_l", _noise(-0.7, n, spread=0.9)) == INCONCLUSIVE
    assert decide("sqrt_l", _noise(-0.5, 1)) == INCONCLUSIVE  # one pair per length: no interval
    assert decide("sqrt_l", tuple(x[:2] for x in _noise(-0.5, 4))) == INCONCLUSIVE  # two lengths


def test_the_slope_estimator_takes_a_prefix_of_every_length():
    sample = _noise(-1.0, 5)
    assert claims.SLOPE.units(sample) == 5 and claims.SLOPE.head(sample, 2) == (
        sample[0],
        tuple(e[:2] for e in sample[1]),
    )


ZH_SENTENCES = 8  # the bundled file's Chinese sentences (21 spans)


def test_the_zh_row_reaches_every_outcome_at_the_files_sentences():
    sizes = [claims.ZH_SPANS[i] for i in range(ZH_SENTENCES)]
    assert decide("zh_labels", [(round(m * 0.4), m) for m in sizes]) == HOLDS  # most spans broken
    # every span kept: 21 spans cannot refute it at the family's level, 80 can
    assert decide("zh_labels", [(m, m) for m in sizes]) == INCONCLUSIVE
    assert decide("zh_labels", [(10, 10)] * ZH_SENTENCES) == REFUTED
    assert decide("zh_labels", [(1, 1)]) == INCONCLUSIVE  # one sentence: no interval


@pytest.mark.parametrize(
    "key, holds, refuted, straddles",
    [
        ("kurtosis", (3.6, 0.3, 48), (0.0, 0.3, 48), (1.8, 0.5, 48)),
        ("kl_threshold", (0.0, 0.02, 48), (0.9, 0.05, 48), (math.log(1.25), 0.05, 48)),
    ],
)
def test_the_bootstrapped_rows_reach_every_outcome(key, holds, refuted, straddles):
    assert decide(key, holds) == HOLDS and decide(key, refuted) == REFUTED
    v = spec(key).decide(straddles, LEVEL)
    assert v.verdict == INCONCLUSIVE and "interval over 48 scored responses" in v.why
    assert decide(key, (holds[0], NAN, 48)) == INCONCLUSIVE  # no standard error
    assert decide(key, (holds[0], 0.0, 48)) == INCONCLUSIVE  # every resample agreed: no interval


# -- each exact row through each outcome ------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, holds, refuted",
    [
        ("kiss_share", 0.12, 0.0569),  # DeepSeek-LLM-7B's q/v r8 is 0.0569 %
        ("over_share", 0.8749, 0.678),  # its q/v/o r64 is 0.678 %: outside the notes' rounding
        ("param_ratio", 3.2, 12.0),
        ("kiss_peak", 0.66, 0.87),
        ("binding_asserts", 1.0, 0.0),
        ("lora_scaling", 1.0, 0.125),  # PEFT applies α/r
        ("en_offsets", 68.0, 0.0),
        ("lax_coercion", 2, 0),
        ("mask_leak", 0, 3),
        ("warmup_stage", 0, 1),
        ("eval_allreduce", 3.0, 0.0),
        ("eval_pollution", 0.57, 0.0),
    ],
)
def test_each_exact_row_holds_refutes_and_waits_for_a_measurement(key, holds, refuted):
    assert not spec(key).noisy and spec(key).plan is None
    assert decide(key, holds) == HOLDS and decide(key, refuted) == REFUTED
    assert decide(key, NAN) == INCONCLUSIVE


@pytest.mark.parametrize(
    "key",
    [
        "notes_ratios_consistent",
        "baddbmm",
        "index_add_keeps_bf16",
        "index_add_promotes",
        "index_copy_recast",
        "kv_cache",
    ],
)
def test_each_flag_row_reaches_every_outcome(key):
    assert decide(key, True) == HOLDS and decide(key, False) == REFUTED and decide(key, None) == INCONCLUSIVE


def test_the_token_count_verdict_needs_its_control():
    assert decide("token_count", (1e-7, 0.05)) == HOLDS
    assert decide("token_count", (0.02, 0.05)) == REFUTED  # token-count normalisation misses one batch
    v = spec("token_count").decide((1e-7, 1e-6))
    assert v.verdict == INCONCLUSIVE and "cannot tell" in v.why  # equal token counts: no contrast
    assert decide("token_count", (NAN, 0.05)) == INCONCLUSIVE
    assert decide("token_count", (1e-7, NAN)) == INCONCLUSIVE


def test_the_token_count_verdict_reads_its_rules(monkeypatch):
    """The bespoke verdict decides through its rules: a changed threshold changes the verdict and its text."""
    before = spec("token_count").decide((5e-4, 0.05))
    assert before.verdict == REFUTED and "> 0.0001" in before.why
    monkeypatch.setattr(claims, "TOKEN_RULE", exact_at_most(1e-3, claims.TOKEN_RULE.what))
    after = spec("token_count").decide((5e-4, 0.05))
    assert after.verdict == HOLDS and "≤ 0.001" in after.why


def test_the_rows_bars_come_from_the_notes():
    assert spec("kiss_steps").rule.threshold == pytest.approx(math.sqrt(890 / 2140))
    assert spec("kiss_steps").rule.false_values() == (1.0,)
    assert spec("zh_labels").rule.threshold == pytest.approx(0.8565)
    assert spec("zh_labels").rule.false_values() == (1.0,)
    assert spec("kurtosis").rule.threshold == pytest.approx(1.8) and spec("kurtosis").rule.null == 0.0
    assert spec("sqrt_l").rule.false_values() == pytest.approx((-1.0, 0.0))
    assert spec("over_share").rule.band == pytest.approx((0.865, 0.875))
    kinds = {k: s.kind for k, s in SPECS.items()}
    assert {k for k, v in kinds.items() if v == ARITHMETIC} == {
        "kiss_share",
        "over_share",
        "param_ratio",
        "notes_ratios_consistent",
    }
    assert kinds["lax_coercion"] == DEMONSTRATION and kinds["index_copy_recast"] == LIBRARY_FACT
    own = {k for k, s in SPECS.items() if s.source == OWN}
    assert own == {"notes_ratios_consistent", "en_offsets", "token_count", "kl_threshold"}
    assert all(k == k.lower() and "-" not in k for k in SPECS)  # snake_case keys
    assert "fragmentation" not in SPECS and "eval_backward" not in SPECS


# -- readers ----------------------------------------------------------------------------------------------


def _kiss(ratios, model="smollm2"):
    runs = tuple(KissRun(i, round(1000 * r), 1000, 1000) for i, r in enumerate(ratios))
    return KissMetrics(
        status="pass",
        model=model,
        kiss_trainable_share_pct=0.34,
        over_trainable_share_pct=4.2,
        param_ratio_over_vs_kiss=12.8,
        notes_model="DeepSeek-LLM-7B",
        notes_kiss_share_pct=0.0569,
        notes_over_share_pct=0.678,
        notes_param_ratio=12.0,
        notes_counts=LoraCounts(3_932_160, 6_914_297_856, 47_185_920, 6_957_551_616, 4096, 4096, 30),
        llama_ratio_range=(12.0, 40 / 3),
        peak_ratio_kiss_vs_over=0.87,
        peak_measured_as="tensor bytes",
        budget_steps=60,
        runs=runs,
    )


def test_the_kiss_readers():
    k = _kiss([0.5, 0.4, 0.45])
    r = claims.read_share("kiss")(k)
    assert (
        r.sample == 0.0569
        and "3,932,160 of 6,914,297,856" in r.measured
        and "0.34 % on smollm2" in r.measured
    )
    assert claims.read_share("over")(k).sample == 0.678 and claims.read_param_ratio(k).sample == 12.0
    consistent = claims.read_notes_ratios(k)
    assert consistent.sample is False and "7.25" in consistent.measured and "12–13.33" in consistent.measured
    assert claims.read_notes_ratios(dataclasses.replace(k, llama_ratio_range=(3.0, 8.0))).sample is True
    steps = claims.read_kiss_steps(k)
    assert steps.sample == pytest.approx([0.5, 0.4, 0.45]) and steps.n.startswith("3 seeds (3 with a ratio)")
    # a seed neither variant finished gives no ratio; one a variant missed counts at the budget
    missed = dataclasses.replace(k, runs=k.runs + (KissRun(3, None, None, 60), KissRun(4, 5, None, 60)))
    r = claims.read_kiss_steps(missed)
    assert len(r.sample) == 4 and r.sample[-1] == pytest.approx(5 / 60) and "-/-" in r.measured
    assert claims.read_kiss_peak(k).sample == 0.87
    assert claims.steps_ratio(k) == pytest.approx((0.5 * 0.4 * 0.45) ** (1 / 3))


def _binding(hold=0, adapted=60):
    return LoraBindingMetrics(
        model="smollm2",
        r=8,
        alpha=16.0,
        scaling_applied=2.0,
        alpha_over_r=2.0,
        adapted_modules=adapted,
        trainable_params=1,
        total_params=2,
        trainable_share_pct=0.5,
        merge_max_abs_err=0.0,
        field_note_asserts_hold_on=hold,
    )


def _language(spans, kept, untrimmed=100.0):
    return LanguageAlignment(
        spans=sum(spans),
        sentences=len(spans),
        label_coverage_pct=100.0,
        boundary_f1_pct=100.0 * sum(kept) / sum(spans),
        untrimmed_offsets_f1_pct=untrimmed,
        chars_per_token=1.0,
        spans_kept=sum(kept),
        spans_returned=sum(spans),
        spans_per_sentence=tuple(spans),
        kept_per_sentence=tuple(kept),
        returned_per_sentence=tuple(spans),
    )


def _labels(zh=None, en=None):
    return LabelAlignmentMetrics(model="smollm2", zh=zh, en=en)


def test_the_binding_and_label_readers():
    assert claims.read_binding_asserts(_binding(0)).sample == 0.0
    assert claims.read_binding_asserts(_binding(0, 0)).missing == "no module was adapted"
    assert claims.read_scaling(_binding()).sample == 0.125
    zh = claims.read_zh_labels(_labels(zh=_language([3, 2, 3], [1, 2, 3])))
    assert zh.sample == [(1, 3), (2, 2), (3, 3)] and zh.measured.startswith("6/8 spans kept (75.0%")
    assert zh.n == "8 Chinese spans in 3 sentences"
    assert claims.read_zh_labels(_labels()).missing
    en = claims.read_en_offsets(_labels(en=_language([3, 2], [3, 2], untrimmed=31.8)))
    assert en.sample == pytest.approx(68.2) and claims.read_en_offsets(_labels()).missing


def _attention(device="cpu", reps=(3.7, 3.9, 3.8)):
    return AttentionMetrics(
        model="smollm2",
        device=device,
        timing_dtype="bfloat16",
        flash_over_math_L=2048,
        flash_over_math_per_rep=tuple(reps),
        load_average=(1.0, 1.2),
    )


def test_the_flash_reader_needs_cuda():
    assert "FlashAttention" in claims.read_flash_speedup(_attention()).needs_gpu
    r = claims.read_flash_speedup(_attention("cuda:0"))
    assert r.sample == [3.7, 3.9, 3.8] and r.measured.startswith("3.8× at L=2048") and not r.missing
    assert claims.read_flash_speedup(_attention("cuda:0", ())).missing


def _grad(exponent=-1.0, pairs=4, lengths=claims.NOISE_LENGTHS, token=1e-8, means=0.05):
    lengths, estimates = _noise(exponent, pairs, spread=0.05, lengths=lengths)
    return GradAccumulationMetrics(
        model="smollm2",
        rel_err_per_microbatch_mean=means,
        rel_err_token_count=token,
        tokens_per_microbatch=(16, 29),
        configured_normalisation="token_count",
        noise_lengths=lengths,
        noise_estimates=estimates,
        noise_variance_slope=exponent,
        gradients_of="all parameters",
    )


def test_the_grad_accumulation_readers():
    r = claims.read_sqrt_l(_grad())
    assert r.sample == _noise(-1.0, 4, spread=0.05) and r.measured == "variance ∝ L^-1.00 [smollm2]"
    assert r.n == "4 lengths × 4 independent pairs of gradient samples (all parameters)"
    assert claims.read_sqrt_l(_grad(lengths=(16, 32))).missing
    t = claims.read_token_count(_grad())
    assert t.sample == (1e-8, 0.05) and "[16, 29] tokens" in t.n


def _op(case, dtype="", error=""):
    return OpOutcome(case, dtype, error)


RAISED = "RuntimeError: index_add_(): self (BFloat16) and source (Float) must have the same scalar type"


def _dtypes(autocast="torch.bfloat16", keys="torch.float32", values="torch.bfloat16", copy_dtype=""):
    return DtypesMetrics(
        model="smollm2",
        device="cpu",
        autocast_dtype=autocast,
        baddbmm_fp32_inputs_under_autocast=_op("float32 inputs under bf16 autocast", "torch.bfloat16"),
        index_add_low_source=_op("bf16 cache, bf16 source", autocast),
        index_add_fp32_source=_op("bf16 cache, float32 source", error=RAISED),
        index_add_fp32_source_under_autocast=_op("the same under autocast", error=RAISED),
        index_copy_fp32_source=_op(
            "bf16 cache, float32 source", copy_dtype, "" if copy_dtype else "RuntimeError"
        ),
        kv_cache_keys_dtype=keys,
        kv_cache_values_dtype=values,
        logits_dtype="torch.float32",
        silent_upcasts=3,
    )


def test_the_dtype_readers():
    d = _dtypes()
    assert claims.read_op("baddbmm_fp32_inputs_under_autocast", "torch.float32")(d).sample is False
    assert claims.read_op("index_add_low_source", claims.BF16)(d).sample is True
    assert (
        claims.read_index_add_prose(d).sample is False
        and "RuntimeError" in claims.read_index_add_prose(d).measured
    )
    promoted = dataclasses.replace(d, index_add_fp32_source=_op("plain", "torch.float32"))
    assert claims.read_index_add_prose(promoted).sample is True
    assert claims.read_op("index_copy_fp32_source")(d).sample is False
    assert claims.read_op("index_copy_fp32_source")(_dtypes(copy_dtype="torch.bfloat16")).sample is True
    # the notes' §2.5 is about bf16: an fp16 run has not measured it
    assert (
        "about bf16" in claims.read_op("index_add_low_source", claims.BF16)(_dtypes("torch.float16")).missing
    )
    assert claims.read_kv_cache(d).sample is True
    same = _dtypes(keys="torch.bfloat16", values="torch.bfloat16")
    assert claims.read_kv_cache(same).sample is False
    assert claims.read_kv_cache(_dtypes(keys="torch.float32", values="torch.float32")).sample is True
    assert claims.read_kv_cache(_dtypes(keys="", values="")).missing


def _mask(missed=None, clean_failing=0, examples=160):
    missed = missed or {}
    classes = tuple(
        LeakClass(c, examples, examples - missed.get(c, 0), 0, examples - missed.get(c, 0))
        for c in LEAK_CLASSES
    )
    return LossMaskMetrics(
        model="smollm2",
        examples=160,
        length_mismatch=0,
        position_mismatch=0,
        eot_masked=0,
        truncated=0,
        boundary_merge=30,
        pad_equals_eos=True,
        leak_classes=classes,
        unseen_leaks=(UnseenLeak("inference_template", 160, 0, "the chat template inference renders"),),
        clean_examples=160,
        clean_failing=clean_failing,
    )


def test_the_mask_leak_reader_counts_every_class_and_reports_the_unseen_apart():
    assert claims.read_mask_leak(_mask()).sample == 0
    r = claims.read_mask_leak(_mask({"shifted_labels": 160, "target_truncated": 12}, clean_failing=3))
    assert (
        r.sample == 175 and "shifted_labels 0/160" in r.measured and "target_truncated 148/160" in r.measured
    )
    assert "not judged: inference_template 160 examples (caught 0)" in r.measured
    assert claims.read_mask_leak(_mask(examples=0)).missing


def _reward(rise_se=0.3, log_ratio_betas=(0.67, 1.3), ratio_se=0.05):
    return RewardWeightsMetrics(
        model="smollm2",
        beta=1.0,
        gamma=0.5,
        concentrated_beta=8.0,
        concentrated_gamma=0.0,
        n_examples=48,
        kl_sampled_vs_reward=0.1,
        kl_concentrated=0.9,
        ci_shrink_pct=20.0,
        ess_configured=40.0,
        ess_concentrated=2.0,
        kurtosis_uniform=2.0,
        kurtosis_concentrated=4.3,
        kurtosis_rise_se=rise_se,
        kl_threshold=0.18,
        shrink_threshold=0.42,
        kl_crossing_beta=log_ratio_betas[0],
        shrink_crossing_beta=log_ratio_betas[1],
        crossing_log_ratio_se=ratio_se,
    )


def test_the_reward_readers():
    k = claims.read_kurtosis(_reward())
    assert k.sample == pytest.approx((2.3, 0.3, 48)) and k.n == "48 scored responses, bootstrapped"
    assert "no standard error" in claims.read_kurtosis(_reward(rise_se=NAN)).missing
    kl = claims.read_kl_threshold(_reward())
    assert kl.sample == pytest.approx((math.log(0.67 / 1.3), 0.05, 48)) and not kl.missing
    assert "never flags" in claims.read_kl_threshold(_reward(log_ratio_betas=(NAN, 1.3))).missing


def _ddp(backward_dw=0.00143, control_update=0.0025):
    scenarios = (
        EvalScenario("no_grad", False, 6, 0.0, 0.0, 0.0, ""),
        EvalScenario("grad_no_backward", False, 6, 0.0, 0.0, 0.0, ""),
        EvalScenario("backward", False, 6, 3.0, backward_dw, 0.0, ""),
        EvalScenario("backward_no_sync", False, 6, 0.0, backward_dw, 0.0, ""),
        EvalScenario("value_head_backward", True, 2, 0.0, NAN, 0.0, ERR),
    )
    return DdpEvalMetrics(
        scenario="no_grad",
        train_steps=6,
        eval_interval=2,
        learning_rate=0.01,
        allreduce_per_train_step=1.0,
        control_update=control_update,
        ranks_agree=True,
        scenarios=scenarios,
        unused_head=UnusedHeadError(ERR, "", ""),
    )


def _schedulers(ramps=0):
    return SchedulersMetrics(
        model="smollm2",
        total_steps=300,
        warmups_applied=1,
        warmups_intended=1,
        max_deviation_from_intended=0.0,
        resume_mismatched_steps=None,
        field_note_scenario_warmup_ramps_in_stage2=ramps,
        field_note_scenario_lr_jump_at_milestone=1e4,
    )


def _audit(coerced=2, schema=True):
    data = DataSchemaMetrics(
        lines=40, valid_lax=30, valid_strict=28, lines_with_errors=10, coerced_values=coerced
    )
    return ConfigAuditMetrics(
        file="broken.yaml",
        format="audit",
        model="tiny",
        keys_audited=10,
        keys_defaulted=2,
        keys_not_covered=0,
        checks=(CheckOutcome("lora-binding", "fail", "rank"), CheckOutcome("dtypes", "pass", "")),
        data_schema=data if schema else None,
    )


def test_the_ddp_scheduler_and_config_readers():
    p = claims.read_eval_pollution(_ddp())
    assert (
        p.sample == pytest.approx(0.572)
        and "3 extra all-reduces" in p.measured
        and "under no_sync" in p.measured
    )
    assert claims.read_eval_pollution(_ddp(control_update=0.0)).missing
    assert claims.read_eval_allreduce(_ddp()).sample == 0.0
    assert claims.read_warmup_stage(_schedulers(1)).sample == 1
    assert (
        claims.read_lax_coercion(_audit()).sample == 2
        and claims.read_lax_coercion(_audit(schema=False)).missing
    )


# -- the ledger through the registry ---------------------------------------------------------------------


def _results():
    """Fabricated typed results of every experiment a row reads: a clear effect where a row is noisy."""
    ratios = [claims.STEP_RATIO * (1 + 0.01 * (i % 3 - 1)) for i in range(16)]
    return {
        "kiss-lora": _kiss(ratios),
        "lora-binding": _binding(),
        "label-alignment": _labels(
            zh=_language([3, 2, 3, 2, 3, 2, 3, 3], [3, 2, 3, 2, 3, 2, 3, 3]),
            en=_language([3, 2], [3, 2], 31.8),
        ),
        "attention": _attention(),
        "grad-accumulation": _grad(pairs=12),
        "dtypes": _dtypes(),
        "loss-mask": _mask(),
        "reward-weights": _reward(),
        "schedulers": _schedulers(),
        "ddp-eval": _ddp(),
        "audit": _audit(),
    }


def _ctx(results=None, **kw):
    ctx = AuditContext("cpu", progress=False, **kw)
    for slug, metrics in (results or _results()).items():
        cfg = REGISTRY[slug].config(False, ctx.profile)
        ctx.keep(slug, Result(metrics=metrics, config=cfg, data=Finding(slug, slug, "pass", "")))
    return ctx


def test_the_ledger_from_fabricated_results_in_a_context(monkeypatch):
    seen = []
    monkeypatch.setattr("nbkit.experiment.record", lambda name, value: seen.append(name))
    rows = claims.judge(AuditContext("cpu", progress=False))
    assert [r.key for r in rows] == list(SPECS)
    assert all(r.measured == NOT_MEASURED and r.verdict == INCONCLUSIVE for r in rows)
    rows = {r.key: r for r in claims.judge(_ctx())}
    assert seen == ["claims", "claims"]
    expected = {
        HOLDS: {"kiss_steps", "en_offsets", "index_add_keeps_bf16", "kv_cache", "lax_coercion", "mask_leak"}
        | {"token_count", "warmup_stage", "eval_pollution"},
        REFUTED: {"kiss_share", "over_share", "param_ratio", "notes_ratios_consistent", "kiss_peak"}
        | {"binding_asserts", "lora_scaling", "baddbmm", "index_add_promotes", "index_copy_recast"}
        | {"sqrt_l", "eval_allreduce"},
        NEEDS_GPU: {"flash_speedup"},
        # all 21 spans kept: not enough spans to refute; the kurtosis and KL rows need the full profile
        INCONCLUSIVE: {"zh_labels", "kurtosis", "kl_threshold"},
    }
    assert {v: {k for k, r in rows.items() if r.verdict == v} for v in expected} == expected
    for key in ("kiss_share", "kiss_peak", "mask_leak"):
        assert rows[key].exact and rows[key].p_holds_if_true is None
    # a sequential row decided at its look (Holm over the family) with its design shown
    steps = rows["kiss_steps"]
    assert not steps.exact and steps.decided and steps.units <= steps.budget == 16 and "Holm" in steps.why
    assert steps.design.startswith("sequential, up to 16 seeds")
    for key in ("kurtosis", "kl_threshold"):  # the default profile's 48 responses cannot decide them
        assert (
            rows[key].why.startswith("not decided at defaults")
            and "the full profile runs up to 680" in rows[key].why
        )
    assert (
        rows["zh_labels"].why.startswith("not decided at defaults")
        and "no profile runs more" in rows["zh_labels"].why
    )
    assert rows["kv_cache"].measured.endswith("[smollm2]") and rows["mask_leak"].n.startswith(
        "160 examples × 5"
    )
    smoke = claims.judge(_ctx(smoke=True))
    assert {r.verdict for r in smoke} == {NOT_JUDGED} and all(r.measured != NOT_MEASURED for r in smoke)


def test_the_default_profile_judges_what_its_budget_decides():
    """At the default four seeds the steps row is not decided, whatever the seeds say; a check that measured
    nothing (skipped) leaves no result, so its rows are not measured."""
    results = {**_results(), "kiss-lora": _kiss([claims.STEP_RATIO] * 3 + [0.5])}
    ctx = _ctx(results)
    ctx.keep("ddp-eval", Result(metrics=None, data=Finding("ddp-eval", "ddp-eval", "skipped", "not run")))
    rows = {r.key: r for r in claims.judge(ctx)}
    assert rows["kiss_steps"].verdict == INCONCLUSIVE and not rows["kiss_steps"].decided
    assert "the full profile runs up to 16 seeds" in rows["kiss_steps"].why
    assert rows["eval_pollution"].measured == NOT_MEASURED and "run ddp-eval" in rows["eval_pollution"].why


def test_the_full_profile_decides_the_noisy_rows():
    rows = {
        r.key: r for r in claims.judge(_ctx({**_results(), "reward-weights": _reward(0.1)}, profile="full"))
    }
    assert rows["kiss_steps"].verdict == HOLDS and rows["sqrt_l"].verdict == REFUTED
    assert rows["kurtosis"].decided and rows["kurtosis"].verdict == HOLDS  # 2.3 ± 0.1 against 1.8
    assert rows["kl_threshold"].decided and rows["kl_threshold"].verdict == REFUTED  # KL flags at half the β


def test_the_headline_has_the_numbers_in_words(monkeypatch):
    seen = {}
    monkeypatch.setattr("nbkit.experiment.record", lambda name, value: seen.__setitem__(name, value))
    h = claims.headline(_ctx())
    assert h["broken_config_failures"] == 1 and h["notes_model_param_ratio"] == 12.0
    assert h["kiss_steps_ratio"] == pytest.approx(claims.STEP_RATIO, rel=1e-3)
    assert h["noise_variance_slope"] == -1.0 and h["leak_classes_missed"] == 0
    assert seen["headline_spec"]["kiss_steps_ratio"]["unit"] == "×"
    assert (
        seen["headline_spec"]["leak_classes_missed"]["label"]
        == "leak classes the notes' two asserts let through"
    )
    empty = claims.headline(AuditContext("cpu", progress=False))
    assert all(math.isnan(v) for v in empty.values())
    skipped = _ctx({"grad-accumulation": None})
    assert math.isnan(claims.headline(skipped)["noise_variance_slope"])


# -- the designs -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "at_defaults", "in_full"),
    [
        ("kiss_steps", False, True),
        ("sqrt_l", False, True),
        ("kurtosis", False, True),
        ("kl_threshold", False, True),
    ],
)
def test_each_design_at_the_defaults_and_in_the_full_profile(key, at_defaults, in_full):
    s = spec(key)
    for profile, expected in (("default", at_defaults), ("full", in_full)):
        n, least = budget(key, profile)
        results = {
            slug: Result(metrics=None, config=REGISTRY[slug].config(False, profile)) for slug in s.reads
        }
        sized = size(s, claims.Reading(None, "", units=least), results, REGISTRY.sizes, LEVEL)
        assert sized.budget == n and sized.oc.decided is expected, (profile, sized.oc)
        if expected:
            assert max(sized.oc.p_refuted_if_true, sized.oc.p_holds_if_false) <= 0.05


def test_the_fixed_designs_at_the_run_s_units():
    """The flash row decides at the 20 repetitions a CUDA run times; the zh row at the file's 8 sentences
    does not, and no profile has more of them."""
    for key, units, decided in (("flash_speedup", 20, True), ("zh_labels", ZH_SENTENCES, False)):
        sized = size(spec(key), claims.Reading(None, "", units=units), {}, REGISTRY.sizes, LEVEL)
        assert sized.budget == units and sized.replicates is None and sized.oc.decided is decided


def test_the_budgets_are_declared_on_the_checks():
    sizes = REGISTRY.sizes
    assert {slug: (r.unit, r.config_field, r.sequential) for slug, r in sizes.items()} == {
        "kiss-lora": ("seed", "seeds", True),
        "grad-accumulation": ("gradient pair", "noise_pairs", True),
        "reward-weights": ("scored response", "examples", False),
    }
    full = {slug: REGISTRY[slug].config(False, "full") for slug in sizes}
    assert (
        full["kiss-lora"].seeds,
        full["grad-accumulation"].noise_pairs,
        full["reward-weights"].examples,
    ) == (
        16,
        12,
        680,
    )


# -- the replicate loops' stop hook -----------------------------------------------------------------------


@dataclasses.dataclass
class _Config:
    units: int = param(5)

    @classmethod
    def smoke(cls):
        return cls()

    @classmethod
    def audit_values(cls, audit):
        return {}


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Metrics(CheckMetrics):
    done: int


def test_a_registered_replicating_check_gets_the_registry_s_stop_hook(monkeypatch):
    """The registry hands a sequential check's measure the stop hook its claims give; run outside a
    registry (or at smoke size) the loop spends its budget."""
    calls = []

    def measure(cfg, ctx, live=None, stop=None):
        done = 0
        for _ in range(cfg.units):
            done += 1
            if stop is not None and stop(_Metrics(done=done)):
                break
        calls.append(done)
        return Checked(Finding("kiss-lora", "t", "pass", ""), _Metrics(done=done))

    rep = Replicates("unit", "units", full=9, cost_s=1.0, cost_source="test")
    check = Check.of("kiss-lora", "t", _Config, _Metrics, measure, number=1, replicates=rep)
    registry = CheckRegistry("test")
    registered = registry.register(check)
    asked = []
    monkeypatch.setattr(
        registry, "stopper", lambda slug, ctx, cfg: lambda m: asked.append(m.done) or m.done == 2
    )
    ctx = AuditContext("cpu", progress=False)
    assert registered.run(_Config(), ctx).metrics.done == 2 and asked == [1, 2]
    assert check.run(_Config(), ctx).metrics.done == 5  # the bare check: no registry, no stop
    from nbkit.audit.checks import kiss

    assert REGISTRY["kiss-lora"].run is not kiss.CHECK.run and REGISTRY["kiss-lora"].replicates.sequential


def test_the_stopper_stops_once_the_steps_row_is_decided():
    """The kiss-lora loop's stop in the full profile: after 3 seeds of the notes' ratio the row is not yet
    decided at that look; after enough it is — and never in a smoke run."""
    ctx = AuditContext("cpu", progress=False, profile="full")
    cfg = REGISTRY["kiss-lora"].config(False, "full")
    stop = REGISTRY.stopper("kiss-lora", ctx, cfg)
    clear = [claims.STEP_RATIO * (1 + 0.01 * (i % 3 - 1)) for i in range(16)]
    assert not stop(_kiss(clear[:3])) and stop(_kiss(clear))
    smoke = AuditContext("cpu", progress=False, smoke=True, profile="full")
    assert not REGISTRY.stopper("kiss-lora", smoke, cfg)(_kiss(clear))


# -- the checks' own measurements the rows rest on -----------------------------------------------------------


def test_kiss_runs_give_censored_log_ratios():
    """A variant that never reached the target counts as the budget (a lower bound); a seed neither
    variant finished gives no ratio."""
    run = KissRun(0, kiss_steps=5, over_steps=None, steps_trained=60)
    assert run.log_step_ratio(60) == pytest.approx(math.log(5 / 60))
    assert math.isnan(KissRun(1, None, None, 60).log_step_ratio(60))


def test_the_field_notes_asserts_on_real_leaks():
    """On the bundled SFT examples and the tiny model's tokenizer (pad == eos, ChatML): the positional
    assert catches every leak a training example shows, a label shift included (it moves the trained
    positions, not the trained tokens); the length assert none (trainers cut inputs and labels alike). A
    training template inference does not render and a BPE merge across the boundary leave the example
    consistent in itself: they are counted apart, and no assert catches them."""
    from nbkit.audit.checks.loss_mask import UNSEEN_LEAKS, probe_field_note_asserts
    from nbkit.audit.config import TemplateSection
    from nbkit.audit.sft import make_sft_examples, tiny_tokenizer

    probe = probe_field_note_asserts(tiny_tokenizer(), make_sft_examples(24), TemplateSection())
    assert probe["clean_examples"] == 24 and probe["clean_failing"] == 0
    leaks = probe["leaks"]
    assert set(leaks) == set(LEAK_CLASSES) and set(probe["unseen"]) == set(UNSEEN_LEAKS)
    for cls in LEAK_CLASSES:
        assert leaks[cls]["examples"] == 24 and leaks[cls]["caught"] == 24, cls
        assert leaks[cls]["caught_by_length"] == 0 and leaks[cls]["caught_by_positions"] == 24, cls
    unseen = probe["unseen"]
    assert unseen["inference_template"] == {"examples": 24, "caught": 0}
    assert unseen["boundary_merge"]["caught"] == 0 and unseen["boundary_merge"]["examples"] > 0


def test_the_positional_assert_reads_positions_not_text():
    """Labels shifted one place decode to the same text; the positional assert still fails them. A
    clean example passes, a length mismatch fails the length assert only."""
    from nbkit.audit.checks.loss_mask import field_note_asserts
    from nbkit.audit.config import TemplateSection
    from nbkit.audit.sft import build_features, make_sft_examples, tiny_tokenizer

    tok = tiny_tokenizer()
    clean = build_features(tok, make_sft_examples(1)[0], TemplateSection())
    assert field_note_asserts(tok, clean) == (True, True)
    labels = clean["labels"]
    shifted = {**clean, "labels": labels[1:] + [-100]}
    trained = [t for t in labels if t != -100]
    assert [t for t in shifted["labels"] if t != -100] == trained  # the same tokens, so the same text
    assert field_note_asserts(tok, shifted) == (True, False)
    assert field_note_asserts(tok, {**clean, "labels": labels + [-100]}) == (False, True)


def test_reward_weights_check_writes_both_samplers_and_the_crossings():
    from nbkit.audit.checks.reward_weights import check_sampling

    rewards = [-(i % 7) * 0.3 - 0.1 * i for i in range(24)]
    m = check_sampling(
        rewards, [r * 10 for r in rewards], beta=0.5, gamma=0.0, concentrated=(8.0, 0.0)
    ).metrics
    assert m.concentrated_beta == 8.0 and m.kl_concentrated > m.kl_sampled_vs_reward
    assert m.ess_concentrated < m.ess_configured and m.kurtosis_rise_se > 0
    assert 0 < m.kl_crossing_beta < 64 and 0 < m.shrink_crossing_beta < 64
    assert math.isfinite(m.crossing_log_ratio) and m.crossing_log_ratio_se > 0


def test_a_bootstrap_without_spread_gives_no_standard_error():
    """Every resample giving the same figure is no evidence of precision: NaN, which the rows read as
    inconclusive, never a zero-width interval that decides."""
    from nbkit.audit.checks.reward_weights import bootstrap_se

    assert math.isnan(bootstrap_se(np.full(1000, 2.0))) and math.isnan(bootstrap_se(np.array([2.0])))
    assert bootstrap_se(np.array([1.0, 2.0, 3.0])) == pytest.approx(1.0)
    assert decide("kurtosis", (4.0, bootstrap_se(np.full(1000, 4.0)), 1000)) == INCONCLUSIVE


def test_claims_read_the_fields_the_real_checks_fill():
    """The CPU paths on the tiny model, the checks run as the notebook runs them (at smoke size, judged as
    a default run would judge them): every row fed by these checks is measured, and the broken config's
    audit feeds lax_coercion."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ctx = AuditContext("cpu", smoke=True, config="good.yaml", progress=False)
        for slug in ("lora-binding", "label-alignment", "dtypes", "loss-mask", "schedulers", "fragmentation"):
            REGISTRY.run(slug, ctx)
        REGISTRY.run("audit", ctx, checks="data-schema")
    finally:
        torch.set_num_threads(before)
    assert {r.verdict for r in claims.judge(ctx)} == {NOT_JUDGED}
    ctx.smoke = False
    rows = {r.key: r for r in claims.judge(ctx)}
    fed = [
        "binding_asserts",
        "lora_scaling",
        "zh_labels",
        "en_offsets",
        "baddbmm",
        "index_add_keeps_bf16",
        "index_add_promotes",
        "index_copy_recast",
        "kv_cache",
        "lax_coercion",
        "mask_leak",
        "warmup_stage",
    ]
    unmeasured = {k: rows[k].why for k in fed if rows[k].measured == NOT_MEASURED}
    assert not unmeasured, unmeasured
    assert rows["lax_coercion"].verdict == HOLDS and rows["mask_leak"].verdict == HOLDS
    assert "inference_template" in rows["mask_leak"].measured  # counted apart, not judged
    assert "fragmentation" not in ctx.results and ctx.checked["fragmentation"].status == "needs_gpu"
    assert all(r.kind in (MEASURED, ARITHMETIC, LIBRARY_FACT, DEMONSTRATION) for r in rows.values())


def test_metrics_are_frozen():
    """A row's read cannot change what the next row reads."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        _kiss([0.5]).budget_steps = 1  # type: ignore[misc]
