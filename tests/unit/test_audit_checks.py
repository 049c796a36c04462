"""The audit checks on the tiny GQA Llama and the bundled data (fast tier)."""

from __future__ import annotations

import math

import pytest
import torch

from nbkit.audit.checks.kiss import KissConfig
from nbkit.audit.config import SchedulerSection, TemplateSection, load_config
from nbkit.audit.sft import EXAMPLES_DIR, load_model_and_tokenizer, make_sft_examples, read_jsonl_plain

CPU = torch.device("cpu")


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny tensors gain nothing from intra-op threads, and on a shared CPU the threads' spinning
    makes these checks ~10-30× slower (measured); restore the setting afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny():
    return load_model_and_tokenizer("tiny", CPU, seed=0)


def test_lora_binding_passes_and_matches_peft_counts(tiny):
    from nbkit.audit.checks.lora_binding import check_lora_binding

    model, _ = tiny
    f = check_lora_binding(model, 8, 16, ["q_proj", "v_proj"])
    assert f.status == "pass", f.summary
    cfg = model.config
    hd = cfg.hidden_size // cfg.num_attention_heads
    per_layer = 8 * (cfg.hidden_size + cfg.hidden_size) + 8 * (cfg.hidden_size + cfg.num_key_value_heads * hd)
    assert f.figures["trainable_params"] == per_layer * cfg.num_hidden_layers
    assert f.figures["scaling_applied"] == 2.0 and f.figures["merge_max_abs_err"] < 1e-6
    rows = {r["module"]: r for r in f.table}
    assert rows["v_proj"]["base W0 (out, in)"] == str((cfg.num_key_value_heads * hd, cfg.hidden_size))
    assert f.figures["field_note_asserts_hold_on"].startswith(
        "0/"
    )  # the field notes' asserts assume a (d, r)·(r, k) layout


def test_lora_binding_reports_unmatched_targets_and_rank_over_width(tiny):
    from nbkit.audit.checks.lora_binding import check_lora_binding

    model, _ = tiny
    f = check_lora_binding(model, 48, 16, ["q_proj", "v_proj", "gate"])
    assert f.status == "fail"
    assert "['gate'] match no Linear module" in f.summary
    assert "rank 48 exceeds" in f.summary and f.figures["modules_over_rank"] == 2  # v_proj is 32 wide
    only_bad = check_lora_binding(model, 8, 16, ["nothing_here"])
    assert only_bad.status == "fail" and only_bad.figures["targets_unmatched"] == ["nothing_here"]


def test_bio_projection_round_trip():
    from nbkit.audit.checks.label_alignment import project_spans, spans_from_tags

    offsets = [(0, 3), (3, 12), (12, 12), (13, 18), (19, 24)]
    tags = project_spans(offsets, [(0, 12, "PER"), (19, 24, "LOC")])
    assert tags == ["B-PER", "I-PER", "O", "O", "B-LOC"]
    assert spans_from_tags(offsets, tags) == [(0, 12, "PER"), (19, 24, "LOC")]
    # a token straddling the span boundary widens the span: the round trip loses the exact boundary
    straddle = project_spans([(0, 4), (4, 9)], [(0, 6, "ORG")])
    assert spans_from_tags([(0, 4), (4, 9)], straddle) == [(0, 9, "ORG")]


def test_label_alignment_per_language(tiny):
    from nbkit.audit.checks.label_alignment import check_label_alignment

    _, tok = tiny
    f = check_label_alignment(tok, read_jsonl_plain(EXAMPLES_DIR / "ner.jsonl"))
    for lang in ("en", "zh"):
        assert f.figures[f"{lang}_spans"] > 15
    # trimming the byte-level leading space can only help the English boundaries
    assert f.figures["en_boundary_f1_pct"] >= f.figures["en_untrimmed_offsets_f1_pct"]
    assert f.figures["zh_chars_per_token"] < f.figures["en_chars_per_token"]


def test_jsonl_report_locates_every_fault():
    from nbkit.audit.checks.data_schema import check_jsonl_schema

    f, rep = check_jsonl_schema(
        EXAMPLES_DIR / "sft_broken.jsonl", str(EXAMPLES_DIR / "sft_schema.py") + ":SFTExample"
    )
    kinds = {(i["line"], i["kind"]) for i in rep.issues}
    assert kinds == {
        (4, "broken JSON"),
        (8, "missing field"),
        (12, "coerced (strict rejects)"),
        (16, "coerced (strict rejects)"),
        (20, "wrong type/value"),
        (24, "blank line"),
        (28, "not UTF-8"),
    }
    assert f.status == "fail" and rep.lines == 40 and rep.valid == 35 and rep.valid_strict == 33
    assert f.figures["missing_field_share_of_errors_pct"] == 50.0
    assert len(rep.records) == 35


def test_schema_that_does_not_import_is_a_finding_not_a_crash():
    from nbkit.audit.checks.data_schema import check_jsonl_schema

    f, rep = check_jsonl_schema(
        EXAMPLES_DIR / "sft.jsonl", str(EXAMPLES_DIR / "broken_schema.py") + ":SFTExample"
    )
    assert (
        rep is None
        and f.status == "fail"
        and "does not import" in f.summary
        and "a_package_that_does_not_exist" in f.summary
    )
    f, _ = check_jsonl_schema(EXAMPLES_DIR / "sft.jsonl", str(EXAMPLES_DIR / "sft_schema.py") + ":Nope")
    assert "has no class 'Nope'" in f.summary


def test_loss_mask_good_and_pad_eq_eos_bug(tiny):
    from nbkit.audit.checks.loss_mask import check_loss_mask

    _, tok = tiny
    ex = make_sft_examples(20)
    good = check_loss_mask(tok, ex, TemplateSection())
    assert good.status == "pass" and good.figures["pad_equals_eos"] is True
    bad = check_loss_mask(tok, ex, TemplateSection(mask_pad_labels=True))
    assert bad.status == "fail" and bad.figures["eot_masked"] == 20
    short = check_loss_mask(tok, ex, TemplateSection(max_length=30))
    assert short.figures["truncated"] > 0
    missing = check_loss_mask(tok, ex, TemplateSection(kind="format", format="Q: {question}\nA: {response}"))
    assert missing.status == "fail" and "question" in missing.summary


def test_grad_accumulation_token_count_matches_one_batch(tiny):
    from nbkit.audit.checks.grad_accumulation import check_grad_accumulation

    model, tok = tiny
    f = check_grad_accumulation(
        model,
        tok,
        make_sft_examples(8),
        TemplateSection(),
        micro_batch_size=2,
        grad_accumulation=4,
        lengths=(16, 32),
        noise_samples=3,
        device=CPU,
        progress=False,
    )
    assert f.figures["rel_err_token_count"] < 1e-5
    assert f.figures["rel_err_per_microbatch_mean"] > 1e-3  # unequal token counts per micro-batch
    assert f.status == "pass"
    assert math.isfinite(f.figures["noise_variance_slope"])
    # two lengths fit a line exactly: a slope but no interval (the claim then says "n too small")
    assert math.isnan(f.figures["noise_variance_slope_ci_low"]) and f.figures["noise_lengths"] == 2

    wrong = check_grad_accumulation(
        model,
        tok,
        make_sft_examples(8),
        TemplateSection(),
        micro_batch_size=2,
        grad_accumulation=4,
        normalisation="per_microbatch_mean",
        lengths=(16, 32),
        noise_samples=3,
        device=CPU,
        progress=False,
    )
    assert wrong.status == "fail"


def test_noise_variance_is_one_independent_estimate_per_pair(tiny):
    """Disjoint pairs of gradient samples give samples // 2 estimates per length (an odd last sample is
    left out); 6 samples = 3 pairs is the least the slope's interval takes."""
    from nbkit.audit.checks.grad_accumulation import fit_slope, noise_variance_by_length, text_token_stream

    model, tok = tiny
    stream = text_token_stream(tok, 4000)
    devs = noise_variance_by_length(
        model, stream, [16, 32, 64], micro_batch=2, samples=7, device=CPU, progress=False
    )
    assert [len(devs[L]) for L in (16, 32, 64)] == [3, 3, 3] and all(x > 0 for d in devs.values() for x in d)
    slope, lo, hi = fit_slope(devs)
    assert math.isfinite(slope) and math.isfinite(lo) and lo <= hi
    assert math.isnan(fit_slope({L: d[:2] for L, d in devs.items()})[1])  # 2 pairs: no interval


def test_slope_bootstrap_interval_covers_a_known_exponent():
    """Fabricated per-sample deviations with variance ∝ L^-0.5 (noisy): the interval brackets -0.5;
    with variance ∝ L^-1 it excludes -0.5."""
    import numpy as np

    from nbkit.audit.checks.grad_accumulation import fit_slope

    rng = np.random.default_rng(0)
    for exponent in (-0.5, -1.0):
        devs = {L: list(L**exponent * rng.chisquare(20, 16) / 20) for L in (16, 32, 64, 128)}
        slope, lo, hi = fit_slope(devs)
        assert lo < slope < hi and hi - lo < 0.4
        assert (lo < -0.5 < hi) == (exponent == -0.5)


def test_dtype_transitions_and_op_probes(tiny):
    from nbkit.audit.checks.dtypes import check_dtype_transitions

    model, tok = tiny
    f = check_dtype_transitions(model, tok, device=CPU)
    assert f.figures["modules_traced"] > 10
    assert f.figures["kv_cache_values_dtype"] == "torch.bfloat16"
    assert "must have the same" in f.figures["index_add_ [torch.bfloat16 cache, float32 source]"]
    assert f.figures["index_copy_ [torch.bfloat16 cache, torch.bfloat16 source]"] == "torch.bfloat16"
    assert check_dtype_transitions(model, tok, device=CPU, autocast_dtype="none").status == "skipped"


def test_sampling_thresholds():
    from nbkit.audit.checks.reward_weights import check_sampling

    g = torch.Generator().manual_seed(0)
    rewards = torch.randn(64, generator=g).tolist()
    prior = (torch.randn(64, generator=g) * 5).tolist()
    calm = check_sampling(rewards, prior, beta=0.0, gamma=0.0)
    assert calm.status == "pass" and calm.figures["kl_sampled_vs_reward"] < 1e-4
    hot = check_sampling(rewards, prior, beta=10.0, gamma=0.0)
    assert hot.status == "fail" and hot.figures["kl_sampled_vs_reward"] > 0.18
    assert hot.figures["effective_sample_size"] < calm.figures["effective_sample_size"]


def test_zero3_rules_follow_deepspeed(tiny):
    from nbkit.audit.checks.zero3_layout import check_zero3, zero3_layout

    model, _ = tiny
    rows = {r["name"]: r for r in zero3_layout(model, 1000, 4)}
    k = rows["model.layers.0.self_attn.k_proj.weight"]
    assert k["numel"] == 32 * 96 and not k["persisted"] and k["slice per rank"] == 32 * 96 // 4
    norm = rows["model.layers.0.input_layernorm.weight"]
    assert norm["persisted"]
    # 6 heads / 2 kv heads, head_dim 16: k_proj rows 0-15 and 16-31 are the two groups; 4 slices of 8 rows cut
    # both
    assert k["kv groups cut by slices"] == 2
    assert check_zero3(model, threshold=1e9, world_size=4).status == "fail"
    assert check_zero3(model, threshold=1000, world_size=4).status == "pass"


def test_scheduler_traces():
    from nbkit.audit.checks.schedulers import check_schedulers

    good = check_schedulers(load_config(EXAMPLES_DIR / "good.yaml").scheduler)
    assert (
        good.status == "pass"
        and good.figures["resume_mismatched_steps"] == 0
        and good.figures["warmups_applied"] == 1
    )
    broken = check_schedulers(load_config(EXAMPLES_DIR / "broken.yaml").scheduler)
    assert broken.status == "fail" and broken.figures["resume_mismatched_steps"] > 0
    lost = SchedulerSection(stages=[{"kind": "cosine", "steps": 50}], warmup_steps=5)
    assert "warmup lost" in check_schedulers(lost).summary


def test_fragmentation_says_needs_cuda_on_cpu():
    from nbkit.audit.checks.fragmentation import CHECK, check_fragmentation
    from nbkit.audit.config import AuditConfig
    from nbkit.zero.config import FragmentationConfig

    f = check_fragmentation(FragmentationConfig(), CPU)
    assert f.status == "needs_gpu" and "needs CUDA" in f.summary
    assert not any(isinstance(v, float) for v in f.figures.values())
    # the GPU run is long enough that the reference interval checkpoints twice
    assert f.figures["steps"] == 400 and f.figures["reference_interval"] == 200
    # one fragmentation experiment: the audit's check runs the ZeRO theme's config, its interval from the
    # audit's checkpoint section
    cfg = CHECK.config_from(load_config(EXAMPLES_DIR / "broken.yaml"))
    assert (
        CHECK.Config is FragmentationConfig
        and cfg.intervals == (5, 200)
        and cfg.expandable_segments == (False,)
    )
    assert CHECK.config_from(AuditConfig()).intervals == FragmentationConfig().intervals
    # an interval the experiment does not run (a TRL save_steps of 500) is "not run", naming what it takes
    from nbkit.audit.experiments import run_audit

    odd = AuditConfig.model_validate({"checkpoint": {"interval": 500}})
    [f] = run_audit(odd, ["fragmentation"], device="cpu", progress=False).data
    assert f.status == "skipped" and "every 500 steps" in f.summary and "50, 100, 200" in f.summary


def test_fragmentation_figures_from_fabricated_traces():
    """The keys the CUDA path writes, from fabricated run pairs: the interval is across repeats, never over
    the steps of one run (those are one allocator's history)."""
    from nbkit.audit.checks.fragmentation import FragmentationMetrics, compare_traces
    from nbkit.audit.claims import verdict_fragmentation
    from nbkit.findings import Finding

    def metrics(figs):  # the figures the CUDA path writes, read into the typed metrics the claim judges
        return FragmentationMetrics.of(Finding("fragmentation", "", "pass", "", {**figs, "device": "cuda:0"}))

    def run(interval, mean):
        return {
            "interval": interval,
            "checkpoints": 800 // interval,
            "mean_gap_ratio": mean,
            "alloc_retries": 0,
            "trace": [mean] * 400,
        }

    pairs = [
        (run(50, 0.40), run(200, 0.20)),
        (run(50, 0.42), run(200, 0.19)),
        (run(50, 0.39), run(200, 0.21)),
    ]
    figs = compare_traces(pairs)
    assert figs["repeats"] == 3 and figs["gap_ratio_diff_per_repeat"] == pytest.approx([0.2, 0.23, 0.18])
    assert 0.1 < figs["gap_ratio_diff_ci_low"] <= figs["gap_ratio_diff_ci_high"] < 0.3
    assert figs["steps"] == 400 and figs["checkpoints_reference"] == 4
    assert verdict_fragmentation(metrics(figs)).verdict == "holds"
    one = compare_traces(pairs[:1])  # one pair: no interval, and the verdict decides nothing
    assert math.isnan(one["gap_ratio_diff_ci_low"]) and one["repeats"] == 1
    assert verdict_fragmentation(metrics(one)).verdict == "inconclusive"


def test_kiss_comparison_on_tiny(tiny):
    from nbkit.audit.checks.kiss import compare_lora_variants

    model, tok = tiny
    cfg = KissConfig(budget_steps=3, batch_size=4, eval_every=1, val_size=8)
    f = compare_lora_variants(
        model, tok, make_sft_examples(40), TemplateSection(), cfg, device=CPU, progress=False
    )
    assert f.figures["param_ratio_over_vs_kiss"] == pytest.approx(12.8)
    assert f.figures["kiss_peak_bytes"] < f.figures["over_peak_bytes"]
    assert len(f.figure.data) == 2 and len(f.figure.data[0].x) == 4
    with pytest.raises(ValueError, match="budget_steps"):
        compare_lora_variants(
            model, tok, make_sft_examples(40), TemplateSection(), KissConfig(budget_steps=1), device=CPU
        )


def test_run_audit_turns_a_crash_into_an_error_finding(monkeypatch):
    import dataclasses

    from nbkit.audit.experiments import REGISTRY, run_audit

    def boom(cfg, ctx, live=None):
        raise RuntimeError("synthetic failure")

    monkeypatch.setitem(
        REGISTRY._experiments, "schedulers", dataclasses.replace(REGISTRY["schedulers"], run=boom)
    )
    cfg = load_config(EXAMPLES_DIR / "good.yaml")
    [f] = run_audit(cfg, ["schedulers"], device="cpu", progress=False).data
    assert f.status == "error" and f.check == "schedulers" and "synthetic failure" in f.summary


def test_lora_rank_above_the_layer_fails_before_building(tiny):
    """r: 10000000 would allocate gigabytes in PEFT; the shapes decide it first (milliseconds)."""
    import time

    from nbkit.audit.checks.lora_binding import check_lora_binding

    model, _ = tiny
    t0 = time.perf_counter()
    f = check_lora_binding(model, 10_000_000, 16, ["q_proj", "v_proj"])
    assert time.perf_counter() - t0 < 2.0
    assert (
        f.status == "fail"
        and "rank 10000000 exceeds" in f.summary
        and f.figures["modules_over_rank"] == 2 * model.config.num_hidden_layers
    )


def test_attention_flash_ratio_keys_match_the_claims():
    """The keys flash_speedup writes (per device type) are the keys the claims read, at every length."""
    from nbkit.audit.checks.attention import AttentionMetrics, flash_speedup
    from nbkit.audit.claims import verdict_flash_speedup
    from nbkit.findings import Finding

    for L in (256, 2048):
        rows = [
            {
                "backend": "flash",
                "L": L,
                "seconds": 0.01,
                "tokens_per_s": L / 0.01,
                "rep_seconds": [0.01, 0.011, 0.009],
            },
            {
                "backend": "math (unfused)",
                "L": L,
                "seconds": 0.038,
                "tokens_per_s": L / 0.038,
                "rep_seconds": [0.038, 0.037, 0.039],
            },
        ]
        figs = {"device": "cuda:0", **flash_speedup(rows, "cuda")}
        assert figs["flash_over_math_L"] == L and figs["flash_over_math_cuda"] == pytest.approx(3.8)
        assert (
            verdict_flash_speedup(AttentionMetrics.of(Finding("attention", "", "pass", "", figs))).verdict
            == "holds"
        )


def test_data_schema_lists_every_bad_line_and_fails_an_empty_file(tmp_path):
    from nbkit.audit.checks.data_schema import check_jsonl_schema

    schema = str(EXAMPLES_DIR / "sft_schema.py") + ":SFTExample"
    f, _ = check_jsonl_schema(EXAMPLES_DIR / "sft_broken.jsonl", schema)
    for line in (4, 8, 20, 24, 28):
        assert f"{line} (" in f.summary
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    f, _ = check_jsonl_schema(empty, schema)
    assert f.status == "fail" and "no lines" in f.summary
    f, _ = check_jsonl_schema(tmp_path, schema)
    assert f.status == "fail" and "is a directory" in f.summary


def test_data_schema_says_when_pscheck_cannot_run(monkeypatch):
    from nbkit.audit.checks import data_schema
    from nbkit.audit.checks.data_schema import check_jsonl_schema

    # as the module's guarded import leaves it when pscheck does not import
    monkeypatch.setattr(data_schema, "lint_paths", None)
    monkeypatch.setattr(data_schema, "PSCHECK_IMPORT_ERROR", "ImportError: pscheck broken for this test")
    f, _ = check_jsonl_schema(EXAMPLES_DIR / "sft.jsonl", str(EXAMPLES_DIR / "sft_schema.py") + ":SFTExample")
    assert "pscheck did not import" in f.figures["pscheck"] and "not linted" in f.summary


def test_kiss_stops_when_decided_and_the_verdict_is_the_full_run_s(tiny):
    """Lock-step training stops at the first evaluation where a variant reached the target; the
    full budget, trained on, gives the same steps-to-target for the first variant and the same verdict."""
    from nbkit.audit.checks.kiss import compare_lora_variants, first_to_target

    model, tok = tiny
    # an absolute target between the two variants' losses at step 12 (6.05 KISS, 5.98 over, measured)
    kw = dict(budget_steps=12, batch_size=4, eval_every=2, val_size=8, lr=0.01, val_loss_target=6.02)
    short = compare_lora_variants(
        model,
        tok,
        make_sft_examples(40),
        TemplateSection(),
        KissConfig(stop_when_decided=True, **kw),
        device=CPU,
        progress=False,
    )
    full = compare_lora_variants(
        model,
        tok,
        make_sft_examples(40),
        TemplateSection(),
        KissConfig(stop_when_decided=False, **kw),
        device=CPU,
        progress=False,
    )
    assert full.figures["steps_trained"] == 12 and not full.figures["stopped_when_decided"]
    assert short.figures["stopped_when_decided"] and short.figures["steps_trained"] < 12
    first = min(
        s
        for s in (short.figures["kiss_steps_to_target"], short.figures["over_steps_to_target"])
        if s is not None
    )
    assert first == short.figures["steps_trained"]
    assert first_to_target(
        short.figures["kiss_steps_to_target"], short.figures["over_steps_to_target"]
    ) == first_to_target(full.figures["kiss_steps_to_target"], full.figures["over_steps_to_target"])


def test_kiss_check_repeats_over_seeds_with_their_own_splits():
    """The check runs one comparison per seed (the smoke preset: 2), each on its own split, and writes the
    counts the kiss-steps verdict reads."""
    from nbkit.audit.checks import kiss
    from nbkit.audit.claims import verdict_kiss_steps
    from nbkit.audit.config import config_file
    from nbkit.audit.experiments import make_context

    ctx = make_context(load_config(config_file("good.yaml")), "cpu", progress=False)
    result = kiss.CHECK.run(KissConfig.smoke(), ctx, None)
    f, m = result.data, result.metrics
    figs = f.figures
    assert figs["seeds"] == 2 and [r["seed"] for r in figs["per_seed"]] == [0, 1]
    assert sum(figs[k] for k in ("seeds_kiss_first", "seeds_over_first", "seeds_tie", "seeds_neither")) == 2
    assert [r["first"] for r in figs["per_seed"]] == [
        kiss.first_to_target(r["kiss_steps_to_target"], r["over_steps_to_target"]) for r in figs["per_seed"]
    ]
    assert (m.seeds, m.per_seed) == (figs["seeds"], figs["per_seed"])  # the typed metrics carry the figures
    assert (
        verdict_kiss_steps(m).verdict == "inconclusive"
    )  # 2 seeds cannot decide the Wilson rule, whatever they say
    assert "not measured" not in verdict_kiss_steps(m).why


def test_response_only_logits_give_the_full_logits_figures(tiny):
    """kiss-lora's loss, reward-weights' scores and eval-batch's losses run the LM head on the response
    positions only: each must equal what the full logits give (transformers' own loss, a full log-softmax)."""
    from nbkit.audit.checks.eval_batch import mean_of_batch_means
    from nbkit.audit.checks.kiss import target_loss
    from nbkit.audit.checks.reward_weights import response_scores
    from nbkit.audit.sft import build_features, example_losses, pad_batch

    model, tok = tiny
    ex, template = make_sft_examples(12), TemplateSection()
    ids, labels, mask = pad_batch([build_features(tok, e, template) for e in ex], tok.pad_token_id)
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss, n = target_loss(model, ids, labels, mask)
        lp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits[:, :-1].float(), -1)
    keep = labels[:, 1:] != -100
    assert n == int(keep.sum()) and float(loss) == pytest.approx(float(full), rel=1e-5)
    sums = (lp.gather(-1, labels[:, 1:].clamp(min=0).unsqueeze(-1)).squeeze(-1) * keep).sum(1)
    losses = example_losses(model, tok, ex, template, batch_size=5)
    rewards, logp = response_scores(losses)
    assert logp == pytest.approx(sums.tolist(), rel=1e-5)
    assert rewards == pytest.approx((sums / keep.sum(1)).tolist(), rel=1e-5)
    assert [c for _, c in losses] == keep.sum(1).tolist()
    assert [s for s, _ in losses] == pytest.approx((-sums).tolist(), rel=1e-5)
    with torch.no_grad():  # trainers' mean of batch means at batch 4, from separate passes
        direct = [
            float(
                model(input_ids=ids[i : i + 4], attention_mask=mask[i : i + 4], labels=labels[i : i + 4]).loss
            )
            for i in range(0, 12, 4)
        ]
    assert mean_of_batch_means(losses, 4) == pytest.approx(sum(direct) / 3, rel=1e-5)
    assert mean_of_batch_means(losses, 4) != pytest.approx(mean_of_batch_means(losses, 12), rel=1e-6)


def test_the_context_scores_each_base_example_once(tiny, monkeypatch):
    """kiss-lora, reward-weights and eval-batch share the base model's per-example losses through the
    context."""
    import nbkit.audit.experiments as experiments
    from nbkit.audit.experiments import make_context

    cfg = load_config(EXAMPLES_DIR / "good.yaml")
    ctx = make_context(cfg, CPU, progress=False)
    assert ctx.cached(("model", "tiny"), lambda: tiny) is tiny  # the loaded model, cached in the context
    scored = []
    real = experiments.example_losses
    monkeypatch.setattr(
        experiments,
        "example_losses",
        lambda m, t, ex, tp, **kw: scored.append(len(ex)) or real(m, t, ex, tp, **kw),
    )
    ex, template = make_sft_examples(10), TemplateSection()
    first = ctx.base_example_losses(ex[:6], template, "tiny")
    both = ctx.base_example_losses(ex, template, "tiny")
    assert scored == [6, 4] and both[:6] == first
    again = real(tiny[0], tiny[1], ex, template)
    assert [n for _, n in both] == [n for _, n in again] and [s for s, _ in both] == pytest.approx(
        [s for s, _ in again], rel=1e-5
    )
    ctx.base_example_losses(ex, template.model_copy(update={"mask_pad_labels": True}), "tiny")
    assert scored == [6, 4, 10]  # another template is another scoring


def test_kiss_variants_side_by_side_give_the_figures_of_one_after_the_other(tiny):
    """On CPU the variants train in threads; each computes what it computes alone (peak bytes from the
    thread-local dispatch tracker included), so every figure equals the sequential run's exactly."""
    from nbkit.audit.checks.kiss import compare_lora_variants

    model, tok = tiny
    cfg = KissConfig(budget_steps=4, batch_size=4, eval_every=2, val_size=8, lr=0.01, stop_when_decided=False)
    one = compare_lora_variants(
        model, tok, make_sft_examples(40), TemplateSection(), cfg, workers=1, device=CPU, progress=False
    )
    two = compare_lora_variants(
        model, tok, make_sft_examples(40), TemplateSection(), cfg, workers=2, device=CPU, progress=False
    )
    assert one.figures == two.figures
    assert [r["final val loss"] for r in one.table] == [r["final val loss"] for r in two.table]
    assert one.figures["kiss_peak_bytes"] < one.figures["over_peak_bytes"]


def test_run_concurrently_keeps_order_and_raises_the_first_error():
    from nbkit.audit.sft import concurrent_workers, run_concurrently

    assert run_concurrently([lambda i=i: i * i for i in range(5)], 2) == [0, 1, 4, 9, 16]
    assert run_concurrently([lambda: 1], 4) == [1]

    def boom():
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        run_concurrently([lambda: 1, boom, lambda: 3], 2)
    assert concurrent_workers(1, CPU) == 1 and concurrent_workers(8, torch.device("meta")) == 1
    assert 1 <= concurrent_workers(8, CPU) <= 8


@pytest.mark.parametrize("noise_params", ["all", "last_layer"])
def test_grad_accumulation_on_a_twin_in_a_thread_gives_the_one_model_figures(tiny, noise_params):
    """The one-batch pass and the micro-batch passes (and half the noise samples) run on a copy of the
    model in a second thread: every figure equals the one-model run's exactly."""
    from nbkit.audit.checks.grad_accumulation import check_grad_accumulation

    model, tok = tiny
    kw = dict(
        micro_batch_size=2,
        grad_accumulation=4,
        lengths=(16, 32, 64),
        noise_samples=6,
        device=CPU,
        progress=False,
        noise_params=noise_params,
    )
    one = check_grad_accumulation(model, tok, make_sft_examples(8), TemplateSection(), workers=1, **kw)
    two = check_grad_accumulation(model, tok, make_sft_examples(8), TemplateSection(), workers=2, **kw)
    assert one.figures == two.figures and one.table == two.table
    assert one.figures["rel_err_token_count"] < 1e-5 < 1e-3 < one.figures["rel_err_per_microbatch_mean"]
    assert all(p.grad is None for p in model.parameters()) and all(
        p.requires_grad for p in model.parameters()
    )


def test_example_losses_scored_side_by_side_equal_one_batch_after_the_other(tiny):
    from nbkit.audit.sft import example_losses

    model, tok = tiny
    ex = make_sft_examples(20)
    assert example_losses(model, tok, ex, TemplateSection(), batch_size=4, workers=2) == example_losses(
        model, tok, ex, TemplateSection(), batch_size=4, workers=1
    )
