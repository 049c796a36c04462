"""Modules behind one signature: ``dspy.Predict``, ``dspy.ChainOfThought`` and ``HybridRetriever``.

All three take the same inputs (``symptoms``) and return the same output fields, so any of them can serve
the contract and be swapped without touching callers — the field notes' "model-agnostic" point, tested.

Note on ``ChainOfThought``: it prepends an output field named ``reasoning``; the field notes' signature
already has one, so DSPy moves it first (keeping our desc). The thinking step *is* the contract's reasoning
field, and its ≤ 50-word bound then limits the chain of thought itself.
"""

from __future__ import annotations

from typing import Any

MODULES = ("predict", "cot", "hybrid")


def _hybrid_class():
    import dspy

    class HybridRetriever(dspy.Module):
        """Retrieve the k best knowledge-base entries for the symptoms, then predict with them as context."""

        def __init__(self, signature, retriever, k: int = 3):
            super().__init__()
            self.retriever = retriever
            self.k = k
            with_context = signature.prepend(
                name="context",
                field=dspy.InputField(desc="Knowledge-base entries that may match the symptoms"),
                type_=list[str],
            )
            self.predict = dspy.Predict(with_context)

        def forward(self, symptoms: str):
            passages = self.retriever.passages(symptoms, self.k)
            prediction = self.predict(context=passages, symptoms=symptoms)
            # A new Prediction, not the traced one: DSPy's bootstrap builds each demo from the trace's
            # inputs + outputs, and a `context` output beside the `context` input collides.
            return dspy.Prediction(**prediction.toDict(), context=passages)

    return HybridRetriever


_HYBRID = None


def HybridRetriever(signature, retriever, k: int = 3):  # noqa: N802  (factory named like the class it builds)
    """A ``HybridRetriever`` module (the class is created on first use so importing stays instant)."""
    global _HYBRID
    if _HYBRID is None:
        _HYBRID = _hybrid_class()
    return _HYBRID(signature, retriever, k)


def build_module(kind: str, signature, retriever: Any = None, k: int = 3):
    import dspy

    if kind == "predict":
        return dspy.Predict(signature)
    if kind == "cot":
        return dspy.ChainOfThought(signature)
    if kind == "hybrid":
        if retriever is None:
            raise ValueError(
                "the 'hybrid' module needs a retriever (nbkit.signatures.retrieval.build_retriever)"
            )
        return HybridRetriever(signature, retriever, k)
    raise ValueError(f"unknown module {kind!r}; expected one of {MODULES}")
