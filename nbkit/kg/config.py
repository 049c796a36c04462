"""One dataclass per KG experiment, plus ``TrainConfig`` (what one training run of one rung needs).

Each experiment config carries widget metadata on its fields (``Panel`` builds its controls from
them) and a ``smoke()`` preset: the SMOKE run of notebook 01 is ``XConfig.smoke()``, the same code
path at a size that runs in seconds. ``dataset`` is a bundled name (``umls``, ``kinships``,
``synthetic``, ``hetionet``) or a path to a triples / RDF file; ``device`` is resolved once, in
``nbkit.kg.experiments``, and handed down as a ``torch.device``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

DATASET_HELP = "umls | kinships | synthetic | hetionet | a path to a .csv/.tsv/.parquet/.nt/.ttl(.gz) triples file"


@dataclass
class TrainConfig:
    """One training run of one rung (full batch, or mini-batch when ``batch_size > 0``)."""

    epochs: int = 200
    hidden: int = 64
    lr: float = 0.005
    weight_decay: float = 0.0
    layers: int = 2
    num_negatives: int = 0  # 0 = every candidate of the rung's negative mode (1-vs-all softmax)
    aggr: str = "mean"  # RGCN neighbour aggregation (the aggr experiment compares mean and add)
    num_bases: int | None = 8
    dropout: float = 0.5  # RGCN input dropout; chosen on validation by experiments.run_selection
    decoder: str = "complex"  # decoder of the RGCN rungs (distmult | complex); chosen on validation
    type_aggr: str = "mean"  # how hetero SAGE combines edge types (sum | mean); chosen on validation
    eval_every: int = 20
    # Early stopping: stop after this many validation evaluations in a row without a new best MRR
    # (0 = train all epochs). The best validation epoch is kept either way.
    patience: int = 0
    seed: int = 0
    max_seconds: float | None = None
    # Graphs this small are dominated by per-op overhead; on shared CPU cores extra intra-op threads
    # mostly spin (measured here: 1 thread 0.17 s/epoch vs 2 threads 1.5 s/epoch on a loaded box).
    cpu_threads: int | None = 1
    # Mini-batch training (Hetionet-sized graphs): 0 = full batch. With batch_size > 0 each step samples
    # num_neighbors[hop] incoming edges per node and hop around the batch's entities
    # (nbkit.kg.neighbor_sampler) and scores every positive against a shared pool of num_negatives
    # sampled entities per side.
    batch_size: int = 0
    num_neighbors: tuple = (10, 10)
    # Mini-batch only: the per-entity input tables get sparse gradients (only the rows a step touched) and
    # their own Adagrad at this learning rate (0 = one Adam at ``lr`` for every parameter). Adagrad, not
    # SparseAdam: at the 47k scale defaults, 82 steps, validation MRR .058 vs .051 (ScaleConfig).
    embed_lr: float = 0.0
    # How the per-entity input tables start: "random" (normal, std 0.1) or "structural" (seeded random
    # vectors averaged over 2-hop train neighbourhoods, nbkit.kg.models.structural_inputs; same scale).
    input_init: str = "random"
    # With batch_size > 0: run message passing over the WHOLE train graph each step instead of sampled
    # neighbourhoods; the loss (batch, shared negative pools) is identical, so comparing the two modes
    # isolates what full-graph message passing costs.
    full_graph: bool = False
    # Filtered ranking scores each evaluated triple against every entity; on big graphs evaluate a seeded
    # sample of this many valid/test triples (0 = all). The metrics then carry "eval_triples".
    eval_max_triples: int = 0
    # Which disjoint block of eval_max_triples sampled triples validation scores (nbkit.kg.train.eval_sample):
    # a claim judged on a run whose settings were chosen on block 0 is judged on another block.
    eval_slice: int = 0
    # Mini-batch training under a time budget: also validate every this many seconds of training, so a
    # budget shorter than one epoch still draws a learning curve (None = only at epoch ends).
    eval_every_seconds: float | None = None
    # Rung 6 (ComplEx-N3, no message passing; Lacroix et al. 2018) trains its own way: mini-batches of
    # (h, r, t) and (t, r⁻¹, h), 1-N cross-entropy over every entity, N3 regularisation, Adagrad.
    # Its width and optimiser differ from the message-passing rungs'; run_selection chooses them on validation.
    complex_dim: int = 400  # real width (complex rank = complex_dim / 2)
    complex_lr: float = 0.2  # Adagrad
    complex_n3: float = 0.01  # N3 weight
    complex_batch: int = 1000
    complex_init: float = 1e-3  # std of the initial embeddings (small, as in the paper)
    # Rung 6 converges in tens of epochs (the RGCN rungs in hundreds): it validates every this many
    # epochs, so early stopping (``patience``) ends it a few epochs after its best one.
    complex_eval_every: int = 5


def _f(default, help: str = "", **meta):
    return field(default=default, metadata={"help": help, **meta} if help else meta)


def _default(parent, name: str, default):
    """``parent``'s field ``name`` with another default: a preset subclass keeps the widget metadata as is."""
    return field(default=default, metadata=parent.__dataclass_fields__[name].metadata)


@dataclass
class _Training:
    """The knobs every experiment that trains a rung shares (first in every panel)."""

    dataset: str = _f("umls", DATASET_HELP)
    epochs: int = _f(200, min=1, max=2000)
    hidden: int = _f(64, min=8, max=512, step=8)
    lr: float = _f(0.005, min=1e-4, max=0.1, log=True)
    num_negatives: int = _f(0, "0 = every candidate is a negative (1-vs-all); k > 0: k sampled corruptions per side",
                            min=0, max=256, label="negatives per positive (0 = all candidates)")
    decoder: str = _f("complex", "decoder of the RGCN rungs (run_selection chooses it on validation)", choices=["distmult", "complex"])
    dropout: float = _f(0.5, "RGCN input dropout (run_selection chooses it on validation)", min=0.0, max=0.9, step=0.05)
    type_aggr: str = _f("mean", "how hetero SAGE combines edge types (run_selection chooses it on validation)", choices=["sum", "mean"])
    complex_dim: int = _f(400, "rung 6 (ComplEx-N3) width: real + imaginary parts (run_selection chooses it on validation)",
                          min=8, max=4000, step=8, label="rung 6 width")
    complex_n3: float = _f(0.01, "rung 6 N3 weight (run_selection chooses it on validation)", min=0.0, max=1.0, label="rung 6 N3 weight")
    complex_lr: float = _f(0.2, "rung 6 Adagrad learning rate (run_selection chooses it on validation)", min=1e-3, max=2.0, log=True, label="rung 6 lr")
    complex_batch: int = _f(1000, "rung 6 queries per step (run_selection chooses it on validation)", min=16, max=100_000, label="rung 6 batch")
    eval_every: int = _f(10, min=1, max=200)
    patience: int = _f(3, "stop after this many validation checks without a new best MRR (0 = never)", min=0, max=100)
    seed: int = _f(0, "random seed of the first run (and of the split)", min=0, max=10_000)
    device: str = _f("auto", hidden=True)

    def train_config(self, **overrides) -> TrainConfig:
        """The ``TrainConfig`` these fields describe (fields it lacks keep TrainConfig's defaults)."""
        names = {f.name for f in dataclasses.fields(TrainConfig)}
        values = {k: getattr(self, k) for k in names if hasattr(self, k)}
        values.update(overrides)
        return TrainConfig(**values)


@dataclass
class LoadConfig:
    """Load a dataset, write it as RDF and compare parsers, split it, measure leakage."""

    dataset: str = _f("umls", DATASET_HELP)
    seed: int = _f(0, "seed of a random split (UMLS ships its own)", min=0, max=10_000)
    compare_rdf: bool = _f(True, "write the KG as N-Triples and time pyoxigraph against rdflib")

    @classmethod
    def smoke(cls, **kw) -> LoadConfig:
        return cls(**kw)


@dataclass
class SelectionConfig(_Training):
    """Choose decoder and dropout (on RGCN rung 5) and the edge-type aggregation of hetero SAGE (on rung 2,
    the cheaper of the two SAGE rungs) by VALIDATION MRR."""

    decoders: tuple = _f(("distmult", "complex"), choices=["distmult", "complex"])
    dropouts: tuple = _f((0.3, 0.5), choices=[0.0, 0.1, 0.3, 0.5, 0.7])
    type_aggrs: tuple = _f(("sum", "mean"), choices=["sum", "mean"])
    # Rung 6 (ComplEx-N3): the grid below, every combination, each run early-stopped on validation MRR.
    # Default grid kept to 2 runs for the notebook's time budget (widen it in the panel or the bench): on
    # UMLS validation width 400 beat 200 (MRR .960 vs .948 at N3 0.01, lr 0.2, batch 1000; measured here).
    complex_dims: tuple = _f((400,), choices=[16, 32, 64, 100, 200, 400, 1000, 2000], label="rung 6 widths")
    complex_n3s: tuple = _f((0.01, 0.03), choices=[0.001, 0.003, 0.01, 0.03, 0.1], label="rung 6 N3 weights")
    complex_lrs: tuple = _f((0.2,), choices=[0.05, 0.1, 0.2, 0.5], label="rung 6 learning rates")
    complex_batches: tuple = _f((1000,), choices=[250, 500, 1000, 2000], label="rung 6 batch sizes")
    epochs: int = _f(60, min=1, max=2000)

    @classmethod
    def smoke(cls, **kw) -> SelectionConfig:
        return cls(**{"epochs": 8, "eval_every": 4, "hidden": 32, "complex_dims": (64,), "complex_n3s": (0.01, 0.03), **kw})


@dataclass
class AblationConfig(_Training):
    """The ablation ladder: every rung on the same split and budget, over ``seeds`` seeds.

    The best rung is chosen on mean validation MRR; only that rung is scored on the test split.
    """

    rungs: tuple = _f((1, 2, 3, 4, 5, 6), choices=[1, 2, 3, 4, 5, 6], label="rungs")
    seeds: int = _f(3, "seeds per rung (the reverse-edge claim needs >= 3 for an interval)", min=1, max=10)
    epochs: int = _f(100, min=1, max=2000)

    @classmethod
    def smoke(cls, **kw) -> AblationConfig:
        return cls(**{"epochs": 10, "eval_every": 5, "seeds": 2, **kw})


@dataclass
class AggrConfig(_Training):
    """RGCN ``aggr='mean'`` vs ``'add'`` on the same seeds: loss roughness, divergence, validation MRR."""

    seeds: int = _f(3, "seeds per aggr (the claim needs >= 3 for an interval)", min=1, max=10, label="seeds per aggr")
    epochs: int = _f(60, min=1, max=2000)
    lr: float = _f(0.01, min=1e-4, max=0.1, log=True)
    eval_every: int = _f(20, min=1, max=200)
    patience: int = _f(0, "0: every run trains all epochs, so the loss curves compared are equally long", min=0, max=100)

    @classmethod
    def smoke(cls, **kw) -> AggrConfig:
        return cls(**{"epochs": 8, "eval_every": 4, "seeds": 2, **kw})


@dataclass
class DownstreamConfig(_Training):
    """Rung 5 trained WITHOUT node types, then logistic regression predicts the type (5-fold macro-F1)."""

    epochs: int = _f(100, min=1, max=2000)
    eval_every: int = _f(25, min=1, max=200)
    seeds: int = _f(3, "embedding runs (seeds): the claim's interval is across them (one run's folds share its embedding)",
                    min=1, max=10, label="seeds")

    @classmethod
    def smoke(cls, **kw) -> DownstreamConfig:
        return cls(**{"epochs": 10, "eval_every": 5, "seeds": 2, **kw})


@dataclass
class MinibatchConfig:
    """Rung 5 on neighbour-sampled mini-batches vs full batch, SAME loss (sampled negatives), same budget."""

    dataset: str = _f("umls", DATASET_HELP)
    source: str = _f("dataset", "the dataset above, or a seeded synthetic graph of the sizes below",
                     choices=["dataset", "synthetic"], label="graph")
    entities: int = _f(47_000, min=100, max=1_000_000, label="synthetic entities")
    triples: int = _f(2_250_000, min=1_000, max=20_000_000, label="synthetic triples")
    clusters: int = _f(200, min=2, max=10_000, label="synthetic clusters")
    batch_size: int = _f(512, min=16, max=65_536)
    fanout: int = _f(10, min=-1, max=100, label="neighbours per node and hop (-1 = all)")
    num_negatives: int = _f(64, "sampled negatives per positive and side: the same in both modes",
                            min=1, max=4096, label="negatives (both modes)")
    epochs: int = _f(10, "measured on UMLS: 30 epochs x 2 modes cost ~2 min on a loaded 2-core box", min=1, max=2000)
    max_seconds: float = _f(30.0, min=5.0, max=7200.0, label="time budget per mode (s)")
    eval_max_triples: int = _f(0, min=0, max=1_000_000, label="evaluated triples (0 = all)")
    compare_full: bool = _f(True, label="also train full-batch (same loss, same budget)")
    eval_points: int = _f(0, "validate this many times within the time budget (a learning curve even inside one epoch); 0 = at epoch ends",
                          min=0, max=50, label="validation points in the budget")
    hidden: int = _f(64, min=8, max=512, step=8)
    lr: float = _f(0.005, min=1e-4, max=0.1, log=True)
    embed_lr: float = _f(0.0, "per-entity input tables: sparse gradients (only the rows a step touched) and Adagrad at this rate; 0 = Adam at lr like every other parameter",
                         min=0.0, max=1.0, label="entity-table lr (Adagrad; 0 = Adam at lr)")
    input_init: str = _f("random", "how the per-entity tables start: random, or structural (random vectors averaged over 2-hop train neighbourhoods)",
                         choices=["random", "structural"], label="entity-table start")
    dropout: float = _f(0.5, "RGCN input dropout (both modes)", min=0.0, max=0.9, step=0.05)
    # 1 thread wins on small graphs (per-op overhead); big mini-batch steps are large matmuls.
    cpu_threads: int = _f(1, min=0, max=256, label="CPU threads (0 = torch default)")
    seed: int = _f(0, "seed of the graph, the split and the first training run", min=0, max=10_000)
    seeds: int = _f(1, "training runs per mode (seeds seed, seed + 1, ...; same graph and split)", min=1, max=10, label="training seeds")
    eval_slice: int = _f(0, "which disjoint block of the sampled validation triples is scored (with evaluated triples > 0)",
                         min=0, max=100, label="validation slice")
    device: str = _f("auto", hidden=True)

    @classmethod
    def smoke(cls, **kw) -> MinibatchConfig:
        return cls(**{"epochs": 3, **kw})



@dataclass
class ScaleConfig(MinibatchConfig):
    """Mini-batch training on a seeded synthetic graph of Hetionet v1.0's size (47k entities, 2.25M
    triples, 1.6M of them train; the real one needs a download), under a time budget, validation on a
    sampled 1,000 triples (2,000 queries).

    Defaults chosen on this graph's VALIDATION split (rung 5, 1 thread, 30 s training budget, 3 curve
    points; a 2-core box shared by 3 sessions, load 2.3-3.0), each run ``train_rung(split, LADDER[5],
    TrainConfig(...))`` as ``run_minibatch`` and the bench's child run it: ``bench/kg_minibatch.py --presets
    hetionet --seconds 30`` with a row's settings as flags (``--input-init random --embed-lr 0 --batch-size
    4096 --fanout 1`` = the old default) reproduces it, and trains the full graph beside it. Curves as (training s:
    validation MRR), points at ~10, 20, 30 s; the cluster-oracle ceiling of this sample is .074 (.032 before
    ``cluster_oracle_mrr`` stopped scoring a cluster as one tie, a figure trained models passed).

    * Entity tables started as independent noise (``input_init="random"``) stay flat whatever else changes:
      4096 positives at fan-out 1x1, Adam .01 (the old default): 11: .0005, 21: .0009, 32: .0007 (29 steps);
      + sparse Adagrad tables (``embed_lr``) .1 / .03 / .3: .0004-.0016; 1024 at 2x2: .0006, .0003, .0005 (81 steps); 512 at
      10x10 (94% of the nodes per step): flat; full-graph message passing, same loss: 3 steps in 30 s.
      Before: 260 s at 4096 / 1x1 stayed at .0005.
    * Tables started from the structure (``input_init="structural"``: 2-hop means of random vectors,
      ``nbkit.kg.models.structural_inputs``) rise: 4096 at 1x1, Adam .01: .0006, .0038, .0093; + Adagrad
      tables .03: .0006, .0067, .0204 (43 steps); 1024 at 2x2, Adam .01: .0089, .0255, .0364 (61 steps);
      512 at 3x3: .0385; 2048 at 2x2: .0366; 1024 at 3x3, Adagrad .01: .0454.
    * 1024 at 2x2 with sparse Adagrad tables (``embed_lr``; only touched rows updated: 2.7-2.9 steps/s vs 2.0
      with dense Adam): rate .03: .0132, .0398, .0491; **.01: .0116, .0446, .0577 (82 steps, the default)**; .005:
      .054; SparseAdam .01: .0512; .03 with 64 negatives instead of 256: .0427 (113 steps).
    * Type-table width 32 instead of 128 (Adam, 4096 at 1x1): .0021 vs .0093 — kept at 128. (SparseAdam and
      the width were measured through options since removed: neither won.)

    Validation: the full-graph forward now runs as one cached sparse-matrix product per layer (1.9-2.2 s vs
    6-8 s per embedding; a validation point 4.5 s vs 10-12 s), the best point's figures are reused instead of
    re-evaluated, and the filter index of the 2M known triples (8.5 s) is built once per run, not twice.
    ``run_minibatch(ScaleConfig())`` as notebook 01 runs it (graph build, oracle, 30 s training, 3 points):
    75 s wall / 75 CPU s at load 2.3 (the section took ~149 s before); .0172, .0487, .0570, 95 steps, 3.17
    steps/s, 29% of the nodes per step, peak RSS 2.66 GB (+1.63 GB, validation's full-graph forward included);
    the rise verdict holds (gain interval [.034, .046] ≥ .0037 = 5% of the ceiling, 2,000 queries). Seed 1
    (another graph and split): .0149 → .0593 in 88 steps (ceiling .0714), holds ([.038, .051]), 84 s at load 2.9.
    Building the structural start costs 1.7 CPU s on this graph (two sparse products, outside the budget).
    Full-graph mode, same loss (the bench, same run): 0.17 steps/s (40 s/step before the sparse-matrix
    path), peak RSS 2.55 vs 2.60 GiB mini-batch — at this size validation, not training, sets the peak."""

    source: str = _f("synthetic", choices=["dataset", "synthetic"], label="graph")
    batch_size: int = _default(MinibatchConfig, "batch_size", 1024)
    fanout: int = _default(MinibatchConfig, "fanout", 2)
    num_negatives: int = _f(256, min=1, max=4096, label="negatives (both modes)")
    epochs: int = _f(1000, min=1, max=2000)
    lr: float = _default(MinibatchConfig, "lr", 0.01)
    embed_lr: float = _default(MinibatchConfig, "embed_lr", 0.01)
    input_init: str = _default(MinibatchConfig, "input_init", "structural")
    dropout: float = _default(MinibatchConfig, "dropout", 0.0)
    eval_max_triples: int = _default(MinibatchConfig, "eval_max_triples", 1000)
    # The defaults above were chosen on validation slice 0 (the first 1,000 sampled triples); the curve the
    # scale claim judges is scored on slice 1, triples those choices never saw. Three training runs: the
    # claim's interval is across runs, not across one run's queries.
    eval_slice: int = _default(MinibatchConfig, "eval_slice", 1)
    seeds: int = _default(MinibatchConfig, "seeds", 3)
    compare_full: bool = _f(False, label="also train on the full graph (same loss, same budget)")
    eval_points: int = _f(3, "validate this many times within the time budget: the learning curve (one epoch is longer than the budget)",
                          min=0, max=50, label="validation points in the budget")
    # cpu_threads stays MinibatchConfig's 1: at the previous defaults (4096 positives, fan-out 1x1), 30 s budget,
    # 1 thread ran 1.19 steps/s, torch's default (2 threads) 0.26 on the loaded 2-core box (intra-op threads spin).

    @classmethod
    def smoke(cls, **kw) -> ScaleConfig:
        return cls(**{"entities": 3000, "triples": 20_000, "max_seconds": 5.0, "eval_max_triples": 500, "seeds": 2, **kw})


@dataclass
class PitfallConfig:
    """Pitfall detectors on deliberately broken inputs built from the dataset (and their clean twins)."""

    dataset: str = _f("umls", DATASET_HELP)
    seed: int = _f(0, min=0, max=10_000)

    @classmethod
    def smoke(cls, **kw) -> PitfallConfig:
        return cls(**kw)


def preset(cls, smoke: bool = False, **values):
    """``cls.smoke(**values)`` for a SMOKE run, else ``cls(**values)``; keys ``cls`` lacks are ignored,
    so a notebook can hand every config the same dataset / seed / device / chosen values."""
    names = {f.name for f in dataclasses.fields(cls)}
    values = {k: v for k, v in values.items() if k in names}
    return cls.smoke(**values) if smoke else cls(**values)
