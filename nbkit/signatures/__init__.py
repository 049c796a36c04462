"""DSPy signatures as tested contracts, on a real local LM (notebook 03).

Submodules (import them directly; nothing heavy is imported here):

* ``server``     — start/stop llama-cpp-python's OpenAI-compatible server on loopback, tokens/s.
* ``llama_server`` — the server launcher (``python -m nbkit.signatures.llama_server``).
* ``lm``         — build a ``dspy.LM`` for the local server or any LiteLLM/DSPy model; token-limit checks.
* ``contracts``  — the seed's ``MedicalDiagnosis`` signature, a typed version, and the contract checker.
* ``cases``      — the medical cases (standard + colloquial phrasings) and the knowledge base; splits.
* ``retrieval``  — BM25 and MiniLM retrievers over the knowledge base, recall by slice.
* ``modules``    — ``Predict`` / ``ChainOfThought`` / ``HybridRetriever`` behind one signature.
* ``evaluation`` — metric, batch evaluation with contract accounting, per-adapter failure counts.
* ``compiling``  — BootstrapFewShot(+RandomSearch) with a real validation set, the colloquial-mix experiment.
* ``panels``     — parameter dataclasses and run functions the notebook's widget panels call.
"""
