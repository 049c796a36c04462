"""What the KG experiments measure: one frozen dataclass per experiment (``Result[XMetrics].metrics``).

Notebook 01 records each under its experiment's slug; :mod:`nbkit.kg.claims` reads these typed fields
(never dict keys), so a claim cannot wait on a value no experiment writes. Kept apart from
:mod:`nbkit.kg.experiments` so that judging results does not load what produces them.
"""

from __future__ import annotations

from dataclasses import dataclass

from nbkit.kg.config import Chosen

__all__ = [
    "AblationMetrics",
    "AggrMetrics",
    "AggrRun",
    "AggrSummary",
    "CoalesceMetrics",
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
    """What was chosen on the selecting half of the validation queries, the training seed of every
    candidate (never a judged seed), and one row per candidate: its group, rung, settings, the selecting
    half's MRR it was chosen on and its best epoch."""

    chosen: Chosen
    train_seed: int
    validation: list


@dataclass(frozen=True)
class RungMetrics:
    """One rung of the ablation over its seeds: validation means, per-seed figures, the MRR interval.

    ``*_select`` / ``*_judge``: two disjoint halves of the validation triples
    (:func:`nbkit.kg.ranking.query_halves`). Every run's epoch was chosen on the selecting half, and the
    ablation's best rung is too; the judging half scores runs none of those choices looked at."""

    rung: int
    valid_mrr: float
    valid_hits_at_10: float
    valid_auc: float
    valid_mrr_select: float
    valid_mrr_judge: float
    valid_auc_judge: float
    valid_mrr_per_seed: tuple[float, ...]
    valid_hits_at_10_per_seed: tuple[float, ...]
    valid_auc_per_seed: tuple[float, ...]
    valid_mrr_select_per_seed: tuple[float, ...]
    valid_mrr_judge_per_seed: tuple[float, ...]
    valid_auc_judge_per_seed: tuple[float, ...]
    valid_mrr_interval: tuple[float, float]
    train_s: float
    epochs: int


@dataclass(frozen=True)
class AblationMetrics:
    """The best rung by mean validation MRR (selecting half), its test figures (mean over seeds), every
    rung's metrics (in rung order)."""

    best_rung: int
    seeds: int
    test_mrr: float
    test_hits_at_1: float
    test_hits_at_3: float
    test_hits_at_10: float
    test_mean_rank: float
    test_auc: float
    test_mrr_per_seed: tuple[float, ...]
    rungs: tuple[RungMetrics, ...]
    interrupted: bool

    def rung(self, key: int) -> RungMetrics | None:
        """Rung ``key``'s metrics, or None when the ablation did not run it."""
        return next((r for r in self.rungs if r.rung == key), None)


@dataclass(frozen=True)
class AggrSummary:
    """One aggregation over its seeds (runs that diverged are counted, not averaged), with the choices it
    ran with."""

    decoder: str
    dropout: float
    width: int
    valid_mrr_mean: float
    roughness_mean: float
    diverged: int
    runs: int


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
    """Per run (aggr, seed): validation MRR, loss-curve wobble, divergence; a summary per aggregation;
    the learning rate both ran at (the ladder's)."""

    runs: tuple[AggrRun, ...]
    mean: AggrSummary
    add: AggrSummary
    seeds: int
    lr: float


@dataclass(frozen=True)
class DownstreamMetrics:
    """Macro-F1 of the untyped embeddings and of a random control, per seed and fold; or why it was
    skipped. ``dropped_classes``: the classes (node types) with fewer members than folds, left out of
    the F1 (``name (members)``), and how many entities they hold."""

    macro_f1: float = float("nan")
    macro_f1_control: float = float("nan")
    seed_scores: tuple[float, ...] = ()
    control_seed_scores: tuple[float, ...] = ()
    fold_scores: tuple[tuple[float, ...], ...] = ()
    control_fold_scores: tuple[tuple[float, ...], ...] = ()
    seeds: int = 0
    classes: int = 0
    samples: int = 0
    dropped_classes: tuple[str, ...] = ()
    dropped_entities: int = 0
    link_valid_mrr_untyped: float = float("nan")
    train_seconds: float = 0.0
    skipped: str | None = None  # why the check could not run (fewer than two usable classes)


@dataclass(frozen=True)
class MinibatchRow:
    """One (mode, training seed) run of the mini-batch experiment: its figures and learning curve.
    The curve's points score the same validation queries, so ``curve_valid_mrr[-1] − curve_valid_mrr[0]``
    is what the run gained between them."""

    mode: str  # "mini-batch" or "full graph"
    seed: int
    valid_mrr: float
    valid_hits_at_10: float
    evaluated_triples: int
    epochs: int
    steps: int
    train_s: float
    steps_per_s: float  # training steps per second of training (validation excluded)
    curve_steps: tuple[int, ...]  # the learning curve: validation MRR after how many steps of training
    curve_valid_mrr: tuple[float, ...]
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
    """One row per (mode, training seed), the graph's sizes and its seed."""

    rows: tuple[MinibatchRow, ...]
    sizes: dict
    graph_seed: int


@dataclass(frozen=True)
class CoalesceMetrics:
    """Does PyG's ``RGCNConv`` raise on unsorted edges with exact duplicates, without ``coalesce``
    (:func:`nbkit.kg.checks.coalesce_experiment`)? ``error_*`` is "" where it ran;
    ``max_abs_diff_*`` how far its output moves once the duplicates are coalesced away (NaN where it
    raised); ``out_of_range_*`` what an edge id past the node count does, raw and after coalescing."""

    pyg_version: str
    edges: int
    distinct_typed_edges: int
    edges_after_coalesce: int
    pairs_with_several_relations: int
    error_add: str
    error_mean: str
    max_abs_diff_add: float
    max_abs_diff_mean: float
    out_of_range_error: str
    out_of_range_after_coalesce_error: str


@dataclass(frozen=True)
class PitfallMetrics:
    """Every pitfall detector's finding (broken input, then its clean twin) and the coalesce experiment."""

    pitfall_findings: list
    coalesce: CoalesceMetrics
