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
class FieldNoteFigures:
    """The paper's per-card model-state figures (decimal GB) for the field notes' model and cluster —
    Llama-2-7B (Ψ counted on the meta device) on 8 cards, bf16 mixed-precision Adam — whatever model
    the memory panel shows: the arithmetic the notes' GB claims are held against."""

    n_params: int
    world_size: int
    stage0_gb: float
    stage1_gb: float
    stage3_gb: float
    optimizer_gb: float
    adam_moments_gb: float
    fp32_master_gb: float
    stage3_params_gb: float


@dataclass(frozen=True)
class MemoryMetrics:
    """The memory model (paper formula beside DeepSpeed's estimators) for one architecture and plan,
    and the same formula for the field notes' own model (``field_notes``)."""

    n_params: int
    largest_layer_params: int
    plan: dict[str, Any]
    world_size: int
    gpus_per_node: int
    nodes: int
    field_notes: FieldNoteFigures
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
    # the smallest count over ranks: the knob "acted" only if every rank formed more sub-groups
    n_sub_groups_small_min: int = 0


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
    """One rung of one launch: per-rank peaks (bytes, one entry per rank) — measured, growth above the
    rank's baseline, predicted —, DeepSpeed's device estimate for the stage (None where it has none),
    and the model-state bytes a rank holds (mean over ranks).

    ``measured`` is what the ranks' device reports: CUDA's peak allocated bytes on GPU ranks, the
    process RSS on CPU ranks (see ``LadderMetrics.ranks_device``). ``launch`` 0 is the launch that ran
    every rung; 1, 2, … rerun stages 0–3 only (``LadderConfig.launches``)."""

    rung: str
    stage: int
    measured: list[float]
    growth: list[float]
    predicted: list[float]
    deepspeed_estimate: float | None = None
    model_states: float = 0.0
    launch: int = 0


@dataclass(frozen=True)
class EstimatorCheck:
    """DeepSpeed's device estimate for one stage beside what the ladder's ranks held.

    The estimators count model states only (``estimate_zero{2,3}_model_states_mem_needs``: parameters,
    gradients, optimizer states and, at stage 3, the largest layer's gather), so what any run answers is
    their scope: ``states_over_estimate``, the model-state tensor bytes a rank holds (mean over ranks)
    ÷ the estimate — exact bytes, the same on any device — and whether a rank's peak grows past the
    estimate: ``growth_over_estimate``, per launch the mean over ranks of peak growth ÷ the estimate
    (the factor measured ÷ estimated; above 1, the estimate leaves something out). How far past is the
    workload's (its activations and buffers against its model states) and a card's memory only on
    CUDA ranks: ``per_card`` is False on CPU ranks, whose peak is the process RSS, never a card's."""

    stage: int
    n_params: int
    estimate_bytes: float
    model_states_bytes: float
    states_over_estimate: float
    growth_over_estimate: tuple[float, ...]
    measured_as: str
    per_card: bool


@dataclass(frozen=True)
class StageRatio:
    """Measured ÷ formula model-state bytes of one stage, at its rank farthest from 1."""

    stage: str
    ratio: float


@dataclass(frozen=True)
class LadderMetrics:
    """Real DeepSpeed ranks at ZeRO stages 0–3: bytes against the formula, the checks, per-rank peaks."""

    formula_ratios: list[StageRatio] = field(default_factory=list)
    wall_s: float = 0.0
    ranks_device: str = "cpu"
    loss_max_rel_diff: float | None = None
    loss_tolerance: float | None = None
    loss_rungs: int = 0
    # the positive control: stage 0 again at half the learning rate, against stage 0 (None: not run)
    control_rel_diff: float | None = None
    replicas_in_sync: bool | None = None
    checkpoint_round_trip_ok: bool | None = None
    rss_peak_bytes: dict[str, int] = field(default_factory=dict)
    monitor_samples: int = 0
    monitor_alerts: list[dict[str, Any]] = field(default_factory=list)
    world_size: int = 2
    steps: int = 0
    micro_batch: int = 2
    seq_len: int = 32
    bucket_elements: int = 0
    precision: str = "bf16"
    overflow_step: int = -1
    loss_scale_history: list[LossScaleStep] = field(default_factory=list)
    sub_group: SubGroup | None = None
    persistence: Persistence | None = None
    peaks: list[RungPeak] = field(default_factory=list)
    launches: int = 1
    n_params: int = 0

    def stage_peak(self, stage: int, launch: int = 0) -> RungPeak | None:
        """The per-rank peaks of rung ``stage<k>`` (stage 3 at persistence threshold 0) in ``launch``."""
        return next((p for p in self.peaks if p.rung == f"stage{stage}" and p.launch == launch), None)

    def stage_states(self, stage: int) -> float | None:
        """The model-state bytes a rank holds at rung ``stage<k>`` (mean over ranks), if it ran."""
        peak = self.stage_peak(stage)
        return None if peak is None else peak.model_states

    def growth_ratios(self, stage: int) -> list[float]:
        """Per launch: the mean over ranks of each rank's peak growth at ``stage`` ÷ its growth at
        stage 0 — one value per launch, the unit the memory-saving rows replicate."""
        out = []
        for launch in range(self.launches):
            base, this = self.stage_peak(0, launch), self.stage_peak(stage, launch)
            if base and this:
                ratios = [a / b for a, b in zip(this.growth, base.growth, strict=True) if b]
                out.append(sum(ratios) / len(ratios))
        return out

    def estimate_ratios(self, stage: int) -> list[float]:
        """Per launch: the mean over ranks of each rank's peak growth at ``stage`` ÷ DeepSpeed's device
        estimate for that stage (empty where DeepSpeed has no estimator)."""
        out = []
        for launch in range(self.launches):
            this = self.stage_peak(stage, launch)
            if this and this.deepspeed_estimate:
                out.append(sum(this.growth) / len(this.growth) / this.deepspeed_estimate)
        return out

    def estimator_check(self, stage: int) -> EstimatorCheck | None:
        """DeepSpeed's estimate at ``stage`` against the model states and peaks the ranks held (None where
        the stage did not run or DeepSpeed has no estimator for it)."""
        peak = self.stage_peak(stage)
        if peak is None or not peak.deepspeed_estimate:
            return None
        cuda = self.ranks_device == "cuda"
        return EstimatorCheck(
            stage=stage,
            n_params=self.n_params,
            estimate_bytes=peak.deepspeed_estimate,
            model_states_bytes=peak.model_states,
            states_over_estimate=peak.model_states / peak.deepspeed_estimate,
            growth_over_estimate=tuple(self.estimate_ratios(stage)),
            measured_as="CUDA peak allocated bytes" if cuda else f"process RSS ({self.ranks_device} ranks)",
            per_card=cuda,
        )

    def for_record(self) -> dict[str, Any]:
        """The fields the notebook records (the loss-scale history is the drill's)."""
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
    # seconds from launch until every rank reported ready (start-up; the timeout counts after it)
    ready_s: float | None = None


@dataclass(frozen=True)
class FragmentationRun:
    """One training run of the fragmentation experiment (CUDA): its checkpoint interval, allocator
    setting and seed, its place in the run order, and the allocator's figures over its steps."""

    interval: int
    expandable_segments: bool
    seed: int
    order: int
    mean_gap_ratio: float
    max_inactive_split: float
    alloc_retries: int
    checkpoints: int


@dataclass(frozen=True)
class FragmentationMetrics:
    """Allocator gap ratio vs checkpoint interval. CUDA fills ``seeds``/``runs``/``model`` and
    ``gap_ratios`` (the first seed's per-step series, per ``"<interval>/<expandable>"``); CPU fills
    ``tensor_bytes_peak`` and names the ``unavailable`` figures."""

    needs_cuda: bool
    steps: int
    tensor_bytes_peak: dict[str, int] | None = None
    unavailable: dict[str, str] | None = None
    seeds: int | None = None
    runs: list[FragmentationRun] = field(default_factory=list)
    model: str | None = None
    intervals: tuple[int, ...] = ()
    gap_ratios: dict[str, list[float]] = field(default_factory=dict)

    def seed_means(self, interval: int, expandable: bool = False) -> list[float]:
        """Each seed's mean gap ratio when checkpointing every ``interval`` steps, in seed order (empty
        when not run)."""
        runs = [r for r in self.runs if r.interval == interval and r.expandable_segments == expandable]
        return [r.mean_gap_ratio for r in sorted(runs, key=lambda r: r.seed)]

    def for_record(self) -> dict[str, Any]:
        """What the notebook records: the fields this device filled, without the per-step series."""
        cpu = ("needs_cuda", "steps", "tensor_bytes_peak", "unavailable")
        cuda = ("needs_cuda", "steps", "seeds", "runs", "model", "intervals")
        return {k: getattr(self, k) for k in (cpu if self.needs_cuda else cuda)}


@dataclass(frozen=True)
class MethodSummary:
    """One speculative method over its requests: throughput, acceptance, fallback, identity to greedy;
    per request (one per prompt) the speedup (median over interleaved timings), verification rounds
    and fallback rounds — the unit the rate and speedup claims take."""

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
    rounds_per_prompt: list[int] = field(default_factory=list)
    fallback_rounds_per_prompt: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class SpecDecMetrics:
    """Speculative decoding: each method's summary (None when it did not run), the device and dtype it
    ran in, the timings per request and method, and the 1-minute load average at the start and end."""

    prompt_lookup: MethodSummary | None
    truncated_draft: MethodSummary | None
    device: str
    dtype: str = ""
    timings: int = 1
    loadavg: tuple[float, float] = (float("nan"), float("nan"))
    draft_layers: int = 0
    target_layers: int = 0

    def methods(self) -> list[tuple[str, MethodSummary]]:
        """(name, summary) of each method that ran."""
        pairs = (("prompt_lookup", self.prompt_lookup), ("truncated_draft", self.truncated_draft))
        return [(name, s) for name, s in pairs if s is not None]


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
