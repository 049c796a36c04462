"""DSPy signatures as tested contracts, on a real local LM (notebook 03).

Submodules (import them directly; nothing heavy is imported here), in a newcomer's reading order:

* ``config``      — one dataclass per experiment (fields via ``nbkit.experiment.param``, a ``smoke()``
  preset, the default profile's budgets); ``SessionConfig``, the context's options.
* ``context``     — ``SignaturesContext(DEVICE, smoke=, profile=, **options)``: data, splits, retrievers, the
  LM, module results evaluated once, every result by slug.
* ``experiments`` — ``REGISTRY`` of ``run_x(cfg, ctx, live) -> Result[XMetrics]``; ``run``/``panel``/``show``;
  each replicating experiment's unit and budget per profile (``Replicates``).
* ``metrics``     — the frozen ``XMetrics`` dataclasses the experiments return and the claims read.
* ``claims``      — the claims, a table of ``ClaimSpec`` rows each judged by its rule's data; ``judge(ctx)``,
  ``headline(ctx)``; ``field_notes`` — the notes' figures and sections, written once.
* ``serving``     — the context's LM: the local servers it starts, grammar copies, the accounting of calls.
* ``server``      — local servers on loopback: llama-cpp-python's (``LocalLMServer``, the choice on a CPU) or
  llama.cpp's batching ``llama-server`` (``LlamaCppServer``, on CUDA), one per core behind a dispatcher
  (``LocalLMPool``); ``llama_server`` is the launcher and supervisor
  (``python -m nbkit.signatures.llama_server``).
* ``lm``          — build a ``dspy.LM`` for the local servers or any LiteLLM/DSPy model; token-limit probes.
* ``contracts``   — the field notes' ``MedicalDiagnosis`` signature, a typed version, and the contract
  checker.
* ``cases``       — the medical cases (standard + colloquial phrasings) and the knowledge base; splits.
* ``retrieval``   — BM25 and MiniLM retrievers over the knowledge base, recall by slice.
* ``modules``     — ``Predict`` / ``ChainOfThought`` / ``HybridRetriever`` behind one signature.
* ``evaluation``  — adapters, metric, batch evaluation with contract accounting, per-question outcomes.
* ``pairing``     — two programs compared question by question (Newcombe's paired interval).
* ``compiling``   — BootstrapFewShot(+RandomSearch) with a real validation set.
* ``user_contract`` — your own signature, JSONL dev set and metric, with the same accounting.
"""
