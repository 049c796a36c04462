"""One config dataclass per ZeRO-theme experiment; widget metadata on the fields; a ``smoke()`` preset.

Field metadata (``min``/``max``/``choices``) drives the panel controls *and* is enforced when a
config is built (``check_fields``): a value outside its bounds, of the wrong type, or not among its
choices raises ``nbkit.errors.UsageError`` naming ``Config.field`` and what was expected — so a
notebook parameter, a panel control and a test all meet the same rule.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from nbkit.errors import UsageError
from nbkit.experiment import param
from nbkit.params import parse_sizes
from nbkit.zero.prompts import NEUTRAL_PROMPTS

PRECISIONS = ["bf16", "fp32", "fp16"]
MODEL_PRESETS = ("Llama-2-7B", "SmolLM2-135M", "tiny Llama (ladder)")
SPEC_METHODS = ["prompt_lookup", "truncated_draft"]
# Each replicating experiment's budget per profile (the most units a run spends; its loop stops once the
# rows it feeds are decided), chosen from the rows' designs (nbkit.zero.claims; bench/RESULTS.md).
LAUNCHES, FULL_LAUNCHES = 5, 5
FRAGMENTATION_SEEDS, FRAGMENTATION_FULL_SEEDS = 3, 7
REQUESTS, FULL_REQUESTS = 3, 90


def _type_name(value: Any) -> str:
    return type(value).__name__


def _check_scalar(where: str, value: Any, default: Any, md: dict) -> None:
    choices = md.get("choices")
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise UsageError(f"{where}: expected true or false, got {value!r} ({_type_name(value)})")
    elif isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageError(f"{where}: expected an integer, got {value!r} ({_type_name(value)})")
    elif isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise UsageError(f"{where}: expected a finite number, got {value!r} ({_type_name(value)})")
    elif isinstance(default, str) and not isinstance(value, str):
        raise UsageError(f"{where}: expected a string, got {value!r} ({_type_name(value)})")
    if choices is not None and value not in choices:
        raise UsageError(f"{where}: expected one of {list(choices)}, got {value!r}")
    lo, hi = md.get("min"), md.get("max")
    if lo is not None and value < lo or hi is not None and value > hi:
        raise UsageError(f"{where}: expected a value in {lo}..{hi}, got {value!r}")


def check_fields(cfg: Any) -> None:
    """Enforce each field's type and its ``min``/``max``/``choices`` metadata (UsageError names the field)."""
    cls = type(cfg).__name__
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        where = f"{cls}.{f.name}"
        default = f.default if f.default is not dataclasses.MISSING else None
        if isinstance(default, tuple):
            if not isinstance(value, (tuple, list)):
                raise UsageError(f"{where}: expected a list of values, got {value!r} ({_type_name(value)})")
            if f.metadata.get("nonempty") and not value:
                raise UsageError(f"{where}: {f.metadata['nonempty']}")
            for item in value:
                # Each element takes the type of the choices (bools and ints must not mix).
                proto = f.metadata["choices"][0] if f.metadata.get("choices") else item
                _check_scalar(where, item, proto, f.metadata)
            object.__setattr__(cfg, f.name, tuple(value))
        else:
            _check_scalar(where, value, default, f.metadata)


class _Checked:
    def __post_init__(self):
        check_fields(self)


@dataclass
class MemoryConfig(_Checked):
    """The memory model: the paper's formula and DeepSpeed's estimators for one architecture."""

    model: str = param("Llama-2-7B", choices=MODEL_PRESETS)
    model_path: str = param(
        "",
        label="or your model (HF dir / config.json / hub id)",
        help="a local Hugging Face model directory or a bare config.json (Ψ counted on the meta device); "
        "overrides model",
    )
    world_size: int = param(8, min=1, max=65536, label="data-parallel degree N (GPUs in all)")
    gpus_per_node: int = param(
        8, min=1, max=64, label="GPUs per node", help="DeepSpeed's estimator counts CPU memory per node"
    )
    precision: str = param("bf16", choices=PRECISIONS)
    offload_optimizer: bool = param(False)
    offload_param: bool = param(False, label="offload params (stage 3 only)")
    ds_config: str = param(
        "",
        label="or your ds_config.json",
        help="its ZeRO stage, offload settings and precision replace the three controls above",
    )

    @classmethod
    def smoke(cls) -> MemoryConfig:
        return cls()


@dataclass
class DsConfigConfig(_Checked):
    """A ds_config explained key by key, with the batch identity at ``world_size`` GPUs."""

    ds_config: str = param(
        "", label="your ds_config.json", help="empty: the field notes' config with its own 8-GPU launch line"
    )
    world_size: int = param(8, min=1, max=65536, label="GPUs in all (N)")

    @classmethod
    def smoke(cls) -> DsConfigConfig:
        return cls()


@dataclass
class LadderConfig(_Checked):
    """Real DeepSpeed ranks at ZeRO stages 0–3 (± offload), measured bytes against the formula."""

    stages: tuple = param(
        (0, 1, 2, 3),
        choices=[0, 1, 2, 3],
        label="ZeRO stages",
        nonempty="pick at least one ZeRO stage",
        advanced=False,
    )
    world_size: int = param(2, min=1, max=256, label="ranks (N)")
    steps: int = param(4, min=1, max=200)
    precision: str = param("bf16", choices=PRECISIONS)
    offload_optimizer: bool = param(False, label="offload optimizer (stages 1-3)")
    offload_param: bool = param(False, label="offload params (stage 3)")
    show_persistence: bool = param(
        True,
        label="also run stage 3 at DeepSpeed's default persistence threshold",
        advanced=True,
    )
    sub_group_elements: int = param(
        100_000,
        min=0,
        max=10**9,
        label="also run stage 3 with this sub_group_size (0 = skip)",
        help="a second stage-3 rung whose sub_group_size differs: does the per-rank shard change?",
        advanced=True,
    )
    bucket_elements: int = param(
        200_000,
        min=1_000,
        max=500_000_000,
        label="reduce/allgather bucket (elements)",
        help="DeepSpeed's default is 5e8 (1 GB in bf16): it dwarfs a small model's states",
        advanced=True,
    )
    model_path: str = param(
        "",
        label="your architecture (HF dir / config.json)",
        help="runs your model's architecture, scaled to hidden_size × num_hidden_layers; empty = the tiny "
        "Llama",
        advanced=True,
    )
    # The default size makes the model states large enough that every ZeRO stage's per-rank peak
    # shows below stage 0's, while the ladder still fits the notebook's time budget
    # (bench/zero_peak.py measures it; bench/RESULTS.md keeps the figures).
    hidden_size: int = param(256, min=32, max=8192, step=32, advanced=True)
    num_hidden_layers: int = param(8, min=1, max=128, advanced=True)
    micro_batch: int = param(2, min=1, max=32, advanced=True)
    seq_len: int = param(32, min=8, max=1024, step=8, advanced=True)
    seed: int = param(0, min=0, max=2**31 - 1, hidden=True)
    timeout_s: float = param(300.0, min=30.0, max=3600.0, advanced=True)
    checkpoint: bool = param(True, label="checkpoint save→load round trip", advanced=True)
    control: bool = param(
        True,
        label="positive control: stage 0 again at half the learning rate",
        help="a rung whose math is changed on purpose: the loss comparison must see it, else it has no power",
        advanced=True,
    )
    launches: int = param(
        LAUNCHES,
        min=1,
        max=10,
        label="launches of stages 0–3 (the unit of the memory-saving rows)",
        help="the first launch runs every rung; each further one reruns stages 0–3 only, with a fresh seed",
    )
    overflow_step: int = param(
        -1,
        min=-1,
        max=200,
        label="fp16: provoke a gradient overflow at this step (-1 = none)",
        advanced=True,
    )
    monitor_limit_mib: float = param(
        1024.0,
        min=10.0,
        max=100000.0,
        label="alert when a rank's RSS exceeds (MiB)",
        advanced=True,
    )
    warm_up: bool = param(
        True,
        hidden=True,
        help="run each optimizer family once, unmeasured, so its one-time runtime growth is not charged to "
        "a stage",
    )
    sabotage: str = param(
        "none",
        choices=["none", "diverge", "corrupt_checkpoint"],
        hidden=True,
        help="break the last rank on purpose (tests of the silent-failure checks)",
    )

    @classmethod
    def smoke(cls) -> LadderConfig:
        return cls(steps=3, hidden_size=64, num_hidden_layers=2, sub_group_elements=20_000, launches=1)

    @classmethod
    def fp16_drill(cls) -> LadderConfig:
        """fp16 at stage 2 with an overflow provoked at step 2 (the loss-scale check; needs CUDA ranks)."""
        return LossScaleConfig().ladder_config(2)


@dataclass
class LossScaleConfig(_Checked):
    """fp16 dynamic loss scaling with a provoked overflow (one ZeRO stage; needs CUDA ranks)."""

    stage: int = param(2, min=0, max=3, label="ZeRO stage")
    steps: int = param(5, min=2, max=50)
    overflow_step: int = param(2, min=0, max=49, label="provoke a gradient overflow at this step")
    world_size: int = param(2, min=1, max=256, label="ranks (at most one per local GPU)")
    hidden_size: int = param(64, min=32, max=8192, step=32)
    num_hidden_layers: int = param(2, min=1, max=128)
    timeout_s: float = param(300.0, min=30.0, max=3600.0)

    def __post_init__(self):
        super().__post_init__()
        if self.overflow_step >= self.steps:
            raise UsageError(
                f"LossScaleConfig.overflow_step: step {self.overflow_step} is not among {self.steps} steps"
            )

    @classmethod
    def smoke(cls) -> LossScaleConfig:
        return cls()

    def ladder_config(self, world_size: int) -> LadderConfig:
        """The one-rung fp16 ladder this drill runs on ``world_size`` ranks."""
        return LadderConfig(
            launches=1,
            stages=(self.stage,),
            world_size=world_size,
            precision="fp16",
            steps=self.steps,
            overflow_step=self.overflow_step,
            show_persistence=False,
            sub_group_elements=0,
            hidden_size=self.hidden_size,
            num_hidden_layers=self.num_hidden_layers,
            checkpoint=False,
            timeout_s=self.timeout_s,
        )


@dataclass
class CrossoverConfig(_Checked):
    """A sweep of model sizes: each stage's measured per-rank peak against Ψ, and where ZeRO starts to pay."""

    sizes: str = param(
        "256x8,512x8,1024x8",
        label="sizes (HIDDENxLAYERS, comma-separated)",
        help="each size is one launch of stages 0–3; empty runs nothing",
    )
    world_size: int = param(2, min=2, max=256, label="ranks (N)")
    steps: int = param(2, min=1, max=50)
    precision: str = param("bf16", choices=PRECISIONS)
    bucket_elements: int = param(
        200_000,
        min=1_000,
        max=500_000_000,
        label="reduce/allgather bucket (elements)",
        help="DeepSpeed's default 5e8 moves the crossover out: stages 1–2 hold that bucket on every rank",
    )
    model_path: str = param("", label="your architecture (HF dir / config.json)")

    def __post_init__(self):
        super().__post_init__()
        self.parsed_sizes()

    def parsed_sizes(self) -> list[tuple[int, int]]:
        """(hidden, layers) per size; an empty ``sizes`` asks for none."""
        try:
            return parse_sizes(self.sizes)
        except UsageError as exc:
            raise UsageError(f"CrossoverConfig.sizes: {exc}") from None

    @classmethod
    def smoke(cls) -> CrossoverConfig:
        return cls(sizes="64x2,128x2", steps=1)


@dataclass
class FailureDrillConfig(_Checked):
    """Kill/raise/exit/hang one rank mid-run."""

    how: str = param("kill", choices=["kill", "raise", "exit", "hang"])
    rank: int = param(1, min=0, max=7)
    step: int = param(1, min=0, max=10)
    world_size: int = param(2, min=2, max=8)
    timeout_s: float = param(
        60.0,
        min=10.0,
        max=600.0,
        help="counted from the moment every rank reports ready (start-up and imports excluded)",
    )

    def __post_init__(self):
        super().__post_init__()
        if self.rank >= self.world_size:
            raise UsageError(
                f"FailureDrillConfig.rank: rank {self.rank} does not exist in a world of {self.world_size}"
            )

    @classmethod
    def smoke(cls) -> FailureDrillConfig:
        return cls()


@dataclass
class FragmentationConfig(_Checked):
    """Allocator fragmentation vs checkpoint interval (CUDA's caching allocator; CPU says so)."""

    intervals: tuple = param(
        (50, 200),
        choices=[1, 2, 5, 10, 20, 50, 100, 200],
        label="checkpoint every N steps",
        nonempty="pick at least one interval",
        advanced=False,
    )
    steps: int = param(400, min=2, max=4000)
    expandable_segments: tuple = param(
        (False, True),
        choices=[False, True],
        nonempty="pick expandable_segments False and/or True",
        advanced=False,
    )
    model: str = param(
        "Llama-2-7B",
        choices=["Llama-2-7B", "tiny Llama"],
        help="Llama-2-7B's layer shapes (hidden 4096, MLP 11008), num_hidden_layers deep",
    )
    hidden_size: int = param(64, min=32, max=4096, step=32, help="tiny Llama only")
    num_hidden_layers: int = param(2, min=1, max=48)
    batch: int = param(4, min=1, max=64)
    seq_len: int = param(512, min=8, max=4096, step=8)
    seed: int = param(0, min=0, max=2**31 - 1, hidden=True)
    seeds: int = param(
        FRAGMENTATION_SEEDS,
        min=1,
        max=20,
        label="runs per interval (seeds)",
        help="the claim's interval is across runs: one run's per-step gap ratios are not independent",
    )

    @classmethod
    def smoke(cls) -> FragmentationConfig:
        return cls(intervals=(2, 5), steps=6, model="tiny Llama", seq_len=64, seeds=2)


@dataclass
class SpecDecConfig(_Checked):
    """Speculative decoding on SmolLM2 (or your model): prompt lookup and a layer-truncated draft."""

    methods: tuple = param(
        ("prompt_lookup", "truncated_draft"),
        choices=SPEC_METHODS,
        nonempty="pick at least one method",
        advanced=False,
    )
    max_new_tokens: int = param(32, min=8, max=512)
    prompt_lookup_num_tokens: int = param(10, min=1, max=32, advanced=True)
    draft_layers: int = param(6, min=1, max=29, advanced=True)
    num_assistant_tokens: int = param(4, min=1, max=16, advanced=True)
    n_prompts: int = param(
        REQUESTS,
        min=1,
        max=len(NEUTRAL_PROMPTS),
        help="requests from nbkit's neutral prompt set (one request per prompt)",
    )
    timings: int = param(
        0,
        min=0,
        max=20,
        help="timed generations per request and method, interleaved (greedy, each method, in turn); "
        "0: 5 on CUDA, where the speedup claim is judged, 1 elsewhere (no claim judges CPU speed)",
        advanced=True,
    )
    model_path: str = param(
        "",
        label="or your model (HF dir / hub id)",
        help="a local Hugging Face causal-LM directory with weights and tokenizer, or a hub id; '' = SmolLM2",
    )
    # On shared CPU cores, OpenMP threads spinning against other processes make a forward much
    # slower and the timings noise; one thread gives stable tokens/s. 0 = torch's default.
    cpu_threads: int = param(1, min=0, max=64)
    seed: int = param(0, min=0, max=2**31 - 1, hidden=True)
    prompts: tuple = param((), hidden=True, help="your own prompts instead of the built-in ones")

    def __post_init__(self):
        super().__post_init__()
        if any(not isinstance(p, str) or not p.strip() for p in self.prompts):
            raise UsageError("SpecDecConfig.prompts: expected non-empty strings")

    @classmethod
    def smoke(cls) -> SpecDecConfig:
        return cls(n_prompts=1, max_new_tokens=16)
