"""Knowledge-graph GNNs: typed biomedical KGs, reverse relations, RGCN, honest link-prediction metrics.

Modules (each imports torch / torch_geometric / pykeen inside its functions, so importing is instant):

* ``nbkit.kg.triples``  - loaders returning one typed triples table plus a ``LoadReport``
  (triples files, RDF, the UMLS KG bundled in PyKEEN, Hetionet v1.0, a seeded synthetic KG);
* ``nbkit.kg.graph``    - entity/relation indices, leak-free splits, the leakage meter, message
  graphs with explicit inverse relations or naive undirected merging, ``HeteroData`` building;
* ``nbkit.kg.models``   - the encoders/decoders of the ablation ladder (GCN, typed hetero SAGE, RGCN);
* ``nbkit.kg.train``    - full-batch training, filtered ranking metrics and AUC, the ladder runner;
* ``nbkit.kg.downstream`` - node embeddings -> logistic regression, 5-fold macro-F1;
* ``nbkit.kg.checks``   - pitfall detectors that return findings with evidence;
* ``nbkit.kg.claims``   - the seed's claims next to measured values, with computed verdicts;
* ``nbkit.kg.panel``    - widget panels for notebook 01.
"""

__all__ = ["triples", "graph", "models", "train", "downstream", "checks", "claims", "panel"]
