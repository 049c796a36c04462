"""What each experiment of notebook 03 measured: one frozen dataclass per experiment.

``experiments.py`` fills them (``Result[XMetrics].metrics``), ``claims.py`` reads their fields, and the
notebook records them as they are (``nbkit.record`` turns a dataclass into the JSON object of its
fields, in field order). The field names are the keys the notebook has always recorded, so a run's
``metrics.json`` keeps its shape.

Per-question outcomes (``questions``) stay plain dicts of equal-length lists (``keys``, ``hit``,
``clean``, ``structural``, ``bound_breaches``): they are columns that :func:`claims.paired` and
:func:`claims.by_slice` pair up by question, not named measurements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DataMetrics:
    """The shipped (or given) cases and knowledge base, and the size of each split (in cases)."""

    cases: int
    kb_conditions: int
    train: int
    val: int
    dev: int
    test: int


@dataclass(frozen=True)
class SignatureMetrics:
    """The bounds read off the hand-written examples, from which the typed signature's descriptions are
    built."""

    max_diagnoses: int
    confidence_min: float
    confidence_max: float
    reasoning_words_observed: int
    max_reasoning_words: int
    ordered: bool


@dataclass(frozen=True)
class TokenLimitMetrics:
    """Completion tokens per token-limit probe; the ``nbkit_*`` and ``stock_*`` fields need the local server
    (None with a remote model), the ``stock_*`` ones also ``stock_server``."""

    limit: int
    dspy_wire_fields: dict[str, Any]
    nbkit_max_tokens: int | None = None
    nbkit_max_completion_tokens: int | None = None
    lm_tokens_per_s_one_stream: float | None = None
    dspy_through_session: int | None = None
    dspy_prompt_tokens: int | None = None
    stock_n_ctx: int | None = None
    stock_context_full: bool | None = None
    stock_dspy_tokens: int | None = None
    stock_seconds: float | None = None


@dataclass(frozen=True)
class RetrievalMetrics:
    """Recall@k per retriever on validation, the one chosen there, and its recall on test (computed once)."""

    chosen: str
    chosen_on: str
    val_cases: int
    test_cases: int
    val: dict[str, dict[str, float]]
    test_of_chosen: dict[str, float]


@dataclass(frozen=True)
class ModulesMetrics:
    """Each module behind one signature on the same dev questions: scores by slice, per-question outcomes,
    bounds."""

    adapter: str
    signature: str
    dev_questions_evaluated: dict[str, int]
    scores: dict[str, dict[str, float]]
    questions: dict[str, dict[str, list]]
    bounds: dict[str, dict[str, int]]


@dataclass(frozen=True)
class FieldNotesAnswers:
    """The field notes' string signature, asked on ``splits``: violations by kind over every answer, then the
    prompt-only bounds among parsed answers (the last three kinds above are recounted over parsed answers
    only), and per answer whether any of its diagnosis items gives a non-numeric confidence."""

    adapter: str
    splits: list[str]
    questions: int
    violation_rate: float
    parse_error: int
    missing_field: int
    confidence_not_numeric: int
    confidence_out_of_range: int
    no_diagnosis: int
    too_many_diagnoses: int
    reasoning_over_50_words: int
    parsed_answers: int
    diagnosis_items: int
    answers_over_bounds: int
    answers_with_items: int
    answers_not_numeric: int


@dataclass(frozen=True)
class ContractsMetrics:
    """One module under each adapter on the same dev questions: violation rate, violations by kind,
    outcomes."""

    module: str
    signature: str
    dev_questions_evaluated: int
    violation_rate: dict[str, float]
    violations_by_kind: dict[str, dict[str, int]]
    questions: dict[str, dict[str, list]]
    bounds: dict[str, dict[str, int]]
    field_notes_signature: FieldNotesAnswers | None = None


@dataclass(frozen=True)
class ModuleChoice:
    """How ``module="auto"`` chose the compiled module: uncompiled hit@3 per module on ``questions`` val
    questions."""

    split: str
    questions: int
    hit_at_3: dict[str, float]


@dataclass(frozen=True)
class RandomSearchRun:
    """BootstrapFewShotWithRandomSearch, when it ran: its program's name, candidates' val scores, their
    number."""

    ran: bool = False
    program: str = ""
    candidates: list[dict[str, Any]] = field(default_factory=list)
    val_questions: int = 0
    num_candidates: int = 0


@dataclass(frozen=True)
class CompileMetrics:
    """Every compiled program (and the uncompiled baseline) on the same dev questions, by slice."""

    module: str
    module_chosen_on: ModuleChoice | None
    adapter: str
    dev_questions_evaluated: int
    table: list[dict[str, Any]]
    gains: dict[str, dict[str, float | None]]
    questions: dict[str, dict[str, list]]
    random_search: RandomSearchRun
    seconds: float


@dataclass(frozen=True)
class AskMetrics:
    """Whether each asked module's answer honoured the contract."""

    contract_holds: dict[str, bool]


@dataclass(frozen=True)
class LMCalls:
    """LM calls of a context so far: ``served`` by the LM in this run (with their completion tokens, the
    longest, how many exceeded ``max_tokens``) and answered ``from_cache`` (DSPy's cache returns no usage for
    those)."""

    calls: int
    served: int
    from_cache: int
    completion_tokens: int
    max_completion_tokens: int
    over_max_tokens: int
    max_tokens: int


@dataclass(frozen=True)
class SlotFill:
    """How full the local servers' slots were while they served (see ``server.Occupancy``): requests in slots
    on average while any was, as a share of ``capacity`` (servers × slots); ``queued_seconds``: time requests
    waited because every slot was busy."""

    capacity: int
    requests: int
    serving_seconds: float
    mean_in_flight: float | None
    fill: float | None
    queued_seconds: float


@dataclass(frozen=True)
class HistoryMetrics:
    """The context's LM calls so far, and how full the local servers' slots were (None for a remote LM)."""

    calls: LMCalls
    slots: SlotFill | None = None


@dataclass(frozen=True)
class UserContractMetrics:
    """A user's contract: not run (``why``) without both a signature and a dev set; else violation rate per
    adapter, score per module, and each module against Predict question by question (``vs_predict``)."""

    ran: bool
    why: str | None = None
    signature: str | None = None
    dev_set: str | None = None
    metric: str | None = None
    examples: int | None = None
    violation_rate: dict[str, float] | None = None
    score: dict[str, float] | None = None
    vs_predict: dict[str, dict[str, Any]] | None = None


@dataclass(frozen=True)
class RoundtripMetrics:
    """A compiled program saved to JSON and loaded into a fresh module: its size, demos, and whether the
    loaded program has the same demos and gives the same answer."""

    program: str
    bytes: int
    demos: dict[str, int]
    same_demos: bool
    same_answer: bool
