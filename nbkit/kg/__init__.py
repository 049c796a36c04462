"""Knowledge-graph GNNs: typed biomedical KGs, reverse relations, RGCN, honest link-prediction metrics.

A newcomer's path: notebook 01 -> ``panels`` -> ``experiments`` -> the domain modules.

* ``nbkit.kg.config``      - one dataclass per experiment (widget metadata, ``smoke()`` presets), ``Chosen``
  (what the selection chose on validation) and ``TrainConfig``;
* ``nbkit.kg.experiments`` - ``REGISTRY``, ``KGContext`` (device, datasets, splits, cached per context) and
  ``run_x(cfg, ctx, live) -> Result[XMetrics]``: load, selection (on validation), ablation, aggr, downstream,
  mini-batch / scale, pitfalls;
* ``nbkit.kg.claims``      - the field notes' claims, two-sided ``verdict_*`` functions,
  ``claims() -> list[Claim]``;
* ``nbkit.kg.panels``      - ``panel(slug, ctx, ...)``: the generic experiment panel for notebook 01;
* ``nbkit.kg.triples``     - loaders returning one typed triples table plus a ``LoadReport``;
* ``nbkit.kg.graph``       - indices, leak-free splits, the leakage meter, message graphs, ``HeteroData``;
* ``nbkit.kg.models``      - the encoders/decoders of the ablation ladder (GCN, typed hetero SAGE, RGCN, and
  ComplEx-N3 with reciprocal relations: rung 6, no message passing);
* ``nbkit.kg.train``       - training (full batch / mini-batch), filtered ranking metrics and AUC;
* ``nbkit.kg.neighbor_sampler`` - a pure-torch PyG neighbour sampler for mini-batches;
* ``nbkit.kg.downstream``  - node embeddings -> logistic regression, 5-fold macro-F1;
* ``nbkit.kg.checks``      - pitfall detectors returning ``nbkit.findings.Finding``.

Every module imports torch / torch_geometric / pykeen inside its functions, so importing is instant.
"""

__all__ = [
    "config",
    "experiments",
    "claims",
    "panels",
    "triples",
    "graph",
    "models",
    "train",
    "neighbor_sampler",
    "downstream",
    "checks",
]
