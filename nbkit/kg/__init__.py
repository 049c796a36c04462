"""Knowledge-graph GNNs: typed biomedical KGs, reverse relations, RGCN, honest link-prediction metrics.

A newcomer's path: notebook 01 -> ``context`` -> ``experiments`` -> ``claims`` -> the domain modules.

* ``nbkit.kg.config``      - one dataclass per experiment (widget metadata, ``smoke()`` and ``full()``
  presets), ``Chosen`` (what the selection chose on validation) and ``TrainConfig``;
* ``nbkit.kg.context``     - ``KGContext`` (device, datasets, splits, the fixed AUC negatives, cached per
  context; every result it ran, by slug);
* ``nbkit.kg.experiments`` - ``REGISTRY`` and ``run_x(cfg, ctx, live) -> Result[XMetrics]``: load, selection
  (on validation), ablation, aggr, downstream, mini-batch / scale, pitfalls; ``run`` / ``panel`` / ``show``;
* ``nbkit.kg.metrics``     - the frozen metrics dataclasses the experiments return and the claims read;
* ``nbkit.kg.claims``      - the field notes' claims as declared specs, two-sided ``verdict_*`` functions,
  ``judge(ctx)`` and ``headline(ctx)``; ``field_notes`` - the notes' figures, written once;
* ``nbkit.kg.figures``     - the figures the experiments end with (losses and MRRs on axes of their own);
* ``nbkit.kg.triples``     - readers returning one typed triples table plus a ``LoadReport`` (files, RDF,
  PyKEEN's bundled UMLS and Kinships); ``hetionet`` (download and reader), ``synthetic`` (the seeded
  generator), ``datasets`` (``load_dataset``: a name or a path), ``rdf_bench`` (pyoxigraph vs rdflib);
* ``nbkit.kg.graph``       - indices, leak-free splits, the leakage meter, message graphs, ``HeteroData``;
* ``nbkit.kg.ladder``      - the ablation ladder's rungs, the model each builds, one run's ``RungResult``;
* ``nbkit.kg.models``      - the encoders/decoders of the ladder (GCN, typed hetero SAGE, RGCN, and
  ComplEx-N3 with reciprocal relations: rung 6, no message passing);
* ``nbkit.kg.train``       - training loops (full batch, mini-batch, rung 6);
* ``nbkit.kg.ranking``     - filtered ranking metrics (MRR, Hits@k) and AUC on fixed negatives;
* ``nbkit.kg.neighbor_sampler`` - a pure-torch PyG neighbour sampler for mini-batches;
* ``nbkit.kg.downstream``  - node embeddings -> logistic regression, 5-fold macro-F1;
* ``nbkit.kg.checks``      - pitfall detectors returning ``nbkit.findings.Finding``.

``import nbkit.kg`` loads none of them. ``models`` defines its ``torch.nn.Module`` classes at module level and
imports torch and torch_geometric at its top, as the modules that build and train models do through it;
``neighbor_sampler`` defines its PyG sampler subclass on first use (module ``__getattr__``).
"""

__all__ = [
    "config",
    "context",
    "experiments",
    "claims",
    "figures",
    "field_notes",
    "triples",
    "graph",
    "models",
    "train",
    "neighbor_sampler",
    "downstream",
    "checks",
]
