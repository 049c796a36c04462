"""One dataclass per experiment of notebook 03, its fields written with :func:`nbkit.experiment.param`, each
with a ``smoke()`` preset. Where a claim needs more units than the defaults give, the full profile's budget is
declared where the experiment is registered (``Replicates`` in :mod:`nbkit.signatures.experiments`).

``SessionConfig`` holds the options of :class:`~nbkit.signatures.context.SignaturesContext` (the data, and
the local SmolLM2 llama.cpp servers or any ``dspy.LM`` model; the device is the context's own); the
experiment configs below describe one panel each. ``n_dev = 0`` means *every* dev case, each asked in both
phrasings (standard and colloquial). A config is built one way, by the context's smoke and profile:
``experiments.show(slug, ctx, **overrides)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from nbkit.experiment import param
from nbkit.signatures.contracts import SIGNATURES
from nbkit.signatures.evaluation import ADAPTERS
from nbkit.signatures.modules import MODULES
from nbkit.signatures.retrieval import RETRIEVERS

DEV_CASES = "dev cases (0 = all; x2 phrasings)"
# Each replicating experiment's budget: the most units a profile spends on it (the designs and the spreads
# they rest on: nbkit.signatures.claims, docs/claims.md, bench/RESULTS.md). The modules are asked on the
# dev cases at the defaults, on every case but test's in the full profile; the compile loop stops once its
# claims are decided.
MODULES_CASES, MODULES_FULL_CASES = 15, 50
COMPILES, FULL_COMPILES = 1, 40


@dataclass
class SessionConfig:
    """The options of a :class:`~nbkit.signatures.context.SignaturesContext`: the LM and the data every
    experiment shares (not a panel: it starts servers)."""

    lm_model: str = param(
        "local",
        help="'local' = SmolLM2-135M on llama.cpp servers nbkit starts; else any dspy.LM model string",
    )
    api_base: str = param("", help="for a remote/other server; ignored for 'local'")
    api_key_env: str = param("", help="name of the environment variable holding the key (never the key)")
    max_tokens: int = param(128, min=8, max=1024)
    seed: int = param(0, help="fixes the splits (by case) and every compile set")
    n_ctx: int = param(2048, min=256, max=8192)
    servers: int = param(
        0,
        min=0,
        max=64,
        help="local llama.cpp servers, one thread each; 0 = one per core this kernel may keep busy",
    )
    server: str = param(
        "auto",
        choices=["auto", "llama-server", "llama-cpp-python"],
        help="auto: llama.cpp's batching llama-server on CUDA (when make setup built it), else "
        "llama-cpp-python's: one request at a time, the same answers whatever the load",
    )
    slots: int = param(
        4, min=1, max=64, help="requests each llama-server decodes together (llama-cpp-python: always 1)"
    )
    cache: str = param(
        "disk",
        choices=["disk", "memory", "off"],
        help="disk: a re-run with the same model, prompts and settings is answered from "
        "DSPy's on-disk cache (counted in lm_calls); memory: within this run only",
    )
    cases_path: str = param("", help="JSONL of medical cases; '' = the shipped 63 cases")
    kb_path: str = param("", help="JSONL knowledge base; '' = the shipped 49 conditions")

    @classmethod
    def smoke(cls) -> SessionConfig:
        return cls()  # the same LM: SMOKE shrinks the experiments, not the model


@dataclass
class DataConfig:
    """The cases and the knowledge base the context loaded, and a few cases to read."""

    preview: int = param(3, min=0, max=20, help="cases shown")

    @classmethod
    def smoke(cls) -> DataConfig:
        return cls()


@dataclass
class SignatureConfig:
    """The typed signature derived from the hand-written examples, next to the field notes' string
    signature."""

    @classmethod
    def smoke(cls) -> SignatureConfig:
        return cls()


@dataclass
class TokenLimitConfig:
    """Does ``max_tokens`` reach the server? And the runaway on a *stock* llama-cpp-python server."""

    limit: int = param(16, min=4, max=128, help="the token limit each probe sends")
    stock_n_ctx: int = param(
        256, min=64, max=4096, help="context of the stock server: bounds the runaway", advanced=True
    )
    stock_server: bool = param(
        True, help="start a stock server and reproduce the runaway (local LM only)", advanced=True
    )

    @classmethod
    def smoke(cls) -> TokenLimitConfig:
        return cls()  # one bounded request: already small


@dataclass
class RetrievalConfig:
    """Recall@k of each retriever; the one the HybridRetriever uses is chosen on the validation split."""

    retrievers: tuple = param(RETRIEVERS, choices=RETRIEVERS, advanced=False)
    k: int = param(3, min=1, max=10)

    @classmethod
    def smoke(cls) -> RetrievalConfig:
        return dataclasses.replace(cls(), retrievers=("bm25",))


@dataclass
class ModulesConfig:
    """Every module behind one signature, on the same questions: the first ``cases`` cases of dev, then of
    val, then of train (never test), both phrasings. Nothing is chosen on these answers, so train and val
    may be asked too; the case is the unit the contract claim's interval is over."""

    cases: int = param(
        MODULES_CASES,
        min=1,
        max=200,
        label="cases (x2 phrasings)",
        help="cases asked: dev's first, then val's, then train's (never test)",
    )
    modules: tuple = param(MODULES, choices=MODULES, advanced=False)
    signature: str = param("typed", choices=SIGNATURES)
    adapter: str = param("auto", choices=["auto", *ADAPTERS])

    @classmethod
    def smoke(cls) -> ModulesConfig:
        return dataclasses.replace(cls(), cases=2)


@dataclass
class ContractsConfig:
    """One module under each adapter, its contract violations counted by kind; then the field notes'
    signature.

    ``json`` (the schema in the prompt, no grammar) is a choice, not a default: on the 135M model its answers
    run to ``max_tokens`` without closing the JSON, and no claim reads it; chat vs json_grammar is the
    comparison the claims decide. The field notes' signature defaults to the grammar (``auto``): it guarantees
    the two string fields, so what is counted is what the model writes *inside* "diagnosis" (a number or a
    word like "high"); under chat the 135M model does not write the field markers, leaving nothing to count.
    It is asked on train, val and dev (never test): "confidence in words" is judged per answer, and refuting
    it (0 of n with a Wilson upper bound under 5 %) needs at least 73 answers, more than dev alone has.
    """

    n_dev: int = param(0, min=0, max=40, label=DEV_CASES)
    adapters: tuple = param(("chat", "json_grammar"), choices=ADAPTERS, advanced=False)
    module: str = param("predict", choices=MODULES)
    signature: str = param("typed", choices=SIGNATURES)
    field_notes_signature: bool = param(True, label="also the field notes' string signature", advanced=True)
    field_notes_adapter: str = param(
        "auto",
        choices=["auto", *ADAPTERS],
        help="adapter for the field notes' signature",
        advanced=True,
    )
    field_notes_splits: tuple = param(
        ("train", "val", "dev"),
        choices=["train", "val", "dev"],
        help="splits the field notes' signature is asked on (never test)",
    )

    @classmethod
    def smoke(cls) -> ContractsConfig:
        return dataclasses.replace(cls(), n_dev=2, field_notes_splits=("dev",))


@dataclass
class CompileConfig:
    """BootstrapFewShot on ``compiles`` compile sets (one per seed, each drawing its own training cases),
    each compiled at every colloquial share of ``mixes`` (the share changes the wording, never the cases),
    then (optionally) BootstrapFewShotWithRandomSearch on each set at the largest share.

    A compile claim's unit is the compile set (the interval is over compile sets × dev cases): one compile
    stands for one draw of demos, so the loop compiles set after set, up to ``compiles``, and stops once
    its claims are decided. ``compile_size`` 10 makes the notes' 10 % exactly one colloquial example.
    Random search (off by default: its claim needs more dev cases than the data has, see
    ``nbkit.signatures.claims``) scores DSPy's 16 candidates on ``n_val`` validation cases (0 = all).
    """

    n_dev: int = param(0, min=0, max=40, label=DEV_CASES)
    compile_size: int = param(10, min=1, max=25)
    max_demos: int = param(2, min=0, max=8)
    mixes: tuple = param((0.0, 0.1), choices=[0.0, 0.1, 0.125, 0.25, 0.5, 1.0])
    compiles: int = param(
        COMPILES,
        min=1,
        max=40,
        help="the most compile sets, one per seed, each program compiled on each (stops once its claims "
        "are decided)",
    )
    module: str = param(
        "auto",
        choices=["auto", *MODULES],
        help="auto: the module with the best uncompiled hit@3 on the val cases (never dev)",
    )
    random_search: bool = False
    num_candidates: int = param(
        16, min=1, max=32, help="random candidates (DSPy's default: 16)", advanced=True
    )
    n_val: int = param(5, min=0, max=20, label="val cases for choices (0 = all; x2)", advanced=True)
    adapter: str = param("auto", choices=["auto", *ADAPTERS])

    @classmethod
    def smoke(cls) -> CompileConfig:
        return dataclasses.replace(cls(), n_dev=2, compile_size=2, max_demos=1, module="predict")


@dataclass
class RoundtripConfig:
    """The compile experiment's first program saved as JSON and loaded into a fresh module."""

    @classmethod
    def smoke(cls) -> RoundtripConfig:
        return cls()


@dataclass
class AskConfig:
    """Symptoms typed by the reader, answered by each chosen module."""

    symptoms: str = "my mom's blood pressure is high and she keeps getting dizzy, can she take aspirin?"
    modules: tuple = param(("predict",), choices=MODULES, advanced=False)
    signature: str = param("typed", choices=SIGNATURES)
    adapter: str = param("auto", choices=["auto", *ADAPTERS])

    @classmethod
    def smoke(cls) -> AskConfig:
        return cls()


@dataclass
class HistoryConfig:
    """The last calls of the context's LM."""

    n: int = param(1, min=1, max=10, label="last N calls")

    @classmethod
    def smoke(cls) -> HistoryConfig:
        return cls()


@dataclass
class UserContractConfig:
    """Your own contract: a DSPy signature, a JSONL dev set with its fields, and a stated metric."""

    signature: str = param("", help="DSPy string signature ('question -> answer') or module:Class")
    dev_set: str = param("", help="JSONL, one example per line with every field of the signature")
    metric: str = param("exact", help="exact, contains, or module:function")
    modules: tuple = param(("predict", "cot"), choices=["predict", "cot"])
    adapters: tuple = param(ADAPTERS, choices=ADAPTERS)
    adapter: str = param(
        "auto", choices=["auto", *ADAPTERS], help="the adapter the modules are compared under"
    )

    @classmethod
    def smoke(cls) -> UserContractConfig:
        return cls()
