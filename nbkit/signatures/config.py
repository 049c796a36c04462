"""One dataclass per experiment of notebook 03, with the widget metadata on its fields and a ``smoke()`` preset.

``SessionConfig`` starts the LM (the local SmolLM2 llama.cpp servers, or any ``dspy.LM`` model) and loads
the data; the experiment configs below describe one panel each. ``n_dev = 0`` means *every* dev case,
each asked in both phrasings (standard and colloquial): the default run decides the module comparisons
on all of them (≥ 30 questions per module), SMOKE on two cases.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from nbkit.signatures.contracts import SIGNATURES
from nbkit.signatures.evaluation import ADAPTERS
from nbkit.signatures.modules import MODULES
from nbkit.signatures.retrieval import RETRIEVERS


def _smoke(cls, **changes):
    return dataclasses.replace(cls(), **changes)


def preset(cls, smoke: bool = False, **overrides):
    """``cls.smoke()`` or ``cls()``, with ``overrides`` (a notebook's parameters) applied; a typo is named."""
    base = cls.smoke() if smoke else cls()
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {unknown}; known: {sorted(known)}")
    return dataclasses.replace(base, **overrides)


@dataclass
class SessionConfig:
    """The LM and the data every experiment shares (not a panel: it starts servers)."""

    lm_model: str = field(default="local", metadata={"help": "'local' = SmolLM2-135M on llama.cpp servers nbkit starts; else any dspy.LM model string"})
    api_base: str = field(default="", metadata={"help": "for a remote/other server; ignored for 'local'"})
    api_key_env: str = field(default="", metadata={"help": "name of the environment variable holding the key (never the key)"})
    max_tokens: int = field(default=128, metadata={"min": 8, "max": 1024})
    seed: int = 0
    device: str = field(default="auto", metadata={"choices": ["auto", "cpu", "cuda"]})
    n_ctx: int = field(default=2048, metadata={"min": 256, "max": 8192})
    servers: int = field(default=0, metadata={"min": 0, "max": 64, "help": "local llama.cpp servers, one thread each; 0 = one per usable core"})
    server: str = field(default="auto", metadata={"choices": ["auto", "llama-server", "llama-cpp-python"],
                                                  "help": "auto: llama.cpp's llama-server (batching) when make setup built it, else llama-cpp-python's"})  # fmt: skip
    slots: int = field(default=4, metadata={"min": 1, "max": 64, "help": "requests each llama-server decodes together (llama-cpp-python: always 1)"})
    cache: str = field(default="disk", metadata={"choices": ["disk", "memory", "off"],
                                                 "help": "disk: a re-run with the same model, prompts and settings is answered from "
                                                         "DSPy's on-disk cache (counted in lm_calls); memory: within this run only"})  # fmt: skip
    cases_path: str = field(default="", metadata={"help": "JSONL of medical cases; '' = the shipped 63 cases"})
    kb_path: str = field(default="", metadata={"help": "JSONL knowledge base; '' = the shipped 49 conditions"})

    @classmethod
    def smoke(cls) -> SessionConfig:
        return cls()  # the same LM: SMOKE shrinks the experiments, not the model


@dataclass
class TokenLimitConfig:
    """Does ``max_tokens`` reach the server? And the runaway on a *stock* llama-cpp-python server."""

    limit: int = field(default=16, metadata={"min": 4, "max": 128, "help": "the token limit each probe sends"})
    stock_n_ctx: int = field(default=256, metadata={"min": 64, "max": 4096, "help": "context of the stock server: bounds the runaway"})
    stock_server: bool = field(default=True, metadata={"help": "start a stock server and reproduce the runaway (local LM only)"})

    @classmethod
    def smoke(cls) -> TokenLimitConfig:
        return cls()  # one bounded request: already small


@dataclass
class RetrievalConfig:
    """Recall@k of each retriever; the one the HybridRetriever uses is chosen on the validation split."""

    retrievers: tuple = field(default=RETRIEVERS, metadata={"choices": list(RETRIEVERS)})
    k: int = field(default=3, metadata={"min": 1, "max": 10})

    @classmethod
    def smoke(cls) -> RetrievalConfig:
        return _smoke(cls, retrievers=("bm25",))


@dataclass
class ModulesConfig:
    n_dev: int = field(default=0, metadata={"min": 0, "max": 40, "label": "dev cases (0 = all; x2 phrasings)"})
    modules: tuple = field(default=MODULES, metadata={"choices": list(MODULES)})
    signature: str = field(default="typed", metadata={"choices": list(SIGNATURES)})
    adapter: str = field(default="auto", metadata={"choices": ["auto", *ADAPTERS]})

    @classmethod
    def smoke(cls) -> ModulesConfig:
        return _smoke(cls, n_dev=2)


@dataclass
class ContractsConfig:
    n_dev: int = field(default=0, metadata={"min": 0, "max": 40, "label": "dev cases (0 = all; x2 phrasings)"})
    # "json" (schema in the prompt, no grammar) is a choice, not a default: on the 135M model every answer
    # ran to max_tokens without closing the JSON (30/30 broken, ~125 tokens each: the costliest 15 % of a
    # default run's tokens) and no claim reads it; chat vs json_grammar is the comparison the claims decide.
    adapters: tuple = field(default=("chat", "json_grammar"), metadata={"choices": list(ADAPTERS)})
    module: str = field(default="predict", metadata={"choices": list(MODULES)})
    signature: str = field(default="typed", metadata={"choices": list(SIGNATURES)})
    field_notes_signature: bool = field(default=True, metadata={"label": "also the field notes' string signature"})
    # auto = json_grammar on the local server: the grammar guarantees the two string fields, so what is
    # counted is what the model writes *inside* "diagnosis" (a number or a word like "high"). Under chat
    # the 135M model never produced the field markers (30/30 missing fields): nothing left to count.
    field_notes_adapter: str = field(default="auto", metadata={"choices": ["auto", *ADAPTERS], "help": "adapter for the field notes' signature"})
    # train + val + dev (50 of the 63 shipped cases, 100 questions): "confidence in words" is judged per answer,
    # and refuting it (0 of n with a Wilson upper bound under 5 %) needs at least 73 answers; dev alone has 30.
    field_notes_splits: tuple = field(default=("train", "val", "dev"), metadata={"choices": ["train", "val", "dev"],
                                                                                 "help": "splits the field notes' signature is asked on (never test)"})  # fmt: skip

    @classmethod
    def smoke(cls) -> ContractsConfig:
        return _smoke(cls, n_dev=2, field_notes_splits=("dev",))


@dataclass
class CompileConfig:
    n_dev: int = field(default=0, metadata={"min": 0, "max": 40, "label": "dev cases (0 = all; x2 phrasings)"})
    compile_size: int = field(default=6, metadata={"min": 1, "max": 25})
    max_demos: int = field(default=2, metadata={"min": 0, "max": 8})
    mixes: tuple = field(default=(0.0, 0.5), metadata={"choices": [0.0, 0.125, 0.25, 0.5, 1.0]})
    module: str = field(default="auto", metadata={"choices": ["auto", *MODULES],
                                                  "help": "auto: the module with the best uncompiled hit@3 on the val cases (never dev)"})  # fmt: skip
    random_search: bool = True
    num_candidates: int = field(default=1, metadata={"min": 1, "max": 8})
    # 5 val cases (10 questions) per candidate: random search scores 3 candidates, so all 10 val cases cost
    # 60 LM calls — a quarter of the compile cell — to pick among programs that the dev set then compares.
    n_val: int = field(default=5, metadata={"min": 0, "max": 20, "label": "val cases for random search (0 = all; x2)"})
    adapter: str = field(default="auto", metadata={"choices": ["auto", *ADAPTERS]})

    @classmethod
    def smoke(cls) -> CompileConfig:
        return _smoke(cls, n_dev=2, compile_size=2, max_demos=1, module="predict", random_search=False)


@dataclass
class AskConfig:
    symptoms: str = "my mom's blood pressure is high and she keeps getting dizzy, can she take aspirin?"
    modules: tuple = field(default=("predict",), metadata={"choices": list(MODULES)})
    signature: str = field(default="typed", metadata={"choices": list(SIGNATURES)})
    adapter: str = field(default="auto", metadata={"choices": ["auto", *ADAPTERS]})

    @classmethod
    def smoke(cls) -> AskConfig:
        return cls()


@dataclass
class HistoryConfig:
    n: int = field(default=1, metadata={"min": 1, "max": 10, "label": "last N calls"})

    @classmethod
    def smoke(cls) -> HistoryConfig:
        return cls()


@dataclass
class UserContractConfig:
    """Your own contract: a DSPy signature, a JSONL dev set with its fields, and a stated metric."""

    signature: str = field(default="", metadata={"help": "DSPy string signature ('question -> answer') or module:Class"})
    dev_set: str = field(default="", metadata={"help": "JSONL, one example per line with every field of the signature"})
    metric: str = field(default="exact", metadata={"help": "exact, contains, or module:function"})
    modules: tuple = field(default=("predict", "cot"), metadata={"choices": ["predict", "cot"]})
    adapters: tuple = field(default=ADAPTERS, metadata={"choices": list(ADAPTERS)})
    adapter: str = field(default="auto", metadata={"choices": ["auto", *ADAPTERS], "help": "the adapter the modules are compared under"})

    @classmethod
    def smoke(cls) -> UserContractConfig:
        return cls()
