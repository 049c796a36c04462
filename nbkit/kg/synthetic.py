"""The seeded synthetic KG: gene / drug / disease triples with long-tailed relation counts and a latent
cluster per entity, so tails are learnable (up to their cluster) and the ceiling MRR is known."""

from __future__ import annotations

from nbkit.errors import UsageError
from nbkit.kg.triples import COLUMNS, TYPE_COLUMNS, KGTriples, LoadReport, finalize

SYNTHETIC_SCHEMA = (
    # (head_type, relation, tail_type, relative frequency): long-tailed on purpose
    ("gene", "interacts", "gene", 40),
    ("drug", "targets", "gene", 20),
    ("gene", "associates", "disease", 15),
    ("drug", "treats", "disease", 8),
    ("disease", "resembles", "disease", 4),
    ("drug", "causes", "disease", 2),
    ("gene", "regulates", "gene", 1),
)


def synthetic_kg(
    num_entities: int = 300, num_triples: int = 3000, seed: int = 0, num_clusters: int = 6
) -> KGTriples:
    """A seeded gene/drug/disease KG with long-tail relation counts and learnable structure.

    Each entity has a latent cluster; a relation links clusters through a fixed random permutation,
    so tails are predictable from (head, relation) — link prediction can learn it, chance cannot.
    """
    import numpy as np
    import pandas as pd

    for name, value, least in (
        ("num_entities", num_entities, 3),
        ("num_triples", num_triples, 1),
        ("num_clusters", num_clusters, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise UsageError(f"synthetic_kg: {name}={value!r}; expected an integer >= {least}")
    rng = np.random.default_rng(seed)
    share = {"gene": 0.6, "drug": 0.2, "disease": 0.2}
    ents = {
        t: [f"{t}_{i:06d}" for i in range(max(num_clusters, int(num_entities * s)))] for t, s in share.items()
    }
    cluster = {t: rng.integers(0, num_clusters, len(v)) for t, v in ents.items()}
    weights = np.array([w for *_, w in SYNTHETIC_SCHEMA], dtype=float)
    counts = rng.multinomial(num_triples, weights / weights.sum())
    parts = []
    # Vectorised per relation so Hetionet-sized graphs (millions of triples) generate in seconds.
    for (ht, rel, tt, _), n in zip(SYNTHETIC_SCHEMA, counts, strict=False):
        perm = rng.permutation(num_clusters)
        h = rng.integers(len(ents[ht]), size=n)
        follow = rng.random(n) < 0.9
        target_c = np.where(follow, perm[cluster[ht][h]], rng.integers(num_clusters, size=n))
        members = np.argsort(cluster[tt], kind="stable")  # tail entities grouped by cluster
        size = np.bincount(cluster[tt], minlength=num_clusters)
        first = np.concatenate([[0], np.cumsum(size)[:-1]])
        ok = size[target_c] > 0
        h, target_c = h[ok], target_c[ok]
        t = members[first[target_c] + (rng.random(len(h)) * size[target_c]).astype(np.int64)]
        parts.append(
            pd.DataFrame(
                {
                    "head": np.asarray(ents[ht], dtype=object)[h],
                    "relation": rel,
                    "tail": np.asarray(ents[tt], dtype=object)[t],
                    "head_type": ht,
                    "tail_type": tt,
                }
            )
        )
    df = pd.concat(parts, ignore_index=True)[list(COLUMNS + TYPE_COLUMNS)]
    report = LoadReport(f"synthetic_kg(num_entities={num_entities}, num_triples={num_triples}, seed={seed})")
    kg = finalize(df, report, name="synthetic")
    kg.clusters = {e: int(c) for t in ents for e, c in zip(ents[t], cluster[t], strict=True)}
    return kg
