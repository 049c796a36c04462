"""Notebook 03's experiments as plain run functions over one :class:`SignatureSession`, plus their panels.

A session owns the LM (and the local server it started), the data, the splits and the retrievers. Each
``run_*`` function takes a parameters dataclass (and the panel's ``live`` figure), does real LM calls, and
returns a dict with a plotly ``figure`` and tables; ``make_panels(session)`` wires them to widgets.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import time
from dataclasses import dataclass, field
from typing import Any

from nbkit.signatures.contracts import VIOLATION_KINDS, check_contract, diagnoses_of
from nbkit.signatures.modules import MODULES

ADAPTERS = ("chat", "json", "json_grammar")


def make_adapter(name: str):
    """The DSPy adapter for ``name``; ``json_grammar`` is JSONAdapter plus a server-side schema (see grammar_lm)."""
    import dspy

    if name == "json_grammar":
        return dspy.JSONAdapter()
    if name == "chat":
        # Fallback off: a ChatAdapter parse failure must show as itself, not be retried as JSON.
        return dspy.ChatAdapter(use_json_adapter_fallback=False)
    if name == "json":
        return dspy.JSONAdapter()
    raise ValueError(f"unknown adapter {name!r}; expected one of {ADAPTERS}")


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

    def dev_examples(self, n_cases: int):
        from nbkit.signatures.data import to_examples

        if n_cases < 1:
            raise ValueError(f"n_dev must be >= 1, got {n_cases}")
        return to_examples(self.splits.dev[:n_cases])

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

    def lm_for(self, adapter: str, signature: str = "typed"):
        """The LM to use with ``adapter``: for ``json_grammar`` a copy that sends the signature's JSON schema.

        llama-cpp-python turns ``response_format={"type": "json_object", "schema": ...}`` into a grammar, so
        the decoder can only emit JSON of the contract's *shape* (fields, types). Bounds (confidence in
        [0, 1], <= 50 words) are not part of the grammar and still have to be checked after parsing.
        """
        if adapter != "json_grammar":
            return self.lm
        if self.server is None:
            raise ValueError("adapter 'json_grammar' needs the local llama.cpp server (LM_MODEL='local'); use 'json' for other models")
        if signature not in self._lm_copies:
            from dspy.adapters.json_adapter import _get_structured_outputs_response_format

            schema = _get_structured_outputs_response_format(self.signature(signature)).model_json_schema()
            self._lm_copies[signature] = self.lm.copy(response_format={"type": "json_object", "schema": schema})
        return self._lm_copies[signature]

    def history(self) -> list[dict]:
        """Every call this session's LMs made (the base LM and its grammar copies), oldest first."""
        entries = [e for lm in (self.lm, *self._lm_copies.values()) for e in lm.history]
        return sorted(entries, key=lambda e: str(e.get("timestamp", "")))

    def resolve_adapter(self, adapter: str) -> str:
        if adapter == "auto":
            return "json_grammar" if self.server is not None else "chat"
        return adapter

    def close(self) -> None:
        self.handle.close()


def start_session(
    lm_model: str = "local",
    *,
    api_base: str | None = None,
    api_key_env: str | None = None,
    max_tokens: int = 128,
    seed: int = 0,
    retriever: str = "bm25",
    num_threads: int | None = None,
    device: str = "cpu",
    n_ctx: int = 2048,
    cases_path=None,
    kb_path=None,
) -> SignatureSession:
    """Load and validate the data first (cheap, fails fast), then start the LM."""
    from nbkit.signatures.data import load_cases, load_knowledge_base, split_cases
    from nbkit.signatures.lm import LOCAL, make_lm

    kb = load_knowledge_base(kb_path)
    cases = load_cases(cases_path, kb)
    splits = split_cases(cases, seed)
    # llama-cpp-python's server answers one request at a time; threads only help a remote API.
    threads = num_threads if num_threads is not None else (1 if lm_model == LOCAL else 4)
    # On CUDA the same server offloads every layer (needs a CUDA build of llama-cpp-python, see README).
    extra = ("--n_gpu_layers", "-1") if str(device).startswith("cuda") else ()
    handle = make_lm(lm_model, api_base=api_base, api_key_env=api_key_env, max_tokens=max_tokens,
                     server_kwargs={"n_ctx": n_ctx, "extra_args": extra})  # fmt: skip
    return SignatureSession(handle, kb, cases, splits, seed=seed, retriever_kind=retriever, num_threads=threads, device=str(device))


# -- 1. modules behind one signature ----------------------------------------------------------
@dataclass
class ModulesParams:
    n_dev: int = field(default=4, metadata={"min": 1, "max": 16, "label": "dev cases (x2 phrasings)"})
    modules: tuple = field(default=MODULES, metadata={"choices": list(MODULES)})
    signature: str = field(default="typed", metadata={"choices": ["typed", "seed"]})
    adapter: str = field(default="auto", metadata={"choices": ["auto", *ADAPTERS]})


def run_modules(session: SignatureSession, params: ModulesParams, live=None) -> dict:
    import plotly.graph_objects as go

    from nbkit.signatures.evaluation import score_table

    examples = session.dev_examples(params.n_dev)
    adapter = session.resolve_adapter(params.adapter)
    results = {}
    for kind in params.modules:
        res = session.evaluate(session.module(kind, params.signature), examples, adapter=adapter, label=kind, signature=params.signature)
        results[kind] = res
        session.results[f"module:{kind}:{params.signature}:{adapter}:{params.n_dev}"] = res
        if live is not None:
            for slice_name, score in res.score_by_slice().items():
                live.add(f"hit@3 {slice_name}", kind, score)
            live.add("contract violation rate", kind, res.violation_rate)
    table = score_table(results)
    fig = go.Figure(layout=dict(title=f"Modules behind {params.signature} signature ({adapter} adapter, {len(examples)} dev examples)",
                                barmode="group", yaxis=dict(title="rate", range=[0, 1.05]), template="plotly_white", height=380))  # fmt: skip
    for col in ("hit@3 standard", "hit@3 colloquial", "contract violation rate"):
        fig.add_bar(name=col, x=table["program"].tolist(), y=table[col].tolist())
    return {"figure": fig, "table": table, "results": results}


# -- 2. contract failures per adapter ---------------------------------------------------------
@dataclass
class ContractParams:
    n_dev: int = field(default=4, metadata={"min": 1, "max": 16, "label": "dev cases (x2 phrasings)"})
    adapters: tuple = field(default=ADAPTERS, metadata={"choices": list(ADAPTERS)})
    module: str = field(default="predict", metadata={"choices": list(MODULES)})
    signature: str = field(default="typed", metadata={"choices": ["typed", "seed"]})


def run_contracts(session: SignatureSession, params: ContractParams, live=None) -> dict:
    import pandas as pd
    import plotly.graph_objects as go

    from nbkit.signatures.evaluation import violation_examples, violation_table

    examples = session.dev_examples(params.n_dev)
    results = {}
    for adapter in params.adapters:
        if adapter == "json_grammar" and session.server is None:
            continue  # a grammar needs the local llama.cpp server
        key = f"module:{params.module}:{params.signature}:{adapter}:{params.n_dev}"
        res = session.results.get(key) or session.evaluate(session.module(params.module, params.signature), examples, adapter=adapter, label=adapter, signature=params.signature)
        session.results[key] = res
        results[adapter] = res
        if live is not None:
            live.add("violation rate", adapter, res.violation_rate)
    counts = violation_table(results)
    fig = go.Figure(layout=dict(title=f"Contract violations by kind ({params.module}, {len(examples)} examples, JSON fallback off)",
                                barmode="stack", yaxis_title="count", template="plotly_white", height=380))  # fmt: skip
    for kind in VIOLATION_KINDS:
        fig.add_bar(name=kind, x=list(counts.columns), y=[int(counts.loc[kind, c]) for c in counts.columns])
    examples_table = pd.DataFrame([dict(adapter=a, **e) for a, r in results.items() for e in violation_examples(r)])
    rates = {a: r.violation_rate for a, r in results.items()}
    return {"figure": fig, "counts": counts, "examples": examples_table, "rates": rates, "results": results}


# -- 3. compiling and the colloquial mix ------------------------------------------------------
@dataclass
class CompileParams:
    n_dev: int = field(default=4, metadata={"min": 1, "max": 16, "label": "dev cases (x2 phrasings)"})
    compile_size: int = field(default=6, metadata={"min": 1, "max": 25})
    max_demos: int = field(default=2, metadata={"min": 0, "max": 8})
    mixes: tuple = field(default=(0.0, 0.5), metadata={"choices": [0.0, 0.125, 0.25, 0.5, 1.0]})
    module: str = field(default="predict", metadata={"choices": list(MODULES)})
    random_search: bool = True
    num_candidates: int = field(default=1, metadata={"min": 1, "max": 8})
    n_val: int = field(default=2, metadata={"min": 1, "max": 10, "label": "val cases (x2)"})
    adapter: str = field(default="auto", metadata={"choices": ["auto", *ADAPTERS]})


def run_compile(session: SignatureSession, params: CompileParams, live=None) -> dict:
    import pandas as pd
    import plotly.graph_objects as go

    from nbkit.signatures.compiling import candidate_scores, compile_program, demo_counts, mix_experiment
    from nbkit.signatures.data import compile_mix, to_examples

    examples = session.dev_examples(params.n_dev)
    adapter = session.resolve_adapter(params.adapter)
    lm = session.lm_for(adapter)
    base_key = f"module:{params.module}:typed:{adapter}:{params.n_dev}"
    baseline = session.results.get(base_key) or session.evaluate(session.module(params.module), examples, adapter=adapter, label="uncompiled")
    session.results[base_key] = baseline
    base = baseline.score_by_slice()
    if live is not None:
        for s, v in base.items():
            live.add(f"hit@3 {s}", "uncompiled", v)
    metric = session.metric()

    def on_mix(mix, row):
        if live is not None:
            live.add("hit@3 standard", f"BFS {mix:.0%} coll.", row["hit@3 standard"])
            live.add("hit@3 colloquial", f"BFS {mix:.0%} coll.", row["hit@3 colloquial"])

    start = time.perf_counter()
    rows = mix_experiment(
        lambda: session.module(params.module), session.splits.train, examples, mixes=tuple(sorted(params.mixes)), size=params.compile_size,
        metric=metric, lm=lm, kb=session.kb, adapter=make_adapter(adapter), max_demos=params.max_demos, seed=session.seed,
        num_threads=session.num_threads, server=session.server, progress=on_mix,
    )  # fmt: skip
    programs = {f"BFS {r['colloquial share']:.0%} colloquial": r["program"] for r in rows}
    table_rows = [{"program": "uncompiled", "hit@3 standard": base.get("standard"), "hit@3 colloquial": base.get("colloquial"),
                   "contract violation rate": baseline.violation_rate}]  # fmt: skip
    table_rows += [{"program": name, **{k: v for k, v in r.items() if k not in ("program", "result")}} for name, r in zip(programs, rows, strict=True)]
    rs_info: dict[str, Any] = {"ran": False}
    if params.random_search:
        mix = max(params.mixes) if params.mixes else 0.125
        compile_set = compile_mix(session.splits.train, params.compile_size, mix, seed=session.seed)
        valset = to_examples(session.splits.val[: params.n_val])
        rs_program = compile_program(
            "random_search", session.module(params.module), compile_set, metric=metric, lm=lm, adapter=make_adapter(adapter),
            valset=valset, max_demos=params.max_demos, num_candidates=params.num_candidates, num_threads=session.num_threads,
        )  # fmt: skip
        rs = session.evaluate(rs_program, examples, adapter=adapter, label="random search", progress=False)
        by = rs.score_by_slice()
        programs[f"RS {mix:.0%} colloquial"] = rs_program
        table_rows.append({"program": f"RS {mix:.0%} colloquial", "colloquial share": mix, "hit@3 standard": by.get("standard"),
                           "hit@3 colloquial": by.get("colloquial"), "contract violation rate": rs.violation_rate,
                           "demos bootstrapped": demo_counts(rs_program)["bootstrapped"], "demos labeled": demo_counts(rs_program)["labeled"]})  # fmt: skip
        rs_info = {"ran": True, "candidates": candidate_scores(rs_program), "val examples": len(valset)}
        if live is not None:
            for s, v in by.items():
                live.add(f"hit@3 {s}", f"RS {mix:.0%} coll.", v)
    table = pd.DataFrame(table_rows)
    gains = {}
    for _, row in table.iloc[1:].iterrows():
        gains[row["program"]] = {s: (row[f"hit@3 {s}"] - base[s]) if base.get(s) is not None else None for s in ("standard", "colloquial")}
    fig = go.Figure(layout=dict(title=f"Compiling: hit@3 by slice ({len(examples)} dev examples, {adapter} adapter)", barmode="group",
                                yaxis=dict(title="hit@3", range=[0, 1.05]), template="plotly_white", height=380))  # fmt: skip
    for s in ("standard", "colloquial"):
        fig.add_bar(name=s, x=table["program"].tolist(), y=table[f"hit@3 {s}"].tolist())
    return {"figure": fig, "table": table, "gains": gains, "programs": programs, "random_search": rs_info, "adapter": adapter,
            "seconds": time.perf_counter() - start}


# -- 4. ask every module, see the contract check live ----------------------------------------
@dataclass
class AskParams:
    symptoms: str = "my mom's blood pressure is high and she keeps getting dizzy, can she take aspirin?"
    modules: tuple = field(default=("predict",), metadata={"choices": list(MODULES)})
    signature: str = field(default="typed", metadata={"choices": ["typed", "seed"]})
    adapter: str = field(default="auto", metadata={"choices": ["auto", *ADAPTERS]})


def run_ask(session: SignatureSession, params: AskParams, live=None) -> dict:
    import dspy
    import pandas as pd
    import plotly.graph_objects as go

    if not params.symptoms.strip():
        raise ValueError("type some symptoms first")
    rows = []
    fig = go.Figure(layout=dict(title="Structured answers (confidence per condition)", barmode="group", yaxis_title="confidence",
                                template="plotly_white", height=360))  # fmt: skip
    for kind in params.modules:
        outputs, error = None, None
        start = time.perf_counter()
        try:
            adapter = session.resolve_adapter(params.adapter)
            with dspy.context(lm=session.lm_for(adapter, params.signature), adapter=make_adapter(adapter)):
                pred = session.module(kind, params.signature)(symptoms=params.symptoms)
            outputs = {k: v for k, v in pred.items()}
        except Exception as exc:  # the panel shows the failure as a contract violation
            if session.server is not None:
                session.server.ensure_running()
            error = exc
        violations = check_contract(outputs, error, output_fields=tuple(session.signature(params.signature).output_fields))
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
    return {"figure": fig, "table": pd.DataFrame(rows)}


# -- 5. history viewer ------------------------------------------------------------------------
@dataclass
class HistoryParams:
    n: int = field(default=1, metadata={"min": 1, "max": 10, "label": "last N calls"})


def run_history(session: SignatureSession, params: HistoryParams) -> dict:
    """``dspy.inspect_history`` (DSPy's global history), captured as text (prompt, response, usage)."""
    import dspy
    import plotly.graph_objects as go

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        dspy.inspect_history(n=params.n)
    entries = session.history()[-params.n :]
    tokens = [int((e.get("usage") or {}).get("completion_tokens") or 0) for e in entries]
    fig = go.Figure(layout=dict(title=f"Completion tokens of the last {len(entries)} calls (max_tokens={session.handle.max_tokens})",
                                template="plotly_white", height=300, xaxis_title="call", yaxis_title="tokens"))  # fmt: skip
    fig.add_bar(name="completion tokens", x=list(range(len(tokens))), y=tokens)
    fig.add_scatter(name="max_tokens", x=list(range(len(tokens))), y=[session.handle.max_tokens] * len(tokens), mode="lines")
    return {"figure": fig, "text": buf.getvalue(), "tokens": tokens}


def show_text(result) -> Any:
    from IPython.display import Pretty

    return Pretty(result["text"][-6000:]) if result and result.get("text") else None


def show_table(result) -> Any:
    return result.get("table") if isinstance(result, dict) else None


def make_panels(session: SignatureSession, widget: bool | None = None, **defaults) -> dict[str, Any]:
    """The notebook's panels, keyed by name, each with run functions bound to ``session``.

    ``defaults`` maps a panel name to a dict of parameter overrides for its starting values.
    """
    from nbkit.panels import Panel

    def bind(fn):
        def run(params, live):
            return fn(session, params, live)

        return run

    specs = {
        "modules": (ModulesParams, bind(run_modules), "Modules behind one signature", show_table),
        "contracts": (ContractParams, bind(run_contracts), "Contract failures per adapter", lambda r: r.get("counts")),
        "compile": (CompileParams, bind(run_compile), "Compiling and the colloquial mix", show_table),
        "ask": (AskParams, bind(run_ask), "Ask the modules", show_table),
        "history": (HistoryParams, lambda p: run_history(session, p), "LM call history (inspect_history)", show_text),
    }
    panels = {}
    for name, (cls, fn, title, shower) in specs.items():
        params = dataclasses.replace(cls(), **defaults.get(name, {}))
        panels[name] = Panel(params, fn, title=title, widget=widget, show_result=shower)
    return panels
