"""What each ZeRO-theme experiment measured: one frozen dataclass per experiment (``Result.metrics``).

Field names are the names the notebook records (``nbkit.record(name, result.metrics)`` writes a
dataclass as the JSON object of its fields), and the only names ``nbkit.zero.claims`` reads. A field
that only a CUDA run can fill (a per-card peak, the caching allocator's gap ratio, fp16 loss scaling)
is still a field: the CPU path fills it with what it has (often nothing) and says why, and unit tests
fill it with fabricated CUDA-like values to drive the GPU verdicts.

Raw per-rank or per-run rows that nothing judges (monitor alerts, allocator runs, the ``plan`` a
ds_config fixes) stay plain lists/dicts; anything a claim reads is a typed field here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


def _fields_except(obj: Any, *names: str) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name not in names}


@dataclass(frozen=True)
class OffloadHeadroom:
    """CPU memory a full ZeRO-3 offload needs on one node (DeepSpeed's estimate) against what is free here."""

    cpu_needed_bytes: float
    cpu_available_bytes: float
    headroom_bytes: float
    ok: bool
    source: str


@dataclass(frozen=True)
class MemoryMetrics:
    """The memory model (paper formula beside DeepSpeed's estimators) for one architecture and plan."""

    n_params: int
    largest_layer_params: int
    plan: dict[str, Any]
    world_size: int
    gpus_per_node: int
    nodes: int
    model_name: str = ""
    offload_headroom: OffloadHeadroom | None = None


@dataclass(frozen=True)
class DsConfigMetrics:
    """A ds_config explained: the batch-identity inputs and the problems found (inert keys, a broken
    identity)."""

    train_batch_size: int | None
    micro_batch: int | None
    grad_accum: int | None
    world_size: int | None
    findings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LossScaleStep:
    """One fp16 step of a rank's dynamic loss scaling."""

    step: int
    scale: float | None
    provoked: bool
    overflow: bool
    skipped: bool


@dataclass(frozen=True)
class SubGroup:
    """Per-rank shard bytes of the two stage-3 rungs that differ only in ``sub_group_size``."""

    shard_bytes_default: int
    shard_bytes_small: int
    n_sub_groups_default: int
    n_sub_groups_small: int
    sub_group_size_default: float
    sub_group_size_small: float


@dataclass(frozen=True)
class Persistence:
    """Per rank, parameter bytes kept whole by the persistence threshold, beside the rule's prediction."""

    threshold: int
    tensors: int
    tensors_kept_whole: int
    elements_kept_whole: int
    largest_tensor: int
    predicted_extra_bytes: int
    measured_extra_bytes: list[int]


@dataclass(frozen=True)
class RungPeak:
    """One rung's per-rank peaks (bytes, one entry per rank): measured, growth above the rank's baseline,
    predicted; DeepSpeed's device estimate for the stage (None where it has none).

    ``measured`` is what the ranks' device reports: CUDA's peak allocated bytes on GPU ranks, the
    process RSS on CPU ranks (see ``LadderMetrics.ranks_device``)."""

    stage: int
    measured: list[float]
    growth: list[float]
    predicted: list[float]
    deepspeed_estimate: float | None = None


@dataclass(frozen=True)
class LadderMetrics:
    """Real DeepSpeed ranks at ZeRO stages 0–3: bytes against the formula, the checks, per-rank peaks."""

    bytes_vs_formula: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0
    ranks_device: str = "cpu"
    loss_max_rel_diff: float | None = None
    loss_tolerance: float | None = None
    loss_agree: bool | None = None
    replicas_in_sync: bool | None = None
    checkpoint_round_trip_ok: bool | None = None
    rss_peak_bytes: dict[str, int] = field(default_factory=dict)
    monitor_samples: int = 0
    monitor_alerts: list[dict[str, Any]] = field(default_factory=list)
    world_size: int = 2
    steps: int = 0
    precision: str = "bf16"
    overflow_step: int = -1
    loss_scale_history: list[LossScaleStep] = field(default_factory=list)
    sub_group: SubGroup | None = None
    persistence: Persistence | None = None
    peak: dict[str, RungPeak] = field(default_factory=dict)
    model_states: dict[str, float] = field(default_factory=dict)
    n_params: int = 0

    def stage_peak(self, stage: int) -> RungPeak | None:
        """The per-rank peaks of the rung ``stage<k>`` (stage 3 at persistence threshold 0), if it ran."""
        return self.peak.get(f"stage{stage}")

    def stage_states(self, stage: int) -> float | None:
        """The model-state bytes a rank holds at rung ``stage<k>`` (mean over ranks), if it ran."""
        return self.model_states.get(f"stage{stage}")

    def for_record(self) -> dict[str, Any]:
        """The fields the notebook records as ``ladder_metrics`` (the loss-scale history is the drill's)."""
        return _fields_except(self, "loss_scale_history")


@dataclass(frozen=True)
class LossScaleMetrics:
    """The fp16 loss-scale drill: rank 0's per-step history, or why it was not measured."""

    ranks_device: str
    loss_scale_history: list[LossScaleStep]
    not_measured: str | None = None
    precision: str = "fp16"
    world_size: int = 0


@dataclass(frozen=True)
class FailureDrillMetrics:
    """A rank killed/raising/exiting/hanging mid-run: did the launcher name it, in time, leaving nothing?"""

    detected: bool
    reported_rank: int | None
    expected_rank: int
    how: str
    timed_out: bool
    message: str
    seconds_to_report: float
    timeout_s: float
    leftover_processes: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class FragmentationMetrics:
    """Allocator gap ratio vs checkpoint interval. CUDA fills ``seeds``/``runs``/``model``/``gap_ratio_means``
    (per ``"<interval>/<expandable>"``, each seed's mean gap ratio) and ``gap_ratios`` (the first seed's
    per-step series); CPU fills ``tensor_bytes_peak`` and names the ``unavailable`` figures."""

    needs_cuda: bool
    steps: int
    tensor_bytes_peak: dict[str, int] | None = None
    unavailable: dict[str, str] | None = None
    seeds: int | None = None
    runs: list[dict[str, Any]] | None = None
    model: str | None = None
    gap_ratio_means: dict[str, list[float]] = field(default_factory=dict)
    gap_ratios: dict[str, list[float]] = field(default_factory=dict)

    def seed_means(self, interval: int, expandable: bool = False) -> list[float]:
        """Each seed's mean gap ratio when checkpointing every ``interval`` steps (empty when not run)."""
        return self.gap_ratio_means.get(f"{interval}/{expandable}") or []

    def for_record(self) -> dict[str, Any]:
        """What the notebook records: the fields this device filled, without the per-step series."""
        cpu = ("needs_cuda", "steps", "tensor_bytes_peak", "unavailable")
        cuda = ("needs_cuda", "steps", "seeds", "runs", "model", "gap_ratio_means")
        return {k: getattr(self, k) for k in (cpu if self.needs_cuda else cuda)}


@dataclass(frozen=True)
class MethodSummary:
    """One speculative method over the prompts: throughput, acceptance, fallback, identity to greedy."""

    tok_s_baseline: float
    tok_s_speculative: float
    speedup_measured: float
    speedup_predicted: float
    acceptance_rate: float
    fallback_rate: float | None
    rounds: int
    fallback_rounds: int
    proposed: int
    accepted: int
    new_tokens: int
    target_calls_speculative: int
    all_identical: bool
    n_prompts: int
    speedups: list[float] = field(default_factory=list)
    fallback_rates: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class SpecDecMetrics:
    """Speculative decoding: one summary per method, and the device it ran on."""

    summary: dict[str, MethodSummary]
    device: str

    def method(self, name: str) -> MethodSummary | None:
        """The summary of the method ``name`` (``prompt_lookup``, ``truncated_draft``) if it ran."""
        return self.summary.get(name)


@dataclass(frozen=True)
class CrossoverRow:
    """One stage at one model size of a size sweep (means over ranks; ratios per rank as min/max)."""

    size: str
    n_params: int
    stage: int
    predicted_mib: float
    measured_mib: float
    pred_over_meas: float
    growth_mib: float
    growth_pred_over_meas: float
    growth_vs_stage0_min: float
    growth_vs_stage0_max: float
    model_states_mib: float
    model_states_share: float
    predicted_phase: str
    measured_phase: str
    wall_s: float = 0.0


@dataclass(frozen=True)
class CrossoverMetrics:
    """A size sweep: per stage the smallest size from which it saves memory, and every row it rests on.
    No sizes asked: nothing ran (``rows`` empty)."""

    crossover: dict[str, str | None]
    ranks_device: str | None
    bucket_elements: int
    world_size: int
    sizes: str
    rows: list[CrossoverRow] = field(default_factory=list)

    def for_record(self) -> dict[str, Any]:
        return {"sizes": self.sizes, "crossover": self.crossover, "rows": self.rows}
