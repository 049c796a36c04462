"""DSPy signatures as tested contracts, on a real local LM (notebook 03).

Submodules (import them directly; nothing heavy is imported here), in a newcomer's reading order:

* ``config``      — one dataclass per experiment (fields via ``nbkit.experiment.param``, ``smoke()`` presets).
* ``panels``      — ``panel(slug, ctx, smoke=SMOKE, **overrides)``: the generic panel over the registry.
* ``experiments`` — ``REGISTRY`` of ``run_x(cfg, ctx, live) -> Result[XMetrics]`` and ``SignaturesContext``
  (data, retrievers, the LM and its servers, dev-set results), ``save_load_roundtrip``, ``headline``.
* ``metrics``     — the frozen ``XMetrics`` dataclasses the experiments return and the claims read.
* ``claims``      — two-sided ``verdict_*`` functions returning ``Verdict``; ``claims(...) -> list[Claim]``.
* ``server``      — local servers on loopback: llama.cpp's batching ``llama-server`` (``LlamaCppServer``) or
  llama-cpp-python's (``LocalLMServer``, the fallback), one per core behind a dispatcher (``LocalLMPool``);
  ``llama_server`` is the launcher and supervisor (``python -m nbkit.signatures.llama_server``).
* ``lm``          — build a ``dspy.LM`` for the local servers or any LiteLLM/DSPy model; token-limit probes.
* ``contracts``   — the field notes' ``MedicalDiagnosis`` signature, a typed version, and the contract
  checker.
* ``cases``       — the medical cases (standard + colloquial phrasings) and the knowledge base; splits.
* ``retrieval``   — BM25 and MiniLM retrievers over the knowledge base, recall by slice.
* ``modules``     — ``Predict`` / ``ChainOfThought`` / ``HybridRetriever`` behind one signature.
* ``evaluation``  — adapters, metric, batch evaluation with contract accounting, per-question outcomes.
* ``compiling``   — BootstrapFewShot(+RandomSearch) with a real validation set, the colloquial-mix experiment.
* ``user_contract`` — your own signature, JSONL dev set and metric, with the same accounting.
"""
