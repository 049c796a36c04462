"""The ablation ladder: what each rung knows about the graph, the model it builds, what one run returns.

Rungs 1-5 add one thing each (node types, reverse relations, RGCN with relation-specific negatives,
negatives from all entities); rung 6 is the no-message-passing baseline (ComplEx-N3). Training lives in
:mod:`nbkit.kg.train`, ranking metrics in :mod:`nbkit.kg.ranking`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from nbkit.kg import models
from nbkit.kg.config import TrainConfig
from nbkit.kg.graph import KGSplit, build_hetero_data, message_graph

ENCODERS = ("gcn", "hetero_sage", "rgcn", "none")
NEGATIVES = ("uniform", "typed")


@dataclass(frozen=True)
class Rung:
    """One step of the ablation ladder: what the model knows about the graph."""

    key: int
    label: str
    typed: bool
    reverse: str
    encoder: str
    decoder: str
    negatives: str


LADDER: dict[int, Rung] = {
    1: Rung(
        1,
        "1 naive: one node type, GCN, undirected, uniform negatives",
        False,
        "undirected",
        "gcn",
        "dot",
        "uniform",
    ),
    2: Rung(
        2,
        "2 typed nodes (per-type embeddings, hetero SAGE, stated direction only)",
        True,
        "none",
        "hetero_sage",
        "dot",
        "uniform",
    ),
    3: Rung(3, "3 + explicit reverse relations (rel__inv)", True, "inverse", "hetero_sage", "dot", "uniform"),
    # "relational" = TrainConfig.decoder: DistMult, or ComplEx (DistMult in complex space, which can score
    # asymmetric relations); experiments.run_selection chooses between them on validation MRR.
    4: Rung(
        4,
        "4 RGCN + relation-specific (type-constrained) negatives + DistMult/ComplEx",
        True,
        "inverse",
        "rgcn",
        "relational",
        "typed",
    ),
    # Rung 5 differs from 4 only in the negatives: every entity, not just type-valid ones. Ranking is
    # over ALL entities, and type-constrained negatives never teach the model to push the others down.
    5: Rung(
        5, "5 = rung 4 with negatives from all entities", True, "inverse", "rgcn", "relational", "uniform"
    ),
    # Rung 6: the no-message-passing baseline the RGCN rungs are judged against (Lacroix et al. 2018):
    # ComplEx with reciprocal relations, 1-N cross-entropy over all entities, N3, Adagrad. Untyped.
    6: Rung(
        6,
        "6 ComplEx-N3, no message passing (reciprocal relations, 1-N cross-entropy, N3, Adagrad)",
        False,
        "none",
        "none",
        "complex_reciprocal",
        "uniform",
    ),
}
MESSAGE_PASSING_RUNGS = (4, 5)  # the RGCN rungs, compared with rung 6 by the message-passing claim
BASELINE_RUNG = 6


@dataclass
class RungResult:
    """One trained rung. ``metrics``: VALIDATION figures at the best validation epoch (``valid_mrr``,
    ``valid_hits_at_k``, ``valid_auc`` when validation negatives were given). ``test_metrics`` stays
    empty until :func:`score_test` is called — once, at the end, for the chosen model."""

    rung: int
    label: str
    metrics: dict[str, float]
    history: dict[str, list] = field(default_factory=dict)
    train_seconds: float = 0.0
    epochs_run: int = 0
    interrupted: bool = False
    best_epoch: int = 0
    seed: int = 0
    test_metrics: dict[str, float] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {
            "rung": self.rung,
            "seed": self.seed,
            "label": self.label,
            **self.metrics,
            **self.test_metrics,
            "epochs": self.epochs_run,
            "best_epoch": self.best_epoch,
            "train_s": round(self.train_seconds, 1),
        }


# ---------------------------------------------------------------------------------------------
# graph inputs and the model of a rung
# ---------------------------------------------------------------------------------------------
@dataclass
class ModelGraph:
    edge_index: Any
    edge_type: Any
    num_relations: int
    types: list[str]
    counts: list[int]
    edge_index_dict: dict | None = None

    def to(self, device):
        ei = (
            {k: v.to(device) for k, v in self.edge_index_dict.items()}
            if self.edge_index_dict is not None
            else None
        )
        return replace(
            self,
            edge_index=self.edge_index.to(device),
            edge_type=self.edge_type.to(device),
            edge_index_dict=ei,
        )


def model_graph(split: KGSplit, reverse: str, hetero: bool) -> ModelGraph:
    mg = message_graph(split, reverse)
    ei_dict = None
    if hetero:
        import warnings

        with warnings.catch_warnings():
            # PyG warns about '__' in 'rel__inv'; it matters only for to_hetero's string keys, unused here.
            warnings.filterwarnings("ignore", message=".*double underscores.*")
            ei_dict = build_hetero_data(split, reverse).edge_index_dict
    return ModelGraph(
        mg.edge_index,
        mg.edge_type,
        mg.num_relations,
        list(split.entity_types),
        [len(split.entities[t]) for t in split.entity_types],
        ei_dict,
    )


def build_model(split: KGSplit, rung: Rung, cfg: TrainConfig, graph: ModelGraph, features=None):
    model = _build_model(split, rung, cfg, graph, features)
    models.remove_generated_modules()  # imported by now: PyG's generated files are not read again
    return model


def _build_model(split: KGSplit, rung: Rung, cfg: TrainConfig, graph: ModelGraph, features=None):
    if rung.encoder == "none":
        import torch

        node_input = models.NodeInput(split, cfg.complex_dim, typed=False)
        dec = models.DECODERS[rung.decoder](split.num_relations, cfg.complex_dim)
        with torch.no_grad():  # small initial factors, as in the paper: N3 and Adagrad start near zero
            node_input.table.weight.normal_(std=cfg.complex_init)
            dec.rel.normal_(std=cfg.complex_init)
        return models.LinkPredictor(node_input, models.NoEncoder(), dec)
    if not cfg.embed_lr >= 0:
        raise ValueError(
            f"embed_lr must be >= 0 (0 = the entity tables train with Adam at lr), got {cfg.embed_lr!r}"
        )
    width = rung_width(rung, cfg)
    node_input = models.NodeInput(
        split, width, rung.typed, features=features, sparse=cfg.embed_lr > 0 and cfg.batch_size > 0
    )
    if cfg.input_init == "structural":
        node_input.init_from(
            models.structural_inputs(graph.edge_index, split.num_nodes, node_input.max_dim(), seed=cfg.seed)
        )
    elif cfg.input_init != "random":
        raise ValueError(f"input_init must be 'random' or 'structural', got {cfg.input_init!r}")
    if rung.encoder == "gcn":
        enc = models.GCNEncoder(cfg.hidden, cfg.layers)
    elif rung.encoder == "hetero_sage":
        enc = models.HeteroSAGEEncoder(
            cfg.hidden, list(graph.edge_index_dict), cfg.layers, type_aggr=cfg.type_aggr
        )
    elif rung.encoder == "rgcn":
        enc = models.RGCNEncoder(
            width,
            graph.num_relations,
            cfg.layers,
            num_bases=cfg.num_bases,
            aggr=cfg.aggr,
            dropout=cfg.dropout,
        )
    else:
        raise ValueError(f"encoder must be one of {ENCODERS}, got {rung.encoder!r}")
    name = cfg.decoder if rung.decoder == "relational" else rung.decoder
    if name not in models.DECODERS:
        raise ValueError(f"decoder must be one of {sorted(models.DECODERS)}, got {name!r}")
    dec = models.DECODERS[name](split.num_relations, width)
    return models.LinkPredictor(node_input, enc, dec)


def rung_width(rung: Rung, cfg: TrainConfig) -> int:
    """The width a rung's model runs at: ``cfg.rgcn_hidden`` for the RGCN rungs when set (their own
    width, chosen on validation like rung 6's), else ``cfg.hidden``; rung 6 has ``cfg.complex_dim``."""
    if rung.encoder == "none":
        return cfg.complex_dim
    if rung.encoder == "rgcn" and cfg.rgcn_hidden:
        return cfg.rgcn_hidden
    return cfg.hidden
