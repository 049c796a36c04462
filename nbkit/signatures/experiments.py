"""Notebook 03's experiments: ``run_x(cfg, live=None, *, session) -> Result``, one per config in ``config.py``.

A :class:`SignatureSession` owns what every experiment shares — the LM (and the local llama.cpp servers it
started), the data, the splits and the retrievers — so :func:`start_session` is called once and each
experiment takes it as the keyword ``session``. Every experiment makes real LM calls and returns a
:class:`nbkit.result.Result`: ``metrics`` (JSON-able, what the notebook records and ``claims.py`` decides
on, including per-question outcomes so two programs can be compared question by question), ``table``,
``figure``, and ``data`` (EvalResults and programs a later cell needs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import time
from dataclasses import dataclass, field
from typing import Any

from nbkit.result import Result
from nbkit.signatures.config import (
    AskConfig,
    CompileConfig,
    ContractsConfig,
    HistoryConfig,
    ModulesConfig,
    RetrievalConfig,
    SessionConfig,
    TokenLimitConfig,
    UserContractConfig,
)
from nbkit.signatures.contracts import VIOLATION_KINDS, check_contract, diagnoses_of
from nbkit.signatures.evaluation import make_adapter
from nbkit.signatures.modules import MODULES


@dataclass
class SignatureSession:
    handle: Any  # nbkit.signatures.lm.LMHandle
    kb: Any
    cases: list
    splits: Any
    seed: int = 0
    retriever_kind: str = "bm25"
    num_threads: int = 1
    device: str = "cpu"
    results: dict = field(default_factory=dict)
    _retrievers: dict = field(default_factory=dict)
    _lm_copies: dict = field(default_factory=dict)

    @property
    def lm(self):
        return self.handle.lm

    @property
    def server(self):
        return self.handle.server

    def retriever(self, kind: str | None = None):
        from nbkit.signatures.retrieval import build_retriever

        kind = kind or self.retriever_kind
        if kind not in self._retrievers:
            self._retrievers[kind] = build_retriever(kind, self.kb, device=self.device)
        return self._retrievers[kind]

    def signature(self, name: str = "typed"):
        from nbkit.signatures.contracts import signature_by_name

        return signature_by_name(name)

    def module(self, kind: str, signature: str = "typed"):
        from nbkit.signatures.modules import build_module

        return build_module(kind, self.signature(signature), self.retriever() if kind == "hybrid" else None)

    def dev_cases(self, n_cases: int = 0) -> list:
        """The first ``n_cases`` dev cases; 0 means all of them."""
        if n_cases < 0:
            raise ValueError(f"n_dev must be >= 0 (0 = every dev case), got {n_cases}")
        return self.splits.dev[:n_cases] if n_cases else list(self.splits.dev)

    def dev_examples(self, n_cases: int = 0):
        from nbkit.signatures.cases import to_examples

        return to_examples(self.dev_cases(n_cases))

    def metric(self, signature: str = "typed"):
        from nbkit.signatures.evaluation import make_metric

        return make_metric(self.kb, tuple(self.signature(signature).output_fields))

    def evaluate(self, program, examples, *, adapter: str = "chat", label: str = "", signature: str = "typed", progress: bool = True):
        from nbkit.signatures.evaluation import evaluate_program

        adapter = self.resolve_adapter(adapter)
        return evaluate_program(
            program, examples, lm=self.lm_for(adapter, signature), kb=self.kb, adapter=make_adapter(adapter), label=label,
            num_threads=self.num_threads, output_fields=tuple(self.signature(signature).output_fields),
            server=self.server, progress=progress,
        )  # fmt: skip

    def evaluate_module(self, kind: str, signature: str, adapter: str, n_dev: int, label: str = ""):
        """A module's dev-set result, computed once per (module, signature, adapter, n_dev) in this session."""
        adapter = self.resolve_adapter(adapter)
        key = f"module:{kind}:{signature}:{adapter}:{n_dev}"
        if key not in self.results:
            self.results[key] = self.evaluate(self.module(kind, signature), self.dev_examples(n_dev), adapter=adapter,
                                              label=label or kind, signature=signature)  # fmt: skip
        return self.results[key]

    def lm_for(self, adapter: str, signature: str = "typed"):
        """The LM to use with ``adapter``: for ``json_grammar`` a copy that sends the signature's JSON schema.

        The local server turns the schema into a grammar (``server.schema_constraint``: llama-cpp-python
        gets ``response_format={"type": "json_object", "schema": ...}``, llama-server the same grammar
        built by llama-cpp-python's converter), so the decoder can only emit JSON of the contract's *shape*
        (fields, types). Bounds (confidence in [0, 1], <= 50 words) are not part of the grammar and still
        have to be checked after parsing.
        """
        if adapter != "json_grammar":
            return self.lm
        if self.server is None:
            raise ValueError("adapter 'json_grammar' needs the local llama.cpp server (LM_MODEL='local'); use 'json' for other models")
        sig = self.signature(signature) if isinstance(signature, str) else signature  # a name, or a user's signature class
        key = signature if isinstance(signature, str) else f"{sig.__name__}@{id(sig)}"
        if key not in self._lm_copies:
            from dspy.adapters.json_adapter import _get_structured_outputs_response_format

            from nbkit.signatures.server import schema_constraint

            schema = _get_structured_outputs_response_format(sig).model_json_schema()
            self._lm_copies[key] = self.lm.copy(**schema_constraint(self.server.kind, schema))
        return self._lm_copies[key]

    def history(self) -> list[dict]:
        """Every call this session's LMs made (the base LM and its grammar copies), oldest first."""
        entries = [e for lm in (self.lm, *self._lm_copies.values()) for e in lm.history]
        return sorted(entries, key=lambda e: str(e.get("timestamp", "")))

    def calls_summary(self) -> dict[str, int]:
        """LM calls so far: ``served`` by the LM in this run (their completion tokens, the longest, how many
        exceeded ``max_tokens``) and answered ``from_cache`` (DSPy's cache returns no usage for those: a
        cached answer was generated, and counted, by the run that first served it)."""
        entries = self.history()
        served = [int((e.get("usage") or {}).get("completion_tokens") or 0) for e in entries if e.get("usage")]
        return {"calls": len(entries), "served": len(served), "from_cache": len(entries) - len(served),
                "completion_tokens": sum(served), "max_completion_tokens": max(served, default=0),
                "over_max_tokens": sum(t > self.handle.max_tokens for t in served), "max_tokens": self.handle.max_tokens}  # fmt: skip

    def resolve_adapter(self, adapter: str) -> str:
        if adapter == "auto":
            return "json_grammar" if self.server is not None else "chat"
        return adapter

    def close(self) -> None:
        self.handle.close()


def start_session(cfg: SessionConfig | None = None) -> SignatureSession:
    """Load and validate the data first (cheap, fails fast), then start the LM once for every experiment.

    The device is resolved here, once. With the local model, ``cfg.servers`` single-threaded servers
    (0 = one per usable core) sit behind one dispatcher: llama.cpp's ``llama-server`` with ``cfg.slots``
    requests decoded together in each (``cfg.server="auto"`` when ``make setup`` built it), else
    llama-cpp-python's server, one request each. DSPy then evaluates with as many threads as the servers
    have slots, so the batch stays full (see ``server.LocalLMPool``). On CUDA one server offloads every
    layer instead (``--n-gpu-layers``; the fallback needs a CUDA build of llama-cpp-python, see README).
    """
    from nbkit.device import pick_device
    from nbkit.procs import usable_cores
    from nbkit.signatures.cases import load_cases, load_knowledge_base, split_cases
    from nbkit.signatures.lm import LOCAL, make_lm
    from nbkit.signatures.server import resolve_server_kind

    cfg = cfg or SessionConfig()
    device = pick_device(cfg.device)
    kb = load_knowledge_base(cfg.kb_path or None)
    cases = load_cases(cfg.cases_path or None, kb)
    splits = split_cases(cases, cfg.seed)
    handle = make_lm(cfg.lm_model, api_base=cfg.api_base or None, api_key_env=cfg.api_key_env or None, max_tokens=cfg.max_tokens,
                     server_kwargs=local_server_kwargs(cfg, device.type, resolve_server_kind(cfg.server) if cfg.lm_model == LOCAL else cfg.server,
                                                       len(usable_cores())), cache=cfg.cache)  # fmt: skip
    # A remote API serves requests concurrently on its own; the local pool serves `capacity` at a time.
    threads = handle.server.capacity if cfg.lm_model == LOCAL else 4
    return SignatureSession(handle, kb, cases, splits, seed=cfg.seed, num_threads=threads, device=str(device))


def local_server_kwargs(cfg: SessionConfig, device_type: str, kind: str, cores: int) -> dict:
    """``LocalLMPool``'s arguments for ``cfg`` on ``device_type`` ("cpu"/"cuda") with ``kind`` of server and ``cores`` usable cores.

    On CUDA: one server with every layer on the GPU (llama-server: ``--n-gpu-layers all``; llama-cpp-python:
    ``--n_gpu_layers -1``). On CPU: ``cfg.servers`` servers (0 = one per core), one thread each, no GPU layers.
    """
    on_cuda = device_type == "cuda"
    kwargs: dict[str, Any] = {"n_ctx": cfg.n_ctx, "n_servers": 1 if on_cuda else (cfg.servers or cores), "kind": kind}
    if kind == "llama-server":
        kwargs.update(slots=cfg.slots, n_gpu_layers="all" if on_cuda else 0)
    else:
        kwargs["extra_args"] = ("--n_gpu_layers", "-1") if on_cuda else ()
    return kwargs


def _plain(value):
    """Round floats for the record; NaN stays NaN."""
    return round(value, 4) if isinstance(value, float) and value == value else value


# -- the token limit and the runaway ----------------------------------------------------------
def run_token_limit(cfg: TokenLimitConfig, live=None, *, session: SignatureSession) -> Result:
    """Which field DSPy puts on the wire, whether the limit reaches nbkit's server, and the stock server's runaway.

    The runaway is reproduced, not asserted: a *stock* llama-cpp-python server (nbkit's field mapping off)
    with a small context receives the same DSPy request with ``max_tokens=limit``; it ignores DSPy's
    ``max_completion_tokens`` and generates until EOS or a full context. ``stock_n_ctx`` bounds the run
    (the issue's ~3,800 tokens came from a 4,096-token context).
    """
    import pandas as pd

    from nbkit.signatures.lm import check_token_limit, dspy_request_usage, wire_token_fields

    limit = cfg.limit
    m: dict[str, Any] = {"limit": limit, "dspy_wire_fields": wire_token_fields(limit)}
    if session.server is not None:
        prompt = "Write a long story about a dragon."
        m["nbkit_max_tokens"] = session.server.complete(prompt, max_tokens=limit).completion_tokens
        m["nbkit_max_completion_tokens"] = session.server.complete(prompt, max_tokens=limit, field="max_completion_tokens").completion_tokens
        speed = session.server.tokens_per_s(max_tokens=96)
        m["lm_tokens_per_s_one_stream"] = round(speed.tokens_per_s, 2)
    m["dspy_through_session"] = check_token_limit(session.lm, limit)["completion_tokens"]
    if cfg.stock_server and session.server is not None:
        from nbkit.signatures.server import LocalLMServer

        fixed = dspy_request_usage(session.server, limit)  # the same request through nbkit's launcher
        m["dspy_prompt_tokens"] = fixed["prompt_tokens"]
        start = time.perf_counter()
        with LocalLMServer(session.server.model_path, n_ctx=cfg.stock_n_ctx, n_threads=1, stock=True) as stock:
            usage = dspy_request_usage(stock, limit)
        m["stock_n_ctx"] = cfg.stock_n_ctx
        m["stock_context_full"] = usage["context_full"]
        # A request that fills the context generated n_ctx - prompt tokens before the server gave up.
        m["stock_dspy_tokens"] = cfg.stock_n_ctx - fixed["prompt_tokens"] if usage["context_full"] else usage["completion_tokens"]
        m["stock_seconds"] = round(time.perf_counter() - start, 1)
    rows = [{"request": k, "completion tokens": v} for k, v in m.items() if k.startswith(("nbkit_", "dspy_through", "stock_dspy"))]
    table = pd.DataFrame(rows)
    if live is not None:
        for r in rows:
            live.add("completion tokens", r["request"], r["completion tokens"])
    return Result(metrics=m, table=table)


# -- retrieval: chosen on validation ----------------------------------------------------------
def run_retrieval(cfg: RetrievalConfig, live=None, *, session: SignatureSession) -> Result:
    """Recall@k by slice on the validation split for each retriever; the best colloquial recall there
    (ties: the better standard recall, then the order of ``cfg.retrievers``) becomes the session's
    retriever. The chosen one's recall on the test split is computed once, after the choice."""
    import pandas as pd

    from nbkit.signatures.retrieval import recall_at_k

    if not cfg.retrievers:
        raise ValueError("choose at least one retriever")
    rows = []
    for kind in cfg.retrievers:
        t0 = time.perf_counter()
        recall = recall_at_k(session.retriever(kind), session.splits.val, cfg.k)
        rows.append({"retriever": kind, "split": "val", **{f"recall@{cfg.k} {s}": v for s, v in recall.items()}, "seconds": time.perf_counter() - t0})
        if live is not None:
            for s, v in recall.items():
                live.add(f"val recall@{cfg.k} {s}", kind, v)
    col, std = f"recall@{cfg.k} colloquial", f"recall@{cfg.k} standard"
    chosen = max(rows, key=lambda r: (r[col], r[std], -cfg.retrievers.index(r["retriever"])))["retriever"]
    session.retriever_kind = chosen
    test = recall_at_k(session.retriever(chosen), session.splits.test, cfg.k)
    rows.append({"retriever": chosen, "split": "test (chosen, once)", **{f"recall@{cfg.k} {s}": v for s, v in test.items()}})
    metrics = {"chosen": chosen, "chosen_on": "val", "val_cases": len(session.splits.val), "test_cases": len(session.splits.test),
               "val": {r["retriever"]: {k: _plain(v) for k, v in r.items() if k.startswith("recall")} for r in rows[:-1]},
               "test_of_chosen": {k: _plain(v) for k, v in test.items()}}  # fmt: skip
    return Result(metrics=metrics, table=pd.DataFrame(rows))


# -- 1. modules behind one signature ----------------------------------------------------------
def run_modules(cfg: ModulesConfig, live=None, *, session: SignatureSession) -> Result:
    import plotly.graph_objects as go

    from nbkit.signatures.evaluation import score_table

    adapter = session.resolve_adapter(cfg.adapter)
    results = {}
    for kind in cfg.modules:
        res = session.evaluate_module(kind, cfg.signature, adapter, cfg.n_dev)
        results[kind] = res
        if live is not None:
            for slice_name, score in res.score_by_slice().items():
                live.add(f"hit@3 {slice_name}", kind, score)
            live.add("contract violation rate", kind, res.violation_rate)
    table = score_table(results)
    n = len(session.dev_cases(cfg.n_dev)) * 2
    fig = go.Figure(layout=dict(title=f"Modules behind the {cfg.signature} signature ({adapter} adapter, {n} dev questions each)",
                                barmode="group", yaxis=dict(title="rate", range=[0, 1.05]), template="plotly_white", height=380))  # fmt: skip
    for col in ("hit@3 standard", "hit@3 colloquial", "contract violation rate"):
        fig.add_bar(name=col, x=table["program"].tolist(), y=table[col].tolist())
    metrics = {
        "adapter": adapter, "signature": cfg.signature,
        "dev_questions_evaluated": {k: len(r.records) for k, r in results.items()},
        "scores": {k: {"hit@3": _plain(r.score), **{s: _plain(v) for s, v in r.score_by_slice().items()},
                       "mentions_expected": _plain(r.mention_rate), "contract_violation_rate": _plain(r.violation_rate)}
                   for k, r in results.items()},
        "questions": {k: r.questions() for k, r in results.items()},
        "bounds": {k: r.bounds() for k, r in results.items()},
    }  # fmt: skip
    return Result(metrics=metrics, table=table, figure=fig, data=results)


# -- 2. contract failures per adapter ---------------------------------------------------------
def run_contracts(cfg: ContractsConfig, live=None, *, session: SignatureSession) -> Result:
    import pandas as pd
    import plotly.graph_objects as go

    from nbkit.signatures.evaluation import violation_examples, violation_table

    results = {}
    for adapter in cfg.adapters:
        if adapter == "json_grammar" and session.server is None:
            continue  # a grammar needs the local llama.cpp server
        results[adapter] = session.evaluate_module(cfg.module, cfg.signature, adapter, cfg.n_dev, label=adapter)
        if live is not None:
            live.add("violation rate", adapter, results[adapter].violation_rate)
    counts = violation_table(results)
    n = len(session.dev_cases(cfg.n_dev)) * 2
    fig = go.Figure(layout=dict(title=f"Contract violations by kind ({cfg.module}, {n} dev questions, JSON fallback off)",
                                barmode="stack", yaxis_title="count", template="plotly_white", height=380))  # fmt: skip
    for kind in VIOLATION_KINDS:
        fig.add_bar(name=kind, x=list(counts.columns), y=[int(counts.loc[kind, c]) for c in counts.columns])
    examples = pd.DataFrame([dict(adapter=a, **e) for a, r in results.items() for e in violation_examples(r)])
    metrics: dict[str, Any] = {
        "module": cfg.module, "signature": cfg.signature, "dev_questions_evaluated": n,
        "violation_rate": {a: _plain(r.violation_rate) for a, r in results.items()},
        "violations_by_kind": {a: r.violation_counts() for a, r in results.items()},
        "questions": {a: r.questions() for a, r in results.items()},
        "bounds": {a: r.bounds() for a, r in results.items()},
    }  # fmt: skip
    data: dict[str, Any] = {"results": results, "examples": examples, "counts": counts}
    if cfg.field_notes_signature:
        # The field notes' signature is a plain-string contract; under the grammar its two strings always parse,
        # so the count is about the text the model writes inside "diagnosis" (see ContractsConfig).
        # Asked on every case outside the test split (nothing is chosen or compared on these answers), so the
        # claim "the model writes words, not numbers" rests on enough answers to be refuted (see its verdict).
        from nbkit.signatures.cases import to_examples
        from nbkit.signatures.contracts import CONFIDENCE_NOT_NUMERIC
        from nbkit.signatures.evaluation import STRUCTURAL

        notes_adapter = session.resolve_adapter(cfg.field_notes_adapter)
        notes_cases = [c for name in cfg.field_notes_splits for c in (session.dev_cases(cfg.n_dev) if name == "dev" else getattr(session.splits, name))]
        notes = session.evaluate(session.module("predict", "field_notes"), to_examples(notes_cases), adapter=notes_adapter,
                                 label="field notes' signature", signature="field_notes")  # fmt: skip
        with_items = [r for r in notes.records if not STRUCTURAL & set(r["violations"]) and int(r.get("items", 0)) > 0]
        metrics["field_notes_signature"] = {"adapter": notes_adapter, "splits": list(cfg.field_notes_splits), "questions": len(notes.records),
                                            "violation_rate": _plain(notes.violation_rate), **notes.violation_counts(), **notes.bounds(),
                                            "answers_with_items": len(with_items),
                                            "answers_not_numeric": sum(1 for r in with_items if CONFIDENCE_NOT_NUMERIC in r["violations"])}  # fmt: skip
        data["field_notes_signature"] = notes
    return Result(metrics=metrics, table=counts, figure=fig, data=data)


# -- 3. compiling and the colloquial mix ------------------------------------------------------
def _compile_row(name: str, res, extra: dict | None = None) -> dict:
    by = res.score_by_slice()
    return {"program": name, **(extra or {}), "hit@3 standard": by.get("standard"), "hit@3 colloquial": by.get("colloquial"),
            "contract violation rate": res.violation_rate}  # fmt: skip


def run_compile(cfg: CompileConfig, live=None, *, session: SignatureSession) -> Result:
    """BootstrapFewShot on compile sets differing only in their colloquial share, then (optionally)
    BootstrapFewShotWithRandomSearch scored on the validation split; every program on the same dev questions."""
    import pandas as pd
    import plotly.graph_objects as go

    from nbkit.signatures.cases import compile_mix, to_examples
    from nbkit.signatures.compiling import candidate_scores, compile_program, demo_counts, mix_experiment

    examples = session.dev_examples(cfg.n_dev)
    adapter = session.resolve_adapter(cfg.adapter)
    lm, metric = session.lm_for(adapter), session.metric()
    valset = to_examples(session.splits.val[: cfg.n_val] if cfg.n_val else session.splits.val)
    module, chosen_on = cfg.module, None
    if module == "auto":
        # Chosen on validation questions, never on the dev questions the compile claims are judged on:
        # the uncompiled module with the best val hit@3 (ties: the first in MODULES, the cheapest).
        val_hit = {kind: _plain(session.evaluate(session.module(kind), valset, adapter=adapter, label=f"{kind} (val)", progress=False).score)
                   for kind in MODULES}  # fmt: skip
        module = max(MODULES, key=lambda kind: (val_hit[kind], -MODULES.index(kind)))
        chosen_on = {"split": "val", "questions": len(valset), "hit@3": val_hit}
    cfg = dataclasses.replace(cfg, module=module)
    baseline = session.evaluate_module(cfg.module, "typed", adapter, cfg.n_dev, label="uncompiled")
    results, rows, programs = {"uncompiled": baseline}, [_compile_row("uncompiled", baseline)], {}

    def on_mix(mix, row):
        if live is not None:
            for s in ("standard", "colloquial"):
                live.add(f"hit@3 {s}", f"BFS {mix:.0%} coll.", row[f"hit@3 {s}"])

    start = time.perf_counter()
    mixes = mix_experiment(
        lambda: session.module(cfg.module), session.splits.train, examples, mixes=tuple(sorted(cfg.mixes)), size=cfg.compile_size,
        metric=metric, lm=lm, kb=session.kb, adapter=make_adapter(adapter), max_demos=cfg.max_demos, seed=session.seed,
        num_threads=session.num_threads, server=session.server, progress=on_mix,
    )  # fmt: skip
    for r in mixes:
        name = f"BFS {r['colloquial share']:.0%} colloquial"
        programs[name], results[name] = r["program"], r["result"]
        rows.append({"program": name, **{k: v for k, v in r.items() if k not in ("program", "result")}})
    random_search: dict[str, Any] = {"ran": False}
    if cfg.random_search:
        mix = max(cfg.mixes) if cfg.mixes else 0.125
        program = compile_program(
            "random_search", session.module(cfg.module), compile_mix(session.splits.train, cfg.compile_size, mix, seed=session.seed),
            metric=metric, lm=lm, adapter=make_adapter(adapter), valset=valset, max_demos=cfg.max_demos,
            num_candidates=cfg.num_candidates, num_threads=session.num_threads,
        )  # fmt: skip
        name = f"RS {mix:.0%} colloquial"
        res = session.evaluate(program, examples, adapter=adapter, label="random search", progress=False)
        demos = demo_counts(program)
        programs[name], results[name] = program, res
        rows.append(_compile_row(name, res, {"colloquial share": mix, "demos bootstrapped": demos["bootstrapped"], "demos labeled": demos["labeled"]}))
        random_search = {"ran": True, "program": name, "candidates": candidate_scores(program), "val_questions": len(valset),
                         "num_candidates": cfg.num_candidates}
        if live is not None:
            for s in ("standard", "colloquial"):
                live.add(f"hit@3 {s}", f"RS {mix:.0%} coll.", rows[-1][f"hit@3 {s}"])
    table = pd.DataFrame(rows)
    base = baseline.score_by_slice()
    gains = {r["program"]: {s: _plain(r[f"hit@3 {s}"] - base[s]) if base.get(s) is not None and r[f"hit@3 {s}"] is not None else None
                            for s in ("standard", "colloquial")} for r in rows[1:]}  # fmt: skip
    fig = go.Figure(layout=dict(title=f"Compiling {cfg.module}: hit@3 by slice ({len(examples)} dev questions, {adapter} adapter)", barmode="group",
                                yaxis=dict(title="hit@3", range=[0, 1.05]), template="plotly_white", height=380))  # fmt: skip
    for s in ("standard", "colloquial"):
        fig.add_bar(name=s, x=table["program"].tolist(), y=table[f"hit@3 {s}"].tolist())
    metrics = {
        "module": cfg.module, "module_chosen_on": chosen_on, "adapter": adapter, "dev_questions_evaluated": len(examples),
        "table": [{k: _plain(v) for k, v in r.items()} for r in rows], "gains": gains,
        "questions": {name: res.questions() for name, res in results.items()},
        "random_search": random_search, "seconds": round(time.perf_counter() - start, 1),
    }  # fmt: skip
    return Result(metrics=metrics, table=table, figure=fig, data={"programs": programs, "results": results, "adapter": adapter})


# -- 4. ask every module, see the contract check live ----------------------------------------
def run_ask(cfg: AskConfig, live=None, *, session: SignatureSession) -> Result:
    import dspy
    import pandas as pd
    import plotly.graph_objects as go

    if not cfg.symptoms.strip():
        raise ValueError("type some symptoms first")
    rows = []
    fig = go.Figure(layout=dict(title="Structured answers (confidence per condition)", barmode="group", yaxis_title="confidence",
                                template="plotly_white", height=360))  # fmt: skip
    adapter = session.resolve_adapter(cfg.adapter)
    for kind in cfg.modules:
        outputs, error = None, None
        start = time.perf_counter()
        try:
            with dspy.context(lm=session.lm_for(adapter, cfg.signature), adapter=make_adapter(adapter)):
                pred = session.module(kind, cfg.signature)(symptoms=cfg.symptoms)
            outputs = {k: v for k, v in pred.items()}
        except Exception as exc:  # the panel shows the failure as a contract violation
            if session.server is not None:
                session.server.ensure_running()
            error = exc
        violations = check_contract(outputs, error, output_fields=tuple(session.signature(cfg.signature).output_fields))
        items = diagnoses_of(outputs or {})
        rows.append({
            "module": kind, "diagnoses": items, "reasoning": (outputs or {}).get("reasoning"),
            "contract": "holds" if not violations else "; ".join(f"{v.kind}: {v.detail}" for v in violations),
            "raw on failure": (getattr(error, "lm_response", "") or "")[:300] if error else "", "seconds": round(time.perf_counter() - start, 1),
        })  # fmt: skip
        confs = []
        for d in items:
            try:
                confs.append(float(d.get("confidence")))
            except (TypeError, ValueError):
                confs.append(None)
        fig.add_bar(name=kind, x=[str(d.get("condition")) for d in items], y=confs)
        if live is not None:
            live.add("contract holds", kind, 0.0 if violations else 1.0)
    table = pd.DataFrame(rows)
    return Result(metrics={"contract_holds": {r["module"]: r["contract"] == "holds" for r in rows}}, table=table, figure=fig)


# -- 5. history viewer ------------------------------------------------------------------------
def run_history(cfg: HistoryConfig, live=None, *, session: SignatureSession) -> Result:
    """``dspy.inspect_history`` (DSPy's global history), captured as text (prompt, response, usage)."""
    import dspy
    import plotly.graph_objects as go

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        dspy.inspect_history(n=cfg.n)
    entries = session.history()[-cfg.n :]
    tokens = [int((e.get("usage") or {}).get("completion_tokens") or 0) for e in entries]
    max_tokens = session.handle.max_tokens
    fig = go.Figure(layout=dict(title=f"Completion tokens of the last {len(entries)} calls (max_tokens={max_tokens})",
                                template="plotly_white", height=300, xaxis_title="call", yaxis_title="tokens"))  # fmt: skip
    fig.add_bar(name="completion tokens", x=list(range(len(tokens))), y=tokens)
    fig.add_scatter(name="max_tokens", x=list(range(len(tokens))), y=[max_tokens] * len(tokens), mode="lines")
    return Result(metrics={"calls": session.calls_summary()}, figure=fig, data={"text": buf.getvalue(), "tokens": tokens})


# -- 6. your own contract ---------------------------------------------------------------------
def check_user_contract(cfg: UserContractConfig) -> bool:
    """Load the user's SIGNATURE, DEV_SET and METRIC once, before any LM starts, so a bad one stops the run
    at its first cell with the UsageError naming file, line and field. True when a contract is given."""
    from nbkit.signatures import user_contract as uc

    return uc.load_contract(cfg.signature, cfg.dev_set, cfg.metric) is not None


def run_user_contract(cfg: UserContractConfig, live=None, *, session: SignatureSession) -> Result:
    """Your signature on your dev set with a stated metric: violations by kind per adapter (Predict),
    and each module's score, compared with Predict question by question. Not run without both
    ``signature`` and ``dev_set``."""
    import dspy
    import pandas as pd

    from nbkit.signatures import user_contract as uc
    from nbkit.signatures.claims import paired, verdict_program_beats

    contract = uc.load_contract(cfg.signature, cfg.dev_set, cfg.metric)
    if contract is None:
        return Result(metrics={"ran": False, "why": "set SIGNATURE and DEV_SET to check your own contract"})
    signature, examples, metric = contract
    outputs = tuple(signature.output_fields)
    modules = {"predict": dspy.Predict, "cot": dspy.ChainOfThought}
    unknown = sorted(set(cfg.modules) - set(modules))
    if unknown:
        raise ValueError(f"modules {unknown} need the medical knowledge base; for your signature choose from {sorted(modules)}")

    def run(kind, adapter):
        adapter = session.resolve_adapter(adapter)
        program = modules[kind](signature)
        # The grammar is built from the signature the module's predictor really answers: ChainOfThought adds a
        # `reasoning` output, and a grammar of the user's fields alone would forbid it (every answer missing it).
        (_name, predictor), *_ = program.named_predictors()
        out = uc.evaluate(program, examples, metric=metric, lm=session.lm_for(adapter, predictor.signature), adapter=make_adapter(adapter),
                          output_fields=outputs, num_threads=session.num_threads, server=session.server)  # fmt: skip
        return uc.questions(out["records"]), out["records"]

    def counts(records):
        return {k: sum(r["violations"].count(k) for r in records) for k in ("parse_error", "missing_field")}

    by_adapter, rows = {}, []
    for adapter in cfg.adapters:
        if adapter == "json_grammar" and session.server is None:
            continue
        q, records = run("predict", adapter)
        by_adapter[adapter] = q
        rows.append({"program": f"predict / {adapter}", "score": sum(q["hit"]) / len(q["hit"]), "violation rate": sum(q["structural"]) / len(q["structural"]),
                     **counts(records)})  # fmt: skip
        if live is not None:
            live.add("violation rate", adapter, rows[-1]["violation rate"])
    by_module = {}
    for kind in cfg.modules:
        by_module[kind], records = run(kind, cfg.adapter)
        rows.append({"program": f"{kind} / {session.resolve_adapter(cfg.adapter)}", "score": sum(by_module[kind]["hit"]) / len(examples),
                     "violation rate": sum(by_module[kind]["structural"]) / len(examples), **counts(records)})  # fmt: skip
        if live is not None:
            live.add("score", kind, rows[-1]["score"])
    comparisons = {}
    for kind in by_module:
        if kind != "predict" and "predict" in by_module:
            a, b = paired(by_module[kind], by_module["predict"])
            verdict, interval = verdict_program_beats(a, b, f"{cfg.metric} {kind} − predict")
            comparisons[kind] = {"verdict": verdict.verdict, "why": verdict.why, "interval": interval, "n": len(a)}
    metrics = {"ran": True, "signature": str(cfg.signature), "dev_set": str(cfg.dev_set), "metric": cfg.metric, "examples": len(examples),
               "violation_rate": {a: sum(q["structural"]) / len(q["structural"]) for a, q in by_adapter.items()},
               "score": {k: sum(q["hit"]) / len(q["hit"]) for k, q in by_module.items()}, "vs_predict": comparisons}  # fmt: skip
    return Result(metrics=metrics, table=pd.DataFrame(rows))
