"""Memory monitor thresholds, Leviathan's formula, the truncated draft, CPU fragmentation honesty."""

import time

import pytest

from nbkit.zero.context import ZeroContext
from nbkit.zero.monitor import MemoryMonitor
from nbkit.zero.specdec import leviathan_speedup


def test_monitor_fires_once_per_crossing_and_rearms():
    values = iter([10, 50, 60, 5, 70] + [0] * 1000)
    fired = []
    mon = MemoryMonitor(lambda: {"x": next(values)}, interval_s=0.01).on_threshold("x", 40, fired.append)
    for _ in range(5):
        mon.sample_once()
    assert [f["value"] for f in fired] == [50, 70]
    with MemoryMonitor(lambda: {"x": 1}, interval_s=0.01) as m2:
        time.sleep(0.1)
    assert len(m2.samples) >= 3 and m2.series()["x"][1][0] == 1
    with pytest.raises(ValueError):
        MemoryMonitor(lambda: {}, interval_s=0)


def test_leviathan_formula():
    assert leviathan_speedup(0.0, 4, 0.0) == pytest.approx(1.0)
    assert leviathan_speedup(1.0, 4, 0.0) == pytest.approx(5.0)
    # Paper's example: α = 0.8, γ = 5, c = 0.05 → ≈ 3.7× (rounded in the paper's figure)
    assert leviathan_speedup(0.8, 5, 0.05) == pytest.approx((1 - 0.8**6) / 0.2 / 1.25)
    with pytest.raises(ValueError):
        leviathan_speedup(1.5, 4, 0)


def test_truncated_draft_keeps_first_layers():
    from nbkit.model_files import tiny_llama
    from nbkit.zero.specdec import truncated_draft

    model = tiny_llama(seed=0, num_hidden_layers=3)
    draft = truncated_draft(model, 1)
    assert len(draft.model.layers) == 1 and draft.config.num_hidden_layers == 1
    assert len(model.model.layers) == 3
    with pytest.raises(ValueError, match="draft_layers"):
        truncated_draft(model, 3)


def test_fragmentation_on_cpu_says_needs_cuda():
    from nbkit.zero.config import FragmentationConfig
    from nbkit.zero.experiments import run_fragmentation

    out = run_fragmentation(FragmentationConfig(steps=2), ZeroContext("cpu"))
    assert out.metrics.needs_cuda is True
    assert "inactive_split" in out.metrics.unavailable
    # real tensor accounting of one AdamW step: Adam's two moments equal 2× the parameter bytes
    peak = out.metrics.tensor_bytes_peak
    assert peak["Optstate"] == pytest.approx(2 * peak["Parameter"], rel=0.01)


@pytest.mark.gpu
def test_fragmentation_on_cuda_measures_gap_ratio():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from nbkit.zero.config import FragmentationConfig
    from nbkit.zero.experiments import run_fragmentation

    out = run_fragmentation(
        FragmentationConfig(
            steps=6,
            intervals=(2,),
            expandable_segments=(False,),
            model="tiny Llama",
            seq_len=64,
        ),
        ZeroContext("cuda"),
    )
    assert out.metrics.needs_cuda is False
    assert out.metrics.runs[0].checkpoints == 3
    assert set(out.metrics.gap_ratios) == {"2/False"} and len(out.metrics.gap_ratios["2/False"]) == 6


@pytest.mark.slow
def test_speculative_decoding_saves_target_passes_on_a_self_repeating_prompt():
    """A fake experiment would not pass this: prompt lookup on a prompt that repeats itself must accept
    draft tokens (α > 0) and so make fewer target forward passes than it generates tokens."""
    from nbkit.zero.config import SpecDecConfig
    from nbkit.zero.experiments import run_specdec

    repeat = "Copy this list exactly:\n" + "- alpha beta gamma delta epsilon\n" * 6
    out = run_specdec(
        SpecDecConfig(methods=("prompt_lookup",), prompts=(repeat,), max_new_tokens=24),
        ZeroContext("cpu"),
    )
    s = out.metrics.prompt_lookup
    assert s.all_identical
    assert s.acceptance_rate > 0 and s.accepted > 0
    assert s.target_calls_speculative < s.new_tokens
    assert s.rounds > 0 and 0 <= s.fallback_rounds <= s.rounds
    # one request: its rounds and fallbacks (the claim's cluster), and one request decides nothing
    assert s.rounds_per_prompt == [s.rounds] and s.fallback_rounds_per_prompt == [s.fallback_rounds]
    assert out.metrics.timings == 1 and len(out.metrics.loadavg) == 2  # CPU: timed once, load recorded
    from nbkit.zero import claims as zc

    row = next(x for x in zc.REGISTRY.claims if x.key == "fallback_rate")
    v = row.decide(list(zip(s.fallback_rounds_per_prompt, s.rounds_per_prompt, strict=True)))
    assert v.verdict == "inconclusive" and "1 request: no interval" in v.why


def test_speculative_decoding_runs_a_users_model_directory(tmp_path):
    """SpecDecConfig.model_path: a user's HF directory (here a 2-layer GPT-2, whose decoder layers are
    ``transformer.h``, not Llama's ``model.layers``) is loaded and truncated into a draft."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from nbkit.model_files import smollm2_dir
    from nbkit.zero.config import SpecDecConfig
    from nbkit.zero.experiments import run_specdec

    tok = AutoTokenizer.from_pretrained(smollm2_dir())
    GPT2LMHeadModel(
        GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=2, n_positions=256)
    ).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    out = run_specdec(
        SpecDecConfig(model_path=str(tmp_path), draft_layers=1, n_prompts=1, max_new_tokens=8),
        ZeroContext("cpu"),
    )
    s = out.metrics
    assert s.prompt_lookup is not None and s.truncated_draft is not None
    assert s.truncated_draft.all_identical and s.truncated_draft.rounds > 0


@pytest.mark.parametrize("path, match", [("does/not/exist", "does/not/exist"), ("", None)])
def test_speculative_decoding_bad_model_path_is_one_usage_error(tmp_path, path, match):
    from nbkit.errors import UsageError
    from nbkit.zero.config import SpecDecConfig
    from nbkit.zero.experiments import run_specdec

    if not path:  # a directory without config.json
        path, match = str(tmp_path), "config.json"
    with pytest.raises(UsageError, match=match):
        run_specdec(SpecDecConfig(model_path=path, n_prompts=1, max_new_tokens=8), ZeroContext("cpu"))


def test_fragmentation_cuda_path_with_fabricated_allocator_figures(monkeypatch):
    """The CUDA branch on CPU: ``cuda_runs`` replaced by fabricated caching-allocator figures (shuffled run
    order, one run per interval and seed), the metrics and the ledger row built from them."""
    import torch

    from nbkit.result import Result
    from nbkit.zero import claims as zc
    from nbkit.zero import experiments as ze
    from nbkit.zero.config import FragmentationConfig
    from nbkit.zero.fragmentation import run_order

    cfg = FragmentationConfig()
    gap = {50: 0.42, 200: 0.18}

    looked = []

    def fake_cuda_runs(cfg, device, live=None, stop=None):
        runs = [
            {"interval": i, "expandable_segments": e, "seed": s, "order": k, "max_inactive_split": 1e6,
             "mean_gap_ratio": gap[i] + 0.01 * s, "alloc_retries": 0, "checkpoints": cfg.steps // i,
             "gap_ratios": [gap[i]]}
            for k, (s, e, i) in enumerate(run_order(cfg))
        ]  # fmt: skip
        # the loop's stop hook sees typed metrics of the runs so far: one seed's, then every seed's
        looked.append(stop([r for r in runs if r["seed"] == 0]))
        looked.append(stop(runs))
        return {"runs": runs, "figure": None, "model": "Llama-2-7B shapes, 2 layer(s)"}

    monkeypatch.setattr(ze, "cuda_runs", fake_cuda_runs)
    ctx = ZeroContext("cpu")
    ctx._resolved = torch.device("cuda")  # a fabricated CUDA device: nothing touches it
    out = ze.run_fragmentation(cfg, ctx)
    m = out.metrics
    assert not m.needs_cuda and len(m.runs) == 2 * 2 * cfg.seeds and m.intervals == (50, 200)
    assert m.seed_means(50) == pytest.approx([0.42, 0.43, 0.44])
    assert sorted(r.order for r in m.runs) == list(range(len(m.runs)))
    spec = next(s for s in zc.REGISTRY.claims if s.key == "fragmentation")
    reading = spec.read(m)
    assert reading.sample == [pytest.approx(0.24)] * 3 and "OOM rates not measured" in reading.measured
    # no row its default budget can decide holds the loop: it runs until its figure has the seeds it needs
    assert looked == [False, True]
    ctx.keep("fragmentation", Result(metrics=m, config=cfg))
    row = next(r for r in zc.judge(ctx) if r.key == "fragmentation")
    assert row.why.startswith(f"not decided at defaults: up to {cfg.seeds} seeds")  # its default budget
