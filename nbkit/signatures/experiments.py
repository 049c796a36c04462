"""Notebook 03's experiments, registered in :data:`REGISTRY`: ``run(cfg, ctx, live) -> Result[XMetrics]``.

Each runs in a :class:`~nbkit.signatures.context.SignaturesContext` and makes real LM calls (the data and
signature ones excepted); each returns a :class:`nbkit.result.Result` whose ``metrics`` is the frozen
dataclass of :mod:`nbkit.signatures.metrics` that the notebook records and ``claims.py`` judges (every answer
kept question by question, so two programs pair up question by question and the phrasings of a case group
into one case), with a ``table`` and a ``figure`` to read, and ``data`` a later experiment needs (the
compiled programs). ``run``, ``panel`` and ``show`` are the registry's own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbkit.errors import UsageError
from nbkit.experiment import Experiment, Registry, Replicates
from nbkit.result import Result
from nbkit.signatures import user_contract as uc
from nbkit.signatures.cases import compile_mix, to_examples
from nbkit.signatures.compiling import (
    candidate_scores,
    compile_program,
    demo_counts,
    load_program,
    save_program,
)
from nbkit.signatures.config import (
    FULL_COMPILES,
    MODULES_FULL_CASES,
    AskConfig,
    CompileConfig,
    ContractsConfig,
    DataConfig,
    HistoryConfig,
    ModulesConfig,
    RetrievalConfig,
    RoundtripConfig,
    SignatureConfig,
    TokenLimitConfig,
    UserContractConfig,
)
from nbkit.signatures.contracts import (
    HANDWRITTEN_EXAMPLES,
    VIOLATION_KINDS,
    check_contract,
    derive_field_specs,
    diagnoses_of,
    medical_diagnosis_signature,
    typed_medical_diagnosis_signature,
)
from nbkit.signatures.evaluation import make_adapter, score_table, violation_examples, violation_table
from nbkit.signatures.lm import check_token_limit, dspy_request_usage, wire_token_fields
from nbkit.signatures.metrics import (
    AdapterRun,
    AdapterScore,
    AskMetrics,
    Candidate,
    CompiledRun,
    CompileMetrics,
    ContractsMetrics,
    DataMetrics,
    FieldNotesAnswers,
    HistoryMetrics,
    ModuleChoice,
    ModuleRun,
    ModuleScore,
    ModulesMetrics,
    ModuleUserScore,
    PairedScore,
    RecallAt,
    RetrievalMetrics,
    RoundtripMetrics,
    SignatureMetrics,
    TokenLimitMetrics,
    UserContractMetrics,
)
from nbkit.signatures.modules import MODULES
from nbkit.signatures.pairing import compare_programs
from nbkit.signatures.retrieval import recall_at_k
from nbkit.signatures.server import LocalLMServer

if TYPE_CHECKING:
    from nbkit.live import LiveFigure
    from nbkit.signatures.context import SignaturesContext
    from nbkit.signatures.evaluation import EvalResult

__all__ = ["REGISTRY", "check_user_contract", "panel", "run", "show"]

REGISTRY = Registry("signatures", summary="modules")
run = REGISTRY.run
panel = REGISTRY.panel
show = REGISTRY.show


def _plain(value):
    """Round floats for the record; NaN stays NaN."""
    return round(value, 4) if isinstance(value, float) and value == value else value


def _bar_figure(title: str, yaxis: str, barmode: str = "group", ymax: float | None = 1.05) -> Any:
    import plotly.graph_objects as go

    return go.Figure(
        layout=dict(
            title=title,
            barmode=barmode,
            yaxis=dict(title=yaxis, **({"range": [0, ymax]} if ymax else {})),
            template="plotly_white",
            height=380,
        )
    )


# -- the data and the signature ----------------------------------------------------------------
def run_data(cfg: DataConfig, ctx: SignaturesContext, live: LiveFigure | None = None) -> Result[DataMetrics]:
    """How many cases and conditions the context loaded, each split's size (in cases), and a few cases to
    read."""
    import pandas as pd

    metrics = DataMetrics(cases=len(ctx.cases), kb_conditions=len(ctx.kb), **ctx.splits.sizes())
    table = pd.DataFrame(ctx.cases[: cfg.preview], columns=["id", "conditions", "standard", "colloquial"])
    return Result(metrics=metrics, table=table)


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
def run_token_limit(
    cfg: TokenLimitConfig, ctx: SignaturesContext, live: LiveFigure | None = None
) -> Result[TokenLimitMetrics]:
    """Which field DSPy puts on the wire, whether the limit reaches nbkit's server, and the stock server's
    runaway (starts the LM).

    The runaway is reproduced, not asserted: a *stock* llama-cpp-python server (nbkit's field mapping off)
    with a small context receives the same DSPy request with ``max_tokens=limit``; it ignores DSPy's
    ``max_completion_tokens`` and generates until EOS or a full context. ``stock_n_ctx`` bounds the run; when
    the context fills, the server answers with an error and no count, and the tokens are the ones that
    filled it (n_ctx − prompt), recorded as imputed.
    """
    import pandas as pd

    limit = cfg.limit
    m: dict[str, Any] = {"limit": limit, "dspy_limit_fields": tuple(sorted(wire_token_fields(limit)))}
    server = ctx.server
    m["served_by"] = ctx.llm.serving()
    if server is not None:
        prompt = "Write a long story about a dragon."
        m["nbkit_max_tokens"] = server.complete(prompt, max_tokens=limit).completion_tokens
        m["nbkit_max_completion_tokens"] = server.complete(
            prompt, max_tokens=limit, field="max_completion_tokens"
        ).completion_tokens
        m["lm_tokens_per_s_one_stream"] = round(server.tokens_per_s(max_tokens=96).tokens_per_s, 2)
    m["dspy_through_session"] = check_token_limit(ctx.lm, limit)["completion_tokens"]
    if cfg.stock_server and server is not None:
        fixed = dspy_request_usage(server, limit)  # the same request through nbkit's launcher
        m["dspy_prompt_tokens"] = fixed["prompt_tokens"]
        start = time.perf_counter()
        with LocalLMServer(server.model_path, n_ctx=cfg.stock_n_ctx, n_threads=1, stock=True) as stock:
            usage = dspy_request_usage(stock, limit)
        m["stock_n_ctx"] = cfg.stock_n_ctx
        m["stock_context_full"] = m["stock_tokens_imputed"] = usage["context_full"]
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
def run_retrieval(
    cfg: RetrievalConfig, ctx: SignaturesContext, live: LiveFigure | None = None
) -> Result[RetrievalMetrics]:
    """Recall@k by slice on the validation split for each retriever; the best colloquial recall there
    (ties: the better standard recall, then the order of ``cfg.retrievers``) becomes the context's
    retriever. The chosen one's recall on the test split is computed once, after the choice."""
    import pandas as pd

    if not cfg.retrievers:
        raise ValueError("choose at least one retriever")
    val = []
    for kind in cfg.retrievers:
        recall = recall_at_k(ctx.retriever(kind), ctx.splits.val, cfg.k)
        val.append(RecallAt(kind, "val", _plain(recall["standard"]), _plain(recall["colloquial"])))
        if live is not None:
            for s, v in recall.items():
                live.add(f"val recall@{cfg.k} {s}", kind, v)
    best = max(val, key=lambda r: (r.colloquial, r.standard, -cfg.retrievers.index(r.retriever)))
    ctx.retriever_kind = best.retriever
    test = recall_at_k(ctx.retriever(best.retriever), ctx.splits.test, cfg.k)
    chosen = RecallAt(
        best.retriever, "test (chosen, once)", _plain(test["standard"]), _plain(test["colloquial"])
    )
    metrics = RetrievalMetrics(
        k=cfg.k,
        chosen=best.retriever,
        chosen_on="val",
        val_cases=len(ctx.splits.val),
        test_cases=len(ctx.splits.test),
        val=tuple(val),
        test_of_chosen=chosen,
    )
    table = pd.DataFrame([dataclasses.asdict(r) for r in (*val, chosen)]).rename(
        columns={"standard": f"recall@{cfg.k} standard", "colloquial": f"recall@{cfg.k} colloquial"}
    )
    return Result(metrics=metrics, table=table)


# -- modules behind one signature ----------------------------------------------------------------
def _module_run(kind: str, res: EvalResult) -> ModuleRun:
    by = res.score_by_slice()
    return ModuleRun(
        module=kind,
        questions=len(res.records),
        hit_at_3=_plain(res.score),
        standard=_plain(by.get("standard")),
        colloquial=_plain(by.get("colloquial")),
        mentions_expected=_plain(res.mention_rate),
        contract_violation_rate=_plain(res.violation_rate),
        bounds=res.bounds(),
        outcomes=res.outcomes(),
    )


def run_modules(
    cfg: ModulesConfig, ctx: SignaturesContext, live: LiveFigure | None = None
) -> Result[ModulesMetrics]:
    """Each module behind the same signature on the same questions (the first ``cfg.cases`` cases of dev,
    val and train, both phrasings): hit@3 by slice, contract violations, every answer."""
    adapter = ctx.resolve_adapter(cfg.adapter)
    cases = ctx.first_cases(cfg.cases)
    results = {}
    for kind in cfg.modules:
        res = ctx.evaluate_module(kind, cfg.signature, adapter, cases=cases)
        results[kind] = res
        if live is not None:
            for slice_name, score in res.score_by_slice().items():
                live.add(f"hit@3 {slice_name}", kind, score)
            live.add("contract violation rate", kind, res.violation_rate)
    table = score_table(results)
    ids = {c["id"] for c in cases}
    splits = tuple(n for n in ("train", "val", "dev") if ids & {c["id"] for c in getattr(ctx.splits, n)})
    fig = _bar_figure(
        f"Modules behind the {cfg.signature} signature ({adapter} adapter, {2 * len(cases)} "
        f"{'+'.join(splits)} questions each)",
        "rate",
    )
    for col in ("hit@3 standard", "hit@3 colloquial", "contract violation rate"):
        fig.add_bar(name=col, x=table["program"].tolist(), y=table[col].tolist())
    metrics = ModulesMetrics(
        adapter=adapter,
        signature=cfg.signature,
        splits=splits,
        cases=len(cases),
        runs=tuple(_module_run(kind, res) for kind, res in results.items()),
    )
    return Result(metrics=metrics, table=table, figure=fig, data=results)


# -- contract failures per adapter ---------------------------------------------------------------
def _field_notes_answers(cfg: ContractsConfig, ctx: SignaturesContext) -> tuple[FieldNotesAnswers, Any]:
    """The field notes' plain-string contract, asked on every case of ``cfg.field_notes_splits``: under the
    grammar its two strings always parse, so what is counted is the text the model writes inside
    "diagnosis" (nothing is chosen or compared on these answers)."""
    notes_adapter = ctx.resolve_adapter(cfg.field_notes_adapter)
    notes = ctx.evaluate(
        ctx.module("predict", "field_notes"),
        to_examples(ctx.cases_of(tuple(cfg.field_notes_splits), cfg.n_dev)),
        adapter=notes_adapter,
        label="field notes' signature",
        signature="field_notes",
    )
    outcomes = notes.outcomes()
    with_items = [i > 0 for i in outcomes.items]
    answers = FieldNotesAnswers(
        adapter=notes_adapter,
        splits=tuple(cfg.field_notes_splits),
        questions=len(notes.records),
        violation_rate=_plain(notes.violation_rate),
        violations=notes.violation_counts(),
        bounds=notes.bounds(),
        answers_with_items=sum(with_items),
        answers_not_numeric=int(sum(v for v, w in zip(outcomes.not_numeric, with_items, strict=True) if w)),
        outcomes=outcomes,
        answers_with_confidence=sum(
            1 for n, w in zip(outcomes.confidence_numbers, outcomes.confidence_words, strict=True) if n + w
        ),
        answers_confidence_in_words=sum(1 for w in outcomes.confidence_words if w),
    )
    return answers, notes


def run_contracts(
    cfg: ContractsConfig, ctx: SignaturesContext, live: LiveFigure | None = None
) -> Result[ContractsMetrics]:
    """One module under each adapter, its contract violations by kind; then the field notes' string
    signature."""
    import pandas as pd

    results = {}
    for adapter in cfg.adapters:
        if adapter == "json_grammar" and ctx.server is None:
            continue  # a grammar needs the local llama.cpp server
        results[adapter] = ctx.evaluate_module(cfg.module, cfg.signature, adapter, cfg.n_dev, label=adapter)
        if live is not None:
            live.add("violation rate", adapter, results[adapter].violation_rate)
    counts = violation_table(results)
    n = 2 * len(ctx.cases_of(("dev",), cfg.n_dev))
    fig = _bar_figure(
        f"Contract violations by kind ({cfg.module}, {n} dev questions, JSON fallback off)",
        "count",
        barmode="stack",
        ymax=None,
    )
    for kind in VIOLATION_KINDS:
        fig.add_bar(name=kind, x=list(counts.columns), y=[int(counts.loc[kind, c]) for c in counts.columns])
    examples = pd.DataFrame([dict(adapter=a, **e) for a, r in results.items() for e in violation_examples(r)])
    data: dict[str, Any] = {"results": results, "examples": examples, "counts": counts}
    notes = None
    if cfg.field_notes_signature:
        notes, data["field_notes_signature"] = _field_notes_answers(cfg, ctx)
    runs = tuple(
        AdapterRun(a, _plain(r.violation_rate), r.violation_counts(), r.bounds(), r.outcomes())
        for a, r in results.items()
    )
    metrics = ContractsMetrics(
        module=cfg.module, signature=cfg.signature, questions=n, runs=runs, field_notes_signature=notes
    )
    return Result(metrics=metrics, table=counts, figure=fig, data=data)


def _show_contracts(result: Result[ContractsMetrics]) -> Any:
    """The violations by kind, then one raw failure per kind."""
    from IPython.display import display

    display(result.table)
    return result.data["examples"]


# -- compiling and the colloquial mix ------------------------------------------------------------
def _choose_module(
    cfg: CompileConfig, ctx: SignaturesContext, adapter: str
) -> tuple[str, ModuleChoice | None]:
    """``cfg.module``, or for ``auto`` the uncompiled module with the best hit@3 on the *validation*
    questions, never on the dev questions the compile claims are judged on (ties: the first in MODULES,
    the cheapest)."""
    if cfg.module != "auto":
        return cfg.module, None
    valset = to_examples(ctx.splits.val[: cfg.n_val] if cfg.n_val else ctx.splits.val)
    scores = tuple(
        ModuleScore(
            kind,
            _plain(
                ctx.evaluate(
                    ctx.module(kind), valset, adapter=adapter, label=f"{kind} (val)", progress=False
                ).score
            ),
        )
        for kind in MODULES
    )
    best = max(scores, key=lambda s: (s.hit_at_3, -MODULES.index(s.module)))
    return best.module, ModuleChoice(split="val", questions=len(valset), scores=scores)


def _compiled_run(
    name: str, optimizer: str, seed: int, mix: float, compile_set: list, program: Any, res: EvalResult
) -> CompiledRun:
    by, demos = res.score_by_slice(), demo_counts(program)
    slices = [d.get("slice") for _n, p in program.named_predictors() for d in p.demos]
    return CompiledRun(
        name=name,
        optimizer=optimizer,
        compile_seed=seed,
        colloquial_share=mix,
        compile_set=len(compile_set),
        colloquial_in_compile_set=sum(1 for e in compile_set if e.slice == "colloquial"),
        demos_bootstrapped=demos["bootstrapped"],
        demos_labeled=demos["labeled"],
        colloquial_demos=sum(1 for s in slices if s == "colloquial"),
        standard=_plain(by.get("standard")),
        colloquial=_plain(by.get("colloquial")),
        contract_violation_rate=_plain(res.violation_rate),
        outcomes=res.outcomes(),
        candidates=tuple(
            Candidate(c["seed"], _plain(float(c["val score"]))) for c in candidate_scores(program)
        ),
    )


def _compile_one(
    cfg: CompileConfig,
    ctx: SignaturesContext,
    optimizer: str,
    seed: int,
    mix: float,
    adapter: str,
    **extra: Any,
) -> tuple[CompiledRun, Any]:
    """One program: ``optimizer`` on the compile set of ``seed`` at colloquial share ``mix``, then scored on
    the dev questions."""
    compile_set = compile_mix(ctx.splits.train, cfg.compile_size, mix, seed=seed)
    program = compile_program(
        optimizer,
        ctx.module(cfg.module),
        compile_set,
        metric=ctx.metric(),
        lm=ctx.lm_for(adapter),
        adapter=make_adapter(adapter),
        max_demos=cfg.max_demos,
        num_threads=ctx.num_threads,
        **extra,
    )
    tag = "RS" if optimizer == "random_search" else "BFS"
    name = f"{tag} {mix:.0%} colloquial" + (f" · set {seed - ctx.seed}" if cfg.compiles > 1 else "")
    res = ctx.evaluate(program, ctx.dev_examples(cfg.n_dev), adapter=adapter, label=name, progress=False)
    return _compiled_run(name, optimizer, seed, mix, compile_set, program, res), program


def run_compile(
    cfg: CompileConfig, ctx: SignaturesContext, live: LiveFigure | None = None
) -> Result[CompileMetrics]:
    """BootstrapFewShot on up to ``cfg.compiles`` compile sets (one per seed), each compiled at every
    colloquial share of ``cfg.mixes`` (the share changes the wording, never the cases), then (optionally)
    BootstrapFewShotWithRandomSearch on each set at the largest share, its candidates scored on the
    validation split; every program on the same dev questions. The loop stops once the claims it feeds
    are decided."""
    import pandas as pd

    adapter = ctx.resolve_adapter(cfg.adapter)
    module, chosen_on = _choose_module(cfg, ctx, adapter)
    cfg = dataclasses.replace(cfg, module=module)
    baseline = ctx.evaluate_module(cfg.module, "typed", adapter, cfg.n_dev, label="uncompiled")
    runs = [_compiled_run("uncompiled", "uncompiled", ctx.seed, 0.0, [], ctx.module(cfg.module), baseline)]
    programs: dict[str, Any] = {}
    valset = to_examples(ctx.splits.val[: cfg.n_val] if cfg.n_val else ctx.splits.val)
    stop = REGISTRY.stopper("compile", ctx, cfg)
    start = time.perf_counter()

    def metrics_so_far() -> CompileMetrics:
        return _compile_metrics(cfg, chosen_on, adapter, len(baseline.records), len(valset), runs, start)

    # Compile set by compile set (seed order); stops once the claims it feeds are decided.
    for seed in range(ctx.seed, ctx.seed + cfg.compiles):
        todo = [("bootstrap", mix, {}) for mix in sorted(cfg.mixes)]
        if cfg.random_search:
            todo.append(
                ("random_search", max(cfg.mixes), {"valset": valset, "num_candidates": cfg.num_candidates})
            )
        for optimizer, mix, extra in todo:
            compiled, program = _compile_one(cfg, ctx, optimizer, seed, mix, adapter, **extra)
            runs.append(compiled)
            programs[compiled.name] = program
            if live is not None:
                for s in ("standard", "colloquial"):
                    live.add(f"hit@3 {s}", compiled.name, getattr(compiled, s))
        if stop(metrics_so_far()):
            break
    table = pd.DataFrame(
        [
            {
                "program": r.name,
                "colloquial share": r.colloquial_share,
                "compile set": r.compile_set,
                "colloquial in compile set": r.colloquial_in_compile_set,
                "demos bootstrapped": r.demos_bootstrapped,
                "demos labeled": r.demos_labeled,
                "hit@3 standard": r.standard,
                "hit@3 colloquial": r.colloquial,
                "contract violation rate": r.contract_violation_rate,
            }
            for r in runs
        ]
    )
    fig = _bar_figure(
        f"Compiling {cfg.module}: hit@3 by slice ({len(baseline.records)} dev questions, {adapter} adapter)",
        "hit@3",
    )
    for s in ("standard", "colloquial"):
        fig.add_bar(name=s, x=table["program"].tolist(), y=table[f"hit@3 {s}"].tolist())
    return Result(
        metrics=metrics_so_far(), table=table, figure=fig, data={"programs": programs, "adapter": adapter}
    )


def _compile_metrics(
    cfg: CompileConfig,
    chosen_on: ModuleChoice | None,
    adapter: str,
    dev_questions: int,
    val_questions: int,
    runs: list[CompiledRun],
    start: float,
) -> CompileMetrics:
    """The compile experiment's metrics from the programs compiled so far (the compile sets done)."""
    return CompileMetrics(
        module=cfg.module,
        module_chosen_on=chosen_on,
        adapter=adapter,
        dev_questions=dev_questions,
        compiles=len({r.compile_seed for r in runs if r.optimizer != "uncompiled"}),
        mixes=tuple(sorted(cfg.mixes)),
        random_search=cfg.random_search,
        num_candidates=cfg.num_candidates if cfg.random_search else 0,
        val_questions=val_questions if cfg.random_search else 0,
        programs=tuple(runs),
        seconds=round(time.perf_counter() - start, 1),
    )


def run_roundtrip(
    cfg: RoundtripConfig, ctx: SignaturesContext, live: LiveFigure | None = None
) -> Result[RoundtripMetrics]:
    """The first compiled program of the compile experiment (run before, in this context) saved as JSON
    (its demos and instructions, to version with the code), loaded into a fresh module of the same kind,
    and both asked the first dev question: same demos, same answer?"""
    import pandas as pd

    if "compile" not in ctx.results:
        raise UsageError("run the compile experiment first: the round trip saves its first program")
    compiled = ctx.results["compile"]
    name, program = next(iter(compiled.data["programs"].items()))
    with tempfile.TemporaryDirectory(prefix="nbkit-compiled-") as folder:  # the saved file is read back here
        saved = save_program(program, Path(folder) / "compiled.json")
        size = saved.stat().st_size
        loaded = load_program(ctx.module(compiled.metrics.module), saved)
    probe = ctx.dev_examples(1)[:1]
    answers = [
        ctx.evaluate(p, probe, adapter=compiled.data["adapter"], label=label, progress=False).records[0][
            "predicted"
        ]
        for p, label in ((program, "original"), (loaded, "loaded"))
    ]
    demos = demo_counts(loaded)
    metrics = RoundtripMetrics(
        program=name,
        bytes=size,
        demos_bootstrapped=demos["bootstrapped"],
        demos_labeled=demos["labeled"],
        same_demos=demos == demo_counts(program),
        same_answer=answers[0] == answers[1],
    )
    return Result(metrics=metrics, table=pd.DataFrame([dataclasses.asdict(metrics)]))


# -- ask every module, see the contract check live -------------------------------------------
def run_ask(cfg: AskConfig, ctx: SignaturesContext, live: LiveFigure | None = None) -> Result[AskMetrics]:
    """Each chosen module's structured answer to the reader's symptoms, and its contract check."""
    import dspy
    import pandas as pd

    if not cfg.symptoms.strip():
        raise ValueError("type some symptoms first")
    rows = []
    fig = _bar_figure("Structured answers (confidence per condition)", "confidence", ymax=None)
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
        fig.add_bar(name=kind, x=[str(d.get("condition")) for d in items], y=[_confidence(d) for d in items])
        if live is not None:
            live.add("contract holds", kind, 0.0 if violations else 1.0)
    metrics = AskMetrics(
        modules=tuple(r["module"] for r in rows), contract_holds=tuple(r["contract"] == "holds" for r in rows)
    )
    return Result(metrics=metrics, table=pd.DataFrame(rows), figure=fig)


def _confidence(item: dict) -> float | None:
    try:
        return float(item.get("confidence"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


# -- history viewer ------------------------------------------------------------------------------
def run_history(
    cfg: HistoryConfig, ctx: SignaturesContext, live: LiveFigure | None = None
) -> Result[HistoryMetrics]:
    """``dspy.inspect_history`` (DSPy's global history), captured as text (prompt, response, usage), the
    context's LM calls so far and how full its servers' slots were."""
    import dspy

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        dspy.inspect_history(n=cfg.n)
    entries = ctx.llm.history()[-cfg.n :]
    tokens = [int((e.get("usage") or {}).get("completion_tokens") or 0) for e in entries]
    max_tokens = ctx.llm.handle.max_tokens
    fig = _bar_figure(
        f"Completion tokens of the last {len(entries)} calls (max_tokens={max_tokens})", "tokens", ymax=None
    )
    fig.add_bar(name="completion tokens", x=list(range(len(tokens))), y=tokens)
    fig.add_scatter(name="max_tokens", x=list(range(len(tokens))), y=[max_tokens] * len(tokens), mode="lines")
    metrics = HistoryMetrics(calls=ctx.llm.calls_summary(), slots=ctx.llm.slot_fill(), seconds=ctx.seconds())
    return Result(metrics=metrics, figure=fig, data={"text": buf.getvalue(), "tokens": tokens})


def _show_history(result: Result[HistoryMetrics]) -> Any:
    """The captured ``inspect_history`` text (its last 6,000 characters)."""
    from IPython.display import Pretty

    text = result.data["text"]
    return Pretty(text[-6000:]) if text else None


# -- your own contract -----------------------------------------------------------------------------
def check_user_contract(signature: str, dev_set: str, metric: str) -> bool:
    """Load the user's SIGNATURE, DEV_SET and METRIC once, before any LM starts, so a bad one stops the run
    at its first cell with the UsageError naming file, line and field. True when a contract is given."""
    return uc.load_contract(signature, dev_set, metric) is not None


NOT_GIVEN = "set SIGNATURE and DEV_SET to check your own contract"


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
    modules = {"predict": dspy.Predict, "cot": dspy.ChainOfThought}
    unknown = sorted(set(cfg.modules) - set(modules))
    if unknown:
        raise ValueError(
            f"modules {unknown} need the medical knowledge base; for your signature choose from "
            f"{sorted(modules)}"
        )

    def ask(kind: str, adapter: str) -> tuple[dict[str, list], dict[str, Any]]:
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
            output_fields=tuple(signature.output_fields),
            num_threads=ctx.num_threads,
            server=ctx.server,
        )
        q = uc.questions(out["records"])
        kinds = {
            k: sum(r["violations"].count(k) for r in out["records"]) for k in ("parse_error", "missing_field")
        }
        row = {
            "program": f"{kind} / {adapter}",
            "score": sum(q["hit"]) / len(q["hit"]),
            "violation rate": sum(q["structural"]) / len(q["structural"]),
            **kinds,
        }
        return q, row

    by_adapter, by_module, rows = {}, {}, []
    for adapter in cfg.adapters:
        if adapter == "json_grammar" and ctx.server is None:
            continue
        by_adapter[adapter], row = ask("predict", adapter)
        rows.append(row)
        if live is not None:
            live.add("violation rate", adapter, row["violation rate"])
    for kind in cfg.modules:
        by_module[kind], row = ask(kind, cfg.adapter)
        rows.append(row)
        if live is not None:
            live.add("score", kind, row["score"])
    comparisons = tuple(
        PairedScore(
            kind, *compare_programs(by_module[kind], by_module["predict"], f"{cfg.metric} {kind} − predict")
        )
        for kind in by_module
        if kind != "predict" and "predict" in by_module
    )
    metrics = UserContractMetrics(
        ran=True,
        signature=str(cfg.signature),
        dev_set=str(cfg.dev_set),
        metric=cfg.metric,
        examples=len(examples),
        violation_rate=tuple(
            AdapterScore(a, sum(q["structural"]) / len(q["structural"])) for a, q in by_adapter.items()
        ),
        score=tuple(ModuleUserScore(k, sum(q["hit"]) / len(q["hit"])) for k, q in by_module.items()),
        vs_predict=comparisons,
    )
    return Result(metrics=metrics, table=pd.DataFrame(rows))


# -- the registry ----------------------------------------------------------------------------------
REGISTRY.register(Experiment("data", "The cases and the knowledge base", DataConfig, DataMetrics, run_data))
REGISTRY.register(
    Experiment(
        "signature",
        "Example-first: the signature from good answers",
        SignatureConfig,
        SignatureMetrics,
        run_signature,
    )
)
REGISTRY.register(
    Experiment(
        "token_limit",
        "Does max_tokens reach the server?",
        TokenLimitConfig,
        TokenLimitMetrics,
        run_token_limit,
    )
)
REGISTRY.register(
    Experiment(
        "retrieval",
        "Retrievers, chosen on validation",
        RetrievalConfig,
        RetrievalMetrics,
        run_retrieval,
    )
)
# CPU-s per unit on 2 cores (servers and this process), cold: bench/RESULTS.md, "Notebook 03's claims": the
# modules on 50 cases 614 CPU-s; eight BootstrapFewShot programs, compiled and scored on the dev questions,
# 882 and 1,243 CPU-s at seeds 0 and 1 (a compile set is two programs, one per mix).
COSTS = "measured cold on the shared 2-core machine (bench/RESULTS.md, Notebook 03's claims)"
# The modules' unit: a case asked of every module, named apart from the case other rows count, whose cases
# come from other experiments as well (the field notes' signature asks every case outside test).
ASKED_CASE = "asked case"
REGISTRY.register(
    Experiment(
        "modules",
        "Modules behind one signature",
        ModulesConfig,
        ModulesMetrics,
        run_modules,
        # The cases are asked at once (the servers decode them side by side): one look at the budget.
        replicates=Replicates(
            ASKED_CASE, "cases", full=MODULES_FULL_CASES, cost_s=12.3, cost_source=COSTS, sequential=False
        ),
    )
)
REGISTRY.register(
    Experiment(
        "contracts",
        "Contract failures per adapter",
        ContractsConfig,
        ContractsMetrics,
        run_contracts,
        show_result=_show_contracts,
    )
)
REGISTRY.register(
    Experiment(
        "compile",
        "Compiling and the colloquial mix",
        CompileConfig,
        CompileMetrics,
        run_compile,
        replicates=Replicates(
            "compile set",
            "compiles",
            full=FULL_COMPILES,
            cost_s=265.0,
            cost_source=COSTS,
            least=3,
            full_also={"n_val": 0},
        ),
    )
)
REGISTRY.register(
    Experiment(
        "roundtrip", "Save and load a compiled program", RoundtripConfig, RoundtripMetrics, run_roundtrip
    )
)
REGISTRY.register(
    Experiment(
        "ask",
        "Ask the modules",
        AskConfig,
        AskMetrics,
        run_ask,
    )
)
REGISTRY.register(
    Experiment(
        "user_contract",
        "Your own contract",
        UserContractConfig,
        UserContractMetrics,
        run_user_contract,
    )
)
REGISTRY.register(
    Experiment(
        "history",
        "LM call history (inspect_history)",
        HistoryConfig,
        HistoryMetrics,
        run_history,
        show_result=_show_history,
    )
)
