"""Downstream check (field notes §3.1 step 3): node embeddings -> logistic regression, 5-fold macro-F1.

The labels must be unseen by the embedding run: on UMLS we predict each entity's semantic group
from embeddings trained with ONE node type (type was not an input). A random-embedding control of
the same width is scored the same way, so the F1 is read against what chance structure gives.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from nbkit.kg.ladder import LADDER
from nbkit.kg.train import train_rung


def embedding_f1(embeddings, labels, *, folds: int = 5, seed: int = 0) -> dict[str, Any]:
    """Stratified k-fold macro-F1 of a logistic regression; classes with < ``folds`` members are
    dropped (and reported), since stratification cannot place them in every fold."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X = np.asarray(embeddings, dtype=np.float64)
    y = np.asarray(labels)
    if len(X) != len(y):
        raise ValueError(f"{len(X)} embeddings but {len(y)} labels")
    counts = Counter(y.tolist())
    keep_classes = sorted(c for c, n in counts.items() if n >= folds)
    dropped = {str(c): n for c, n in sorted(counts.items()) if n < folds}
    mask = np.isin(y, keep_classes)
    if len(keep_classes) < 2:
        raise ValueError(f"need at least 2 classes with >= {folds} members, have {dict(counts)}")
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    scores = cross_val_score(clf, X[mask], y[mask], cv=cv, scoring="f1_macro")
    return {
        "macro_f1": float(scores.mean()),
        "macro_f1_std": float(scores.std()),
        "fold_scores": [float(s) for s in scores],
        "classes": len(keep_classes),
        "samples": int(mask.sum()),
        "dropped_small_classes": dropped,
    }


def downstream_skip_reason(labels: dict[str, str], folds: int = 5) -> str:
    """Why the downstream check cannot run on these labels ("" when it can): it needs at least two
    classes with ``folds`` members each (an untyped KG has one class)."""
    counts = Counter(labels.values())
    big = sorted(c for c, n in counts.items() if n >= folds)
    if len(big) >= 2:
        return ""
    return (
        f"the labels (node types) give {len(counts)} class(es), {len(big)} with >= {folds} members; "
        f"predicting a node type needs at least 2 such classes (an untyped triples file has one)"
    )


def downstream_check(
    split, cfg, *, labels: dict[str, str], rung_key: int = 5, device=None, progress: bool = True, live=None
) -> dict[str, Any]:
    """Train ``rung_key`` WITHOUT node types (one type for all entities), then score embeddings.

    ``labels`` maps entity name -> label (e.g. UMLS semantic group). Returns F1 for the trained
    embeddings and for a random control.
    """
    import torch

    untyped = split_without_types(split)
    rung = dataclasses.replace(
        LADDER[rung_key],
        typed=False,
        negatives="uniform",
        label=f"{LADDER[rung_key].label} [untyped, for downstream]",
    )
    res, model, graph = train_rung(
        untyped, rung, cfg, device=device, progress=progress, live=live, trace_prefix="downstream"
    )
    model.eval()
    with torch.no_grad():
        z = model.embed(graph).cpu()
    names = untyped.entity_names()
    missing = [n for n in names if n not in labels]
    if missing:
        raise KeyError(f"no label for {len(missing)} entities (e.g. {missing[:3]})")
    y = [labels[n] for n in names]
    trained = embedding_f1(z.numpy(), y, seed=cfg.seed)
    g = torch.Generator().manual_seed(cfg.seed)
    control = embedding_f1(torch.randn(z.shape, generator=g).numpy(), y, seed=cfg.seed)
    return {
        "trained": trained,
        "random_control": control,
        "link_valid_mrr_untyped": res.metrics["valid_mrr"],
        "train_seconds": res.train_seconds,
    }


def split_without_types(split):
    """The same split with every entity given the single type ``entity`` (ids re-sorted by name)."""
    import torch

    names = split.entity_names()
    order = sorted(range(len(names)), key=lambda i: names[i])
    new_id = torch.empty(len(names), dtype=torch.long)
    new_id[torch.tensor(order)] = torch.arange(len(names))

    def remap(tr):
        return torch.stack([new_id[tr[:, 0]], tr[:, 1], new_id[tr[:, 2]]], 1) if len(tr) else tr

    return dataclasses.replace(
        split,
        entity_types=["entity"],
        entities={"entity": [names[i] for i in order]},
        train=remap(split.train),
        valid=remap(split.valid),
        test=remap(split.test),
        node_type=torch.zeros(len(names), dtype=torch.long),
    )
