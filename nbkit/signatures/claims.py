"""Notebook 03's claims: a table of rows over the DSPy experiments' typed metrics, judged by their rules.

The unit is what varies from one answer to the next: the **case** (its two phrasings share its content,
so a rate's interval is clustered by case), and for a compiled program the **compile set** (each seed
draws other training cases; a program is only as good as the demos its set gave), whose rows of per-case
differences make a compile sets × cases table. The notes measured F1 with GPT-4 on their own data; here
the score is hit@3 on this project's cases with a 135M local model: a verdict is about the direction and
size of each claim on this setup. Spreads: ``bench/signatures_spread.py`` (``bench/RESULTS.md``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from statistics import NormalDist
from typing import Any

from nbkit.claims import (
    CLUSTER,
    CROSSED,
    HOLDS,
    INCONCLUSIVE,
    MEASURED,
    OWN,
    REFUTED,
    ClaimSpec,
    Estimator,
    HeadlineSpec,
    Plan,
    Reading,
    Rule,
    Verdict,
    at_least,
    clustered_rate_interval,
    exact_at_least,
    exact_at_most,
    halfway,
)
from nbkit.claims.design import SPREAD_CONFIDENCE
from nbkit.claims.intervals import NAN
from nbkit.signatures import field_notes as notes
from nbkit.signatures.experiments import ASKED_CASE, REGISTRY
from nbkit.signatures.metrics import (
    CompileMetrics,
    ContractsMetrics,
    HistoryMetrics,
    ModulesMetrics,
    TokenLimitMetrics,
    request_breaches,
)

GAP = notes.STANDARD_F1 - notes.COLLOQUIAL_F1  # the notes' gap; the remedies' lifts are planned at it
# "A module serves the contract": the project's bar, 4 answers in 5 honour it (the notes give no figure);
# its design's points: a module breaking the contract in 1 answer in 50, and one breaking it in 2 in 5.
CLEAN, CLEAN_TRUE, CLEAN_FALSE = 0.8, 0.98, 0.6
# A breach proves the claim; only a breach rate whose interval lies below RARE refutes it. Its design draws
# a true claim at RARE itself, the true rate hardest to tell from none.
RARE = 0.05
RS_CANDIDATES = 16  # BootstrapFewShotWithRandomSearch's documented num_candidate_programs
DEV_CASES = 15  # the shipped data's dev cases at any seed (a quarter of 63; a test checks it)
SPREADS = "bench/signatures_spread.py (bench/RESULTS.md, Notebook 03's claims)"
ICC = "intraclass correlation of a case's answers"
ASSUMED = "assumed, not measured: a case's two phrasings alike half the time beyond chance"
# sds of the compile-set effect, the case effect and the residual of a compile sets × dev cases table (two-way
# ANOVA), 4 compile sets at each of seeds 0 and 1 (each its own 15 dev cases), their mean variances.
GAP_SD, LIFT_SD, RS_SD = (0.14, 0.31, 0.51), (0.07, 0.08, 0.31), (0.09, 0.21, 0.34)


def icc_upper(icc: float, cases: int) -> float:
    """The upper confidence bound (SPREAD_CONFIDENCE, as the core plans an sd) of an intraclass correlation
    measured on ``cases`` clusters of two: Fisher's z, atanh(ρ) with variance 1 / (g − 2)."""
    return math.tanh(math.atanh(icc) + NormalDist().inv_cdf(SPREAD_CONFIDENCE) / math.sqrt(cases - 2))


def row_sd(parts: tuple[float, ...]) -> float:
    """The sd of one compile set's mean over the dev cases (its own effect and its cells' residuals); the
    case effect is shared by every compile set, so it is planned apart (:func:`_crossed`)."""
    return math.hypot(parts[0], parts[2] / math.sqrt(DEV_CASES))


def effect(claimed: float, what: str, estimator: Estimator, unit: str) -> Rule:
    """An effect claim's rule: at least halfway between the claimed effect and none, false at none."""
    return at_least(halfway(claimed, 0.0), what, estimator=estimator, unit=unit, claimed=claimed, null=0.0)


def _sums(sample: list) -> tuple[int, ...]:
    return tuple(sum(x[i] for x in sample) for i in range(len(sample[0]))) if sample else (0, 0, 0)


# -- estimators the core has none of ---------------------------------------------------------------
def _lowest_module(sample: list[tuple[tuple[int, int], ...]], level: float) -> tuple[float, float]:
    """Per case one (clean, questions) per module. Each module's rate clustered by case at ``level`` split
    over the modules (Bonferroni): they cover together, so (lowest low, lowest high) covers the lowest
    module's rate, and "every module at least the bar" is "this interval at least the bar"."""
    if not sample:
        return NAN
    each, modules = 1 - (1 - level) / len(sample[0]), [[c[m] for c in sample] for m in range(len(sample[0]))]
    per = [clustered_rate_interval([k for k, _ in cs], [n for _, n in cs], each) for cs in modules]
    return (min(lo for lo, _ in per), min(hi for _, hi in per))


def _rate_difference(sample: list[tuple[int, int, int]], level: float) -> tuple[float, float]:
    """Rate a − rate b from per-case (a's count, b's count, questions): Newcombe's square-and-add (his
    method 10) of each rate's Wilson interval at the cases' effective size. Both arms answer the same
    questions; leaving their positive correlation out only widens the interval."""
    ka, kb, n = _sums(sample)
    if not n:
        return NAN
    (la, ua), (lb, ub) = (
        clustered_rate_interval([x[i] for x in sample], [x[2] for x in sample], level) for i in (0, 1)
    )
    pa, pb = ka / n, kb / n
    return (pa - pb - math.hypot(pa - la, ub - pb), pa - pb + math.hypot(ua - pa, pb - lb))


LOWEST_MODULE = dataclasses.replace(
    CLUSTER,
    name="lowest clustered",
    words="Wilson intervals by case, Bonferroni over the modules, across",
    interval=_lowest_module,
)
RATE_DIFFERENCE = dataclasses.replace(
    CLUSTER,
    name="clustered difference",
    words="Newcombe's square-and-add of two Wilson intervals by case, across",
    interval=_rate_difference,
)
# Random search's rows carry the candidates each compile set scored, which its bespoke verdict reads.
RS_TABLE = dataclasses.replace(CROSSED, interval=lambda s, level: CROSSED.interval([r for _, r in s], level))


# -- readers ---------------------------------------------------------------------------------------
def read_modules(modules: ModulesMetrics) -> Reading:
    per = [r.outcomes.case_counts(r.outcomes.clean) for r in modules.runs]
    return Reading(
        list(zip(*per, strict=True)),
        ", ".join(
            f"{r.module}: {sum(k for k, _ in c)}/{len(r.outcomes)} contract-clean"
            for r, c in zip(modules.runs, per, strict=True)
        ),
        n=f"{modules.cases} cases × 2 phrasings per module ({'+'.join(modules.splits)}, {modules.adapter})",
        missing="" if per else "no module was asked",
    )


def read_prompt_bounds(modules: ModulesMetrics, contracts: ContractsMetrics) -> Reading:
    sample, requests = request_breaches(modules, contracts)
    k, n = _sums(sample)[:2]
    return Reading(
        sample,
        f"{k} of {n} parsed answers breach them (reasoning over 50 words, or a confidence outside [0, 1])",
        n=f"{n} parsed answers to {requests} distinct requests (modules, adapters, the notes' signature), "
        f"{len(sample)} cases",
    )


def read_grammar(contracts: ContractsMetrics) -> Reading:
    chat, grammar = contracts.run("chat"), contracts.run("json_grammar")
    if chat is None or grammar is None:
        return Reading(
            [], "not measured", missing="it needs ChatAdapter and the grammar (the local server's)"
        )
    o, g = chat.outcomes, grammar.outcomes.values("structural")
    both = [k in g for k in o.keys]
    a, b = o.case_counts(o.structural, both), o.case_counts([g.get(k, 0) for k in o.keys], both)
    sample = [(ka, kb, n) for (ka, n), (kb, _) in zip(a, b, strict=True)]
    ka, kb, n = _sums(sample)
    return Reading(
        sample,
        f"parse errors + missing fields: ChatAdapter {ka}/{n}, JSON schema as llama.cpp grammar {kb}/{n}",
        n=f"{n} dev questions asked under both, {len(sample)} cases ({contracts.module})",
    )


def read_confidence(contracts: ContractsMetrics) -> Reading:
    if (fn := contracts.field_notes_signature) is None:
        return Reading([], "not measured", missing="the field notes' signature was not asked")
    # An answer giving no confidence at all (a bare condition name) shows nothing of words against numbers.
    sample = fn.outcomes.case_counts(fn.outcomes.confidence_words, fn.outcomes.confidence_given())
    (k, n), parsed = _sums(sample)[:2], sum(1 for s in fn.outcomes.structural if not s)
    return Reading(
        sample,
        f"{k} of {n} answers giving a confidence give it as a word; {parsed - n} of {parsed} parsed answers "
        f"give none (the field notes' signature, {fn.adapter}, {'+'.join(fn.splits)})",
        n=f"{n} answers with a confidence from {len(sample)} cases, of {fn.questions} questions",
        missing=""
        if len(sample) > 1
        else f"fewer than two cases give a confidence ({n} of {parsed} answers)",
    )


def _table(compiled: CompileMetrics, table: list[list[float]], what: str, sample: Any = None) -> Reading:
    cells, on = [v for row in table for v in row], compiled.module_chosen_on
    return Reading(
        table if sample is None else sample,
        f"{what} {sum(cells) / len(cells):+.3f}" if cells else "not measured",
        n=f"{len(table)} compile set(s) × {len(table[0]) if table else 0} dev cases ({compiled.module})"
        + (f"; module chosen on {on.questions} val questions" if on else ""),
        missing="" if cells else "no compiled programs to compare",
    )


def read_gap(compiled: CompileMetrics) -> Reading:
    table = compiled.table(compiled.of("bootstrap", 0.0), None)
    return _table(compiled, table, "hit@3 standard − colloquial (BootstrapFewShot, 0 % colloquial)")


def read_mix(compiled: CompileMetrics) -> Reading:
    share = notes.COLLOQUIAL_SHARE
    table = compiled.table(compiled.of("bootstrap", share), compiled.of("bootstrap", 0.0), "colloquial")
    return _table(compiled, table, f"colloquial hit@3, {share:.0%} mix − 0 %")


def read_random_search(compiled: CompileMetrics) -> Reading:
    if not (rs := compiled.of("random_search")):
        return Reading([], "not measured", missing="random search did not run (its panel runs it)")
    table = compiled.table(rs, compiled.of("bootstrap", rs[0].colloquial_share))
    what = f"hit@3 RS ({compiled.num_candidates} candidates on {compiled.val_questions} val questions) − BFS"
    return _table(compiled, table, what, [(compiled.num_candidates, row) for row in table])


def read_runaway(t: TokenLimitMetrics) -> Reading:
    if t.stock_dspy_tokens is None:
        return Reading(None, "not run", missing="the stock-server probe needs the local llama.cpp model")
    imputed = f" (a lower bound: its context of {t.stock_n_ctx} filled)" if t.stock_tokens_imputed else ""
    return Reading(
        t.stock_dspy_tokens - t.limit,
        f"DSPy sends {list(t.dspy_limit_fields)}; stock server, max_tokens={t.limit}: "
        f"{t.stock_dspy_tokens} tokens{imputed}",
        n="1 request to a stock server (a short, bounded context)",
    )


def read_limit(t: TokenLimitMetrics, history: HistoryMetrics) -> Reading:
    calls, probes = history.calls, t.probes()
    over = [p - t.limit for p in probes]
    over += [calls.max_completion_tokens - calls.max_tokens] if calls.served else []
    cached = f" ({calls.from_cache} more answered from DSPy's cache)" if calls.from_cache else ""
    return Reading(
        max(over, default=None),
        f"longest completion {calls.max_completion_tokens} tokens over {calls.served} calls served, "
        f"max_tokens={calls.max_tokens}{cached}; limit probes {probes} at limit {t.limit}",
        n=f"{calls.served} LM calls served in this run + {len(probes)} limit probes",
        missing="" if over else "no LM call was served in this run (none made, or all answered from cache)",
    )


# -- the bespoke verdicts --------------------------------------------------------------------------
BREACHES = "share of parsed answers breaching a prompt-only bound"
BOUNDS_RULE = at_least(RARE, BREACHES, estimator=CLUSTER, unit="case", claimed=RARE, null=0.0)
RS_RULE = effect(GAP, "hit@3 RS − BFS per dev case", RS_TABLE, "compile set")


def verdict_bounds(sample: list[tuple[int, int]], level: float = 0.95) -> Verdict:
    """An existence claim: one breach proves it; with none, the rule (:data:`BOUNDS_RULE`) refutes it when
    the breach rate's interval lies wholly below its bar, and is inconclusive otherwise."""
    if (k := _sums(sample)[0]) > 0:
        return Verdict(HOLDS, f"{k} of {_sums(sample)[1]} parsed answers breach a prompt-only bound")
    return BOUNDS_RULE.decide(sample, level)


def verdict_random_search(sample: list[tuple[int, list[float]]], level: float = 0.95) -> Verdict:
    """The rule (:data:`RS_RULE`), whose refutation needs random search at DSPy's documented budget: a loss
    with fewer random candidates reads inconclusive (the peer ran below its documented budget)."""
    v, fewest = RS_RULE.decide(sample, level), min((c for c, _ in sample), default=RS_CANDIDATES)
    if v.verdict == REFUTED and fewest < RS_CANDIDATES:
        return Verdict(INCONCLUSIVE, f"{v.why}; random search ran {fewest} candidates, not {RS_CANDIDATES}")
    return v


# -- draws: one simulated run of n units at a true value --------------------------------------------
def _clustered(rng: Any, rate: float, sizes: list[int], icc: float) -> list[tuple[int, int]]:
    """Per cluster: successes of ``sizes[i]`` 0/1 outcomes at ``rate`` (beta-binomial, correlation icc)."""
    p = [min(1.0, max(0.0, rate))] * len(sizes)
    if 0 < rate < 1 and 0 < icc < 1:
        p = list(rng.beta(rate * (1 - icc) / icc, (1 - rate) * (1 - icc) / icc, len(sizes)))
    return [(int(rng.binomial(m, q)), m) for m, q in zip(sizes, p, strict=True)]


def draw_modules(rng: Any, value: float, n: int, icc: float) -> list[tuple[tuple[int, int], ...]]:
    """Three modules on n cases × 2 phrasings: the first at ``value``, the others at CLEAN_TRUE."""
    modules = [_clustered(rng, r, [2] * n, icc) for r in (value, CLEAN_TRUE, CLEAN_TRUE)]
    return list(zip(*modules, strict=True))


def draw_bounds(rng: Any, value: float, n: int, icc: float) -> list[tuple[int, int]]:
    """Parsed answers per case as a default run has them: 7 per dev case (3 modules × 2 phrasings and the
    notes' signature's 2, less about one structural failure), the notes' signature's 2 per other case."""
    return _clustered(rng, value, [7] * min(n, DEV_CASES) + [2] * max(0, n - DEV_CASES), icc)


def draw_pairs(rng: Any, value: float, n: int, icc: float) -> list[tuple[int, int]]:
    return _clustered(rng, value, [2] * n, icc)


def draw_grammar(rng: Any, value: float, n: int, icc: float) -> list[tuple[int, int, int]]:
    return [(k, 0, m) for k, m in draw_pairs(rng, value, n, icc)]  # the grammar never breaks the structure


@functools.cache
def _case_sd(sd: float) -> float:
    return Plan(sd, 2 * DEV_CASES, "").planning_spread  # measured on 2 seeds' 15 dev cases


def _crossed(rng: Any, value: float, n: int, spread: float, parts: tuple[float, ...]) -> list[list[float]]:
    """n compile sets × the dev cases around ``value``: compile-set and residual effects in the measured
    proportion, their row mean's sd ``spread``; the case effect at its own upper bound."""
    scale = spread / row_sd(parts)
    rows, cases = rng.normal(0, parts[0] * scale, (n, 1)), rng.normal(0, _case_sd(parts[1]), (1, DEV_CASES))
    return (value + rows + cases + rng.normal(0, parts[2] * scale, (n, DEV_CASES))).tolist()


def draw_gap(rng: Any, value: float, n: int, spread: float) -> list[list[float]]:
    return _crossed(rng, value, n, spread, GAP_SD)


def draw_lift(rng: Any, value: float, n: int, spread: float) -> list[list[float]]:
    return _crossed(rng, value, n, spread, LIFT_SD)


def draw_rs(rng: Any, value: float, n: int, spread: float) -> list[tuple[int, list[float]]]:
    return [(RS_CANDIDATES, row) for row in _crossed(rng, value, n, spread, RS_SD)]


def _icc(measured: float) -> str:
    return f"{measured} on 50 cases at its {SPREAD_CONFIDENCE:.0%} upper bound (Fisher's z); {SPREADS}"


def _table_plan(parts: tuple[float, ...], sets: int, draw: Any, how: str = "") -> Plan:
    words = f"compile set {parts[0]}, residual {parts[2]} (case {parts[1]}, planned apart){how}; {SPREADS}"
    return Plan(row_sd(parts), sets, words, draw, "sd of one compile set's mean over 15 dev cases")


# -- the table -------------------------------------------------------------------------------------
ROWS = (
    ClaimSpec(
        "modules_serve_contract",
        "A Signature is a contract any module can serve (Predict / ChainOfThought / HybridRetriever swap "
        "freely): every module honours it",
        notes.MODULES_SECTION,
        "any module that keeps the contract can replace another",
        MEASURED,
        ("modules",),
        read_modules,
        at_least(
            CLEAN,
            "the lowest module's contract-clean rate",
            estimator=LOWEST_MODULE,
            unit=ASKED_CASE,
            claimed=CLEAN_TRUE,
            null=CLEAN_FALSE,
        ),
        Plan(icc_upper(0.39, 50), 0, "the largest module's, " + _icc(0.39), draw_modules, ICC),
        bounded_by="the shipped data holds 50 cases outside test, the full profile's budget",
    ),
    ClaimSpec(
        "prompt_bounds_not_enforced",
        "Length/range bounds written in the prompt are not enforced by the model",
        notes.PROMPT_BOUNDS_SECTION,
        f"'{notes.PROMPT_BOUND}' cannot be enforced",
        MEASURED,
        ("modules", "contracts"),
        read_prompt_bounds,
        BOUNDS_RULE,
        Plan(icc_upper(0.014, 50), 0, _icc(0.014), draw_bounds, ICC),
        verdict=verdict_bounds,
        bespoke="an existence claim: one breach proves it; only a rate wholly below the bar refutes it",
    ),
    ClaimSpec(
        "grammar_fixes_structure",
        "DSPy only writes the contract into the prompt: without constrained decoding a small model breaks "
        "its structure (parse errors, missing fields), and a JSON grammar removes those failures",
        OWN,
        "",
        MEASURED,
        ("contracts",),
        read_grammar,
        effect(1.0, "structural-failure rate, ChatAdapter − the JSON grammar", RATE_DIFFERENCE, "case"),
        Plan(0.5, 0, ASSUMED, draw_grammar, ICC),
    ),
    ClaimSpec(
        "confidence_in_words",
        "With desc 'confidence: [0-1]' the model answers words like 'high' instead of a number",
        notes.CONFIDENCE_SECTION,
        "asked for 'confidence: 0.8', the model keeps answering 'high'",
        MEASURED,
        ("contracts",),
        read_confidence,
        effect(1.0, "share of answers giving a confidence that give it as a word", CLUSTER, "case"),
        Plan(0.5, 0, f"{ASSUMED}; no answer gave a confidence at all in {SPREADS}", draw_pairs, ICC),
    ),
    ClaimSpec(
        "standard_only_gap",
        "Compiled on standard questions only, a program does much worse on real users' (colloquial) "
        "questions",
        notes.COMPILE_SECTION,
        f"F1 {notes.STANDARD_F1} standard vs {notes.COLLOQUIAL_F1} colloquial (gap {GAP:.2f})",
        MEASURED,
        ("compile",),
        read_gap,
        effect(GAP, "hit@3 standard − colloquial per dev case (0 % programs)", CROSSED, "compile set"),
        _table_plan(GAP_SD, 8, draw_gap),
        bounded_by="the shipped data's 15 dev cases bound its interval at any number of compile sets",
    ),
    ClaimSpec(
        "colloquial_mix_lifts",
        f"Remedy: {notes.COLLOQUIAL_SHARE:.0%} colloquial examples in the compile set lift colloquial "
        "accuracy",
        notes.COMPILE_SECTION,
        f"force {notes.COLLOQUIAL_SHARE:.0%} non-standard questions",
        MEASURED,
        ("compile",),
        read_mix,
        effect(GAP, "colloquial hit@3 per dev case, mix − 0 % (one compile set)", CROSSED, "compile set"),
        _table_plan(LIFT_SD, 8, draw_lift),
    ),
    ClaimSpec(
        "random_search_beats_bootstrap",
        "BootstrapFewShotWithRandomSearch beats plain BootstrapFewShot (same compile set)",
        notes.COMPILE_SECTION,
        "use FewShotWithRandomSearch instead of the default compiler",
        MEASURED,
        ("compile",),
        read_random_search,
        RS_RULE,
        _table_plan(RS_SD, 1, draw_rs, ", one set's cell sd 0.41 split as standard − colloquial's"),
        verdict=verdict_random_search,
        bespoke="a refutation needs random search at DSPy's documented 16 candidates",
        bounded_by="the shipped data's 15 dev cases bound its interval at any number of compile sets",
    ),
    ClaimSpec(
        "runaway_reproduced",
        "A stock llama-cpp-python server ignores the token limit DSPy sends: it generates past it",
        OWN,
        "",
        MEASURED,
        ("token_limit",),
        read_runaway,
        exact_at_least(1, "tokens the stock server generated beyond the limit", digits=4),
    ),
    ClaimSpec(
        "limit_enforced",
        "nbkit's launcher makes DSPy's token limit reach llama-cpp-python's server",
        OWN,
        "",
        MEASURED,
        ("token_limit", "history"),
        read_limit,
        exact_at_most(0, "tokens over its limit, the most of any served call or limit probe", digits=4),
    ),
)
for _row in ROWS:
    REGISTRY.claim(_row)


# -- the headline --------------------------------------------------------------------------------
def _broken(adapter: str) -> Any:
    return lambda c: None if c.run(adapter) is None else c.run(adapter).violation_rate


def _best_hit(modules: ModulesMetrics) -> float:
    return max((r.hit_at_3 for r in modules.runs), default=math.nan)


ANSWERS = "share of answers"
for _h in (
    HeadlineSpec(
        "questions_per_module",
        "questions asked of each module",
        ("modules",),
        lambda m: 2 * m.cases,
        "questions",
    ),
    HeadlineSpec(
        "best_module_hit_at_3", "hit@3 of the best module", ("modules",), _best_hit, "share of questions", 0.1
    ),
    HeadlineSpec(
        "chat_violation_rate", "contract breaches, ChatAdapter", ("contracts",), _broken("chat"), ANSWERS, 0.1
    ),
    HeadlineSpec(
        "grammar_violation_rate",
        "contract breaches, JSON grammar",
        ("contracts",),
        _broken("json_grammar"),
        ANSWERS,
        0.1,
    ),
    HeadlineSpec(
        "lm_calls_from_cache",
        "LM calls answered from DSPy's cache",
        ("history",),
        lambda h: h.calls.from_cache,
        "calls",
        help="0: a cold run; more: a re-run answered from the cache",
    ),
    # Wall seconds follow the machine's load: only a change of half of them is reported.
    HeadlineSpec(
        "notebook_seconds",
        "seconds from opening the context",
        ("history",),
        lambda h: h.seconds,
        "s",
        0.5,
        True,
    ),
):
    REGISTRY.headline_number(_h)

judge = REGISTRY.judge
headline = REGISTRY.headline
