"""Every audit verdict function through every outcome at the n the notebook really has, each spec's
operating characteristics, and the ledger judged on one context's typed results."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from nbkit.audit import claims as C
from nbkit.audit.checks.ddp_eval import DdpEvalMetrics, EvalScenario, UnusedHeadError
from nbkit.audit.checks.grad_accumulation import GradAccumulationConfig, GradAccumulationMetrics
from nbkit.audit.checks.kiss import KISS_FULL_SEEDS, KissConfig, KissMetrics, KissRun, LoraCounts
from nbkit.audit.checks.loss_mask import LEAK_CLASSES, LeakClass
from nbkit.audit.checks.reward_weights import REWARD_FULL_RESPONSES, RewardWeightsConfig
from nbkit.audit.context import AuditContext
from nbkit.claims import DEFAULT, FULL, operating_characteristics
from nbkit.findings import Finding
from nbkit.result import Result

H, R, INC, G = "holds", "refuted", "inconclusive", "needs GPU"
SPECS = {s.key: s for s in C.REGISTRY.claims}


def v(verdict):
    return verdict.verdict


def test_trainable_shares_and_param_ratio_on_the_notes_model():
    assert v(C.verdict_trainable_share(0.13, C.KISS_SHARE_PCT)) == H
    assert v(C.verdict_trainable_share(0.0569, C.KISS_SHARE_PCT)) == R  # DeepSeek-LLM-7B's q/v r8
    assert v(C.verdict_trainable_share(0.678, C.OVER_SHARE_PCT)) == H  # its q/v/o r64
    assert v(C.verdict_trainable_share(math.nan, C.OVER_SHARE_PCT)) == INC
    assert v(C.verdict_param_ratio(3.0)) == H
    assert v(C.verdict_param_ratio(12.0)) == R
    assert v(C.verdict_param_ratio(math.nan)) == INC


SEEDS = KissConfig().seeds  # the notebook's default seeds


@pytest.mark.parametrize(
    "ratios,expected",
    [
        ([math.log(0.4), math.log(0.45), math.log(0.38), math.log(0.42)], H),  # the notes' 0.42
        ([0.0, 0.05, -0.04, 0.02], R),  # no difference
        ([math.log(0.3), 0.4, -0.6, 0.2], INC),  # scattered
        ([0.1, 0.1, 0.1, 0.1], INC),  # tied seeds: no spread, no interval
        ([math.log(0.4)], INC),  # one seed never decides
    ],
)
def test_kiss_steps_every_outcome_at_the_default_seeds(ratios, expected):
    assert SEEDS == 4
    assert v(C.verdict_kiss_steps(ratios)) == expected


def test_kiss_runs_give_censored_log_ratios():
    """A variant that never reached the target counts as the budget (a lower bound); a seed neither
    variant finished gives no ratio."""
    run = KissRun(0, kiss_steps=5, over_steps=None, steps_trained=60)
    assert run.log_step_ratio(60) == pytest.approx(math.log(5 / 60))
    assert math.isnan(KissRun(1, None, None, 60).log_step_ratio(60))


def test_peak_binding_scaling_and_labels():
    assert v(C.verdict_peak_ratio(0.7)) == H and v(C.verdict_peak_ratio(0.95)) == R
    assert v(C.verdict_peak_ratio(math.nan)) == INC
    assert v(C.verdict_binding_asserts(60, 60)) == H
    assert v(C.verdict_binding_asserts(0, 60)) == R
    assert v(C.verdict_binding_asserts(0, 0)) == INC
    assert v(C.verdict_scaling(16.0, 16.0)) == H and v(C.verdict_scaling(2.0, 16.0)) == R
    assert v(C.verdict_scaling(math.nan, 16.0)) == INC
    assert v(C.verdict_zh_labels(71.3)) == H and v(C.verdict_zh_labels(100.0)) == R
    assert v(C.verdict_zh_labels(math.nan)) == INC
    assert C.ZH_F1_THRESHOLD == pytest.approx(85.65)
    assert v(C.verdict_en_offsets(95.0, 40.0)) == H and v(C.verdict_en_offsets(95.0, 95.0)) == R
    assert v(C.verdict_en_offsets(math.nan, math.nan)) == INC


REPS = C.FLASH_DESIGN.n  # the notebook's default repetitions


def test_flash_speedup_every_outcome_with_fabricated_cuda_timings():
    """The GPU path without a GPU: per-repetition ratios as 20 interleaved CUDA repetitions give them."""
    rng = np.random.default_rng(0)

    def reps(center, sd=0.03):
        return list(np.exp(rng.normal(math.log(center), sd, REPS)))

    assert v(C.verdict_flash_speedup("cuda:0", reps(3.8))) == H
    assert v(C.verdict_flash_speedup("cuda:0", reps(1.3))) == R
    assert v(C.verdict_flash_speedup("cuda:0", reps(4.75, sd=0.4))) == INC  # straddles the band's edge
    assert v(C.verdict_flash_speedup("cuda:0", [])) == INC  # a CUDA run that could not time flash
    assert v(C.verdict_flash_speedup("cpu", reps(20.0))) == G  # a CPU's kernels are not the claim


PAIRS = GradAccumulationConfig().noise_samples // 2  # pairs per length at defaults
LENGTHS = tuple(sorted(GradAccumulationConfig().noise_lengths))


def _estimates(exponent, pairs, cv=0.05, seed=0):
    rng = np.random.default_rng(seed)
    k = 1 / cv**2
    return [list(rng.gamma(k, L**exponent / k, pairs)) for L in LENGTHS]


def test_sqrt_l_every_outcome_at_the_default_pairs():
    assert v(C.verdict_sqrt_l(LENGTHS, _estimates(-0.5, PAIRS))) == H
    assert v(C.verdict_sqrt_l(LENGTHS, _estimates(-1.0, PAIRS))) == R
    assert v(C.verdict_sqrt_l(LENGTHS, _estimates(0.1, PAIRS))) == R
    assert v(C.verdict_sqrt_l(LENGTHS, _estimates(-0.75, PAIRS, cv=0.8))) == INC
    assert v(C.verdict_sqrt_l(LENGTHS, _estimates(-0.5, 1))) == INC  # one pair per length: no interval
    assert v(C.verdict_sqrt_l(LENGTHS[:2], _estimates(-0.5, PAIRS)[:2])) == INC  # two lengths


def test_token_count_every_outcome():
    assert v(C.verdict_token_count(1e-7, 0.05)) == H
    assert v(C.verdict_token_count(0.02, 0.05)) == R
    assert v(C.verdict_token_count(1e-7, 1e-6)) == R
    assert v(C.verdict_token_count(1e-7, 5e-4)) == INC
    assert v(C.verdict_token_count(math.nan, 0.05)) == INC


def test_dtype_verdicts():
    assert v(C.verdict_op_dtype("torch.float32", "torch.float32")) == H
    assert v(C.verdict_op_dtype("torch.bfloat16", "torch.float32")) == R
    assert v(C.verdict_op_dtype("RuntimeError: no", "torch.float32")) == R
    raised = "RuntimeError: index_add_(): self (BFloat16) and source (Float) must have the same scalar type"
    assert v(C.verdict_index_add_keeps("torch.bfloat16", "torch.bfloat16")) == H
    assert v(C.verdict_index_add_keeps(raised, "torch.bfloat16")) == R
    assert v(C.verdict_index_add_keeps("torch.float32", "torch.bfloat16")) == R
    copy = "RuntimeError: index_copy_(): self and source expected to have the same dtype"
    assert v(C.verdict_index_copy_recast("torch.bfloat16")) == H
    assert v(C.verdict_index_copy_recast(copy)) == R
    assert v(C.verdict_kv_cache_boundary("torch.float32", "torch.bfloat16")) == H
    assert v(C.verdict_kv_cache_boundary("torch.bfloat16", "torch.bfloat16")) == R
    # a plain float32 model's cache is float32 throughout: no boundary crossed, whatever either dtype is
    assert v(C.verdict_kv_cache_boundary("torch.float32", "torch.float32")) == R


def test_lax_coercion():
    assert v(C.verdict_lax_coercion(2)) == H and v(C.verdict_lax_coercion(0)) == R
    assert v(C.verdict_lax_coercion(math.nan)) == INC


def _classes(missed=None, examples=160):
    missed = missed or {}
    return tuple(LeakClass(c, examples, examples - missed.get(c, 0), 0, examples) for c in LEAK_CLASSES)


def test_mask_leak_every_outcome():
    assert v(C.verdict_mask_leak(_classes(), 160, 0)) == H
    refuted = C.verdict_mask_leak(_classes({"shifted_labels": 160, "target_truncated": 12}), 160, 0)
    assert (
        v(refuted) == R
        and "shifted_labels 160/160" in refuted.why
        and "target_truncated 12/160" in refuted.why
    )
    assert v(C.verdict_mask_leak(_classes(), 160, 3)) == R  # false alarms on clean examples
    assert v(C.verdict_mask_leak(_classes(examples=0), 160, 0)) == INC


def test_the_field_notes_asserts_on_real_leaks():
    """On the bundled SFT examples and the tiny model's tokenizer (pad == eos, ChatML): the positional
    assert catches every leak a training example shows, a label shift included (it moves the trained
    positions, not the trained tokens); the length assert none (trainers cut inputs and labels alike). A
    training template inference does not render and a BPE merge across the boundary (where the
    hand-written template's trailing space makes one) leave the example consistent in itself: they are
    counted apart, and no assert catches them."""
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
    classes = tuple(LeakClass(c, **leaks[c]) for c in LEAK_CLASSES)
    assert v(C.verdict_mask_leak(classes, 24, 0)) == H


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


RESPONSES = RewardWeightsConfig().examples  # the notebook's default scored responses


def test_kurtosis_every_outcome():
    se = C.KURTOSIS_SPREAD / math.sqrt(REWARD_FULL_RESPONSES)  # the full profile's standard error
    assert v(C.verdict_kurtosis_rises(C.KURTOSIS_THRESHOLD + 4 * se, se)) == H
    assert v(C.verdict_kurtosis_rises(C.KURTOSIS_THRESHOLD - 4 * se, se)) == R
    assert v(C.verdict_kurtosis_rises(C.KURTOSIS_THRESHOLD, se)) == INC
    assert v(C.verdict_kurtosis_rises(math.nan, se)) == INC


def test_kl_threshold_every_outcome():
    se = C.CROSSING_SPREAD / math.sqrt(REWARD_FULL_RESPONSES)  # the full profile's standard error
    band = math.log(1 + C.RELATIVE_TOLERANCE)
    assert v(C.verdict_kl_threshold(0.0, min(se, band / 4))) == H
    assert v(C.verdict_kl_threshold(band + 4 * se, se)) == R  # the two rules far apart in β
    assert v(C.verdict_kl_threshold(-band - 4 * se, se)) == R
    assert v(C.verdict_kl_threshold(band, se)) == INC
    assert v(C.verdict_kl_threshold(math.nan, se)) == INC


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
    """Every resample giving the same figure is no evidence of precision: NaN, which the rules read as
    inconclusive, never a zero-width interval that decides."""
    from nbkit.audit.checks.reward_weights import bootstrap_se

    assert math.isnan(bootstrap_se(np.full(1000, 2.0))) and math.isnan(bootstrap_se(np.array([2.0])))
    assert bootstrap_se(np.array([1.0, 2.0, 3.0])) == pytest.approx(1.0)
    se = bootstrap_se(np.full(1000, C.KURTOSIS_THRESHOLD + 1))
    assert v(C.verdict_kurtosis_rises(C.KURTOSIS_THRESHOLD + 1, se)) == INC
    assert v(C.verdict_kl_threshold(0.0, bootstrap_se(np.zeros(1000)))) == INC


def test_scheduler_and_ddp_verdicts():
    assert v(C.verdict_warmup_first_stage_only(0)) == H and v(C.verdict_warmup_first_stage_only(1)) == R
    assert v(C.verdict_eval_allreduce(3.0)) == H and v(C.verdict_eval_allreduce(0.0)) == R
    assert v(C.verdict_eval_allreduce(math.nan)) == INC
    err = "Expected to have finished reduction in the prior iteration"
    assert v(C.verdict_eval_backward(err, err)) == H
    refuted = C.verdict_eval_backward("", err)
    assert v(refuted) == R and "with the value head" in refuted.why  # the error is the unused head's
    assert v(C.verdict_eval_backward("", "")) == R


def test_operating_characteristics_of_every_measured_spec():
    """Exact rows decide at defaults; the flash row decides at its 20 repetitions (on a GPU); kiss-steps,
    sqrt-l, kurtosis and kl-threshold need the full profile, where they decide."""
    decided_at_defaults = {
        key
        for key, s in SPECS.items()
        if s.design is not None and operating_characteristics(s, DEFAULT).decided
    }
    assert {
        "kiss-peak",
        "zh-labels",
        "token-count",
        "kv-cache",
        "mask-leak",
        "eval-allreduce",
    } <= decided_at_defaults
    assert {"eval-backward", "flash-speedup"} <= decided_at_defaults
    full = {"kiss-steps", "sqrt-l", "kurtosis", "kl-threshold"}
    assert not full & decided_at_defaults
    for key in full:
        oc = operating_characteristics(SPECS[key], FULL)
        assert oc.decided and oc.p_holds_if_true >= 0.8 and oc.p_refuted_if_false >= 0.8, (key, oc)
    assert SPECS["kiss-steps"].design.full_n == KISS_FULL_SEEDS
    assert SPECS["kiss-steps"].design.units(KissConfig.full()) == KISS_FULL_SEEDS
    assert SPECS["kurtosis"].design.units(RewardWeightsConfig.full()) == REWARD_FULL_RESPONSES
    kinds = {key: s.kind for key, s in SPECS.items()}
    assert kinds["binding-asserts"] == kinds["lora-scaling"] == kinds["index-copy"] == "library fact"
    assert kinds["en-offsets"] == "library fact" and kinds["lax-coercion"] == "demonstration"
    assert kinds["kiss-share"] == kinds["over-share"] == kinds["param-ratio"] == "arithmetic"
    assert "fragmentation" not in SPECS  # notebook 02's ledger judges it, once


def _kiss(ratios, model="smollm2"):
    runs = tuple(KissRun(i, round(1000 * math.exp(r)), 1000, 1000) for i, r in enumerate(ratios))
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


def _ddp():
    err = "Expected to have finished reduction in the prior iteration"
    scenarios = (
        EvalScenario("no_grad", False, 6, 0.0, 0.0, 0.0, ""),
        EvalScenario("grad_no_backward", False, 6, 0.0, 0.0, 0.0, ""),
        EvalScenario("backward", False, 6, 3.0, 0.15, 0.0, ""),
        EvalScenario("value_head_backward", True, 2, 1.0, math.nan, 0.0, err),
    )
    return DdpEvalMetrics(
        scenario="no_grad",
        train_steps=6,
        eval_interval=2,
        learning_rate=0.01,
        allreduce_per_train_step=1.0,
        control_update=0.05,
        ranks_agree=True,
        scenarios=scenarios,
        unused_head=UnusedHeadError(err, "", ""),
    )


def _context(results: dict) -> AuditContext:
    """An audit context holding fabricated results (slug → metrics), as the notebook's context holds
    real ones."""
    ctx = AuditContext("cpu", progress=False)
    for slug, m in results.items():
        ctx.keep(slug, Result(metrics=m, data=Finding(slug, slug, "pass", "")))
    return ctx


def test_the_ledger_judges_one_context():
    """Rows from the typed results one context keeps: a row whose experiment did not run says "not
    measured", an undecided row says the n it needs, the model is named."""
    grad = GradAccumulationMetrics(
        model="smollm2",
        rel_err_per_microbatch_mean=0.05,
        rel_err_token_count=1e-8,
        tokens_per_microbatch=(16, 29),
        configured_normalisation="token_count",
        noise_lengths=LENGTHS,
        noise_estimates=tuple(tuple(e) for e in _estimates(-1.0, PAIRS)),
        noise_variance_slope=-1.0,
        gradients_of="all parameters",
    )
    ctx = _context(
        {"grad-accumulation": grad, "kiss-lora": _kiss([math.log(0.4)] * 3 + [0.0]), "ddp-eval": _ddp()}
    )
    rows = {r.key: r for r in C.judge(ctx)}
    assert rows["token-count"].verdict == H and rows["token-count"].kind == "measured"
    assert rows["sqrt-l"].verdict == INC and rows["sqrt-l"].why.startswith(
        "not decided at defaults: needs n ≥ 16"
    )
    assert rows["sqrt-l"].measured.endswith("[smollm2]") and "4 independent pairs" in rows["sqrt-l"].n
    assert (
        rows["kiss-steps"].why.startswith("not decided at defaults")
        and not rows["kiss-steps"].decided_at_defaults
    )
    assert rows["kiss-share"].verdict == R and "DeepSeek-LLM-7B" in rows["kiss-share"].measured
    assert rows["over-share"].verdict == H and rows["kiss-share"].p_holds_if_true is None
    assert rows["eval-backward"].verdict == R and rows["eval-allreduce"].verdict == R
    assert rows["flash-speedup"].measured == "not measured" and "run attention" in rows["flash-speedup"].why
    assert len(rows) == len(SPECS) >= 20
    head = C.headline(ctx)
    assert head["noise_variance_slope"] == -1.0 and head["notes_model_param_ratio"] == 12.0
    assert math.isnan(head["broken_config_failures"])  # the broken config's audit did not run
    assert 3 <= len(head) <= 6


def test_the_full_profile_judges_kiss_steps():
    """With the full profile's seeds the same rule decides: the notes' ratio holds, no difference refutes."""
    ratios = list(np.random.default_rng(1).normal(math.log(C.STEP_RATIO), 0.05, KISS_FULL_SEEDS))
    ctx = _context({"kiss-lora": _kiss(ratios)})
    ctx.profile = FULL
    assert {r.key: r for r in C.judge(ctx)}["kiss-steps"].verdict == H
    ctx = _context({"kiss-lora": _kiss(list(np.random.default_rng(2).normal(0.0, 0.05, KISS_FULL_SEEDS)))})
    ctx.profile = FULL
    assert {r.key: r for r in C.judge(ctx)}["kiss-steps"].verdict == R


def test_claims_read_the_fields_the_real_checks_fill():
    """The CPU paths on the tiny model, the checks run as the notebook runs them: every claim fed by
    these checks is measured (never 'not measured'), and the broken config's audit feeds lax-coercion."""
    import torch

    from nbkit.audit import experiments

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ctx = AuditContext("cpu", smoke=True, config="good.yaml", progress=False)
        for slug in ("lora-binding", "label-alignment", "dtypes", "loss-mask", "schedulers", "fragmentation"):
            experiments.run(slug, ctx)
        experiments.run("audit", ctx, checks="data-schema")
    finally:
        torch.set_num_threads(before)
    rows = {r.key: r for r in C.judge(ctx)}
    fed = [
        "binding-asserts",
        "lora-scaling",
        "zh-labels",
        "en-offsets",
        "baddbmm",
        "index-add",
        "index-copy",
        "kv-cache",
        "lax-coercion",
        "mask-leak",
        "warmup-stage",
    ]
    unmeasured = {k: rows[k].why for k in fed if "not measured" in rows[k].why}
    assert not unmeasured, unmeasured
    # the notes' positional assert catches every leak a training example shows
    assert rows["lax-coercion"].verdict == H and rows["mask-leak"].verdict == H
    assert "inference_template" in rows["mask-leak"].measured  # counted apart, not judged
    assert "fragmentation" not in ctx.results and ctx.checked["fragmentation"].status == "needs_gpu"


def test_a_spec_reads_a_copy_of_metrics_unchanged():
    """Metrics are frozen: a claim's read cannot change what the next claim reads."""
    m = _kiss([0.0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.budget_steps = 1  # type: ignore[misc]
