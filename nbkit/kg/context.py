"""The KG theme's one context: what notebook 01's experiments share.

``KGContext(device, *, smoke=False, profile="default")`` resolves the device once and caches datasets,
splits and the fixed AUC negatives per (dataset file, seed), so the sections share them; every result
it ran is kept by slug (``ctx.results``) for ``claims.judge(ctx)``. Nothing a run trained is kept for a
later run to reuse: a choice's runs never stand in for the runs that judge it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from nbkit.experiment import Context
from nbkit.kg import graph as kgg
from nbkit.kg.datasets import load_dataset
from nbkit.kg.ranking import eval_negatives

if TYPE_CHECKING:
    from nbkit.kg.graph import KGSplit
    from nbkit.kg.triples import KGTriples

__all__ = ["EVAL_NEGATIVES_SEED", "KGContext"]

EVAL_NEGATIVES_SEED = 12345  # the fixed AUC negatives: the same pairs for every rung and seed


def _stamp(dataset: str):
    """Cache key part that changes when a dataset FILE changes (bundled names never do)."""
    p = Path(dataset).expanduser()
    if p.is_file():
        st = p.stat()
        return (str(p.resolve()), st.st_mtime_ns, st.st_size)
    return dataset


class KGContext(Context):
    """What notebook 01's experiments share: the device, loaded datasets and splits, the fixed AUC
    negatives. Cached per context; opened as ``KGContext(DEVICE, smoke=SMOKE, profile=PROFILE)``."""

    def kg(self, dataset: str) -> KGTriples:
        """The triples table of ``dataset``."""
        return self.cached(("kg", _stamp(dataset)), lambda: load_dataset(dataset))

    def split(self, dataset: str, seed: int = 0) -> KGSplit:
        """The split of ``dataset`` (per seed; a shipped split column wins)."""
        return self.cached(
            ("split", _stamp(dataset), seed), lambda: kgg.split_kg(self.kg(dataset), seed=seed)
        )

    def negatives(self, dataset: str, seed: int, which: str):
        """One filtered corruption per ``which`` triple, fixed: the AUC of every rung is on the same pairs."""
        key = ("negatives", _stamp(dataset), seed, which)
        return self.cached(key, lambda: eval_negatives(self.split(dataset, seed), which, EVAL_NEGATIVES_SEED))
