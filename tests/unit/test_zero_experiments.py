"""The ZeRO theme on the experiment contract: registry, context, the helpers notebook 02 calls instead of
computing in cells, and what the typed metrics record as."""

import pytest

from nbkit.record import to_jsonable
from nbkit.zero import experiments as ze
from nbkit.zero.claims import verdict_batch_identity
from nbkit.zero.config import CrossoverConfig, MemoryConfig
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
    ctx = ze.ZeroContext("cpu", world_size=8)
    assert ctx.torch_device.type == "cpu" and ctx.device_for("cpu") is ctx.torch_device  # resolved once
    assert (ctx.ranks, ctx.drill_ranks, ctx.drill_rank) == (ze.CPU_RANKS, 2, 1)
    one = ze.ZeroContext("cpu", world_size=1)
    assert (one.ranks, one.drill_ranks, one.drill_rank) == (1, 2, 1)  # the drill needs a second rank to kill


def test_unless_smoke_keeps_the_smoke_preset():
    assert ze.unless_smoke(True, steps=4) == {}
    assert ze.unless_smoke(False, steps=4) == {"steps": 4}


def test_ds_config_experiment_reads_the_field_notes_launch_line():
    out = ze.run("ds_config", ze.ZeroContext("cpu"), world_size=8)
    assert isinstance(out.metrics, DsConfigMetrics)
    m = out.metrics
    assert (m.train_batch_size, m.micro_batch, m.grad_accum, m.world_size) == (128, 2, 4, 8)
    assert out.metrics.findings and "zero_optimization.stage" in set(out.table["key"])
    assert verdict_batch_identity(out.metrics).verdict == "refuted"


def test_memory_model_carries_the_offload_headroom_and_says_it_in_one_line():
    m = ze.run_memory_model(MemoryConfig(model="SmolLM2-135M", world_size=2, gpus_per_node=2)).metrics
    assert isinstance(m.offload_headroom, OffloadHeadroom) and m.offload_headroom.cpu_needed_bytes > 0
    assert m.offload_headroom.ok == (
        m.offload_headroom.cpu_needed_bytes <= m.offload_headroom.cpu_available_bytes
    )
    assert ze.headroom_summary(m).startswith("SmolLM2-135M: ZeRO-3 offload of a 2-GPU node needs")
    assert ze.plan_summary(m) == ""  # no ds_config: nothing to say


def test_a_crossover_without_sizes_launches_nothing(monkeypatch):
    monkeypatch.setattr(ze, "run_ladder", lambda *a, **k: pytest.fail("launched"))
    out = ze.run_crossover(CrossoverConfig(sizes=""), ze.ZeroContext("cpu"))
    assert out.metrics.rows == [] and out.metrics.crossover == {} and out.figure is None


def test_typed_metrics_record_as_the_dicts_they_replace():
    peak = RungPeak(
        stage=1, measured=[3.0, 4.0], growth=[1.0, 2.0], predicted=[3.5, 3.5], deepspeed_estimate=None
    )
    step = LossScaleStep(step=2, scale=32768.0, provoked=True, overflow=True, skipped=True)
    m = LadderMetrics(peak={"stage1": peak}, loss_scale_history=[step], n_params=10)
    rec = to_jsonable(m.for_record())
    assert "loss_scale_history" not in rec and rec["n_params"] == 10
    assert rec["peak"] == {
        "stage1": {
            "stage": 1,
            "measured": [3.0, 4.0],
            "growth": [1.0, 2.0],
            "predicted": [3.5, 3.5],
            "deepspeed_estimate": None,
        }
    }
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
    gpu = FragmentationMetrics(
        needs_cuda=False, steps=6, seeds=2, runs=[], model="m", gap_ratio_means={"2/False": [0.1]}
    )
    assert set(gpu.for_record()) == {"needs_cuda", "steps", "seeds", "runs", "model", "gap_ratio_means"}
