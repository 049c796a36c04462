"""Notebook 03's experiments, registered in :data:`REGISTRY`: ``run(cfg, ctx, live) -> Result[XMetrics]``.

A :class:`SignaturesContext` holds what every experiment shares in one notebook: the data, the splits and the
retrievers, the LM (and the local llama.cpp servers it started, a pool of request slots), the LM copies that
send a grammar, and each module's dev-set result, evaluated once. Every experiment makes real LM calls (the
data and signature ones excepted) and returns a :class:`nbkit.result.Result`: ``metrics``, the frozen
dataclass of :mod:`nbkit.signatures.metrics` that the notebook records and ``claims.py`` decides on
(per-question outcomes included, so two programs can be compared question by question), ``table``, ``figure``,
and ``data`` (the EvalResults and programs a later cell needs).

:func:`save_load_roundtrip` and :func:`headline` are the notebook's two summaries: a compiled program saved
and loaded again, and the numbers its run index shows first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbkit.device import device_report, pick_device
from nbkit.experiment import Context, Registry, config_for
from nbkit.procs import usable_cores
from nbkit.result import Result
from nbkit.signatures import user_contract as uc
from nbkit.signatures.cases import compile_mix, load_cases, load_knowledge_base, split_cases, to_examples
from nbkit.signatures.claims import paired, paired_interval, verdict_program_beats
from nbkit.signatures.compiling import (
    candidate_scores,
    compile_program,
    demo_counts,
    load_program,
    mix_experiment,
    save_program,
)
from nbkit.signatures.config import (
    AskConfig,
    CompileConfig,
    ContractsConfig,
    DataConfig,
    HistoryConfig,
    ModulesConfig,
    RetrievalConfig,
    SessionConfig,
    SignatureConfig,
    TokenLimitConfig,
    UserContractConfig,
)
from nbkit.signatures.contracts import (
    CONFIDENCE_NOT_NUMERIC,
    HANDWRITTEN_EXAMPLES,
    VIOLATION_KINDS,
    check_contract,
    derive_field_specs,
    diagnoses_of,
    medical_diagnosis_signature,
    signature_by_name,
    typed_medical_diagnosis_signature,
)
from nbkit.signatures.evaluation import (
    STRUCTURAL,
    evaluate_program,
    make_adapter,
    make_metric,
    score_table,
    violation_examples,
    violation_table,
)
from nbkit.signatures.lm import LOCAL, check_token_limit, dspy_request_usage, make_lm, wire_token_fields
from nbkit.signatures.metrics import (
    AskMetrics,
    CompileMetrics,
    ContractsMetrics,
    DataMetrics,
    FieldNotesAnswers,
    HistoryMetrics,
    LMCalls,
    ModuleChoice,
    ModulesMetrics,
    RandomSearchRun,
    RetrievalMetrics,
    RoundtripMetrics,
    SignatureMetrics,
    SlotFill,
    TokenLimitMetrics,
    UserContractMetrics,
)
from nbkit.signatures.modules import MODULES, build_module
from nbkit.signatures.retrieval import build_retriever, recall_at_k
from nbkit.signatures.server import LocalLMServer, resolve_server_kind, schema_constraint

if TYPE_CHECKING:
    from nbkit.live import LiveFigure
    from nbkit.signatures.cases import KnowledgeBase, Splits
    from nbkit.signatures.evaluation import EvalResult
    from nbkit.signatures.lm import LMHandle
    from nbkit.signatures.server import LocalLMPool, Occupancy

__all__ = [
    "REGISTRY",
    "SignaturesContext",
    "check_user_contract",
    "device_report",
    "headline",
    "local_server_kwargs",
    "run",
    "save_load_roundtrip",
]

REGISTRY = Registry("signatures")
# A registered experiment run headless by slug (its SMOKE preset or defaults, then overrides): what a
# panel's Run button runs, without the panel.
run = REGISTRY.run


class SignaturesContext(Context):
    """What notebook 03's experiments share: data, splits, retrievers, the LM and its servers, results.

    :meth:`open` loads and validates the data (cheap, fails fast); the LM starts once, on :meth:`start_lm` or
    on first use. With the local model, ``servers`` single-threaded servers (0 = one per usable core) sit
    behind one dispatcher: llama.cpp's ``llama-server`` with ``slots`` requests decoded together in each
    (``server="auto"`` when ``make setup`` built it), else llama-cpp-python's server, one request each. DSPy
    then evaluates with as many threads as the servers have slots, so the batch stays full (see
    ``server.LocalLMPool``). On CUDA one server offloads every layer instead (``--n-gpu-layers``; the fallback
    needs a CUDA build of llama-cpp-python, see README). :meth:`close` stops the servers.

    Tests build one directly around a ready ``LMHandle`` (``dspy.utils.DummyLM``, no server).
    """

    def __init__(
        self,
        handle: LMHandle | None,
        kb: KnowledgeBase,
        cases: list[dict[str, Any]],
        splits: Splits,
        *,
        seed: int = 0,
        retriever_kind: str = "bm25",
        num_threads: int = 1,
        device: str = "cpu",
        session: SessionConfig | None = None,
    ) -> None:
        super().__init__(device)
        self.kb = kb
        self.cases = cases
        self.splits = splits
        self.seed = seed
        self.retriever_kind = retriever_kind
        self.num_threads = num_threads
        self.session = session or SessionConfig(seed=seed, device=device)
        self.started = time.perf_counter()
        self._handle = handle
        self._lm_copies: dict[str, Any] = {}

    @classmethod
    def open(cls, smoke: bool = False, **overrides: Any) -> SignaturesContext:
        """A context for :class:`SessionConfig` (its SMOKE preset when ``smoke``, with ``overrides``): the
        device resolved once, the knowledge base and cases loaded and validated, the splits fixed by the
        seed."""
        cfg = config_for(SessionConfig, smoke, **overrides)
        device = pick_device(cfg.device)
        kb = load_knowledge_base(cfg.kb_path or None)
        cases = load_cases(cfg.cases_path or None, kb)
        return cls(
            None, kb, cases, split_cases(cases, cfg.seed), seed=cfg.seed, device=str(device), session=cfg
        )

    def start_lm(self) -> LMHandle:
        """Start the LM (once): the local llama.cpp servers, or the client of any ``dspy.LM`` model."""
        if self._handle is None:
            cfg = self.session
            on = self.torch_device.type
            kind = resolve_server_kind(cfg.server, on) if cfg.lm_model == LOCAL else cfg.server
            kwargs = local_server_kwargs(cfg, self.torch_device.type, kind, len(usable_cores()))
            self._handle = make_lm(
                cfg.lm_model,
                api_base=cfg.api_base or None,
                api_key_env=cfg.api_key_env or None,
                max_tokens=cfg.max_tokens,
                server_kwargs=kwargs,
                cache=cfg.cache,
            )
            # A remote API serves requests concurrently on its own; the local pool serves `capacity` at once.
            self.num_threads = self._handle.server.capacity if cfg.lm_model == LOCAL else 4
        return self._handle

    @property
    def handle(self) -> LMHandle:
        return self.start_lm()

    @property
    def lm(self) -> Any:
        return self.handle.lm

    @property
    def server(self) -> LocalLMPool | None:
        return self.handle.server

    def serving(self) -> str:
        """Who answers and how many requests at once (one line for the notebook)."""
        return f"{self.server.label if self.server else 'remote'}: {self.num_threads} parallel requests"

    def occupancy(self) -> Occupancy | None:
        """How full the local servers' slots have been since they started (None for a remote LM or before
        :meth:`start_lm`); subtract two snapshots for one stretch of work."""
        if self._handle is None or self.server is None:
            return None
        return self.server.occupancy()

    def slot_fill(self, since: Occupancy | None = None) -> SlotFill | None:
        """:meth:`occupancy` (since the snapshot ``since``) as rounded figures to record."""
        o = self.occupancy()
        if o is None:
            return None
        o = o - since if since is not None else o
        return SlotFill(
            capacity=o.capacity,
            requests=o.requests,
            serving_seconds=round(o.serving_seconds, 1),
            mean_in_flight=None if o.mean_in_flight is None else round(o.mean_in_flight, 2),
            fill=None if o.fill is None else round(o.fill, 3),
            queued_seconds=round(o.queued_seconds, 1),
        )

    def seconds(self) -> float:
        """Seconds since this context was opened."""
        return round(time.perf_counter() - self.started, 1)

    def retriever(self, kind: str | None = None) -> Any:
        kind = kind or self.retriever_kind
        return self.cached(("retriever", kind), lambda: build_retriever(kind, self.kb, device=self.device))

    def signature(self, name: str = "typed") -> Any:
        return signature_by_name(name)

    def module(self, kind: str, signature: str = "typed") -> Any:
        return build_module(kind, self.signature(signature), self.retriever() if kind == "hybrid" else None)

    def dev_cases(self, n_cases: int = 0) -> list:
        """The first ``n_cases`` dev cases; 0 means all of them."""
        if n_cases < 0:
            raise ValueError(f"n_dev must be >= 0 (0 = every dev case), got {n_cases}")
        return self.splits.dev[:n_cases] if n_cases else list(self.splits.dev)

    def dev_examples(self, n_cases: int = 0) -> list:
        return to_examples(self.dev_cases(n_cases))

    def metric(self, signature: str = "typed") -> Any:
        return make_metric(self.kb, tuple(self.signature(signature).output_fields))

    def evaluate(
        self,
        program: Any,
        examples: list,
        *,
        adapter: str = "chat",
        label: str = "",
        signature: str = "typed",
        progress: bool = True,
    ) -> EvalResult:
        adapter = self.resolve_adapter(adapter)
        return evaluate_program(
            program,
            examples,
            lm=self.lm_for(adapter, signature),
            kb=self.kb,
            adapter=make_adapter(adapter),
            label=label,
            num_threads=self.num_threads,
            output_fields=tuple(self.signature(signature).output_fields),
            server=self.server,
            progress=progress,
        )

    def evaluate_module(
        self, kind: str, signature: str, adapter: str, n_dev: int, label: str = ""
    ) -> EvalResult:
        """A module's dev-set result, computed once per (module, signature, adapter, n_dev) in this
        context."""
        adapter = self.resolve_adapter(adapter)
        return self.cached(
            ("module", kind, signature, adapter, n_dev),
            lambda: self.evaluate(
                self.module(kind, signature),
                self.dev_examples(n_dev),
                adapter=adapter,
                label=label or kind,
                signature=signature,
            ),
        )

    def lm_for(self, adapter: str, signature: Any = "typed") -> Any:
        """The LM to use with ``adapter``: for ``json_grammar`` a copy that sends the signature's JSON schema.

        The local server turns the schema into a grammar (``server.schema_constraint``: llama-cpp-python
        gets ``response_format={"type": "json_object", "schema": ...}``, llama-server the same grammar
        built by llama-cpp-python's converter), so the decoder can only emit JSON of the contract's *shape*
        (fields, types). Bounds (confidence in [0, 1], <= 50 words) are not part of the grammar and still
        have to be checked after parsing. ``signature`` is a name or a user's signature class.
        """
        if adapter != "json_grammar":
            return self.lm
        if self.server is None:
            raise ValueError(
                "adapter 'json_grammar' needs the local llama.cpp server (LM_MODEL='local'); use 'json' for "
                "other models"
            )
        sig = self.signature(signature) if isinstance(signature, str) else signature
        key = signature if isinstance(signature, str) else f"{sig.__name__}@{id(sig)}"
        if key not in self._lm_copies:
            from dspy.adapters.json_adapter import _get_structured_outputs_response_format

            schema = _get_structured_outputs_response_format(sig).model_json_schema()
            self._lm_copies[key] = self.lm.copy(**schema_constraint(self.server.kind, schema))
        return self._lm_copies[key]

    def history(self) -> list[dict]:
        """Every call this context's LMs made (the base LM and its grammar copies), oldest first."""
        entries = [e for lm in (self.lm, *self._lm_copies.values()) for e in lm.history]
        return sorted(entries, key=lambda e: str(e.get("timestamp", "")))

    def calls_summary(self) -> LMCalls:
        """LM calls so far: ``served`` by the LM in this run and answered ``from_cache`` (see
        :class:`LMCalls`; a cached answer was generated, and counted, by the run that first served it)."""
        entries = self.history()
        served = [
            int((e.get("usage") or {}).get("completion_tokens") or 0) for e in entries if e.get("usage")
        ]
        return LMCalls(
            calls=len(entries),
            served=len(served),
            from_cache=len(entries) - len(served),
            completion_tokens=sum(served),
            max_completion_tokens=max(served, default=0),
            over_max_tokens=sum(t > self.handle.max_tokens for t in served),
            max_tokens=self.handle.max_tokens,
        )

    def resolve_adapter(self, adapter: str) -> str:
        if adapter == "auto":
            return "json_grammar" if self.server is not None else "chat"
        return adapter

    def close(self) -> None:
        """Stop the LM's servers (if it started any) and drop what this context cached."""
        if self._handle is not None:
            self._handle.close()
        super().close()


def local_server_kwargs(cfg: SessionConfig, device_type: str, kind: str, cores: int) -> dict:
    """``LocalLMPool``'s arguments for ``cfg`` on ``device_type`` ("cpu"/"cuda") with ``kind`` of server and
    ``cores`` usable cores.

    On CUDA: one server with every layer on the GPU (llama-server: ``--n-gpu-layers all``; llama-cpp-python:
    ``--n_gpu_layers -1``). On CPU: ``cfg.servers`` servers (0 = one per core), one thread each, no GPU
    layers.
    """
    on_cuda = device_type == "cuda"
    kwargs: dict[str, Any] = {
        "n_ctx": cfg.n_ctx,
        "n_servers": 1 if on_cuda else (cfg.servers or cores),
        "kind": kind,
    }
    if kind == "llama-server":
        kwargs.update(slots=cfg.slots, n_gpu_layers="all" if on_cuda else 0)
    else:
        kwargs["extra_args"] = ("--n_gpu_layers", "-1") if on_cuda else ()
    return kwargs


def _plain(value):
    """Round floats for the record; NaN stays NaN."""
    return round(value, 4) if isinstance(value, float) and value == value else value


# -- the data and the signature ----------------------------------------------------------------
@REGISTRY.experiment("data", "The cases and the knowledge base", DataConfig, DataMetrics)
def run_data(cfg: DataConfig, ctx: SignaturesContext, live: LiveFigure | None = None) -> Result[DataMetrics]:
    """How many cases and conditions the context loaded, each split's size (in cases), and a few cases to
    read."""
    import pandas as pd

    metrics = DataMetrics(cases=len(ctx.cases), kb_conditions=len(ctx.kb), **ctx.splits.sizes())
    table = pd.DataFrame(ctx.cases[: cfg.preview], columns=["id", "conditions", "standard", "colloquial"])
    return Result(metrics=metrics, table=table)


@REGISTRY.experiment(
    "signature", "Example-first: the signature from good answers", SignatureConfig, SignatureMetrics
)
def run_signature(
    cfg: SignatureConfig, ctx: SignaturesContext, live: LiveFigure | None = None
) -> Result[SignatureMetrics]:
    """The bounds the hand-written examples share, and the fields of the typed signature built from them next
    to the field notes' string signature (kept as written, for comparison)."""
    import pandas as pd

    specs = derive_field_specs(HANDWRITTEN_EXAMPLES)
    typed, field_notes = typed_medical_diagnosis_signature(), medical_diagnosis_signature()
    table = pd.DataFrame(
        [
            {
                "signature": s.__name__,
                "field": k,
                "type": getattr(v.annotation, "__name__", str(v.annotation)),
                "desc": v.json_schema_extra.get("desc"),
            }
            for s in (field_notes, typed)
            for k, v in s.fields.items()
        ]
    )
    metrics = SignatureMetrics(**{k: v for k, v in specs.items() if not k.endswith("desc")})
    return Result(
        metrics=metrics, table=table, data={"typed": typed, "field_notes": field_notes, "specs": specs}
    )


# -- the token limit and the runaway ----------------------------------------------------------
@REGISTRY.experiment("token_limit", "Does max_tokens reach the server?", TokenLimitConfig, TokenLimitMetrics)
def run_token_limit(
    cfg: TokenLimitConfig, ctx: SignaturesContext, live: LiveFigure | None = None
) -> Result[TokenLimitMetrics]:
    """Which field DSPy puts on the wire, whether the limit reaches nbkit's server, and the stock server's
    runaway.

    The runaway is reproduced, not asserted: a *stock* llama-cpp-python server (nbkit's field mapping off)
    with a small context receives the same DSPy request with ``max_tokens=limit``; it ignores DSPy's
    ``max_completion_tokens`` and generates until EOS or a full context. ``stock_n_ctx`` bounds the run.
    """
    import pandas as pd

    limit = cfg.limit
    m: dict[str, Any] = {"limit": limit, "dspy_wire_fields": wire_token_fields(limit)}
    server = ctx.server
    if server is not None:
        prompt = "Write a long story about a dragon."
        m["nbkit_max_tokens"] = server.complete(prompt, max_tokens=limit).completion_tokens
        m["nbkit_max_completion_tokens"] = server.complete(
            prompt, max_tokens=limit, field="max_completion_tokens"
        ).completion_tokens
        speed = server.tokens_per_s(max_tokens=96)
        m["lm_tokens_per_s_one_stream"] = round(speed.tokens_per_s, 2)
    m["dspy_through_session"] = check_token_limit(ctx.lm, limit)["completion_tokens"]
    if cfg.stock_server and server is not None:
        fixed = dspy_request_usage(server, limit)  # the same request through nbkit's launcher
        m["dspy_prompt_tokens"] = fixed["prompt_tokens"]
        start = time.perf_counter()
        with LocalLMServer(server.model_path, n_ctx=cfg.stock_n_ctx, n_threads=1, stock=True) as stock:
            usage = dspy_request_usage(stock, limit)
        m["stock_n_ctx"] = cfg.stock_n_ctx
        m["stock_context_full"] = usage["context_full"]
        # A request that fills the context generated n_ctx - prompt tokens before the server gave up.
        full = cfg.stock_n_ctx - fixed["prompt_tokens"]
        m["stock_dspy_tokens"] = full if usage["context_full"] else usage["completion_tokens"]
        m["stock_seconds"] = round(time.perf_counter() - start, 1)
    probes = ("nbkit_", "dspy_through", "stock_dspy")
    rows = [{"request": k, "completion tokens": v} for k, v in m.items() if k.startswith(probes)]
    if live is not None:
        for r in rows:
            live.add("completion tokens", r["request"], r["completion tokens"])
    return Result(metrics=TokenLimitMetrics(**m), table=pd.DataFrame(rows))


# -- retrieval: chosen on validation ----------------------------------------------------------
@REGISTRY.experiment("retrieval", "Retrievers, chosen on validation", RetrievalConfig, RetrievalMetrics)
def run_retrieval(
    cfg: RetrievalConfig, ctx: SignaturesContext, live: LiveFigure | None = None
) -> Result[RetrievalMetrics]:
    """Recall@k by slice on the validation split for each retriever; the best colloquial recall there
    (ties: the better standard recall, then the order of ``cfg.retrievers``) becomes the context's
    retriever. The chosen one's recall on the test split is computed once, after the choice."""
    import pandas as pd

    if not cfg.retrievers:
        raise ValueError("choose at least one retriever")
    rows = []
    for kind in cfg.retrievers:
        t0 = time.perf_counter()
        recall = recall_at_k(ctx.retriever(kind), ctx.splits.val, cfg.k)
        recalls = {f"recall@{cfg.k} {s}": v for s, v in recall.items()}
        rows.append({"retriever": kind, "split": "val", **recalls, "seconds": time.perf_counter() - t0})
        if live is not None:
            for s, v in recall.items():
                live.add(f"val recall@{cfg.k} {s}", kind, v)
    col, std = f"recall@{cfg.k} colloquial", f"recall@{cfg.k} standard"
    chosen = max(rows, key=lambda r: (r[col], r[std], -cfg.retrievers.index(r["retriever"])))["retriever"]
    ctx.retriever_kind = chosen
    test = recall_at_k(ctx.retriever(chosen), ctx.splits.test, cfg.k)
    rows.append(
        {
            "retriever": chosen,
            "split": "test (chosen, once)",
            **{f"recall@{cfg.k} {s}": v for s, v in test.items()},
        }
    )
    metrics = RetrievalMetrics(
        chosen=chosen,
        chosen_on="val",
        val_cases=len(ctx.splits.val),
        test_cases=len(ctx.splits.test),
        val={
            r["retriever"]: {k: _plain(v) for k, v in r.items() if k.startswith("recall")} for r in rows[:-1]
        },
        test_of_chosen={k: _plain(v) for k, v in test.items()},
    )
    return Result(metrics=metrics, table=pd.DataFrame(rows))


# -- 1. modules behind one signature ----------------------------------------------------------
@REGISTRY.experiment("modules", "Modules behind one signature", ModulesConfig, ModulesMetrics)
def run_modules(
    cfg: ModulesConfig, ctx: SignaturesContext, live: LiveFigure | None = None
) -> Result[ModulesMetrics]:
    """Each module behind the same signature on the same dev questions: hit@3 by slice, violations,
    outcomes."""
    import plotly.graph_objects as go

    adapter = ctx.resolve_adapter(cfg.adapter)
    results = {}
    for kind in cfg.modules:
        res = ctx.evaluate_module(kind, cfg.signature, adapter, cfg.n_dev)
        results[kind] = res
        if live is not None:
            for slice_name, score in res.score_by_slice().items():
                live.add(f"hit@3 {slice_name}", kind, score)
            live.add("contract violation rate", kind, res.violation_rate)
    table = score_table(results)
    n = len(ctx.dev_cases(cfg.n_dev)) * 2
    fig = go.Figure(
        layout=dict(
            title=f"Modules behind the {cfg.signature} signature ({adapter} adapter, {n} dev questions each)",
            barmode="group",
            yaxis=dict(title="rate", range=[0, 1.05]),
            template="plotly_white",
            height=380,
        )
    )
    for col in ("hit@3 standard", "hit@3 colloquial", "contract violation rate"):
        fig.add_bar(name=col, x=table["program"].tolist(), y=table[col].tolist())
    metrics = ModulesMetrics(
        adapter=adapter,
        signature=cfg.signature,
        dev_questions_evaluated={k: len(r.records) for k, r in results.items()},
        scores={
            k: {
                "hit@3": _plain(r.score),
                **{s: _plain(v) for s, v in r.score_by_slice().items()},
                "mentions_expected": _plain(r.mention_rate),
                "contract_violation_rate": _plain(r.violation_rate),
            }
            for k, r in results.items()
        },
        questions={k: r.questions() for k, r in results.items()},
        bounds={k: r.bounds() for k, r in results.items()},
    )
    return Result(metrics=metrics, table=table, figure=fig, data=results)


# -- 2. contract failures per adapter ---------------------------------------------------------
@REGISTRY.experiment("contracts", "Contract failures per adapter", ContractsConfig, ContractsMetrics)
def run_contracts(
    cfg: ContractsConfig, ctx: SignaturesContext, live: LiveFigure | None = None
) -> Result[ContractsMetrics]:
    """One module under each adapter, its contract violations by kind; then the field notes' string
    signature."""
    import pandas as pd
    import plotly.graph_objects as go

    results = {}
    for adapter in cfg.adapters:
        if adapter == "json_grammar" and ctx.server is None:
            continue  # a grammar needs the local llama.cpp server
        results[adapter] = ctx.evaluate_module(cfg.module, cfg.signature, adapter, cfg.n_dev, label=adapter)
        if live is not None:
            live.add("violation rate", adapter, results[adapter].violation_rate)
    counts = violation_table(results)
    n = len(ctx.dev_cases(cfg.n_dev)) * 2
    fig = go.Figure(
        layout=dict(
            title=f"Contract violations by kind ({cfg.module}, {n} dev questions, JSON fallback off)",
            barmode="stack",
            yaxis_title="count",
            template="plotly_white",
            height=380,
        )
    )
    for kind in VIOLATION_KINDS:
        fig.add_bar(name=kind, x=list(counts.columns), y=[int(counts.loc[kind, c]) for c in counts.columns])
    examples = pd.DataFrame([dict(adapter=a, **e) for a, r in results.items() for e in violation_examples(r)])
    data: dict[str, Any] = {"results": results, "examples": examples, "counts": counts}
    notes_answers = None
    if cfg.field_notes_signature:
        # A plain-string contract: under the grammar its two strings always parse, so the count is about the
        # text the model writes inside "diagnosis" (see ContractsConfig). Asked on every case outside the test
        # split (nothing is chosen or compared on these answers), so the claim "the model writes words, not
        # numbers" rests on enough answers to be refuted (see its verdict).
        notes_adapter = ctx.resolve_adapter(cfg.field_notes_adapter)
        notes_cases = [
            c
            for name in cfg.field_notes_splits
            for c in (ctx.dev_cases(cfg.n_dev) if name == "dev" else getattr(ctx.splits, name))
        ]
        notes = ctx.evaluate(
            ctx.module("predict", "field_notes"),
            to_examples(notes_cases),
            adapter=notes_adapter,
            label="field notes' signature",
            signature="field_notes",
        )
        with_items = [
            r for r in notes.records if not STRUCTURAL & set(r["violations"]) and int(r.get("items", 0)) > 0
        ]
        notes_answers = FieldNotesAnswers(
            adapter=notes_adapter,
            splits=list(cfg.field_notes_splits),
            questions=len(notes.records),
            violation_rate=_plain(notes.violation_rate),
            **{**notes.violation_counts(), **notes.bounds()},
            answers_with_items=len(with_items),
            answers_not_numeric=sum(1 for r in with_items if CONFIDENCE_NOT_NUMERIC in r["violations"]),
        )
        data["field_notes_signature"] = notes
    metrics = ContractsMetrics(
        module=cfg.module,
        signature=cfg.signature,
        dev_questions_evaluated=n,
        violation_rate={a: _plain(r.violation_rate) for a, r in results.items()},
        violations_by_kind={a: r.violation_counts() for a, r in results.items()},
        questions={a: r.questions() for a, r in results.items()},
        bounds={a: r.bounds() for a, r in results.items()},
        field_notes_signature=notes_answers,
    )
    return Result(metrics=metrics, table=counts, figure=fig, data=data)


# -- 3. compiling and the colloquial mix ------------------------------------------------------
def _compile_row(name: str, res: EvalResult, extra: dict | None = None) -> dict:
    by = res.score_by_slice()
    return {
        "program": name,
        **(extra or {}),
        "hit@3 standard": by.get("standard"),
        "hit@3 colloquial": by.get("colloquial"),
        "contract violation rate": res.violation_rate,
    }


@REGISTRY.experiment("compile", "Compiling and the colloquial mix", CompileConfig, CompileMetrics)
def run_compile(
    cfg: CompileConfig, ctx: SignaturesContext, live: LiveFigure | None = None
) -> Result[CompileMetrics]:
    """BootstrapFewShot on compile sets differing only in their colloquial share, then (optionally)
    BootstrapFewShotWithRandomSearch scored on the validation split; every program on the same dev
    questions."""
    import pandas as pd
    import plotly.graph_objects as go

    examples = ctx.dev_examples(cfg.n_dev)
    adapter = ctx.resolve_adapter(cfg.adapter)
    lm, metric = ctx.lm_for(adapter), ctx.metric()
    valset = to_examples(ctx.splits.val[: cfg.n_val] if cfg.n_val else ctx.splits.val)
    module, chosen_on = cfg.module, None
    if module == "auto":
        # Chosen on validation questions, never on the dev questions the compile claims are judged on:
        # the uncompiled module with the best val hit@3 (ties: the first in MODULES, the cheapest).
        val_hit = {
            kind: _plain(
                ctx.evaluate(
                    ctx.module(kind), valset, adapter=adapter, label=f"{kind} (val)", progress=False
                ).score
            )
            for kind in MODULES
        }
        module = max(MODULES, key=lambda kind: (val_hit[kind], -MODULES.index(kind)))
        chosen_on = ModuleChoice(split="val", questions=len(valset), hit_at_3=val_hit)
    cfg = dataclasses.replace(cfg, module=module)
    baseline = ctx.evaluate_module(cfg.module, "typed", adapter, cfg.n_dev, label="uncompiled")
    results, rows, programs = {"uncompiled": baseline}, [_compile_row("uncompiled", baseline)], {}

    def on_mix(mix, row):
        if live is not None:
            for s in ("standard", "colloquial"):
                live.add(f"hit@3 {s}", f"BFS {mix:.0%} coll.", row[f"hit@3 {s}"])

    start = time.perf_counter()
    mixes = mix_experiment(
        lambda: ctx.module(cfg.module),
        ctx.splits.train,
        examples,
        mixes=tuple(sorted(cfg.mixes)),
        size=cfg.compile_size,
        metric=metric,
        lm=lm,
        kb=ctx.kb,
        adapter=make_adapter(adapter),
        max_demos=cfg.max_demos,
        seed=ctx.seed,
        num_threads=ctx.num_threads,
        server=ctx.server,
        progress=on_mix,
    )
    for r in mixes:
        name = f"BFS {r['colloquial share']:.0%} colloquial"
        programs[name], results[name] = r["program"], r["result"]
        rows.append({"program": name, **{k: v for k, v in r.items() if k not in ("program", "result")}})
    random_search = RandomSearchRun()
    if cfg.random_search:
        mix = max(cfg.mixes) if cfg.mixes else 0.125
        program = compile_program(
            "random_search",
            ctx.module(cfg.module),
            compile_mix(ctx.splits.train, cfg.compile_size, mix, seed=ctx.seed),
            metric=metric,
            lm=lm,
            adapter=make_adapter(adapter),
            valset=valset,
            max_demos=cfg.max_demos,
            num_candidates=cfg.num_candidates,
            num_threads=ctx.num_threads,
        )
        name = f"RS {mix:.0%} colloquial"
        res = ctx.evaluate(program, examples, adapter=adapter, label="random search", progress=False)
        demos = demo_counts(program)
        programs[name], results[name] = program, res
        demo_cols = {
            "colloquial share": mix,
            "demos bootstrapped": demos["bootstrapped"],
            "demos labeled": demos["labeled"],
        }
        rows.append(_compile_row(name, res, demo_cols))
        random_search = RandomSearchRun(
            ran=True,
            program=name,
            candidates=candidate_scores(program),
            val_questions=len(valset),
            num_candidates=cfg.num_candidates,
        )
        if live is not None:
            for s in ("standard", "colloquial"):
                live.add(f"hit@3 {s}", f"RS {mix:.0%} coll.", rows[-1][f"hit@3 {s}"])
    table = pd.DataFrame(rows)
    base = baseline.score_by_slice()
    gains = {
        r["program"]: {
            s: _plain(r[f"hit@3 {s}"] - base[s])
            if base.get(s) is not None and r[f"hit@3 {s}"] is not None
            else None
            for s in ("standard", "colloquial")
        }
        for r in rows[1:]
    }
    fig = go.Figure(
        layout=dict(
            title=f"Compiling {cfg.module}: hit@3 by slice "
            f"({len(examples)} dev questions, {adapter} adapter)",
            barmode="group",
            yaxis=dict(title="hit@3", range=[0, 1.05]),
            template="plotly_white",
            height=380,
        )
    )
    for s in ("standard", "colloquial"):
        fig.add_bar(name=s, x=table["program"].tolist(), y=table[f"hit@3 {s}"].tolist())
    metrics = CompileMetrics(
        module=cfg.module,
        module_chosen_on=chosen_on,
        adapter=adapter,
        dev_questions_evaluated=len(examples),
        table=[{k: _plain(v) for k, v in r.items()} for r in rows],
        gains=gains,
        questions={name: res.questions() for name, res in results.items()},
        random_search=random_search,
        seconds=round(time.perf_counter() - start, 1),
    )
    return Result(
        metrics=metrics,
        table=table,
        figure=fig,
        data={"programs": programs, "results": results, "adapter": adapter},
    )


def save_load_roundtrip(ctx: SignaturesContext, compiled: Result[CompileMetrics]) -> RoundtripMetrics:
    """The first compiled program saved as JSON (its demos and instructions, to version with the code), loaded
    into a fresh module of the same kind, and both asked the first dev question: same demos, same answer?"""
    name, program = next(iter(compiled.data["programs"].items()))
    saved = save_program(program, Path(tempfile.mkdtemp()) / "compiled.json")
    loaded = load_program(ctx.module(compiled.metrics.module), saved)
    probe = ctx.dev_examples(1)[:1]
    answers = [
        ctx.evaluate(p, probe, adapter=compiled.data["adapter"], label=label, progress=False).records[0][
            "predicted"
        ]
        for p, label in ((program, "original"), (loaded, "loaded"))
    ]
    return RoundtripMetrics(
        program=name,
        bytes=saved.stat().st_size,
        demos=demo_counts(loaded),
        same_demos=demo_counts(loaded) == demo_counts(program),
        same_answer=answers[0] == answers[1],
    )


# -- 4. ask every module, see the contract check live ----------------------------------------
@REGISTRY.experiment("ask", "Ask the modules", AskConfig, AskMetrics)
def run_ask(cfg: AskConfig, ctx: SignaturesContext, live: LiveFigure | None = None) -> Result[AskMetrics]:
    """Each chosen module's structured answer to the reader's symptoms, and its contract check."""
    import dspy
    import pandas as pd
    import plotly.graph_objects as go

    if not cfg.symptoms.strip():
        raise ValueError("type some symptoms first")
    rows = []
    fig = go.Figure(
        layout=dict(
            title="Structured answers (confidence per condition)",
            barmode="group",
            yaxis_title="confidence",
            template="plotly_white",
            height=360,
        )
    )
    adapter = ctx.resolve_adapter(cfg.adapter)
    for kind in cfg.modules:
        outputs, error = None, None
        start = time.perf_counter()
        try:
            with dspy.context(lm=ctx.lm_for(adapter, cfg.signature), adapter=make_adapter(adapter)):
                pred = ctx.module(kind, cfg.signature)(symptoms=cfg.symptoms)
            outputs = {k: v for k, v in pred.items()}
        except Exception as exc:  # the panel shows the failure as a contract violation
            if ctx.server is not None:
                ctx.server.ensure_running()
            error = exc
        violations = check_contract(
            outputs, error, output_fields=tuple(ctx.signature(cfg.signature).output_fields)
        )
        items = diagnoses_of(outputs or {})
        rows.append(
            {
                "module": kind,
                "diagnoses": items,
                "reasoning": (outputs or {}).get("reasoning"),
                "contract": "holds"
                if not violations
                else "; ".join(f"{v.kind}: {v.detail}" for v in violations),
                "raw on failure": (getattr(error, "lm_response", "") or "")[:300] if error else "",
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
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
    metrics = AskMetrics(contract_holds={r["module"]: r["contract"] == "holds" for r in rows})
    return Result(metrics=metrics, table=table, figure=fig)


# -- 5. history viewer ------------------------------------------------------------------------
@REGISTRY.experiment("history", "LM call history (inspect_history)", HistoryConfig, HistoryMetrics)
def run_history(
    cfg: HistoryConfig, ctx: SignaturesContext, live: LiveFigure | None = None
) -> Result[HistoryMetrics]:
    """``dspy.inspect_history`` (DSPy's global history), captured as text (prompt, response, usage)."""
    import dspy
    import plotly.graph_objects as go

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        dspy.inspect_history(n=cfg.n)
    entries = ctx.history()[-cfg.n :]
    tokens = [int((e.get("usage") or {}).get("completion_tokens") or 0) for e in entries]
    max_tokens = ctx.handle.max_tokens
    fig = go.Figure(
        layout=dict(
            title=f"Completion tokens of the last {len(entries)} calls (max_tokens={max_tokens})",
            template="plotly_white",
            height=300,
            xaxis_title="call",
            yaxis_title="tokens",
        )
    )
    fig.add_bar(name="completion tokens", x=list(range(len(tokens))), y=tokens)
    fig.add_scatter(name="max_tokens", x=list(range(len(tokens))), y=[max_tokens] * len(tokens), mode="lines")
    return Result(
        metrics=HistoryMetrics(calls=ctx.calls_summary(), slots=ctx.slot_fill()),
        figure=fig,
        data={"text": buf.getvalue(), "tokens": tokens},
    )


# -- 6. your own contract ---------------------------------------------------------------------
def check_user_contract(cfg: UserContractConfig) -> bool:
    """Load the user's SIGNATURE, DEV_SET and METRIC once, before any LM starts, so a bad one stops the run
    at its first cell with the UsageError naming file, line and field. True when a contract is given."""
    return uc.load_contract(cfg.signature, cfg.dev_set, cfg.metric) is not None


NOT_GIVEN = "set SIGNATURE and DEV_SET to check your own contract"


@REGISTRY.experiment("user_contract", "Your own contract", UserContractConfig, UserContractMetrics)
def run_user_contract(
    cfg: UserContractConfig, ctx: SignaturesContext, live: LiveFigure | None = None
) -> Result[UserContractMetrics]:
    """Your signature on your dev set with a stated metric: violations by kind per adapter (Predict),
    and each module's score, compared with Predict question by question. Not run without both
    ``signature`` and ``dev_set``."""
    import dspy
    import pandas as pd

    contract = uc.load_contract(cfg.signature, cfg.dev_set, cfg.metric)
    if contract is None:
        return Result(
            metrics=UserContractMetrics(ran=False, why=NOT_GIVEN),
            table=pd.DataFrame([{"your contract": NOT_GIVEN}]),
        )
    signature, examples, metric = contract
    outputs = tuple(signature.output_fields)
    modules = {"predict": dspy.Predict, "cot": dspy.ChainOfThought}
    unknown = sorted(set(cfg.modules) - set(modules))
    if unknown:
        raise ValueError(
            f"modules {unknown} need the medical knowledge base; for your signature choose from "
            f"{sorted(modules)}"
        )

    def run(kind, adapter):
        adapter = ctx.resolve_adapter(adapter)
        program = modules[kind](signature)
        # The grammar is built from the signature the module's predictor really answers: ChainOfThought adds a
        # `reasoning` output, and a grammar of the user's fields alone would forbid it (every answer missing
        # it).
        (_name, predictor), *_ = program.named_predictors()
        out = uc.evaluate(
            program,
            examples,
            metric=metric,
            lm=ctx.lm_for(adapter, predictor.signature),
            adapter=make_adapter(adapter),
            output_fields=outputs,
            num_threads=ctx.num_threads,
            server=ctx.server,
        )
        return uc.questions(out["records"]), out["records"]

    def counts(records):
        return {k: sum(r["violations"].count(k) for r in records) for k in ("parse_error", "missing_field")}

    by_adapter, rows = {}, []
    for adapter in cfg.adapters:
        if adapter == "json_grammar" and ctx.server is None:
            continue
        q, records = run("predict", adapter)
        by_adapter[adapter] = q
        rows.append(
            {
                "program": f"predict / {adapter}",
                "score": sum(q["hit"]) / len(q["hit"]),
                "violation rate": sum(q["structural"]) / len(q["structural"]),
                **counts(records),
            }
        )
        if live is not None:
            live.add("violation rate", adapter, rows[-1]["violation rate"])
    by_module = {}
    for kind in cfg.modules:
        by_module[kind], records = run(kind, cfg.adapter)
        rows.append(
            {
                "program": f"{kind} / {ctx.resolve_adapter(cfg.adapter)}",
                "score": sum(by_module[kind]["hit"]) / len(examples),
                "violation rate": sum(by_module[kind]["structural"]) / len(examples),
                **counts(records),
            }
        )
        if live is not None:
            live.add("score", kind, rows[-1]["score"])
    comparisons = {}
    for kind in by_module:
        if kind != "predict" and "predict" in by_module:
            a, b = paired(by_module[kind], by_module["predict"])
            verdict = verdict_program_beats(a, b, f"{cfg.metric} {kind} − predict")
            interval = paired_interval(a, b, floor=True)
            comparisons[kind] = {
                "verdict": verdict.verdict,
                "why": verdict.why,
                "interval": interval,
                "n": len(a),
            }
    metrics = UserContractMetrics(
        ran=True,
        signature=str(cfg.signature),
        dev_set=str(cfg.dev_set),
        metric=cfg.metric,
        examples=len(examples),
        violation_rate={a: sum(q["structural"]) / len(q["structural"]) for a, q in by_adapter.items()},
        score={k: sum(q["hit"]) / len(q["hit"]) for k, q in by_module.items()},
        vs_predict=comparisons,
    )
    return Result(metrics=metrics, table=pd.DataFrame(rows))


# -- the notebook's headline ------------------------------------------------------------------
def headline(
    modules: ModulesMetrics, contracts: ContractsMetrics, history: HistoryMetrics, seconds: float
) -> dict[str, Any]:
    """The numbers a reader wants first: questions per module, the best module's hit@3, the violation rate
    under chat and under the grammar, the run's seconds, and LM calls answered from cache (> 0: a warm
    re-run)."""
    hit = {m: v["hit@3"] for m, v in modules.scores.items()}
    best = max(hit, key=hit.__getitem__)
    return {
        "dev questions per module": min(modules.dev_questions_evaluated.values()),
        f"best hit@3 ({best})": hit[best],
        "chat violation rate": contracts.violation_rate.get("chat"),
        "grammar violation rate": contracts.violation_rate.get("json_grammar"),
        "notebook seconds": seconds,
        "LM calls answered from cache": history.calls.from_cache,
    }
