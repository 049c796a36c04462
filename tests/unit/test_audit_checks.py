"""The audit checks on the tiny GQA Llama and the bundled data (fast tier)."""

from __future__ import annotations

import math

import pytest
import torch

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
    from nbkit.audit.lora import check_lora_binding

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
    assert f.figures["seed_asserts_hold_on"].startswith("0/")  # the seed's asserts assume a (d, r)·(r, k) layout


def test_lora_binding_reports_unmatched_targets_and_rank_over_width(tiny):
    from nbkit.audit.lora import check_lora_binding

    model, _ = tiny
    f = check_lora_binding(model, 48, 16, ["q_proj", "v_proj", "gate"])
    assert f.status == "fail"
    assert "['gate'] match no Linear module" in f.summary
    assert "rank 48 exceeds" in f.summary and f.figures["modules_over_rank"] == 2  # v_proj is 32 wide
    only_bad = check_lora_binding(model, 8, 16, ["nothing_here"])
    assert only_bad.status == "fail" and only_bad.figures["targets_unmatched"] == ["nothing_here"]


def test_bio_projection_round_trip():
    from nbkit.audit.tokens import project_spans, spans_from_tags

    offsets = [(0, 3), (3, 12), (12, 12), (13, 18), (19, 24)]
    tags = project_spans(offsets, [(0, 12, "PER"), (19, 24, "LOC")])
    assert tags == ["B-PER", "I-PER", "O", "O", "B-LOC"]
    assert spans_from_tags(offsets, tags) == [(0, 12, "PER"), (19, 24, "LOC")]
    # a token straddling the span boundary widens the span: the round trip loses the exact boundary
    straddle = project_spans([(0, 4), (4, 9)], [(0, 6, "ORG")])
    assert spans_from_tags([(0, 4), (4, 9)], straddle) == [(0, 9, "ORG")]


def test_label_alignment_per_language(tiny):
    from nbkit.audit.tokens import check_label_alignment

    _, tok = tiny
    f = check_label_alignment(tok, read_jsonl_plain(EXAMPLES_DIR / "ner.jsonl"))
    for lang in ("en", "zh"):
        assert 0 <= f.figures[f"{lang}_boundary_f1_pct"] <= 100
        assert f.figures[f"{lang}_spans"] > 15
    assert f.figures["zh_chars_per_token"] < f.figures["en_chars_per_token"]


def test_jsonl_report_locates_every_fault():
    from nbkit.audit.data import check_jsonl_schema

    f, rep = check_jsonl_schema(EXAMPLES_DIR / "sft_broken.jsonl", str(EXAMPLES_DIR / "sft_schema.py") + ":SFTExample")
    kinds = {(i["line"], i["kind"]) for i in rep.issues}
    assert kinds == {(4, "broken JSON"), (8, "missing field"), (12, "coerced (strict rejects)"), (16, "coerced (strict rejects)"),
                     (20, "wrong type/value"), (24, "blank line"), (28, "not UTF-8")}
    assert f.status == "fail" and rep.lines == 40 and rep.valid == 35 and rep.valid_strict == 33
    assert f.figures["missing_field_share_of_errors_pct"] == 50.0
    assert len(rep.records) == 35


def test_schema_that_does_not_import_is_a_finding_not_a_crash():
    from nbkit.audit.data import check_jsonl_schema

    f, rep = check_jsonl_schema(EXAMPLES_DIR / "sft.jsonl", str(EXAMPLES_DIR / "broken_schema.py") + ":SFTExample")
    assert rep is None and f.status == "fail" and "does not import" in f.summary and "a_package_that_does_not_exist" in f.summary
    f, _ = check_jsonl_schema(EXAMPLES_DIR / "sft.jsonl", str(EXAMPLES_DIR / "sft_schema.py") + ":Nope")
    assert "has no class 'Nope'" in f.summary


def test_loss_mask_good_and_pad_eq_eos_bug(tiny):
    from nbkit.audit.template import check_loss_mask

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
    from nbkit.audit.gradients import check_grad_accumulation

    model, tok = tiny
    f = check_grad_accumulation(model, tok, make_sft_examples(8), TemplateSection(), micro_batch_size=2, grad_accumulation=4,
                                lengths=(16, 32), noise_samples=3, device=CPU, progress=False)
    assert f.figures["rel_err_token_count"] < 1e-5
    assert f.figures["rel_err_per_microbatch_mean"] > 1e-3  # unequal token counts per micro-batch
    assert f.status == "pass"
    assert math.isfinite(f.figures["noise_variance_slope"])
    wrong = check_grad_accumulation(model, tok, make_sft_examples(8), TemplateSection(), micro_batch_size=2, grad_accumulation=4,
                                    normalisation="per_microbatch_mean", lengths=(16, 32), noise_samples=3, device=CPU, progress=False)
    assert wrong.status == "fail"


def test_dtype_transitions_and_op_probes(tiny):
    from nbkit.audit.dtypes import check_dtype_transitions

    model, tok = tiny
    f = check_dtype_transitions(model, tok, device=CPU)
    assert f.figures["modules_traced"] > 10
    assert f.figures["kv_cache_values_dtype"] == "torch.bfloat16"
    assert "must have the same" in f.figures["index_add_ [torch.bfloat16 cache, float32 source]"]
    assert f.figures["index_copy_ [torch.bfloat16 cache, torch.bfloat16 source]"] == "torch.bfloat16"
    assert check_dtype_transitions(model, tok, device=CPU, autocast_dtype="none").status == "skipped"


def test_sampling_thresholds():
    from nbkit.audit.sampling import check_sampling

    g = torch.Generator().manual_seed(0)
    rewards = torch.randn(64, generator=g).tolist()
    prior = (torch.randn(64, generator=g) * 5).tolist()
    calm = check_sampling(rewards, prior, beta=0.0, gamma=0.0)
    assert calm.status == "pass" and calm.figures["kl_sampled_vs_reward"] < 1e-4
    hot = check_sampling(rewards, prior, beta=10.0, gamma=0.0)
    assert hot.status == "fail" and hot.figures["kl_sampled_vs_reward"] > 0.18
    assert hot.figures["effective_sample_size"] < calm.figures["effective_sample_size"]


def test_zero3_rules_follow_deepspeed(tiny):
    from nbkit.audit.zero3 import check_zero3, zero3_layout

    model, _ = tiny
    rows = {r["name"]: r for r in zero3_layout(model, 1000, 4)}
    k = rows["model.layers.0.self_attn.k_proj.weight"]
    assert k["numel"] == 32 * 96 and not k["persisted"] and k["slice per rank"] == 32 * 96 // 4
    norm = rows["model.layers.0.input_layernorm.weight"]
    assert norm["persisted"]
    # 6 heads / 2 kv heads, head_dim 16: k_proj rows 0-15 and 16-31 are the two groups; 4 slices of 8 rows cut both
    assert k["kv groups cut by slices"] == 2
    assert check_zero3(model, threshold=1e9, world_size=4).status == "fail"
    assert check_zero3(model, threshold=1000, world_size=4).status == "pass"


def test_scheduler_traces():
    from nbkit.audit.schedulers import check_schedulers

    good = check_schedulers(load_config(EXAMPLES_DIR / "good.yaml").scheduler)
    assert good.status == "pass" and good.figures["resume_mismatched_steps"] == 0 and good.figures["warmups_applied"] == 1
    broken = check_schedulers(load_config(EXAMPLES_DIR / "broken.yaml").scheduler)
    assert broken.status == "fail" and broken.figures["resume_mismatched_steps"] > 0
    lost = SchedulerSection(stages=[{"kind": "cosine", "steps": 50}], warmup_steps=5)
    assert "warmup lost" in check_schedulers(lost).summary


def test_fragmentation_says_needs_cuda_on_cpu():
    from nbkit.audit.fragmentation import check_fragmentation

    f = check_fragmentation(None, None, [], TemplateSection(), device=CPU, interval=50)
    assert f.status == "needs_gpu" and "needs CUDA" in f.summary
    assert not any(isinstance(v, float) for v in f.figures.values())


def test_kiss_comparison_on_tiny(tiny):
    from nbkit.audit.lora import compare_lora_variants

    model, tok = tiny
    f = compare_lora_variants(model, tok, make_sft_examples(40), TemplateSection(), budget_steps=3, batch_size=4, eval_every=1,
                              val_size=8, device=CPU, progress=False)
    assert f.figures["param_ratio_over_vs_kiss"] == pytest.approx(12.8)
    assert f.figures["kiss_peak_bytes"] < f.figures["over_peak_bytes"]
    assert len(f.figure.data) == 2 and len(f.figure.data[0].x) == 4
    with pytest.raises(ValueError, match="budget_steps"):
        compare_lora_variants(model, tok, make_sft_examples(40), TemplateSection(), budget_steps=1, device=CPU)


def test_run_audit_turns_a_crash_into_an_error_finding(monkeypatch):
    from nbkit.audit import runner

    def boom(ctx, live=None):
        raise RuntimeError("synthetic failure")

    monkeypatch.setitem(runner.CHECKS, 11, boom)
    cfg = load_config(EXAMPLES_DIR / "good.yaml")
    [f] = runner.run_audit(cfg, [11], device="cpu", progress=False)
    assert f.status == "error" and "synthetic failure" in f.summary
