"""Widget panels for notebook 02: each wires a config dataclass to its experiment, nothing more."""

from __future__ import annotations

from nbkit.zero.config import (
    CrossoverConfig,
    FailureDrillConfig,
    FragmentationConfig,
    LadderConfig,
    MemoryConfig,
    SpecDecConfig,
)


def memory_panel(cfg: MemoryConfig | None = None, widget=None):
    from nbkit.panels import Panel
    from nbkit.zero.experiments import run_memory_model

    return Panel(cfg or MemoryConfig(), run_memory_model, title="ZeRO memory model: paper formula vs DeepSpeed's estimator", widget=widget)


def ladder_panel(cfg: LadderConfig | None = None, widget=None):
    from nbkit.live import LiveFigure
    from nbkit.panels import Panel
    from nbkit.zero.experiments import run_ladder

    live = LiveFigure("ZeRO ladder: loss per step (streamed from rank 0)", xaxis="step", yaxis="loss", widget=widget)
    return Panel(cfg or LadderConfig(), run_ladder, title="ZeRO ladder: real DeepSpeed ranks", figure=live, widget=widget)


def crossover_panel(cfg: CrossoverConfig | None = None, widget=None):
    from nbkit.panels import Panel
    from nbkit.zero.experiments import run_crossover

    return Panel(cfg or CrossoverConfig(), run_crossover, title="Where ZeRO starts to pay: per-rank peak vs model size", widget=widget)


def failure_panel(cfg: FailureDrillConfig | None = None, widget=None):
    from nbkit.panels import Panel
    from nbkit.zero.experiments import run_failure_drill

    return Panel(cfg or FailureDrillConfig(), run_failure_drill, title="Failure drill: a rank dies mid-run", widget=widget)


def fragmentation_panel(cfg: FragmentationConfig | None = None, widget=None):
    from nbkit.live import LiveFigure
    from nbkit.panels import Panel
    from nbkit.zero.experiments import run_fragmentation

    live = LiveFigure("allocator gap ratio per step", xaxis="step", yaxis="(reserved − allocated) / reserved", widget=widget)
    return Panel(cfg or FragmentationConfig(), run_fragmentation, title="Fragmentation vs checkpoint interval", figure=live, widget=widget)


def specdec_panel(cfg: SpecDecConfig | None = None, widget=None, model_and_tokenizer=None):
    from nbkit.live import LiveFigure
    from nbkit.panels import Panel
    from nbkit.zero.experiments import run_specdec

    live = LiveFigure("speculative speedup per prompt", xaxis="prompt", yaxis="× tokens/s", widget=widget)

    def run(cfg: SpecDecConfig, live=None):
        return run_specdec(cfg, live=live, model_and_tokenizer=model_and_tokenizer)

    return Panel(cfg or SpecDecConfig(), run, title="Speculative decoding on SmolLM2 (assisted generation)", figure=live, widget=widget)
