"""What each experiment of notebook 03 measured: one frozen dataclass per experiment, typed all the way down.

``experiments.py`` fills them (``Result[XMetrics].metrics``), ``claims.py`` reads their fields, and the
notebook records them under the experiment's slug (``nbkit.record`` turns a dataclass into the JSON object
of its fields, in field order).

A program's answers are kept question by question (:class:`Outcomes`, keyed ``case_id:slice``), so two
programs pair up question by question and the two phrasings of a case group into one case: the case is
what varies from one question to the next, not the phrasing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Outcomes:
    """One program's answers, question by question, in one order: ``keys`` (``case_id:slice``), ``hit``
    (hit@3, or a user's metric), ``clean`` (no contract violation), ``structural`` (a parse error or a
    missing field), ``bound_breaches`` (the prompt-only bounds a parsed answer breaks, by kind), ``items``
    (diagnosis items in the answer), ``not_numeric`` (an item's confidence is not a number), and the
    confidence values the answer carries at all (:func:`nbkit.signatures.contracts.confidence_values`:
    in its items, or in its text around the word), as numbers (``confidence_numbers``) and as words
    such as 'high' (``confidence_words``); an answer with neither gives no confidence."""

    keys: tuple[str, ...] = ()
    hit: tuple[float, ...] = ()
    clean: tuple[float, ...] = ()
    structural: tuple[float, ...] = ()
    bound_breaches: tuple[tuple[str, ...], ...] = ()
    items: tuple[int, ...] = ()
    not_numeric: tuple[float, ...] = ()
    confidence_numbers: tuple[int, ...] = ()
    confidence_words: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.keys)

    def values(self, what: str = "hit") -> dict[str, float]:
        """``what`` by question key."""
        return dict(zip(self.keys, getattr(self, what), strict=True))

    def cases(self) -> list[str]:
        """The cases these questions come from, in first-seen order."""
        return list(dict.fromkeys(k.rsplit(":", 1)[0] for k in self.keys))

    def case_hits(self, phrasing: str = "") -> dict[str, float]:
        """hit@3 by case: of one phrasing, or the mean of a case's phrasings."""
        if phrasing:
            return self.slice_values(phrasing)
        return {c: sum(v) / len(v) for c, v in self.by_case().items()}

    def slice_values(self, slice_name: str, what: str = "hit") -> dict[str, float]:
        """``what`` by case, for the questions of one phrasing (``standard`` or ``colloquial``)."""
        return {k.rsplit(":", 1)[0]: v for k, v in self.values(what).items() if k.endswith(f":{slice_name}")}

    def by_case(self, what: str = "hit") -> dict[str, list[float]]:
        """``what`` grouped by case (both phrasings of a case together)."""
        out: dict[str, list[float]] = {}
        for k, v in self.values(what).items():
            out.setdefault(k.rsplit(":", 1)[0], []).append(v)
        return out

    def case_counts(self, what: Sequence[float], among: Sequence[float] = ()) -> list[tuple[int, int]]:
        """Per case, in first-seen order: (Σ ``what``, questions) over its questions where ``among`` is
        true (every question when ``among`` is empty), each value read as 0/1; a case with none left
        out. The sample of a rate clustered by case."""
        out: dict[str, list[int]] = {}
        for key, value, keep in zip(self.keys, what, among or [1] * len(self.keys), strict=True):
            if keep:
                out.setdefault(key.rsplit(":", 1)[0], []).append(1 if value else 0)
        return [(sum(v), len(v)) for v in out.values()]

    def confidence_given(self) -> list[int]:
        """Per question: 1 when its answer parsed and gives a confidence at all, as a number or a word."""
        return [
            int(not s and n + w > 0)
            for s, n, w in zip(self.structural, self.confidence_numbers, self.confidence_words, strict=True)
        ]


@dataclass(frozen=True)
class AnswerBounds:
    """Breaches of the prompt-only bounds among *parsed* answers (a parse failure has no bounds to
    breach)."""

    parsed_answers: int = 0
    diagnosis_items: int = 0
    answers_over_bounds: int = 0
    reasoning_over_50_words: int = 0
    confidence_out_of_range: int = 0
    confidence_not_numeric: int = 0


@dataclass(frozen=True)
class ViolationCounts:
    """Contract violations by kind, over every answer."""

    parse_error: int = 0
    missing_field: int = 0
    confidence_not_numeric: int = 0
    confidence_out_of_range: int = 0
    no_diagnosis: int = 0
    too_many_diagnoses: int = 0
    reasoning_over_50_words: int = 0


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
    (None with a remote model), the ``stock_*`` ones also ``stock_server``. ``stock_dspy_tokens`` is what
    the stock server generated for DSPy's request: counted when it stopped by itself, else (its context
    filled, ``stock_tokens_imputed``) the tokens that fill the context, n_ctx − prompt, a lower bound."""

    limit: int
    dspy_limit_fields: tuple[str, ...]
    served_by: str = ""
    nbkit_max_tokens: int | None = None
    nbkit_max_completion_tokens: int | None = None
    lm_tokens_per_s_one_stream: float | None = None
    dspy_through_session: int | None = None
    dspy_prompt_tokens: int | None = None
    stock_n_ctx: int | None = None
    stock_context_full: bool | None = None
    stock_dspy_tokens: int | None = None
    stock_tokens_imputed: bool | None = None
    stock_seconds: float | None = None

    def probes(self) -> list[int]:
        """The completion tokens of the cell's own requests at ``limit`` (never cached): a story prompt
        raw with either field, and through DSPy."""
        return [
            v
            for v in (self.nbkit_max_tokens, self.nbkit_max_completion_tokens, self.dspy_through_session)
            if v is not None
        ]


@dataclass(frozen=True)
class RecallAt:
    """Recall@k of one retriever on one split, per phrasing."""

    retriever: str
    split: str
    standard: float
    colloquial: float


@dataclass(frozen=True)
class RetrievalMetrics:
    """Recall@k per retriever on validation, the one chosen there, and its recall on test (computed once)."""

    k: int
    chosen: str
    chosen_on: str
    val_cases: int
    test_cases: int
    val: tuple[RecallAt, ...]
    test_of_chosen: RecallAt


@dataclass(frozen=True)
class ModuleRun:
    """One module behind the signature: hit@3 overall and per phrasing, answers naming an acceptable
    diagnosis in any format, contract violations, bound breaches, and every answer."""

    module: str
    questions: int
    hit_at_3: float
    standard: float | None
    colloquial: float | None
    mentions_expected: float
    contract_violation_rate: float
    bounds: AnswerBounds
    outcomes: Outcomes


@dataclass(frozen=True)
class ModulesMetrics:
    """Each module behind one signature on the same questions (``splits``' cases, both phrasings)."""

    adapter: str
    signature: str
    splits: tuple[str, ...]
    cases: int
    runs: tuple[ModuleRun, ...]

    def run(self, module: str) -> ModuleRun | None:
        return next((r for r in self.runs if r.module == module), None)


@dataclass(frozen=True)
class AdapterRun:
    """One module under one adapter: its violation rate, violations by kind, bound breaches, answers."""

    adapter: str
    violation_rate: float
    violations: ViolationCounts
    bounds: AnswerBounds
    outcomes: Outcomes


@dataclass(frozen=True)
class FieldNotesAnswers:
    """The field notes' string signature, asked on ``splits``: violations by kind over every answer, the
    prompt-only bounds among parsed answers, and every answer (``outcomes``: whether it parsed, its items,
    whether an item's confidence is not a number, its confidence values as numbers and as words)."""

    adapter: str
    splits: tuple[str, ...]
    questions: int
    violation_rate: float
    violations: ViolationCounts
    bounds: AnswerBounds
    answers_with_items: int
    answers_not_numeric: int
    # parsed answers that carry a confidence value at all, and those that give one as a word
    answers_with_confidence: int
    answers_confidence_in_words: int
    outcomes: Outcomes


@dataclass(frozen=True)
class ContractsMetrics:
    """One module under each adapter on the same dev questions, then the field notes' string signature."""

    module: str
    signature: str
    questions: int
    runs: tuple[AdapterRun, ...]
    field_notes_signature: FieldNotesAnswers | None = None

    def run(self, adapter: str) -> AdapterRun | None:
        return next((r for r in self.runs if r.adapter == adapter), None)


def request_breaches(
    modules: ModulesMetrics, contracts: ContractsMetrics
) -> tuple[list[tuple[int, int]], int]:
    """Per case (prompt-only bound breaches, parsed answers), each *request* (module or adapter, signature,
    question) counted once, and the distinct requests: the modules' Predict under the grammar and the
    contracts' json_grammar are the same requests (one cached result); the field notes' string signature
    states the same bounds in its prompt, so its parsed answers count too."""
    sources = [((r.module, modules.signature, modules.adapter), r.outcomes) for r in modules.runs]
    sources += [((contracts.module, contracts.signature, r.adapter), r.outcomes) for r in contracts.runs]
    if (fn := contracts.field_notes_signature) is not None:
        sources.append((("predict", "field_notes", fn.adapter), fn.outcomes))
    answers: dict[tuple, tuple] = {}
    for at, q in sources:
        for key, structural, breaches in zip(q.keys, q.structural, q.bound_breaches, strict=True):
            answers.setdefault((*at, key), (key, structural, breaches))
    by_case: dict[str, list[int]] = {}
    for key, structural, breaches in answers.values():
        if not structural:
            by_case.setdefault(key.rsplit(":", 1)[0], []).append(1 if breaches else 0)
    return [(sum(v), len(v)) for v in by_case.values()], len(answers)


@dataclass(frozen=True)
class ModuleScore:
    module: str
    hit_at_3: float


@dataclass(frozen=True)
class ModuleChoice:
    """How ``module="auto"`` chose the compiled module: uncompiled hit@3 per module on ``questions`` val
    questions."""

    split: str
    questions: int
    scores: tuple[ModuleScore, ...]


@dataclass(frozen=True)
class Candidate:
    """One of random search's candidate programs: its seed (-2 labelled demos only, -1 unshuffled
    bootstrap, ≥ 0 shuffled) and its validation score."""

    seed: int
    val_score: float


@dataclass(frozen=True)
class CompiledRun:
    """One program on the dev questions: ``optimizer`` ``uncompiled``, ``bootstrap`` (BootstrapFewShot) or
    ``random_search`` (BootstrapFewShotWithRandomSearch, its candidates scored on validation);
    ``compile_seed`` picks the compile set's cases and order (one seed, one compile set, both mixes);
    ``colloquial_share`` is the mix asked for, ``colloquial_in_compile_set`` what it gave."""

    name: str
    optimizer: str
    compile_seed: int
    colloquial_share: float
    compile_set: int
    colloquial_in_compile_set: int
    demos_bootstrapped: int
    demos_labeled: int
    colloquial_demos: int
    standard: float | None
    colloquial: float | None
    contract_violation_rate: float
    outcomes: Outcomes
    candidates: tuple[Candidate, ...] = ()


@dataclass(frozen=True)
class CompileMetrics:
    """Every compiled program (and the uncompiled baseline) on the same dev questions, by slice:
    ``compiles`` compile sets (seeds), each compiled at every mix, and with random search when it ran."""

    module: str
    module_chosen_on: ModuleChoice | None
    adapter: str
    dev_questions: int
    compiles: int
    mixes: tuple[float, ...]
    random_search: bool
    num_candidates: int
    val_questions: int
    programs: tuple[CompiledRun, ...]
    seconds: float

    def of(self, optimizer: str, share: float | None = None) -> list[CompiledRun]:
        """The programs of one optimizer (and one colloquial share), in compile-seed order."""
        return [
            p
            for p in self.programs
            if p.optimizer == optimizer and (share is None or abs(p.colloquial_share - share) < 1e-9)
        ]

    def table(
        self, a: list[CompiledRun], b: list[CompiledRun] | None, phrasing: str = ""
    ) -> list[list[float]]:
        """Rows: compile sets; columns: the dev cases every program answered, in one order; cell: hit@3 of
        program ``a`` minus program ``b`` of the same compile set on that case (``phrasing``: of one
        phrasing, else the mean of the two); ``b`` None: ``a``'s standard minus its colloquial phrasing."""
        rows = []
        for i, pa in enumerate(a[: len(a) if b is None else len(b)]):
            if b is None:
                x, y = pa.outcomes.slice_values("standard"), pa.outcomes.slice_values("colloquial")
            else:
                x, y = pa.outcomes.case_hits(phrasing), b[i].outcomes.case_hits(phrasing)
            rows.append({c: x[c] - y[c] for c in x if c in y})
        cases = [c for c in rows[0] if all(c in r for r in rows)] if rows else []
        return [[r[c] for c in cases] for r in rows]


@dataclass(frozen=True)
class RoundtripMetrics:
    """A compiled program saved to JSON and loaded into a fresh module: its size, demos, and whether the
    loaded program has the same demos and gives the same answer."""

    program: str
    bytes: int
    demos_bootstrapped: int
    demos_labeled: int
    same_demos: bool
    same_answer: bool


@dataclass(frozen=True)
class AskMetrics:
    """Whether each asked module's answer honoured the contract."""

    modules: tuple[str, ...]
    contract_holds: tuple[bool, ...]


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
    """The context's LM calls so far, how full the local servers' slots were (None for a remote LM), and
    the seconds since the context was opened."""

    calls: LMCalls
    slots: SlotFill | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class PairedScore:
    """One module against Predict on a user's dev set, question by question."""

    module: str
    verdict: str
    why: str
    interval: str
    n: int


@dataclass(frozen=True)
class AdapterScore:
    adapter: str
    violation_rate: float


@dataclass(frozen=True)
class ModuleUserScore:
    module: str
    score: float


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
    violation_rate: tuple[AdapterScore, ...] = field(default_factory=tuple)
    score: tuple[ModuleUserScore, ...] = field(default_factory=tuple)
    vs_predict: tuple[PairedScore, ...] = field(default_factory=tuple)
