"""Notebook 03's claims: each field-note claim declared once, with its two-sided rule and its design.

Every ``verdict_*`` function below returns a :class:`~nbkit.claims.Verdict` and can return ``holds``,
``refuted`` and ``inconclusive``; its rule is in its docstring. The unit is what varies from one answer to
the next: the **case** (the two phrasings of one case share its clinical content), and for a compiled
program also the **compile set** (each seed draws other training cases, and a program is only as good as
the demos its compile set gave). So rates are clustered Wilson intervals over cases
(:func:`nbkit.claims.clustered_rate_interval`) and a compile claim's difference is the interval of a
compiles × cases table (:func:`nbkit.claims.crossed_mean_interval`). The field notes measured F1 with
GPT-4 on their own data; here the score is hit@3 on this project's cases with a 135M local model, so a
verdict is about the *direction and size* of each claim on this setup.

``judge`` and ``headline`` are the registry's own: every spec judged on what a context ran.
"""

from __future__ import annotations

from collections.abc import Sequence

from nbkit.claims import (
    DEMONSTRATION,
    HOLDS,
    INCONCLUSIVE,
    MEASURED,
    REFUTED,
    ClaimSpec,
    HeadlineSpec,
    Reading,
    Rule,
    Verdict,
    clustered_rate_interval,
    crossed_mean_interval,
    decide_at_least,
    fmt_interval,
)
from nbkit.signatures import designs
from nbkit.signatures.designs import GAP_CLAIMED, NOTES_COLLOQUIAL_F1, NOTES_STANDARD_F1, RARE
from nbkit.signatures.experiments import REGISTRY
from nbkit.signatures.metrics import (
    CompileMetrics,
    ContractsMetrics,
    HistoryMetrics,
    ModulesMetrics,
    Outcomes,
    TokenLimitMetrics,
)
from nbkit.signatures.pairing import paired, paired_gain, shown_interval

CLEAN = (
    0.8  # "a module serves the contract": at least 4 of 5 of its answers honour it (no figure in the notes)
)
WORDS = 0.5  # "always answers 'high'" read as "in most answers"
GAP_MIN = GAP_CLAIMED / 2  # "much worse": at least half the notes' gap
# The notes' remedy for that gap: a 10 % colloquial compile set and random search instead of plain
# BootstrapFewShot. Each part "works" when it closes at least half the gap it is the remedy for.
LIFT_MIN = GAP_CLAIMED / 2
RS_GAIN = GAP_CLAIMED / 2
RS_CANDIDATES = 16  # BootstrapFewShotWithRandomSearch's documented num_candidate_programs
STRUCTURE_GAIN = 0.10  # the grammar removes at least 10 points of structural failures
MIX = 0.1  # the notes' remedy: "at least 10 %" colloquial questions in the compile set

Cluster = tuple[Sequence[int], Sequence[int]]  # per case: successes, trials


# -- reading outcomes by case --------------------------------------------------------------------
def case_counts(outcomes: Outcomes, what: str, among: str = "") -> Cluster:
    """Per case: how many of its questions have ``what`` = 1, out of those with ``among`` = 1 (all its
    questions when ``among`` is empty); cases with none left out."""
    values = outcomes.by_case(what)
    masks = outcomes.by_case(among) if among else {c: [1.0] * len(v) for c, v in values.items()}
    pairs = [
        (int(sum(v for v, m in zip(vals, masks[c], strict=True) if m)), int(sum(1 for m in masks[c] if m)))
        for c, vals in values.items()
    ]
    pairs = [(k, n) for k, n in pairs if n > 0]
    return [k for k, _ in pairs], [n for _, n in pairs]


def _rate(cluster: Cluster) -> str:
    k, n = sum(cluster[0]), sum(cluster[1])
    return f"{k}/{n}"


def _shown(cluster: Cluster, level: float = 0.95) -> str:
    return fmt_interval(clustered_rate_interval(*cluster, level)) if len(cluster[1]) >= 2 else ""


# -- modules serve the contract --------------------------------------------------------------------
def verdict_modules_serve_contract(
    clean: Sequence[tuple[str, Sequence[int], Sequence[int]]], level: float = 0.95
) -> Verdict:
    """Rule: every module serves the contract when *each* module's contract-clean rate, a Wilson interval
    clustered by case (the two phrasings of a case count for one case's worth) at the level the row is
    judged at Bonferroni-split over the modules, lies at or above CLEAN (0.8); refuted when some module's
    interval lies wholly below 0.8; else inconclusive. ``clean`` is (module, clean answers per case,
    questions per case) per module."""
    if not clean or any(sum(n) == 0 for _m, _k, n in clean):
        return Verdict(INCONCLUSIVE, "no module was evaluated")
    each = 1 - (1 - level) / len(clean)
    intervals = {m: clustered_rate_interval(k, n, each) for m, k, n in clean}
    rates = {m: f"{sum(k)}/{sum(n)}" for m, k, n in clean}
    if any(lo != lo for lo, _ in intervals.values()):
        return Verdict(INCONCLUSIVE, "fewer than two cases per module: no interval")
    below = [m for m, (_lo, hi) in intervals.items() if hi < CLEAN]
    if below:
        m = below[0]
        return Verdict(REFUTED, f"contract-clean rate of {m} ({rates[m]}) {_fmt(intervals[m])} < {CLEAN}")
    worst = min(intervals, key=lambda m: intervals[m][0])
    if intervals[worst][0] >= CLEAN:
        return Verdict(
            HOLDS, f"every module's contract-clean interval ≥ {CLEAN} (lowest: {worst}, {rates[worst]})"
        )
    return Verdict(
        INCONCLUSIVE,
        f"contract-clean rate of {worst} ({rates[worst]}) {_fmt(intervals[worst])} straddles {CLEAN} — n too "
        f"small; {len(clean[0][1])} cases per module",
    )


def _fmt(interval: tuple[float, float]) -> str:
    return fmt_interval(interval, level=None)


def read_modules_serve_contract(modules: ModulesMetrics) -> Reading:
    clean = tuple((r.module, *case_counts(r.outcomes, "clean")) for r in modules.runs)
    shown = min(
        (clustered_rate_interval(k, n) for _m, k, n in clean if len(n) >= 2), key=lambda i: i[0], default=None
    )
    return Reading(
        args=(clean,),
        measured=", ".join(f"{m}: {sum(k)}/{sum(n)} contract-clean" for m, k, n in clean),
        n=f"{modules.cases} cases × 2 phrasings per module ({'+'.join(modules.splits)}, "
        f"{modules.adapter} adapter)",
        interval=fmt_interval(shown) + " (lowest module)" if shown else "",
    )


# -- bounds written only in the prompt -------------------------------------------------------------
def verdict_observed(
    breaches: Sequence[int], answers: Sequence[int], what: str, level: float = 0.95
) -> Verdict:
    """Rule for "the model breaks X in practice": holds as soon as one breach is seen (an existence
    proof); refuted when none is seen and the breach rate's Wilson upper bound (clustered by case) lies
    below RARE (5 %), i.e. enough answers to say the model keeps the rule; else inconclusive. ``breaches``
    and ``answers`` are per case."""
    k, n = sum(breaches), sum(answers)
    if n <= 0:
        return Verdict(INCONCLUSIVE, f"{what}: nothing to check (0 parsed answers)")
    if k >= 1:
        return Verdict(HOLDS, f"{what}: {k} of {n}")
    upper = clustered_rate_interval(breaches, answers, level)[1]
    if upper < RARE:
        return Verdict(REFUTED, f"{what}: 0 of {n}; rate ≤ {upper:.3f} < {RARE:.0%}")
    return Verdict(INCONCLUSIVE, f"{what}: 0 of {n} — n too small to exclude a rate of {RARE:.0%}")


def request_bounds(modules: ModulesMetrics, contracts: ContractsMetrics) -> tuple[Cluster, int]:
    """Prompt-only bound breaches counted once per *request* (module or adapter, signature, question) and
    grouped by case: (breaches per case, parsed answers per case), and the number of distinct requests.

    The modules' ``predict`` under the grammar and the contracts' ``json_grammar`` are the same requests
    (one cached result in the context), so counting both would count each answer twice; the field notes'
    string signature states the same bounds in its prompt, so its parsed answers count too.
    """
    answers: dict[tuple, tuple[str, ...] | None] = {}
    sources = [((r.module, modules.signature, modules.adapter), r.outcomes) for r in modules.runs]
    sources += [((contracts.module, contracts.signature, r.adapter), r.outcomes) for r in contracts.runs]
    notes = contracts.field_notes_signature
    if notes is not None:
        sources.append((("predict", "field_notes", notes.adapter), notes.outcomes))
    for request, q in sources:
        for key, structural, breaches in zip(q.keys, q.structural, q.bound_breaches, strict=True):
            answers.setdefault((*request, key), None if structural else breaches)
    by_case: dict[str, list[int]] = {}
    for (*_request, key), breached in answers.items():
        if breached is not None:
            by_case.setdefault(key.rsplit(":", 1)[0], []).append(1 if breached else 0)
    return ([sum(v) for v in by_case.values()], [len(v) for v in by_case.values()]), len(answers)


def read_prompt_bounds(modules: ModulesMetrics, contracts: ContractsMetrics) -> Reading:
    (breaches, answers), requests = request_bounds(modules, contracts)
    return Reading(
        args=(breaches, answers, "answers breaching a prompt-only bound"),
        measured=f"{sum(breaches)} of {sum(answers)} parsed answers breach them (reasoning > 50 words or a "
        "confidence outside [0, 1])",
        n=f"{sum(answers)} parsed answers to {requests} distinct requests, {len(answers)} cases (modules, "
        "adapters and the field notes' signature; each request counted once)",
        interval=_shown((breaches, answers)),
    )


# -- the grammar and the structure -----------------------------------------------------------------
def verdict_grammar_fixes_structure(
    chat_structural: Sequence[float], grammar_structural: Sequence[float]
) -> Verdict:
    """Rule: holds when the paired interval (Newcombe) of (ChatAdapter − grammar) structural-failure rate
    (parse errors + missing fields, per question) lies at or above STRUCTURE_GAIN (0.10); refuted when it
    lies below; else inconclusive."""
    what = "structural failures removed by the grammar"
    return paired_gain(chat_structural, grammar_structural, STRUCTURE_GAIN, what, "questions")


def read_grammar(contracts: ContractsMetrics) -> Reading:
    chat, grammar = contracts.run("chat"), contracts.run("json_grammar")
    a, b = paired(chat.outcomes, grammar.outcomes, "structural") if chat and grammar else ([], [])
    return Reading(
        args=(a, b),
        measured=f"parse errors + missing fields: ChatAdapter {int(sum(a))}/{len(a)}, JSON schema as "
        "llama.cpp "
        f"grammar {int(sum(b))}/{len(b)}",
        n=f"{len(a)} paired dev questions ({contracts.module})",
        interval=shown_interval(a, b),
    )


# -- confidence in words ---------------------------------------------------------------------------
def words_among_given(outcomes: Outcomes) -> Cluster:
    """Per case: parsed answers that give their confidence as a word (such as 'high'), out of its parsed
    answers that give a confidence at all — an answer with none (a bare condition name) is not
    counted: it shows nothing about words against numbers."""
    by_case: dict[str, list[int]] = {}
    for key, structural, numbers, words in zip(
        outcomes.keys,
        outcomes.structural,
        outcomes.confidence_numbers,
        outcomes.confidence_words,
        strict=True,
    ):
        if not structural and numbers + words:
            by_case.setdefault(key.rsplit(":", 1)[0], []).append(1 if words else 0)
    return [sum(v) for v in by_case.values()], [len(v) for v in by_case.values()]


def verdict_confidence_in_words(words: Sequence[int], answers: Sequence[int], level: float = 0.95) -> Verdict:
    """Rule for "the model keeps answering 'high'" (an *always* claim, read as "in most answers"): among
    the parsed answers that give a confidence at all, holds when the share giving it as a word where the
    signature's "confidence: [0-1]" asks for a number has a Wilson interval (clustered by case) at or
    above WORDS (0.5); refuted when it lies below 0.5; else inconclusive — also when fewer than two
    cases give one. Per case: answers with a word, answers with a confidence."""
    if sum(answers) == 0 or len(answers) < 2:
        return Verdict(
            INCONCLUSIVE, "fewer than two cases' answers give a confidence at all: nothing to count"
        )
    return decide_at_least(
        clustered_rate_interval(words, answers, level),
        WORDS,
        what="share of answers giving their confidence as a word",
        n_hint=f"{sum(answers)} answers with a confidence from {len(answers)} cases",
    )


def read_confidence(contracts: ContractsMetrics) -> Reading:
    notes = contracts.field_notes_signature
    counts: Cluster = words_among_given(notes.outcomes) if notes else ([], [])
    k, n = sum(counts[0]), sum(counts[1])
    parsed = sum(1 for s in notes.outcomes.structural if not s) if notes else 0
    where = f"{notes.adapter} adapter, {'+'.join(notes.splits)} cases" if notes else "not asked"
    return Reading(
        args=counts,
        measured=f"{k} of {n} answers giving a confidence give it as a word; {parsed - n} of {parsed} parsed "
        f"answers give none at all (field notes' string signature, {where})",
        n=f"{n} answers with a confidence from {len(counts[1])} cases"
        + (f", of {notes.questions} questions" if notes else ""),
        interval=_shown(counts),
    )


# -- compiling ---------------------------------------------------------------------------------------
def compile_table(
    compiled: CompileMetrics, a: list, b: list | None, what: str = "hit", slice_a: str = "", slice_b: str = ""
) -> list[list[float]]:
    """Rows: compile sets; columns: dev cases; cell: program ``a`` minus program ``b`` of the same compile set
    on that case (``slice_*``: one phrasing, else the mean of the two; ``b`` None: ``a``'s standard minus its
    colloquial phrasing). Cases every program answered, in one order."""
    rows = []
    for i, pa in enumerate(a):
        if b is None:
            x, y = pa.outcomes.slice_values("standard", what), pa.outcomes.slice_values("colloquial", what)
        else:
            x, y = _case_values(pa.outcomes, what, slice_a), _case_values(b[i].outcomes, what, slice_b)
        rows.append({c: x[c] - y[c] for c in x if c in y})
    cases = [c for c in rows[0] if all(c in r for r in rows)] if rows else []
    return [[r[c] for c in cases] for r in rows]


def _case_values(outcomes: Outcomes, what: str, slice_name: str) -> dict[str, float]:
    if slice_name:
        return outcomes.slice_values(slice_name, what)
    return {c: sum(v) / len(v) for c, v in outcomes.by_case(what).items()}


def _compile_verdict(table: Sequence[Sequence[float]], threshold: float, what: str, level: float) -> Verdict:
    if not table or not table[0]:
        return Verdict(INCONCLUSIVE, f"{what}: not measured (no compiled programs to compare)")
    unit = f"{len(table)} compile set(s) × {len(table[0])} cases"
    return decide_at_least(crossed_mean_interval(table, level), threshold, what=what, n_hint=unit)


def verdict_colloquial_gap(table: Sequence[Sequence[float]], level: float = 0.95) -> Verdict:
    """Rule: compiled on standard wording only, the program is "much worse" on colloquial wording when the
    interval (compile sets × cases, :func:`nbkit.claims.crossed_mean_interval`) of hit@3 standard −
    colloquial per case lies at or above GAP_MIN, half the notes' gap; refuted when it lies below;
    inconclusive when it straddles or the table has no spread."""
    return _compile_verdict(table, GAP_MIN, "hit@3 standard − colloquial", level)


def verdict_mix_lifts_colloquial(table: Sequence[Sequence[float]], level: float = 0.95) -> Verdict:
    """Rule: the notes' 10 % colloquial compile set lifts colloquial hit@3 when the interval (compile sets ×
    cases) of colloquial hit@3 with the mix − without it, per case and compile set, lies at or above
    LIFT_MIN (half the gap the remedy addresses); refuted when it lies below; else inconclusive."""
    return _compile_verdict(table, LIFT_MIN, "colloquial hit@3, 10 % mix − standard only", level)


def verdict_random_search_beats(
    table: Sequence[Sequence[float]], num_candidates: int, level: float = 0.95
) -> Verdict:
    """Rule: BootstrapFewShotWithRandomSearch beats plain BootstrapFewShot on the same compile set when the
    interval (compile sets × cases) of hit@3 RS − BFS per case lies at or above RS_GAIN (half the notes'
    gap, which the remedy addresses); refuted below. The claim is about the optimizer as documented
    (``num_candidate_programs`` = 16): with fewer random candidates a refutation reads inconclusive (the
    peer ran below its documented budget)."""
    verdict = _compile_verdict(table, RS_GAIN, "hit@3 RS − BFS", level)
    if verdict.verdict == REFUTED and num_candidates < RS_CANDIDATES:
        return Verdict(
            INCONCLUSIVE,
            f"{verdict.why} — but random search ran {num_candidates} random candidates, not DSPy's default "
            f"{RS_CANDIDATES}: a loss at that budget does not refute the documented optimizer",
        )
    return verdict


def _compile_n(compiled: CompileMetrics, table: list[list[float]]) -> str:
    on = compiled.module_chosen_on
    chosen = f"; module chosen on {on.questions} val questions" if on else ""
    cols = len(table[0]) if table else 0
    return f"{len(table)} compile set(s) × {cols} dev cases ({compiled.module}){chosen}"


def _mean(table: list[list[float]]) -> float:
    cells = [v for row in table for v in row]
    return sum(cells) / len(cells) if cells else float("nan")


def _interval(table: list[list[float]]) -> str:
    return fmt_interval(crossed_mean_interval(table)) if table and table[0] else ""


def read_gap(compiled: CompileMetrics) -> Reading:
    table = compile_table(compiled, compiled.of("bootstrap", 0.0), None)
    return Reading(
        args=(table,),
        measured=f"hit@3 standard − colloquial {_mean(table):+.3f} (BootstrapFewShot, 0 % colloquial)",
        n=_compile_n(compiled, table),
        interval=_interval(table),
    )


def read_mix(compiled: CompileMetrics) -> Reading:
    mixed = compiled.of("bootstrap", MIX)
    table = compile_table(compiled, mixed, compiled.of("bootstrap", 0.0), "hit", "colloquial", "colloquial")
    return Reading(
        args=(table,),
        measured=f"colloquial hit@3, {MIX:.0%} mix − 0 % {_mean(table):+.3f}"
        if mixed
        else f"not measured: the compile experiment ran no {MIX:.0%} mix",
        n=_compile_n(compiled, table),
        interval=_interval(table),
    )


def read_random_search(compiled: CompileMetrics) -> Reading:
    rs = compiled.of("random_search")
    share = rs[0].colloquial_share if rs else MIX
    table = compile_table(compiled, rs, compiled.of("bootstrap", share))
    measured = (
        f"hit@3 RS − BFS {_mean(table):+.3f} ({compiled.num_candidates} random candidates scored on "
        f"{compiled.val_questions} val questions; DSPy's default is {RS_CANDIDATES})"
        if rs
        else "not measured: random search did not run (its panel runs it, with DSPy's 16 candidates)"
    )
    return Reading(
        args=(table, compiled.num_candidates),
        measured=measured,
        n=_compile_n(compiled, table),
        interval=_interval(table),
    )


# -- the token limit -------------------------------------------------------------------------------
def verdict_runaway(
    stock_tokens: int | None, limit: int, n_ctx: int | None, imputed: bool = False
) -> Verdict:
    """Rule: the runaway is reproduced (holds) when a stock llama-cpp-python server, sent DSPy's request with
    ``max_tokens=limit``, generates more than ``limit`` tokens (it ignored the limit); refuted when it stays
    within the limit; inconclusive when not measured (no local server). A request that filled the server's
    context counts the tokens that filled it (n_ctx − prompt), a lower bound, and says so."""
    if stock_tokens is None:
        return Verdict(INCONCLUSIVE, "not measured: the stock-server probe needs the local llama.cpp model")
    if stock_tokens > limit:
        how = f"≥ {stock_tokens} (its context of {n_ctx} filled)" if imputed else f"{stock_tokens}"
        return Verdict(
            HOLDS, f"stock server generated {how} tokens for a limit of {limit}: the limit was ignored"
        )
    return Verdict(REFUTED, f"stock server kept the limit: {stock_tokens} ≤ {limit}")


def read_runaway(token_limit: TokenLimitMetrics) -> Reading:
    t = token_limit
    tokens = "not run" if t.stock_dspy_tokens is None else str(t.stock_dspy_tokens)
    if t.stock_tokens_imputed:
        tokens = f"≥ {t.stock_dspy_tokens} (imputed: the context of {t.stock_n_ctx} filled)"
    return Reading(
        args=(t.stock_dspy_tokens, int(t.limit), t.stock_n_ctx, bool(t.stock_tokens_imputed)),
        measured=f"DSPy sends {list(t.dspy_limit_fields)}; stock server, max_tokens={t.limit}: {tokens} "
        "tokens",
        n="1 request to a stock server (a short, bounded context)",
    )


def verdict_limit_enforced(
    max_completion_tokens: int, max_tokens: int, calls: int, probes: Sequence[int] = (), probe_limit: int = 0
) -> Verdict:
    """Rule (exact, every served call counted): nbkit's server keeps the limit when no call served in this
    run generated more than ``max_tokens`` and no token-limit probe (a request that would otherwise run on,
    sent with ``probe_limit``) generated more than ``probe_limit`` (holds); refuted when any did;
    inconclusive when nothing was served. Calls answered from DSPy's cache are not counted: they were
    served, and counted, by the run that cached them."""
    n = calls + len(probes)
    if n <= 0:
        return Verdict(
            INCONCLUSIVE, "no LM call was served in this run (none made, or all answered from cache)"
        )
    if max_completion_tokens > max_tokens:
        return Verdict(REFUTED, f"a call generated {max_completion_tokens} > max_tokens={max_tokens}")
    if probes and max(probes) > probe_limit:
        return Verdict(REFUTED, f"a probe generated {max(probes)} > its limit {probe_limit}")
    probe_note = f"; {len(probes)} probes ≤ {probe_limit}" if probes else ""
    return Verdict(
        HOLDS, f"longest of {calls} calls: {max_completion_tokens} ≤ max_tokens={max_tokens}{probe_note}"
    )


def read_limit(token_limit: TokenLimitMetrics, history: HistoryMetrics) -> Reading:
    calls = history.calls
    # The token-limit cell's own requests (never cached): a story prompt with a small limit, raw and through
    # DSPy.
    probes = [
        int(v)
        for v in (
            token_limit.nbkit_max_tokens,
            token_limit.nbkit_max_completion_tokens,
            token_limit.dspy_through_session,
        )
        if v is not None
    ]
    cached = f" ({calls.from_cache} more answered from DSPy's cache)" if calls.from_cache else ""
    return Reading(
        args=(calls.max_completion_tokens, calls.max_tokens, calls.served, probes, int(token_limit.limit)),
        measured=f"longest completion {calls.max_completion_tokens} tokens over {calls.served} calls served, "
        f"max_tokens={calls.max_tokens}{cached}",
        n=f"{calls.served} LM calls served in this run + {len(probes)} limit probes",
    )


# -- the specs --------------------------------------------------------------------------------------
SOURCE_23, SOURCE_43, TEAM = "§2.3", "§4.3 坑1", "the field notes' team"

REGISTRY.claim(
    ClaimSpec(
        key="modules_serve_contract",
        claim="A Signature is a contract any module can serve (Predict / ChainOfThought / HybridRetriever "
        "swap freely)",
        field_note="any module honours the contract",
        source=SOURCE_23,
        kind=MEASURED,
        reads=("modules",),
        read=read_modules_serve_contract,
        verdict=verdict_modules_serve_contract,
        rule=Rule(
            "each module's contract-clean rate, Wilson clustered by case, Bonferroni over the modules: all "
            f"≥ {CLEAN} holds, any < {CLEAN} refutes",
            "wilson",
            "at least",
            CLEAN,
            unit="case",
        ),
        design=designs.MODULES_CLEAN,
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="prompt_bounds_not_enforced",
        claim="Length/range bounds written in the prompt are not enforced by the model",
        field_note="'不超过100字' 无法强制 (a word limit in the prompt cannot be enforced)",
        source=SOURCE_23,
        kind=MEASURED,
        reads=("modules", "contracts"),
        read=read_prompt_bounds,
        verdict=verdict_observed,
        rule=Rule(
            "any breach holds; 0 breaches with a Wilson (clustered by case) upper bound < "
            f"{RARE:.0%} refutes",
            "wilson",
            "at least",
            RARE,
            unit="case",
        ),
        design=designs.PROMPT_BOUNDS,
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="grammar_fixes_structure",
        claim="DSPy only writes the contract into the prompt; a small model breaks its structure unless "
        "decoding is constrained",
        field_note="the contract is an interface, not a guarantee",
        source=SOURCE_23,
        kind=DEMONSTRATION,
        reads=("contracts",),
        read=read_grammar,
        verdict=verdict_grammar_fixes_structure,
        rule=Rule(
            f"Newcombe paired 95 % interval of (chat − grammar) structural-failure rate ≥ {STRUCTURE_GAIN} "
            f"holds, < {STRUCTURE_GAIN} refutes (a JSON grammar cannot emit a broken structure: a "
            "demonstration of what the chat adapter does without it)",
            "newcombe",
            "at least",
            STRUCTURE_GAIN,
            unit="question",
        ),
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="confidence_in_words",
        claim="With desc 'confidence: [0-1]' the model answers words like 'high' instead of a number",
        field_note="模型总输出 'high' (the model keeps answering 'high')",
        source="§4.3 坑2",
        kind=MEASURED,
        reads=("contracts",),
        read=read_confidence,
        verdict=verdict_confidence_in_words,
        rule=Rule(
            "'always' as 'in most answers': among parsed answers giving a confidence, the share giving it "
            "as a word where 'confidence: [0-1]' asks for a number, Wilson clustered by case, "
            f"≥ {WORDS} holds, < {WORDS} refutes",
            "wilson",
            "at least",
            WORDS,
            unit="case",
        ),
        design=designs.CONFIDENCE_WORDS,
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="standard_only_gap",
        claim="Compiled on standard questions only, a program does much worse on real users' (colloquial) "
        "questions",
        field_note=f"F1 {NOTES_STANDARD_F1} standard vs {NOTES_COLLOQUIAL_F1} colloquial "
        f"(gap {GAP_CLAIMED:.2f})",
        source=SOURCE_43,
        kind=MEASURED,
        reads=("compile",),
        read=read_gap,
        verdict=verdict_colloquial_gap,
        rule=Rule(
            "hit@3 standard − colloquial per case, interval over compile sets × cases: "
            f"≥ {GAP_MIN:.3g} (half the notes' gap) holds, < {GAP_MIN:.3g} refutes",
            "t",
            "at least",
            GAP_MIN,
            unit="compile set × case",
        ),
        design=designs.GAP,
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="colloquial_mix_lifts",
        claim="Remedy: ≥ 10 % colloquial examples in the compile set lifts colloquial accuracy",
        field_note="force ≥ 10 % non-standard questions",
        source=SOURCE_43,
        kind=MEASURED,
        reads=("compile",),
        read=read_mix,
        verdict=verdict_mix_lifts_colloquial,
        rule=Rule(
            f"colloquial hit@3 with a {MIX:.0%} colloquial compile set − without, per case and compile set, "
            f"interval over compile sets × cases: ≥ {LIFT_MIN:.3g} (half the notes' gap) holds, < refutes",
            "t",
            "at least",
            LIFT_MIN,
            unit="compile set × case",
        ),
        design=designs.MIX_LIFT,
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="random_search_beats_bootstrap",
        claim="BootstrapFewShotWithRandomSearch beats plain BootstrapFewShot (same compile set)",
        field_note="use FewShotWithRandomSearch instead of the default compiler",
        source=SOURCE_43,
        kind=MEASURED,
        reads=("compile",),
        read=read_random_search,
        verdict=verdict_random_search_beats,
        rule=Rule(
            f"hit@3 RS − BFS per case, interval over compile sets × cases: ≥ {RS_GAIN:.3g} (half the "
            f"notes' gap) holds, < {RS_GAIN:.3g} refutes (a refutation needs RS at ≥ {RS_CANDIDATES} "
            "candidates, its documented budget)",
            "t",
            "at least",
            RS_GAIN,
            unit="compile set × case",
        ),
        design=designs.RANDOM_SEARCH,
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="runaway_reproduced",
        claim="A DSPy request to llama-cpp-python's server ran ~3,800 tokens despite a token limit",
        field_note="~3,800 tokens",
        source=TEAM,
        kind=MEASURED,
        reads=("token_limit",),
        read=read_runaway,
        verdict=verdict_runaway,
        rule=Rule(
            "stock server > the limit holds (the limit ignored), ≤ the limit refutes", "exact", "at least"
        ),
        design=designs.RUNAWAY,
    )
)
REGISTRY.claim(
    ClaimSpec(
        key="limit_enforced",
        claim="nbkit's launcher makes DSPy's token limit reach llama-cpp-python's server",
        field_note="(the fix)",
        source=TEAM,
        kind=MEASURED,
        reads=("token_limit", "history"),
        read=read_limit,
        verdict=verdict_limit_enforced,
        rule=Rule(
            "every served call ≤ max_tokens and every limit probe ≤ its limit holds, any call over refutes "
            "(exact)",
            "exact",
            "at most",
        ),
        design=designs.LIMIT,
    )
)


# -- the headline ----------------------------------------------------------------------------------
def _best_hit(modules: ModulesMetrics) -> float:
    return max((r.hit_at_3 for r in modules.runs), default=float("nan"))


def _violation_rate(adapter: str):
    def value(contracts: ContractsMetrics) -> float | None:
        run = contracts.run(adapter)
        return None if run is None else run.violation_rate

    return value


REGISTRY.headline_number(
    HeadlineSpec(
        "dev questions per module", ("modules",), lambda m: min((r.questions for r in m.runs), default=0)
    )
)
REGISTRY.headline_number(
    HeadlineSpec(
        "best module's hit@3", ("modules",), _best_hit, tolerance=0.1, help="the modules table names it"
    )
)
REGISTRY.headline_number(
    HeadlineSpec("chat violation rate", ("contracts",), _violation_rate("chat"), tolerance=0.1)
)
REGISTRY.headline_number(
    HeadlineSpec("grammar violation rate", ("contracts",), _violation_rate("json_grammar"), tolerance=0.1)
)
REGISTRY.headline_number(
    HeadlineSpec("notebook seconds", ("history",), lambda h: h.seconds, tolerance=0.5, relative=True)
)
REGISTRY.headline_number(
    HeadlineSpec(
        "LM calls answered from cache",
        ("history",),
        lambda h: h.calls.from_cache,
        help="0: a cold run; > 0: answered from DSPy's cache",
    )
)

judge = REGISTRY.judge
headline = REGISTRY.headline
