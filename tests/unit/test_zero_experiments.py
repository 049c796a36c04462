"""The ZeRO theme on the experiment contract: registry, context, the helpers notebook 02 calls instead of
computing in cells, and what the typed metrics record as."""

import pytest

from nbkit.record import to_jsonable
from nbkit.zero import claims as zc
from nbkit.zero import experiments as ze
from nbkit.zero.config import CrossoverConfig, MemoryConfig
from nbkit.zero.context import CPU_RANKS, ZeroContext
from nbkit.zero.metrics import (
    DsConfigMetrics,
    FragmentationMetrics,
    LadderMetrics,
    LossScaleStep,
    OffloadHeadroom,
    RungPeak,
)


def test_registry_names_every_experiment_and_the_context_plans_ranks():
    slugs = "memory ds_config ladder crossover loss_scale failure_drill fragmentation specdec"
    assert ze.REGISTRY.slugs == slugs.split()
    ctx = ZeroContext("cpu", world_size=8)
    assert ctx.torch_device.type == "cpu" and ctx.torch_device is ctx.torch_device  # resolved once
    assert (ctx.ranks, ctx.drill_ranks, ctx.drill_rank) == (CPU_RANKS, 2, 1)
    assert ctx.ranks_device(2) == "cpu"
    one = ZeroContext("cpu", world_size=1)
    assert (one.ranks, one.drill_ranks, one.drill_rank) == (1, 2, 1)  # the drill needs a second rank to kill


def test_no_config_carries_a_device_the_context_alone_does():
    import dataclasses

    for exp in ze.REGISTRY:
        assert "device" not in {f.name for f in dataclasses.fields(exp.Config)}, exp.slug


def test_smoke_and_profile_reach_configs_through_the_context_and_none_keeps_the_preset():
    from nbkit.zero.config import FRAGMENTATION_FULL_SEEDS, FULL_REQUESTS, LadderConfig, SpecDecConfig

    assert ze.REGISTRY["ladder"].config(True, steps=None) == LadderConfig.smoke()
    assert ze.REGISTRY["specdec"].config(False, "full").n_prompts == FULL_REQUESTS
    full = SpecDecConfig(n_prompts=FULL_REQUESTS)
    assert ze.REGISTRY["specdec"].config(False, "full", n_prompts=None) == full
    frag = ze.REGISTRY["fragmentation"].config(
        False, "full"
    )  # the budget and what the full profile also sets
    assert (frag.seeds, frag.expandable_segments) == (FRAGMENTATION_FULL_SEEDS, (False,))


def test_ds_config_experiment_reads_the_field_notes_launch_line():
    out = ze.run("ds_config", ZeroContext("cpu"), world_size=8)
    assert isinstance(out.metrics, DsConfigMetrics)
    m = out.metrics
    assert (m.train_batch_size, m.micro_batch, m.grad_accum, m.world_size) == (128, 2, 4, 8)
    assert out.metrics.findings and "zero_optimization.stage" in set(out.table["key"])
    row = next(s for s in zc.REGISTRY.claims if s.key == "batch_identity")
    assert row.decide(row.read(out.metrics).sample).verdict == "refuted"


def test_memory_model_carries_the_offload_headroom_and_says_it_in_one_line():
    m = ze.run_memory_model(
        MemoryConfig(model="SmolLM2-135M", world_size=2, gpus_per_node=2), ZeroContext("cpu")
    ).metrics
    assert m.field_notes.n_params == 6_738_415_616 and m.field_notes.stage0_gb == pytest.approx(
        107.8, abs=0.1
    )
    assert isinstance(m.offload_headroom, OffloadHeadroom) and m.offload_headroom.cpu_needed_bytes > 0
    assert m.offload_headroom.ok == (
        m.offload_headroom.cpu_needed_bytes <= m.offload_headroom.cpu_available_bytes
    )
    assert ze.headroom_summary(m).startswith("SmolLM2-135M: ZeRO-3 offload of a 2-GPU node needs")
    assert ze.plan_summary(m) == ""  # no ds_config: nothing to say


def test_a_crossover_without_sizes_launches_nothing(monkeypatch):
    monkeypatch.setattr(ze, "run_ladder", lambda *a, **k: pytest.fail("launched"))
    out = ze.run_crossover(CrossoverConfig(sizes=""), ZeroContext("cpu"))
    assert out.metrics.rows == [] and out.metrics.crossover == {} and out.figure is None


def test_typed_metrics_record_as_the_dicts_they_replace():
    peak = RungPeak(
        rung="stage1", stage=1, measured=[3.0, 4.0], growth=[1.0, 2.0], predicted=[3.5, 3.5], model_states=2.0
    )
    step = LossScaleStep(step=2, scale=32768.0, provoked=True, overflow=True, skipped=True)
    m = LadderMetrics(peaks=[peak], loss_scale_history=[step], n_params=10)
    rec = to_jsonable(m.for_record())
    assert "loss_scale_history" not in rec and rec["n_params"] == 10
    assert rec["peaks"][0]["growth"] == [1.0, 2.0] and rec["peaks"][0]["launch"] == 0
    assert to_jsonable(step) == {
        "step": 2,
        "scale": 32768.0,
        "provoked": True,
        "overflow": True,
        "skipped": True,
    }
    cpu = FragmentationMetrics(
        needs_cuda=True, steps=6, tensor_bytes_peak={"Parameter": 8}, unavailable={"reserved": "CPU"}
    )
    assert set(cpu.for_record()) == {"needs_cuda", "steps", "tensor_bytes_peak", "unavailable"}
    gpu = FragmentationMetrics(needs_cuda=False, steps=6, seeds=2, runs=[], model="m")
    assert set(gpu.for_record()) == {"needs_cuda", "steps", "seeds", "runs", "model", "intervals"}
