"""What the KG experiments measure: one frozen dataclass per experiment (``Result[XMetrics].metrics``).

Their field names are the keys notebook 01 records; :mod:`nbkit.kg.claims` reads these fields (never
dict keys), so a claim cannot wait on a value no experiment writes. Kept apart from
:mod:`nbkit.kg.experiments` so that judging results does not load what produces them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from nbkit.kg.config import Chosen

__all__ = [
    "AblationMetrics",
    "AggrMetrics",
    "AggrRun",
    "AggrSummary",
    "DownstreamMetrics",
    "LoadMetrics",
    "MinibatchMetrics",
    "MinibatchRow",
    "PitfallMetrics",
    "RungMetrics",
    "SelectionMetrics",
]


@dataclass(frozen=True)
class LoadMetrics:
    """The load report, split sizes, ``HeteroData`` summary, leakage meter and RDF parser comparison."""

    load_report: dict
    split_sizes: dict
    hetero_summary: dict
    leakage: dict
    leakage_test_reversed_pair_share: float
    leakage_test_same_pair_other_relation_share: float
    rdf_parser_comparison: dict | None = None  # None when LoadConfig.compare_rdf is off
    rdf_roundtrip_kept: int | None = None


@dataclass(frozen=True)
class SelectionMetrics:
    """What was chosen on validation, and every candidate's validation row it was chosen on."""

    chosen: Chosen
    validation: list


@dataclass(frozen=True)
class RungMetrics:
    """One rung of the ablation over its seeds: validation means, per-seed figures, the MRR interval.

    ``valid_mrr_select`` / ``valid_mrr_judge``: two disjoint halves of the validation queries
    (``train.query_halves``), so the claims can choose between rungs on one half and judge on the other."""

    valid_mrr: float
    valid_hits_at_10: float
    valid_auc: float
    valid_mrr_select: float
    valid_mrr_judge: float
    valid_mrr_per_seed: list
    valid_hits_at_10_per_seed: list
    valid_auc_per_seed: list
    valid_mrr_select_per_seed: list
    valid_mrr_judge_per_seed: list
    valid_mrr_interval: list
    train_s: float
    epochs: int


@dataclass(frozen=True)
class AblationMetrics:
    """The best rung by mean validation MRR, its test figures (mean over seeds), every rung's metrics."""

    best_rung: int
    seeds: int
    test_mrr: float
    test_hits_at_1: float
    test_hits_at_3: float
    test_hits_at_10: float
    test_mean_rank: float
    test_auc: float
    test_mrr_per_seed: list
    rung_metrics: dict  # str(rung) -> RungMetrics
    interrupted: bool


@dataclass(frozen=True)
class AggrSummary:
    """One aggregation over its seeds (runs that diverged are counted, not averaged)."""

    valid_mrr_mean: float
    valid_mrr_std: float
    roughness: float
    diverged: int


@dataclass(frozen=True)
class AggrRun:
    """One training run of the aggr experiment (a diverged run has NaN figures)."""

    aggr: str
    seed: int
    valid_mrr: float
    roughness: float  # experiments.loss_roughness of its loss curve
    diverged: bool


@dataclass(frozen=True)
class AggrMetrics:
    """Per run (aggr, seed): validation MRR, loss roughness, divergence; and a summary per aggregation."""

    runs: list[AggrRun]
    summary: dict  # "mean" / "add" -> AggrSummary
    seeds: int


@dataclass(frozen=True)
class DownstreamMetrics:
    """Macro-F1 of the untyped embeddings and of a random control, per seed and fold; or why it was
    skipped."""

    macro_f1: float = float("nan")
    macro_f1_control: float = float("nan")
    seed_scores: list = field(default_factory=list)
    control_seed_scores: list = field(default_factory=list)
    fold_scores: list = field(default_factory=list)
    control_fold_scores: list = field(default_factory=list)
    seeds: int = 0
    classes: int = 0
    samples: int = 0
    dropped_small_classes: dict = field(default_factory=dict)
    link_valid_mrr_untyped: float = float("nan")
    train_seconds: float = 0.0
    skipped: str | None = None  # why the check could not run (fewer than two usable classes)


@dataclass(frozen=True)
class MinibatchRow:
    """One (mode, training seed) run of the mini-batch experiment: its figures and learning curve."""

    mode: str  # "mini-batch" or "full graph"
    seed: int
    valid_mrr: float
    valid_hits_at_10: float
    evaluated_triples: int
    epochs: int
    steps: int
    train_s: float
    steps_per_s: float  # training steps per second of training (validation time excluded)
    curve_steps: list  # the learning curve: validation MRR after how many steps / seconds of training
    curve_train_s: list
    curve_valid_mrr: list
    edges_per_step: int
    nodes_per_step: int
    nodes_fraction: float  # how much of the graph one step's encoder runs on (1.0 = every node)
    message_graph_edges: int
    peak_memory_mb: float
    peak_memory_growth_mb: float
    memory_measured_as: str
    interrupted: bool
    ceiling_mrr: float | None = None  # synthetic graphs: what a perfect model reaches on the same sample


@dataclass(frozen=True)
class MinibatchMetrics:
    """One row per (mode, training seed) and the graph's sizes; ``reciprocal_ranks[mode]``: per seed, the
    first and last curve point's per-query reciprocal ranks (what the scale claim judges)."""

    rows: list[MinibatchRow]
    sizes: dict
    reciprocal_ranks: dict = field(default_factory=dict, repr=False)

    @property
    def scale_row(self) -> dict:
        """The first run's row with the graph's sizes as ``graph_*`` (what notebook 01 records for the
        scale run)."""
        return {**dataclasses.asdict(self.rows[0]), **{f"graph_{k}": v for k, v in self.sizes.items()}}


@dataclass(frozen=True)
class PitfallMetrics:
    """Every pitfall detector's finding (broken input, then its clean twin) and the coalesce experiment."""

    pitfall_findings: list
    coalesce_experiment: dict
