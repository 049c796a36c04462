"""Widget panels for notebook 02: each wires a parameters dataclass to a pure run function."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nbkit.zero.fragmentation import FragParams, fragmentation_run
from nbkit.zero.ladder import LadderParams, run_ladder
from nbkit.zero.specdec import SpecParams, run_specdec

MODEL_PRESETS = ("Llama-2-7B", "SmolLM2-135M", "tiny Llama (ladder)")


@dataclass
class MemoryParams:
    model: str = field(default="Llama-2-7B", metadata={"choices": list(MODEL_PRESETS)})
    world_size: int = field(default=8, metadata={"min": 1, "max": 1024, "label": "data-parallel degree N"})
    precision: str = field(default="bf16", metadata={"choices": ["bf16", "fp16", "fp32"]})
    offload_optimizer: bool = False
    offload_param: bool = field(default=False, metadata={"label": "offload params (stage 3 only)"})


def preset_size(name: str):
    from nbkit.model_files import tiny_llama_config
    from nbkit.zero.memory import llama2_7b_config, model_size

    if name == "Llama-2-7B":
        return model_size(llama2_7b_config(), name)
    if name == "SmolLM2-135M":
        from transformers import LlamaConfig

        # SmolLM2-135M-Instruct's architecture (its config.json), on the meta device.
        cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                          num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True)
        return model_size(cfg, name)
    if name == "tiny Llama (ladder)":
        return model_size(tiny_llama_config(), name)
    raise ValueError(f"model must be one of {MODEL_PRESETS}, got {name!r}")


def run_memory_model(params: MemoryParams) -> dict[str, Any]:
    from nbkit.zero.memory import memory_figure, memory_table

    size = preset_size(params.model)
    table = memory_table(size, params.world_size, precision=params.precision,
                         offload_optimizer=params.offload_optimizer, offload_param=params.offload_param)
    fig = memory_figure(table, f"{size.name} (Ψ = {size.n_params / 1e9:.3f} B) on N = {params.world_size}: model states per device")
    return {"table": table, "size": size, "figure": fig}


def memory_panel(widget=None):
    from nbkit.panels import Panel

    return Panel(MemoryParams(), run_memory_model, title="ZeRO memory model: paper formula vs DeepSpeed's estimator", widget=widget)


def ladder_panel(params: LadderParams | None = None, widget=None):
    from nbkit.live import LiveFigure
    from nbkit.panels import Panel

    live = LiveFigure("ZeRO ladder: loss per step (streamed from rank 0)", xaxis="step", yaxis="loss", widget=widget)
    return Panel(params or LadderParams(), run_ladder, title="ZeRO ladder: real DeepSpeed ranks", figure=live, widget=widget)


@dataclass
class MonitorParams:
    world_size: int = field(default=2, metadata={"min": 1, "max": 8})
    steps: int = field(default=4, metadata={"min": 1, "max": 200})
    stage: int = field(default=3, metadata={"choices": [0, 1, 2, 3]})
    limit_mib: float = field(default=400.0, metadata={"min": 10.0, "max": 100000.0, "label": "alert when a rank's RSS exceeds (MiB)"})
    interval_s: float = field(default=0.2, metadata={"min": 0.05, "max": 5.0})
    device: str = field(default="auto", metadata={"choices": ["auto", "cpu", "cuda"]})
    timeout_s: float = field(default=240.0, metadata={"hidden": True})


def run_monitored(params: MonitorParams, live=None) -> dict[str, Any]:
    """A ladder rung under the sampler-thread monitor: per-rank RSS timeline + threshold alerts."""
    from nbkit.zero.monitor import MemoryMonitor, process_tree_rss

    pids: dict[int, int] = {}
    alerts: list[dict[str, Any]] = []
    names: dict[str, str] = {}

    def sampler():
        raw = process_tree_rss(list(pids.values()))()
        return {names.get(k, k): v for k, v in raw.items()}

    def started(p):
        pids.update(p)
        names.update({f"pid{pid}": f"rank {r}" for r, pid in p.items()})

    mon = MemoryMonitor(sampler, interval_s=params.interval_s)
    for r in range(params.world_size):
        mon.on_threshold(f"rank {r}", params.limit_mib * 2**20, alerts.append)
    lp = LadderParams(stages=(params.stage,), world_size=params.world_size, steps=params.steps, show_persistence=False,
                      device=params.device, timeout_s=params.timeout_s)
    with mon:
        ladder = run_ladder(lp, on_start=started)
    fig = mon.figure(f"Per-rank RSS while training (stage {params.stage}); sampled every {params.interval_s:.2f} s")
    if live is not None:
        live.set_figure(fig)
    peaks = {k: max(ys) for k, (_xs, ys) in mon.series().items()}
    return {"figure": fig, "alerts": alerts, "peaks": peaks, "samples": len(mon.samples), "ladder": ladder, "monitor_errors": mon.errors}


def monitor_panel(widget=None):
    from nbkit.panels import Panel

    return Panel(MonitorParams(), run_monitored, title="Memory monitor (sampler thread + threshold callbacks)", widget=widget)


@dataclass
class FailureParams:
    how: str = field(default="kill", metadata={"choices": ["kill", "raise", "exit", "hang"]})
    rank: int = field(default=1, metadata={"min": 0, "max": 7})
    step: int = field(default=1, metadata={"min": 0, "max": 10})
    world_size: int = field(default=2, metadata={"min": 2, "max": 8})
    timeout_s: float = field(default=60.0, metadata={"min": 10.0, "max": 600.0})
    device: str = field(default="auto", metadata={"choices": ["auto", "cpu", "cuda"]})


def run_failure_drill(params: FailureParams) -> dict[str, Any]:
    """Kill/raise/hang one rank mid-run: the launcher must name it, within the timeout, and leave no process."""
    import time

    import psutil

    from nbkit.zero.launch import RankFailed, RankTimeout

    if params.rank >= params.world_size:
        raise ValueError(f"rank {params.rank} does not exist in a world of {params.world_size}")
    pids: dict[int, int] = {}
    lp = LadderParams(stages=(2,), world_size=params.world_size, steps=params.step + 2, show_persistence=False,
                      device=params.device, timeout_s=params.timeout_s)
    t = time.perf_counter()
    caught: RankFailed | None = None
    try:
        run_ladder(lp, on_start=pids.update, fail={"rank": params.rank, "step": params.step, "how": params.how})
    except RankFailed as exc:
        caught = exc
    elapsed = time.perf_counter() - t
    survivors = [pid for pid in pids.values() if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    return {
        "detected": caught is not None,
        "reported_rank": getattr(caught, "rank", None),
        "timed_out": isinstance(caught, RankTimeout),
        "message": str(caught) if caught else "no failure reported",
        "traceback_tail": (caught.traceback_tail[-600:] if caught else ""),
        "seconds_to_report": elapsed,
        "leftover_processes": survivors,
        "expected_rank": params.rank,
    }


def failure_panel(widget=None):
    from nbkit.panels import Panel

    return Panel(FailureParams(), run_failure_drill, title="Failure drill: a rank dies mid-run", widget=widget)


def fragmentation_panel(widget=None):
    from nbkit.live import LiveFigure
    from nbkit.panels import Panel

    live = LiveFigure("allocator gap ratio per step", xaxis="step", yaxis="(reserved − active) / reserved", widget=widget)
    return Panel(FragParams(), fragmentation_run, title="Fragmentation vs checkpoint interval", figure=live, widget=widget)


def specdec_panel(params: SpecParams | None = None, widget=None, model_and_tokenizer=None):
    from nbkit.live import LiveFigure
    from nbkit.panels import Panel

    live = LiveFigure("speculative speedup per prompt", xaxis="prompt", yaxis="× tokens/s", widget=widget)

    def run(p: SpecParams, live=None):
        return run_specdec(p, live=live, model_and_tokenizer=model_and_tokenizer)

    return Panel(params or SpecParams(), run, title="Speculative decoding on SmolLM2 (assisted generation)", figure=live, widget=widget)
