"""What notebook 03's experiments share: :class:`SignaturesContext`.

Opened one way, ``SignaturesContext(DEVICE, smoke=SMOKE, profile=PROFILE, **options)`` (the options are
:class:`~nbkit.signatures.config.SessionConfig`'s fields; an unknown one is a ``UsageError``): it loads and
validates the knowledge base and the cases at once (cheap, fails fast), fixes the splits by the seed, and
starts the LM (:class:`~nbkit.signatures.serving.LMService`) on first use. It builds the modules behind a
signature, evaluates programs on labelled questions, and evaluates each module on the dev questions once
(cached), so two experiments that ask the same questions share the answers.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from nbkit.claims import DEFAULT
from nbkit.experiment import Context, config_for
from nbkit.signatures.cases import load_cases, load_knowledge_base, split_cases, to_examples
from nbkit.signatures.config import SessionConfig
from nbkit.signatures.contracts import signature_by_name
from nbkit.signatures.evaluation import evaluate_program, make_adapter, make_metric
from nbkit.signatures.modules import build_module
from nbkit.signatures.retrieval import build_retriever
from nbkit.signatures.serving import LMService

if TYPE_CHECKING:
    from nbkit.signatures.evaluation import EvalResult
    from nbkit.signatures.lm import LMHandle
    from nbkit.signatures.server import LocalLMPool

SPLITS = ("train", "val", "dev", "test")


class SignaturesContext(Context):
    """Notebook 03's context: data, splits, retrievers, the LM and its servers, and every result by slug.

    ``handle`` is a ready ``LMHandle`` (tests: ``dspy.utils.DummyLM``, no server); without it the LM starts
    on first use, on this context's device.
    """

    def __init__(
        self,
        device: str = "auto",
        *,
        smoke: bool = False,
        profile: str = DEFAULT,
        handle: LMHandle | None = None,
        **options: Any,
    ) -> None:
        super().__init__(device, smoke=smoke, profile=profile)
        self.options = config_for(SessionConfig, **options)
        self.kb = load_knowledge_base(self.options.kb_path or None)
        self.cases = load_cases(self.options.cases_path or None, self.kb)
        self.seed = self.options.seed
        self.splits = split_cases(self.cases, self.seed)
        self.retriever_kind = "bm25"  # until the retrieval experiment chooses one on validation
        self.llm = LMService(self.options, handle)
        self.started = time.perf_counter()

    # -- the LM ------------------------------------------------------------------------------------
    def start_lm(self) -> LMHandle:
        """Start the LM (once), on this context's device."""
        return self.llm.start(self.torch_device.type)

    @property
    def lm(self) -> Any:
        self.start_lm()
        return self.llm.lm

    @property
    def server(self) -> LocalLMPool | None:
        self.start_lm()
        return self.llm.server

    @property
    def num_threads(self) -> int:
        self.start_lm()
        return self.llm.num_threads

    def lm_for(self, adapter: str, signature: Any = "typed") -> Any:
        """The LM for ``adapter`` (for ``json_grammar`` a copy sending the signature's schema; ``signature`` a
        name or a signature class)."""
        self.start_lm()
        return self.llm.lm_for(
            adapter, self.signature(signature) if isinstance(signature, str) else signature
        )

    def resolve_adapter(self, adapter: str) -> str:
        """``auto``: the grammar on the local server, the chat adapter on any other LM."""
        if adapter == "auto":
            return "json_grammar" if self.server is not None else "chat"
        return adapter

    # -- data, modules, evaluation ------------------------------------------------------------------
    def retriever(self, kind: str | None = None) -> Any:
        kind = kind or self.retriever_kind
        return self.cached(
            ("retriever", kind), lambda: build_retriever(kind, self.kb, device=str(self.torch_device))
        )

    def signature(self, name: str = "typed") -> Any:
        return signature_by_name(name)

    def module(self, kind: str, signature: str = "typed") -> Any:
        return build_module(kind, self.signature(signature), self.retriever() if kind == "hybrid" else None)

    def cases_of(self, splits: tuple[str, ...] = ("dev",), n_dev: int = 0) -> list[dict[str, Any]]:
        """The cases of ``splits`` in split order; of dev only the first ``n_dev`` (0 = all of them). The
        test split is never asked: it is touched once, by the retrieval experiment."""
        if n_dev < 0:
            raise ValueError(f"n_dev must be >= 0 (0 = every dev case), got {n_dev}")
        unknown = [s for s in splits if s not in SPLITS[:3]]
        if unknown:
            raise ValueError(f"splits {unknown}: expected some of {SPLITS[:3]} (test is never asked)")
        out: list[dict[str, Any]] = []
        for name in SPLITS[:3]:
            if name in splits:
                cases = getattr(self.splits, name)
                out += cases[:n_dev] if name == "dev" and n_dev else list(cases)
        return out

    def first_cases(self, n: int) -> list[dict[str, Any]]:
        """The first ``n`` cases of dev, then of val, then of train (never test): a budget of cases that
        starts with the dev questions every other experiment asks, so their answers are shared."""
        if n < 0:
            raise ValueError(f"cases must be >= 0, got {n}")
        return [*self.splits.dev, *self.splits.val, *self.splits.train][:n]

    def dev_examples(self, n_cases: int = 0) -> list:
        return to_examples(self.cases_of(("dev",), n_cases))

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
        self,
        kind: str,
        signature: str,
        adapter: str,
        n_dev: int = 0,
        splits: tuple[str, ...] = ("dev",),
        label: str = "",
        cases: list[dict[str, Any]] | None = None,
    ) -> EvalResult:
        """A module's result on the questions of ``splits`` (dev: the first ``n_dev`` cases), or of
        ``cases`` when given, computed once per (module, signature, adapter, questions) in this context."""
        adapter = self.resolve_adapter(adapter)
        cases = self.cases_of(splits, n_dev) if cases is None else cases
        return self.cached(
            ("module", kind, signature, adapter, tuple(c["id"] for c in cases)),
            lambda: self.evaluate(
                self.module(kind, signature),
                to_examples(cases),
                adapter=adapter,
                label=label or kind,
                signature=signature,
            ),
        )

    def seconds(self) -> float:
        """Seconds since this context was opened."""
        return round(time.perf_counter() - self.started, 1)

    def close(self) -> None:
        """Stop the LM's servers (if it started any) and drop what this context cached."""
        self.llm.close()
        super().close()
