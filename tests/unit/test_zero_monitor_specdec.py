"""Memory monitor thresholds, Leviathan's formula, the truncated draft, CPU fragmentation honesty."""

import time

import pytest

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
    from nbkit.zero.fragmentation import FragParams, fragmentation_run

    out = fragmentation_run(FragParams(steps=2, device="cpu"))
    assert out["needs_cuda"] is True
    assert "inactive_split" in out["unavailable"]
    assert out["tensor_bytes_peak"]  # real tensor accounting, not a made-up ratio


@pytest.mark.gpu
def test_fragmentation_on_cuda_measures_gap_ratio():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from nbkit.zero.fragmentation import FragParams, fragmentation_run

    out = fragmentation_run(FragParams(steps=6, intervals=(2,), expandable_segments=(False,), device="cuda"))
    assert out["needs_cuda"] is False and 0 <= out["runs"][0]["mean_gap_ratio"] <= 1


@pytest.mark.slow
def test_speculative_greedy_output_identical_on_smollm2():
    from nbkit.zero.specdec import SpecParams, run_specdec

    out = run_specdec(SpecParams(methods=("prompt_lookup",), n_prompts=1, max_new_tokens=12, device="cpu"))
    s = out["summary"]["prompt_lookup"]
    assert s["all_identical"]
    assert 0 <= s["acceptance_rate"] <= 1 and s["tok_s_baseline"] > 0
