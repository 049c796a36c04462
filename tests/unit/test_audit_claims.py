"""Every audit verdict function through every outcome, on fabricated metrics of the fields the checks fill."""

from __future__ import annotations

import dataclasses

import pytest

from nbkit.audit import claims as C
from nbkit.audit.checks.attention import AttentionMetrics
from nbkit.audit.checks.data_schema import DataSchemaMetrics
from nbkit.audit.checks.ddp_eval import DdpEvalMetrics
from nbkit.audit.checks.dtypes import DtypesMetrics
from nbkit.audit.checks.fragmentation import FragmentationMetrics
from nbkit.audit.checks.grad_accumulation import GradAccumulationMetrics
from nbkit.audit.checks.kiss import KissConfig, KissMetrics
from nbkit.audit.checks.label_alignment import LabelAlignmentMetrics
from nbkit.audit.checks.lora_binding import LoraBindingMetrics
from nbkit.audit.checks.loss_mask import LossMaskMetrics
from nbkit.audit.checks.reward_weights import RewardWeightsMetrics
from nbkit.audit.checks.schedulers import SchedulersMetrics
from nbkit.audit.config import AuditConfig
from nbkit.audit.experiments import AuditContext
from nbkit.findings import Finding
from nbkit.result import Result

replace = dataclasses.replace

H, R, INC, G = "holds", "refuted", "inconclusive", "needs GPU"


def v(verdict):
    return verdict.verdict


def test_trainable_share_and_param_ratio():
    assert v(C.verdict_trainable_share(KissMetrics(kiss_trainable_share_pct=0.13), "kiss", 0.12)) == H
    assert v(C.verdict_trainable_share(KissMetrics(kiss_trainable_share_pct=0.5), "kiss", 0.12)) == R
    assert v(C.verdict_trainable_share(KissMetrics(), "kiss", 0.12)) == INC
    assert v(C.verdict_param_ratio(KissMetrics(param_ratio_over_vs_kiss=3.0))) == H
    assert v(C.verdict_param_ratio(KissMetrics(param_ratio_over_vs_kiss=12.8))) == R
    assert v(C.verdict_param_ratio(KissMetrics())) == INC


SEEDS = KissConfig().seeds  # the notebook's default number of repeats


@pytest.mark.parametrize(
    "kiss_first,over_first,ties,neither,expected",
    [
        (SEEDS, 0, 0, 0, H),
        (0, SEEDS, 0, 0, R),
        (SEEDS - 1, 1, 0, 0, INC),
        (0, 0, 2, SEEDS - 2, INC),
        (1, 0, 0, 0, INC),
        (0, 1, 0, 0, INC),
    ],  # one seed can never decide, whichever way it went
)
def test_kiss_steps(kiss_first, over_first, ties, neither, expected):
    figs = {
        "seeds": kiss_first + over_first + ties + neither,
        "seeds_kiss_first": kiss_first,
        "seeds_over_first": over_first,
        "seeds_tie": ties,
        "seeds_neither": neither,
        "budget_steps": 30,
    }
    assert v(C.verdict_kiss_steps(KissMetrics(**figs))) == expected


def test_first_to_target():
    from nbkit.audit.checks.kiss import first_to_target

    assert [first_to_target(*p) for p in ((5, 10), (5, None), (10, 5), (None, 5), (5, 5), (None, None))] == [
        "kiss",
        "kiss",
        "over",
        "over",
        "tie",
        "neither",
    ]


def test_kiss_steps_not_measured_and_peak_ratio():
    assert v(C.verdict_kiss_steps(KissMetrics())) == INC
    assert v(C.verdict_peak_ratio(KissMetrics(peak_ratio_kiss_vs_over=0.7))) == H
    assert v(C.verdict_peak_ratio(KissMetrics(peak_ratio_kiss_vs_over=0.95))) == R
    assert v(C.verdict_peak_ratio(KissMetrics())) == INC


def test_binding_asserts_and_scaling():
    assert v(C.verdict_binding_asserts(LoraBindingMetrics(field_note_asserts_hold_on="60/60 modules"))) == H
    assert v(C.verdict_binding_asserts(LoraBindingMetrics(field_note_asserts_hold_on="0/60 modules"))) == R
    assert v(C.verdict_binding_asserts(LoraBindingMetrics(field_note_asserts_hold_on="0/0 modules"))) == INC
    assert v(C.verdict_binding_asserts(LoraBindingMetrics())) == INC
    assert v(C.verdict_scaling(LoraBindingMetrics(scaling_applied=16.0, alpha=16.0))) == H
    assert v(C.verdict_scaling(LoraBindingMetrics(scaling_applied=2.0, alpha=16.0))) == R
    assert v(C.verdict_scaling(LoraBindingMetrics())) == INC


def test_label_alignment_verdicts():
    assert v(C.verdict_zh_labels(LabelAlignmentMetrics(zh_boundary_f1_pct=71.3))) == H
    assert v(C.verdict_zh_labels(LabelAlignmentMetrics(zh_boundary_f1_pct=98.0))) == R
    assert v(C.verdict_zh_labels(LabelAlignmentMetrics())) == INC
    assert (
        v(
            C.verdict_en_offsets(
                LabelAlignmentMetrics(en_boundary_f1_pct=95.0, en_untrimmed_offsets_f1_pct=40.0)
            )
        )
        == H
    )
    assert (
        v(
            C.verdict_en_offsets(
                LabelAlignmentMetrics(en_boundary_f1_pct=95.0, en_untrimmed_offsets_f1_pct=95.0)
            )
        )
        == R
    )
    assert v(C.verdict_en_offsets(LabelAlignmentMetrics())) == INC


def test_flash_speedup_every_outcome():
    """Keys as attention.flash_speedup writes them on CUDA (the key test there checks the writer)."""
    cuda = {"device": "cuda:0", "flash_over_math_L": 2048, "flash_over_math_reps": 3}
    assert (
        v(
            C.verdict_flash_speedup(
                AttentionMetrics(
                    **cuda,
                    flash_over_math_cuda=3.8,
                    flash_over_math_cuda_low=3.5,
                    flash_over_math_cuda_high=4.1,
                )
            )
        )
        == H
    )
    assert (
        v(
            C.verdict_flash_speedup(
                AttentionMetrics(
                    **cuda,
                    flash_over_math_cuda=1.2,
                    flash_over_math_cuda_low=1.1,
                    flash_over_math_cuda_high=1.3,
                )
            )
        )
        == R
    )
    assert (
        v(
            C.verdict_flash_speedup(
                AttentionMetrics(
                    **cuda,
                    flash_over_math_cuda=3.0,
                    flash_over_math_cuda_low=2.0,
                    flash_over_math_cuda_high=4.0,
                )
            )
        )
        == INC
    )
    assert (
        v(C.verdict_flash_speedup(AttentionMetrics(device="cuda:0"))) == INC
    )  # CUDA run that stored no ratio
    assert v(C.verdict_flash_speedup(AttentionMetrics(device="cpu"))) == G


def test_sqrt_l_is_two_sided():
    figs = {"noise_variance_slope": -0.5, "noise_lengths": 4}
    assert (
        v(
            C.verdict_sqrt_l(
                replace(
                    GradAccumulationMetrics(**figs),
                    noise_variance_slope_ci_low=-0.6,
                    noise_variance_slope_ci_high=-0.4,
                )
            )
        )
        == H
    )
    assert (
        v(
            C.verdict_sqrt_l(
                replace(
                    GradAccumulationMetrics(**figs),
                    noise_variance_slope=-1.0,
                    noise_variance_slope_ci_low=-1.1,
                    noise_variance_slope_ci_high=-0.9,
                )
            )
        )
        == R
    )
    assert (
        v(
            C.verdict_sqrt_l(
                replace(
                    GradAccumulationMetrics(**figs),
                    noise_variance_slope=0.1,
                    noise_variance_slope_ci_low=0.0,
                    noise_variance_slope_ci_high=0.2,
                )
            )
        )
        == R
    )
    assert (
        v(
            C.verdict_sqrt_l(
                replace(
                    GradAccumulationMetrics(**figs),
                    noise_variance_slope_ci_low=-1.2,
                    noise_variance_slope_ci_high=0.1,
                )
            )
        )
        == INC
    )
    assert (
        v(
            C.verdict_sqrt_l(
                replace(
                    GradAccumulationMetrics(**figs),
                    noise_variance_slope_ci_low=float("nan"),
                    noise_variance_slope_ci_high=float("nan"),
                )
            )
        )
        == INC
    )
    assert v(C.verdict_sqrt_l(GradAccumulationMetrics())) == INC


def test_token_count_normalisation():
    assert (
        v(
            C.verdict_token_count_normalisation(
                GradAccumulationMetrics(rel_err_per_microbatch_mean=0.05, rel_err_token_count=1e-7)
            )
        )
        == H
    )
    assert (
        v(
            C.verdict_token_count_normalisation(
                GradAccumulationMetrics(rel_err_per_microbatch_mean=0.05, rel_err_token_count=0.02)
            )
        )
        == R
    )
    assert (
        v(
            C.verdict_token_count_normalisation(
                GradAccumulationMetrics(rel_err_per_microbatch_mean=1e-6, rel_err_token_count=1e-7)
            )
        )
        == R
    )
    assert (
        v(
            C.verdict_token_count_normalisation(
                GradAccumulationMetrics(rel_err_per_microbatch_mean=5e-4, rel_err_token_count=1e-7)
            )
        )
        == INC
    )
    assert v(C.verdict_token_count_normalisation(GradAccumulationMetrics())) == INC


def test_dtype_verdicts():
    key = "baddbmm [float32 inputs under torch.bfloat16 autocast]"
    assert v(C.verdict_op_dtype("torch.float32", key, "torch.float32")) == H
    assert v(C.verdict_op_dtype("torch.bfloat16", key, "torch.float32")) == R
    assert v(C.verdict_op_dtype(None, key, "torch.float32")) == INC
    ic = "index_copy_ [torch.bfloat16 cache, float32 source]"
    assert v(C.verdict_index_copy_recast("torch.bfloat16", ic)) == H
    assert (
        v(
            C.verdict_index_copy_recast(
                "RuntimeError: index_copy_(): self and source expected to have the same dtype", ic
            )
        )
        == R
    )
    assert v(C.verdict_index_copy_recast(None, ic)) == INC
    assert (
        v(
            C.verdict_kv_cache_boundary(
                DtypesMetrics(kv_cache_keys_dtype="torch.float32", kv_cache_values_dtype="torch.bfloat16")
            )
        )
        == H
    )
    assert (
        v(
            C.verdict_kv_cache_boundary(
                DtypesMetrics(kv_cache_keys_dtype="torch.bfloat16", kv_cache_values_dtype="torch.bfloat16")
            )
        )
        == R
    )
    assert v(C.verdict_kv_cache_boundary(DtypesMetrics())) == INC


def test_broken_config_verdicts():
    assert v(C.verdict_lax_coercion(DataSchemaMetrics(issue_counts={"coerced (strict rejects)": 2}))) == H
    assert v(C.verdict_lax_coercion(DataSchemaMetrics(issue_counts={"broken JSON": 1}))) == R
    assert v(C.verdict_lax_coercion(DataSchemaMetrics())) == INC


def _probe(caught=None, clean_failing=0, examples=48):
    """``field_note_asserts`` as the loss-mask check writes it (48 = the smoke examples; the default run
    has more)."""
    caught = caught or {}
    leaks = {
        c: {
            "examples": examples,
            "caught": caught.get(c, examples),
            "length_fires": 0,
            "decode_fires": caught.get(c, examples),
        }
        for c in ("eot_masked_by_pad", "target_truncated", "prompt_trained", "mask_off_by_one")
    }
    return {
        "field_note_asserts": {"leaks": leaks, "clean_examples": examples, "clean_failing": clean_failing}
    }


def test_mask_leak_judges_the_field_notes_asserts():
    assert v(C.verdict_mask_check_catches_leak(LossMaskMetrics(**_probe()))) == H
    assert (
        v(C.verdict_mask_check_catches_leak(LossMaskMetrics(**_probe({"mask_off_by_one": 47})))) == R
    )  # one leak passes both asserts
    assert (
        v(C.verdict_mask_check_catches_leak(LossMaskMetrics(**_probe(clean_failing=3)))) == R
    )  # false alarms on clean examples
    assert v(C.verdict_mask_check_catches_leak(LossMaskMetrics(**_probe(examples=0)))) == INC
    assert v(C.verdict_mask_check_catches_leak(LossMaskMetrics())) == INC  # the old counter is not the claim
    assert v(C.verdict_mask_check_catches_leak(LossMaskMetrics())) == INC


def test_the_field_notes_asserts_on_real_leaks():
    """The probe on the bundled SFT examples and the tiny model's tokenizer (pad == eos, ChatML): the decode
    assert catches every leak class; the length assert never fires (inputs and labels are cut alike)."""
    from nbkit.audit.checks.loss_mask import probe_field_note_asserts
    from nbkit.audit.config import TemplateSection
    from nbkit.audit.sft import make_sft_examples, tiny_tokenizer

    tok = tiny_tokenizer()
    probe = probe_field_note_asserts(tok, make_sft_examples(24), TemplateSection())
    assert probe["clean_examples"] == 24 and probe["clean_failing"] == 0
    for cls, row in probe["leaks"].items():
        assert row["examples"] == 24 and row["caught"] == 24, cls
        assert row["length_fires"] == 0 and row["decode_fires"] == 24, cls
    assert v(C.verdict_mask_check_catches_leak(LossMaskMetrics(field_note_asserts=probe))) == H


def test_reward_weight_verdicts():
    """Both samplers on one model's responses: the configured one (β, γ) and the concentrated one."""
    assert (
        v(C.verdict_kurtosis_rises(RewardWeightsMetrics(kurtosis_uniform=2.1, kurtosis_concentrated=5.7)))
        == H
    )
    assert (
        v(C.verdict_kurtosis_rises(RewardWeightsMetrics(kurtosis_uniform=3.0, kurtosis_concentrated=2.5)))
        == R
    )
    assert (
        v(C.verdict_kurtosis_rises(RewardWeightsMetrics(kurtosis_uniform=3.0))) == INC
    )  # no concentrated sampler measured
    assert (
        v(C.verdict_kl_threshold(RewardWeightsMetrics(kl_sampled_vs_reward=0.05, kl_concentrated=0.6))) == H
    )
    assert v(C.verdict_kl_threshold(RewardWeightsMetrics(kl_sampled_vs_reward=0.3, kl_concentrated=0.6))) == R
    assert (
        v(C.verdict_kl_threshold(RewardWeightsMetrics(kl_sampled_vs_reward=0.3, kl_concentrated=0.1))) == INC
    )
    assert v(C.verdict_kl_threshold(RewardWeightsMetrics(kl_sampled_vs_reward=0.05))) == INC


def test_reward_weights_check_writes_the_concentrated_sampler():
    from nbkit.audit.checks.reward_weights import check_sampling

    rewards = [-(i % 7) * 0.3 - 0.1 * i for i in range(24)]
    f = check_sampling(rewards, [r * 10 for r in rewards], beta=0.5, gamma=0.0, concentrated=(8.0, 0.0))
    assert (
        f.figures["concentrated_beta"] == 8.0
        and f.figures["kl_concentrated"] > f.figures["kl_sampled_vs_reward"]
    )
    assert {"kurtosis_uniform", "kurtosis_concentrated"} <= set(f.figures)


def test_scheduler_verdicts():
    assert (
        v(C.verdict_warmup_first_stage_only(SchedulersMetrics(field_note_scenario_warmup_ramps_in_stage2=0)))
        == H
    )
    assert (
        v(C.verdict_warmup_first_stage_only(SchedulersMetrics(field_note_scenario_warmup_ramps_in_stage2=1)))
        == R
    )
    assert v(C.verdict_warmup_first_stage_only(SchedulersMetrics())) == INC


def test_fragmentation_every_outcome():
    """Keys as fragmentation.compare_traces writes them on CUDA (one run per interval), plus per-repeat
    differences."""
    from nbkit.zero.claims import verdict_gap_difference

    cuda = {
        "device": "cuda:0",
        "configured_interval": 50,
        "reference_interval": 200,
        "steps": 400,
        "gap_ratio_configured": 0.42,
        "gap_ratio_reference": 0.18,
        "repeats": 1,
    }
    one_run = C.verdict_fragmentation(FragmentationMetrics(**cuda))
    assert (
        one_run.verdict == INC and "one run" in one_run.why
    )  # per-step values of one run are not independent
    assert (
        v(C.verdict_fragmentation(FragmentationMetrics(**cuda, gap_ratio_diff_per_repeat=[0.24, 0.25, 0.23])))
        == H
    )
    assert (
        v(C.verdict_fragmentation(FragmentationMetrics(**cuda, gap_ratio_diff_per_repeat=[0.01, 0.0, 0.02])))
        == R
    )
    assert (
        v(C.verdict_fragmentation(FragmentationMetrics(**cuda, gap_ratio_diff_per_repeat=[0.0, 0.3, 0.15])))
        == INC
    )
    assert v(C.verdict_fragmentation(FragmentationMetrics(device="cpu", configured_interval=50))) == G
    # one claim, one rule: the same numbers give the same verdict in the ZeRO theme
    assert C.verdict_fragmentation(
        FragmentationMetrics(**cuda, gap_ratio_diff_per_repeat=[0.13, 0.14, 0.13])
    ) == verdict_gap_difference([0.13, 0.14, 0.13], what="gap(50) − gap(200)")


def test_ddp_verdicts():
    assert v(C.verdict_eval_allreduce(DdpEvalMetrics(grad_no_backward_extra_allreduces=3.0))) == H
    assert v(C.verdict_eval_allreduce(DdpEvalMetrics(grad_no_backward_extra_allreduces=0.0))) == R
    assert v(C.verdict_eval_allreduce(DdpEvalMetrics())) == INC
    assert (
        v(
            C.verdict_eval_backward_breaks_reducer(
                DdpEvalMetrics(
                    backward_extra_allreduces=2, backward_error="Expected to have finished reduction"
                )
            )
        )
        == H
    )
    assert v(C.verdict_eval_backward_breaks_reducer(DdpEvalMetrics(backward_extra_allreduces=2))) == R
    assert v(C.verdict_eval_backward_breaks_reducer(DdpEvalMetrics())) == INC


def _context(results: dict) -> AuditContext:
    """An audit context holding fabricated results (slug → metrics), as the notebook's contexts hold
    real ones."""
    ctx = AuditContext(AuditConfig(), "cpu")
    for slug, m in results.items():
        ctx.results[slug] = Result(metrics=m, data=Finding(slug, slug, m.status, m.summary))
    return ctx


def test_claims_rows_from_metrics_and_headline():
    grad = GradAccumulationMetrics(
        status="pass",
        model="smollm2",
        noise_variance_slope=-0.9,
        noise_variance_slope_ci_low=-1.0,
        noise_variance_slope_ci_high=-0.8,
        noise_lengths=4,
        noise_samples_per_length=8,
        rel_err_per_microbatch_mean=0.05,
        rel_err_token_count=1e-8,
    )
    rows = C.claims(grad=grad, broken_schema=DataSchemaMetrics(status="fail", model="tiny"))
    by = {r.key: r for r in rows}
    assert (
        by["sqrt-l"].verdict == R and "[-1, -0.8]" in by["sqrt-l"].interval and "4 lengths" in by["sqrt-l"].n
    )
    assert "4 independent pairs" in by["sqrt-l"].n
    assert by["token-count"].verdict == H
    assert by["flash-speedup"].verdict == G and by["kiss-steps"].verdict == INC
    assert "persistence" not in by  # restated DeepSpeed's rule: it could only hold
    # every row measured on a model names it; the op-level rows name none
    assert by["sqrt-l"].measured.endswith("[smollm2]") and by["lax-coercion"].measured.endswith("[tiny]")
    assert (
        by["eval-allreduce"].measured.endswith("[tiny Llama, 2 ranks]") and "[" not in by["baddbmm"].measured
    )
    assert len({r.key for r in rows}) == len(rows) >= 20
    kiss = KissMetrics(
        status="warn",
        model="smollm2",
        seeds=4,
        seeds_kiss_first=0,
        seeds_over_first=4,
        seeds_tie=0,
        seeds_neither=0,
        budget_steps=30,
        kiss_steps_to_target=None,
        over_steps_to_target=5,
        per_seed=[{"seed": 0}],
    )
    row = {r.key: r for r in C.claims(kiss=kiss)}["kiss-steps"]
    assert (
        row.verdict == R
        and row.interval.startswith("[0, 0.49")
        and row.n.startswith("4 seeds (4 decided)")
        and row.measured.endswith("[smollm2]")
    )
    good = _context({"grad-accumulation": grad})
    head = C.headline(good, _context({"lora-binding": LoraBindingMetrics(status="fail")}))
    assert head["broken_config_failures"] == 1 and head["noise_variance_slope"] == -0.9
    assert {r.key: r.verdict for r in C.claims_of(good)} == {r.key: r.verdict for r in C.claims(grad=grad)}


def test_claims_read_the_fields_the_real_checks_fill():
    """The CPU paths on the tiny model: every claim fed by these checks is measured (never 'not measured')."""
    import torch

    from nbkit.audit.config import config_file, load_config
    from nbkit.audit.experiments import make_context, run_audit

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fast = [
            "lora-binding",
            "label-alignment",
            "dtypes",
            "data-schema",
            "loss-mask",
            "zero3-layout",
            "schedulers",
            "fragmentation",
        ]
        good = make_context(load_config(config_file("good.yaml")), "cpu", progress=False)
        broken = make_context(load_config(config_file("broken.yaml")), "cpu", progress=False)
        run_audit(good.config, fast, smoke=True, progress=False, context=good)
        run_audit(broken.config, fast, smoke=True, progress=False, context=broken)
    finally:
        torch.set_num_threads(before)
    rows = {r.key: r for r in C.claims_of(good, broken)}
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
    assert (
        rows["fragmentation"].verdict == G
        and rows["lax-coercion"].verdict == H
        and rows["mask-leak"].verdict == H
    )
    assert (
        "persistence" not in rows
    )  # a restated DeepSpeed rule cannot refute itself: notebook 02's ladder measures it
