"""Notebook 03's claims: each field-note claim, what this run measured, and a two-sided verdict.

Every ``verdict_*`` function below returns a :class:`~nbkit.claims.Verdict` and can return ``holds``,
``refuted`` and ``inconclusive``; its rule and tolerance are in its docstring. Rates and differences of hit@3
are compared with an interval: a Wilson interval for a rate (:func:`nbkit.claims.rate_interval`) and, for the
difference of two programs' 0/1 outcomes on the same questions, Newcombe's paired interval
(:func:`nbkit.claims.paired_rate_difference_interval`), which keeps its width when no question is discordant
(a paired bootstrap collapses to zero width there). Non-binary scores (a user's metric) fall back to a paired
bootstrap over at least MIN_PAIRS (10) pairs. When the interval straddles the tolerance the verdict is
"inconclusive — n too small". The interval a row shows comes from the matching ``*_interval`` function, built
the same way. The field notes measured F1 with GPT-4 on their own data; here the score is hit@3 on this
project's cases with a 135M local model, so a verdict is about the *direction and size* of each claim on this
setup.

:func:`claims` turns the typed metrics of ``run_modules``, ``run_contracts``, ``run_compile``,
``run_token_limit`` and ``run_history`` (:mod:`nbkit.signatures.metrics`) into rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from nbkit.claims import (
    HOLDS,
    INCONCLUSIVE,
    REFUTED,
    Claim,
    Verdict,
    bootstrap_interval,
    decide_at_least,
    fmt_interval,
    paired_rate_difference_interval,
    rate_interval,
)
from nbkit.signatures.metrics import (
    CompileMetrics,
    ContractsMetrics,
    HistoryMetrics,
    ModulesMetrics,
    TokenLimitMetrics,
)

CLEAN = 0.8  # "a module serves the contract": at least 80 % of its answers honour it
GAP = 0.10  # "much worse on colloquial questions": a standard-minus-colloquial gap of at least 0.10 hit@3
GAIN = 0.05  # an improvement of at least 0.05 hit@3 (or 0.05 fewer structural failures) counts
STRUCTURE_GAIN = 0.10  # the grammar removes at least 10 points of structural failures
# "The model keeps the rule in practice": a breach rate whose Wilson 95 % upper bound is below 5 %. With 0
# breaches that needs n ≥ 73 answers (z²(1 − RARE)/RARE); the default run has up to 120 distinct parsed
# answers for the bounds and 100 questions for the field notes' signature. A 2 % tolerance would need 189 and
# could not refute.
RARE = 0.05
RUNAWAY = 4.0  # a stock server that generates at least 4x the limit "ran away"
PAIRED_RULE = "Newcombe paired 95 % interval"
RS_CANDIDATES = 16  # BootstrapFewShotWithRandomSearch's documented num_candidate_programs
# Below 10 pairs a percentile bootstrap is overconfident (2 equal pairs give a zero-width interval).
MIN_PAIRS = 10


def paired(a: dict[str, list], b: dict[str, list], what: str = "hit") -> tuple[list[float], list[float]]:
    """Per-question values of two programs on the questions both answered, in the same order."""
    b_by_key = dict(zip(b["keys"], b[what], strict=True))
    keys = [k for k in a["keys"] if k in b_by_key]
    a_by_key = dict(zip(a["keys"], a[what], strict=True))
    return [a_by_key[k] for k in keys], [b_by_key[k] for k in keys]


def by_slice(questions: dict[str, list], what: str = "hit") -> tuple[list[float], list[float]]:
    """(standard, colloquial) values of one program, paired by case."""
    std = {
        k.rsplit(":", 1)[0]: v
        for k, v in zip(questions["keys"], questions[what], strict=True)
        if k.endswith(":standard")
    }
    col = {
        k.rsplit(":", 1)[0]: v
        for k, v in zip(questions["keys"], questions[what], strict=True)
        if k.endswith(":colloquial")
    }
    cases = [c for c in std if c in col]
    return [std[c] for c in cases], [col[c] for c in cases]


def _binary(*values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for seq in values for v in seq)


def _paired_interval(a: Sequence[float], b: Sequence[float]) -> tuple[float, float] | None:
    """The interval of mean(a − b) a paired verdict rests on: Newcombe's paired interval for 0/1 outcomes,
    else the paired bootstrap ((nan, nan) under 2 pairs); None when there is none (no pairs, or non-binary
    pairs that all differ by the same amount, where a bootstrap has no width to give)."""
    if _binary(a, b):
        return paired_rate_difference_interval(a, b) if a else None
    if len(a) < MIN_PAIRS:
        return (
            bootstrap_interval((list(a), list(b)), paired=True)
            if len(a) >= 2
            else (float("nan"), float("nan"))
        )
    if len({x - y for x, y in zip(a, b, strict=True)}) == 1:
        return None
    return bootstrap_interval((list(a), list(b)), paired=True)


def _paired_gain(a: Sequence[float], b: Sequence[float], threshold: float, what: str, unit: str) -> Verdict:
    """decide_at_least on the interval of mean(a − b) (see :func:`_paired_interval`); a non-binary sample
    needs MIN_PAIRS pairs and some spread."""
    if _binary(a, b) and not a:
        return Verdict(INCONCLUSIVE, f"{what}: no paired {unit}")
    if not _binary(a, b) and len(a) < MIN_PAIRS:
        return Verdict(
            INCONCLUSIVE, f"{what}: only {len(a)} paired {unit} — n too small to decide (needs ≥ {MIN_PAIRS})"
        )
    interval = _paired_interval(a, b)
    if interval is None:
        return Verdict(
            INCONCLUSIVE,
            f"{what}: all {len(a)} paired {unit} differ by the same amount — no spread to build an interval "
            "from",
        )
    return decide_at_least(
        interval, threshold, what=what, n_hint=f"n={len(a)} {unit}; more {unit} would narrow it"
    )


def min_n_to_refute(rare: float = RARE, level: float = 0.95) -> int:
    """The fewest answers for which 0 observed breaches give a Wilson upper bound below ``rare``."""
    from scipy import stats

    z2 = stats.norm.ppf(0.5 + level / 2) ** 2
    return math.floor(z2 * (1 - rare) / rare) + 1


def _at_floor(*scores: Sequence[float]) -> bool:
    return all(len(s) > 0 and max(s) == 0 for s in scores)


def _floor() -> Verdict:
    return Verdict(
        INCONCLUSIVE, "floor effect: hit@3 is 0 on every question of both programs, nothing to compare"
    )


# -- the intervals a row shows -------------------------------------------------------------------
def paired_interval(a: Sequence[float], b: Sequence[float], *, floor: bool = False) -> str:
    """The interval shown beside a paired verdict ("" when it has none; with ``floor``, also when both
    programs score 0 on every question, where the verdict says "floor effect")."""
    if floor and _at_floor(a, b):
        return ""
    interval = _paired_interval(a, b)
    return "" if interval is None else fmt_interval(interval)


def observed_interval(k: int, n: int) -> str:
    """The Wilson 95 % interval of k breaches in n answers ("" when nothing was checked)."""
    return fmt_interval(rate_interval(k, n)) if n > 0 else ""


def clean_interval(clean: dict[str, tuple[int, int]]) -> str:
    """The contract-clean interval :func:`verdict_modules_serve_contract` names: the first module wholly below
    CLEAN when there is one, else the module with the lowest bound."""
    if not clean or any(n == 0 for _k, n in clean.values()):
        return ""
    intervals = {m: rate_interval(k, n) for m, (k, n) in clean.items()}
    below = [m for m, (_lo, hi) in intervals.items() if hi < CLEAN]
    shown = below[0] if below else min(intervals, key=lambda m: intervals[m][0])
    return fmt_interval(intervals[shown])


# -- verdict functions ---------------------------------------------------------------------------
def verdict_modules_serve_contract(clean: dict[str, tuple[int, int]]) -> Verdict:
    """Rule: every module serves the contract when *each* module's contract-clean rate has a Wilson 95 %
    interval at or above CLEAN (0.8); refuted when some module's interval lies wholly below 0.8; else
    inconclusive. Judging every module (not the one with the worst point rate) keeps a module with fewer
    questions and a wider interval from deciding alone. ``clean`` maps module → (clean answers, questions)."""
    if not clean or any(n == 0 for _k, n in clean.values()):
        return Verdict(INCONCLUSIVE, "no module was evaluated")
    intervals = {m: rate_interval(k, n) for m, (k, n) in clean.items()}
    worst = min(intervals, key=lambda m: intervals[m][0])
    k, n = clean[worst]
    below = [m for m, (lo, hi) in intervals.items() if hi < CLEAN]
    if below:
        m = below[0]
        shown = fmt_interval(intervals[m], level=None)
        return Verdict(REFUTED, f"contract-clean rate of {m} ({clean[m][0]}/{clean[m][1]}) {shown} < {CLEAN}")
    if intervals[worst][0] >= CLEAN:
        return Verdict(HOLDS, f"every module's contract-clean interval ≥ {CLEAN} (lowest: {worst}, {k}/{n})")
    shown = fmt_interval(intervals[worst], level=None)
    return Verdict(
        INCONCLUSIVE,
        f"contract-clean rate of {worst} ({k}/{n}) {shown} straddles {CLEAN} — n too small; n={n} questions",
    )


def verdict_observed(k: int, n: int, what: str) -> Verdict:
    """Rule for "the model breaks X in practice", counted per answer: holds as soon as one breach is seen
    (k ≥ 1 is an existence proof); refuted when none is seen and the Wilson 95 % upper bound of the breach
    rate is below RARE (5 %), i.e. n is large enough to say the model keeps the rule (0 of ≥ 73 answers);
    else inconclusive (n too small to tell)."""
    if n <= 0:
        return Verdict(INCONCLUSIVE, f"{what}: nothing to check (0 parsed answers)")
    if k >= 1:
        return Verdict(HOLDS, f"{what}: {k} of {n}")
    if rate_interval(k, n)[1] < RARE:
        return Verdict(REFUTED, f"{what}: 0 of {n}; rate < {RARE:.0%} at 95 %")
    return Verdict(
        INCONCLUSIVE,
        f"{what}: 0 of {n} — n too small to exclude a rate of {RARE:.0%} (needs ≥ {min_n_to_refute()} "
        "answers)",
    )


def verdict_grammar_fixes_structure(
    chat_structural: Sequence[float], grammar_structural: Sequence[float]
) -> Verdict:
    """Rule: holds when the paired interval (Newcombe) of (ChatAdapter − grammar) structural-failure rate
    (parse errors + missing fields, per question) lies at or above STRUCTURE_GAIN (0.10); refuted when it
    lies below; else inconclusive."""
    what = "structural failures removed by the grammar"
    return _paired_gain(chat_structural, grammar_structural, STRUCTURE_GAIN, what, "questions")


def verdict_colloquial_gap(standard: Sequence[float], colloquial: Sequence[float]) -> Verdict:
    """Rule: compiled on standard wording only, the program is "much worse" on colloquial wording when the
    paired (by case, Newcombe) interval of hit@3 standard − colloquial lies at or above GAP (0.10);
    refuted when it lies below 0.10; inconclusive when it straddles or both slices score 0 everywhere."""
    if _at_floor(standard, colloquial):
        return _floor()
    return _paired_gain(standard, colloquial, GAP, "hit@3 standard − colloquial", "cases")


def verdict_mix_lifts_colloquial(mixed: Sequence[float], standard_only: Sequence[float]) -> Verdict:
    """Rule: colloquial examples in the compile set lift colloquial hit@3 when the paired (by question)
    interval (Newcombe) of mixed − standard-only lies at or above GAIN (0.05); refuted below; else
    inconclusive (also at the floor)."""
    if _at_floor(mixed, standard_only):
        return _floor()
    what = "colloquial hit@3 gain of the mixed compile set"
    return _paired_gain(mixed, standard_only, GAIN, what, "colloquial questions")


def verdict_program_beats(better: Sequence[float], baseline: Sequence[float], what: str) -> Verdict:
    """Rule: program A beats program B when the paired (by question) interval of hit@3 A − B (Newcombe for 0/1
    scores, a paired bootstrap for a user's non-binary metric) lies at or above GAIN (0.05); refuted when it
    lies below 0.05; else inconclusive (also at the floor). Used for random search vs plain bootstrap and for
    each module vs Predict."""
    if _at_floor(better, baseline):
        return _floor()
    return _paired_gain(better, baseline, GAIN, what, "questions")


def verdict_random_search_beats(
    rs: Sequence[float], bfs: Sequence[float], num_candidates: int | None
) -> Verdict:
    """Rule: as :func:`verdict_program_beats` for hit@3 RS − BFS, with one guard for the peer: the claim is
    about BootstrapFewShotWithRandomSearch as documented (``num_candidate_programs`` = RS_CANDIDATES, 16), so
    a refutation with fewer random candidates is reported inconclusive (the peer was run below its documented
    budget); holds and inconclusive stand as they are, and at ≥ 16 candidates it can be refuted."""
    verdict = verdict_program_beats(rs, bfs, "hit@3 RS − BFS")
    if verdict.verdict == REFUTED and (num_candidates or 0) < RS_CANDIDATES:
        return Verdict(
            INCONCLUSIVE,
            f"{verdict.why} — but random search ran {num_candidates} random candidates, not DSPy's default "
            f"{RS_CANDIDATES}: a loss at that budget does not refute the documented optimizer",
        )
    return verdict


def verdict_runaway(stock_tokens: int | None, limit: int, n_ctx: int | None) -> Verdict:
    """Rule: the runaway is reproduced (holds) when a stock llama-cpp-python server, sent DSPy's request with
    ``max_tokens=limit``, generates at least RUNAWAY (4) × limit tokens; refuted when it stays within the
    limit (the stock server honoured it); inconclusive in between or when not measured (no local server)."""
    if stock_tokens is None:
        return Verdict(INCONCLUSIVE, "not measured: the stock-server probe needs the local llama.cpp model")
    ctx = f" (context {n_ctx})" if n_ctx else ""
    if stock_tokens >= RUNAWAY * limit:
        return Verdict(
            HOLDS,
            f"stock server generated {stock_tokens} tokens for a limit of {limit}{ctx}: "
            f"{stock_tokens / limit:.1f}x",
        )
    if stock_tokens <= limit:
        return Verdict(REFUTED, f"stock server kept the limit: {stock_tokens} ≤ {limit}")
    return Verdict(
        INCONCLUSIVE,
        f"stock server generated {stock_tokens} tokens for a limit of {limit}: over it, but < {RUNAWAY:g}x",
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


# -- the table -------------------------------------------------------------------------------------
def _claim(
    key: str,
    claim: str,
    field_note: str,
    source: str,
    measured: str,
    rule: str,
    n: str,
    verdict: Verdict,
    interval: str = "",
) -> Claim:
    return Claim.from_verdict(
        verdict,
        key=key,
        claim=claim,
        field_note=field_note,
        source=source,
        measured=measured,
        rule=rule,
        n=n,
        interval=interval,
    )


def request_bounds(modules: ModulesMetrics, contracts: ContractsMetrics) -> dict[str, int]:
    """Prompt-only bound breaches counted once per *request* (module, signature, adapter, question).

    The modules' ``predict`` under the grammar adapter and the contracts' ``json_grammar`` are the same
    requests (one cached result in the context), so summing both would count each answer twice.
    """
    answers: dict[tuple, list[str] | None] = {}
    sources = [((m, modules.signature, modules.adapter), q) for m, q in modules.questions.items()]
    sources += [((contracts.module, contracts.signature, a), q) for a, q in contracts.questions.items()]
    for request, q in sources:
        if "bound_breaches" not in q:
            continue
        for key, structural, breaches in zip(q["keys"], q["structural"], q["bound_breaches"], strict=True):
            answers.setdefault((*request, key), None if structural else list(breaches))
    parsed = [b for b in answers.values() if b is not None]
    return {
        "requests": len(answers),
        "parsed_answers": len(parsed),
        "answers_over_bounds": sum(1 for b in parsed if b),
        "reasoning_over_50_words": sum(b.count("reasoning_over_50_words") for b in parsed),
        "confidence_out_of_range": sum(b.count("confidence_out_of_range") for b in parsed),
    }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / max(len(values), 1)


def claims(
    *,
    modules: ModulesMetrics,
    contracts: ContractsMetrics,
    compiled: CompileMetrics | None,
    token_limit: TokenLimitMetrics,
    history: HistoryMetrics,
) -> list[Claim]:
    """The claims rows from the experiments' metrics (``compiled`` None: compiling was not run)."""
    rows: list[Claim] = []
    mq = modules.questions
    n_mod = ", ".join(f"{m}: {len(q['keys'])}" for m, q in mq.items())
    clean = {m: (int(sum(q["clean"])), len(q["clean"])) for m, q in mq.items()}
    rows.append(
        _claim(
            "modules_serve_contract",
            "A Signature is a contract any module can serve (Predict / ChainOfThought / HybridRetriever swap "
            "freely)",
            "any module honours the contract",
            "§2.3",
            ", ".join(f"{m}: {k}/{n} contract-clean" for m, (k, n) in clean.items()),
            f"worst module's contract-clean rate, Wilson 95 % interval ≥ {CLEAN} holds, < {CLEAN} refuted",
            f"dev questions per module ({modules.adapter} adapter): {n_mod}",
            verdict_modules_serve_contract(clean),
            clean_interval(clean),
        )
    )
    predict = mq.get("predict")
    notes_by_module = {
        "cot": (
            "ChainOfThought answers better than Predict (measured here)",
            "— (the notes only say ChainOfThought inserts a reasoning step; they claim no accuracy gain)",
        ),
        "hybrid": (
            "HybridRetriever (knowledge base first) answers better than Predict",
            "HybridRetriever queries the internal medical knowledge base before the LM",
        ),
    }
    for other, (label, note) in notes_by_module.items():
        if predict is None or other not in mq:
            continue
        a, b = paired(mq[other], predict)
        rows.append(
            _claim(
                f"{other}_beats_predict",
                f"Swapping the module behind the same signature: {label}",
                note,
                "§2.3",
                f"hit@3 {other} {_mean(a):.3f} vs predict {_mean(b):.3f}",
                f"{PAIRED_RULE} of hit@3 {other} − predict, interval ≥ {GAIN} holds, < {GAIN} refuted",
                f"{len(a)} paired dev questions",
                verdict_program_beats(a, b, f"hit@3 {other} − predict"),
                paired_interval(a, b, floor=True),
            )
        )

    bounds = request_bounds(modules, contracts)
    breaches = bounds["answers_over_bounds"]
    parsed = bounds["parsed_answers"]
    rows.append(
        _claim(
            "prompt_bounds_not_enforced",
            "Length/range bounds written in the prompt are not enforced by the model",
            "'不超过100字' 无法强制 (a word limit in the prompt cannot be enforced)",
            "§2.3",
            f"{breaches} of {parsed} parsed answers breach them ({bounds['reasoning_over_50_words']} "
            "reasoning > 50 words, "
            f"{bounds['confidence_out_of_range']} confidences outside [0, 1])",
            f"any breach holds; 0 breaches with a Wilson 95 % upper bound < {RARE:.0%} refutes "
            f"(needs ≥ {min_n_to_refute()} answers)",
            f"{parsed} parsed answers to {bounds['requests']} distinct requests (modules + adapters, each "
            "request counted once)",
            verdict_observed(breaches, parsed, "answers breaching a prompt-only bound"),
            observed_interval(breaches, parsed),
        )
    )

    cq = contracts.questions
    if "chat" in cq and "json_grammar" in cq:
        a, b = paired(cq["chat"], cq["json_grammar"], "structural")
        rows.append(
            _claim(
                "grammar_fixes_structure",
                "DSPy only writes the contract into the prompt; a small model breaks its structure unless "
                "decoding is "
                "constrained",
                "the contract is an interface, not a guarantee",
                "§2.3",
                f"parse errors + missing fields: ChatAdapter {int(sum(a))}/{len(a)}, JSON schema as "
                "llama.cpp grammar "
                f"{int(sum(b))}/{len(b)}",
                f"{PAIRED_RULE} of (chat − grammar) structural-failure rate ≥ {STRUCTURE_GAIN} holds, < "
                f"{STRUCTURE_GAIN} refuted",
                f"{len(a)} paired dev questions ({contracts.module})",
                verdict_grammar_fixes_structure(a, b),
                paired_interval(a, b),
            )
        )
    notes = contracts.field_notes_signature
    if notes is not None:
        # Per answer, not per item: the items of one answer come from one generation and share its habit.
        k, n = notes.answers_not_numeric, notes.answers_with_items
        rows.append(
            _claim(
                "confidence_in_words",
                "With desc 'confidence: [0-1]' the model answers words like 'high' instead of a number",
                "模型总输出 'high' (the model keeps answering 'high')",
                "§4.3 坑2",
                f"{k} of {n} answers give a non-numeric confidence ({notes.confidence_not_numeric} of "
                f"{notes.diagnosis_items} items; field notes' string signature, {notes.adapter} adapter)",
                "any answer with a non-numeric confidence holds; none with a Wilson 95 % upper bound < "
                f"{RARE:.0%} "
                f"refutes (needs ≥ {min_n_to_refute()} answers)",
                f"{n} parsed answers with diagnosis items, of {notes.questions} questions "
                f"({'+'.join(notes.splits)} cases)",
                verdict_observed(k, n, "answers with a non-numeric confidence"),
                observed_interval(k, n),
            )
        )

    if compiled is not None:
        rows.extend(_compile_claims(compiled))

    calls = history.calls
    served, cached = calls.served, calls.from_cache
    stock = token_limit.stock_dspy_tokens
    limit = int(token_limit.limit)
    n_ctx = token_limit.stock_n_ctx
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
    rows.append(
        _claim(
            "runaway_reproduced",
            "A DSPy request to llama-cpp-python's server ran ~3,800 tokens despite a token limit",
            "~3,800 tokens",
            "the field notes' team",
            f"DSPy sends {sorted(token_limit.dspy_wire_fields)}; stock server, max_tokens={limit}: "
            f"{stock if stock is not None else 'not run'} tokens (context "
            f"{n_ctx if n_ctx is not None else '-'})",
            f"stock server ≥ {RUNAWAY:g}× the limit holds, ≤ the limit refutes",
            "1 request to a stock server (a short, bounded context)",
            verdict_runaway(stock, limit, n_ctx),
        )
    )
    rows.append(
        _claim(
            "limit_enforced",
            "nbkit's launcher makes DSPy's token limit reach llama-cpp-python's server",
            "(the fix)",
            "the field notes' team",
            f"longest completion {calls.max_completion_tokens} tokens over {served} calls served, "
            f"max_tokens={calls.max_tokens}"
            + (f" ({cached} more answered from DSPy's cache)" if cached else ""),
            "every served call ≤ max_tokens and every limit probe ≤ its limit holds, any call over refutes "
            "(exact)",
            f"{served} LM calls served in this run + {len(probes)} limit probes",
            verdict_limit_enforced(calls.max_completion_tokens, calls.max_tokens, served, probes, limit),
        )
    )
    return rows


def _compile_claims(compiled: CompileMetrics) -> list[Claim]:
    rows = []
    q = compiled.questions
    on = compiled.module_chosen_on
    chosen = f"; module chosen on {on.questions} val questions" if on else ""
    zero = q.get("BFS 0% colloquial")
    mixed_names = [k for k in q if k.startswith("BFS") and k != "BFS 0% colloquial"]
    if zero is not None:
        std, col = by_slice(zero)
        rows.append(
            _claim(
                "standard_only_gap",
                "Compiled on standard questions only, a program does much worse on real users' (colloquial) "
                "questions",
                "F1 0.92 standard vs 0.65 colloquial (gap 0.27)",
                "§4.3 坑1",
                f"hit@3 standard {_mean(std):.3f}, colloquial {_mean(col):.3f} ({compiled.module}, BFS 0 % "
                "colloquial)",
                f"{PAIRED_RULE} (by case) of standard − colloquial ≥ {GAP} holds, < {GAP} refuted",
                f"{len(std)} dev cases × 2 phrasings{chosen}",
                verdict_colloquial_gap(std, col),
                paired_interval(std, col, floor=True),
            )
        )
    if zero is not None and mixed_names:
        name = mixed_names[-1]
        a, b = by_slice(q[name])[1], by_slice(zero)[1]
        rows.append(
            _claim(
                "colloquial_mix_lifts",
                "Remedy: ≥ 10 % colloquial examples in the compile set lifts colloquial accuracy",
                "force ≥ 10 % non-standard questions",
                "§4.3 坑1",
                f"colloquial hit@3 {_mean(b):.3f} (0 %) → {_mean(a):.3f} ({name})",
                f"{PAIRED_RULE} of colloquial hit@3 mixed − standard-only ≥ {GAIN} holds, < {GAIN} refuted",
                f"{len(a)} colloquial dev questions",
                verdict_mix_lifts_colloquial(a, b),
                paired_interval(a, b, floor=True),
            )
        )
    rs = compiled.random_search
    if rs.ran and mixed_names:
        a, b = paired(q[rs.program], q[mixed_names[-1]])
        rows.append(
            _claim(
                "random_search_beats_bootstrap",
                "BootstrapFewShotWithRandomSearch beats plain BootstrapFewShot (same compile set)",
                "use FewShotWithRandomSearch instead of the default compiler",
                "§4.3 坑1",
                f"hit@3 RS {_mean(a):.3f} vs BFS {_mean(b):.3f} (candidates chosen on {rs.val_questions} val "
                "questions; "
                f"{rs.num_candidates} random candidates, DSPy's default is {RS_CANDIDATES})",
                f"{PAIRED_RULE} of hit@3 RS − BFS ≥ {GAIN} holds, < {GAIN} refuted (a refutation needs RS at "
                "≥ "
                f"{RS_CANDIDATES} candidates)",
                f"{len(a)} paired dev questions",
                verdict_random_search_beats(a, b, rs.num_candidates),
                paired_interval(a, b, floor=True),
            )
        )
    return rows
