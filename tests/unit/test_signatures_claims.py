"""Every verdict function of notebook 03 driven through every outcome at the n the notebook really has, on
fabricated measurements of the types the experiments return (:mod:`nbkit.signatures.metrics`); each spec's
operating characteristics asserted; the ledger judged from a context's results."""

import dataclasses

import pytest

from nbkit.claims import (
    DEFAULT,
    DEMONSTRATION,
    FAMILY_ALPHA,
    FULL,
    HOLDS,
    INCONCLUSIVE,
    MEASURED,
    REFUTED,
    Verdict,
    family_size,
    operating_characteristics,
    simulate,
)
from nbkit.experiment import Context
from nbkit.result import Result
from nbkit.signatures import claims as sc
from nbkit.signatures import config, designs
from nbkit.signatures.experiments import REGISTRY
from nbkit.signatures.metrics import (
    AdapterRun,
    AnswerBounds,
    CompiledRun,
    CompileMetrics,
    ContractsMetrics,
    FieldNotesAnswers,
    HistoryMetrics,
    LMCalls,
    ModuleChoice,
    ModuleRun,
    ModulesMetrics,
    Outcomes,
    TokenLimitMetrics,
    ViolationCounts,
)

SPECS = {s.key: s for s in REGISTRY.claims}
# The level a noisy row is judged at when Holm has to take it first: Bonferroni over the notebook's family.
LEVEL = 1 - FAMILY_ALPHA / family_size(REGISTRY.claims)
DEV = designs.shipped_cases(("dev",))  # 15 dev cases at the default seed
NOTES = designs.shipped_cases(("train", "val", "dev"))  # 50: the field notes' signature, the full modules


def outcome(verdict):
    assert isinstance(verdict, Verdict)
    return verdict.verdict


def test_the_shipped_sizes_are_what_the_configs_ask():
    assert (DEV, NOTES) == (15, 50)
    assert designs.MODULES_CLEAN.units(config.ModulesConfig()) == DEV
    assert designs.MODULES_CLEAN.units(config.ModulesConfig.full()) == NOTES
    assert designs.CONFIDENCE_WORDS.units(config.ContractsConfig()) == NOTES
    assert designs.MIX_LIFT.units(config.CompileConfig()) == 1
    assert designs.MIX_LIFT.units(config.CompileConfig.full()) == config.FULL_COMPILES
    # standard − colloquial is bounded by the dev cases, which no profile adds to
    assert designs.GAP.units(config.CompileConfig()) == designs.GAP.units(config.CompileConfig.full()) == DEV
    assert designs.RANDOM_SEARCH.units(config.CompileConfig()) == 0  # random search runs in the full profile


# -- modules serve the contract ----------------------------------------------------------------------
def _modules_clean(*per_module):
    """(module, clean per case, 2 per case) from per-case clean counts."""
    return tuple((f"m{i}", list(k), [2] * len(k)) for i, k in enumerate(per_module))


@pytest.mark.parametrize(
    ("clean", "expected"),
    [
        (_modules_clean([2] * NOTES, [2] * NOTES, [2] * 49 + [1]), HOLDS),  # lowest bound ≥ 0.8
        (_modules_clean([2] * NOTES, [1] * 40 + [2] * 10, [2] * NOTES), REFUTED),  # 60/100 clean
        (_modules_clean([2] * NOTES, [2] * 38 + [1] * 12, [2] * NOTES), INCONCLUSIVE),  # 88/100 straddles
        ((), INCONCLUSIVE),
    ],
)
def test_modules_serve_contract_at_the_full_profiles_n(clean, expected):
    assert outcome(sc.verdict_modules_serve_contract(clean, LEVEL)) == expected


def test_modules_serve_contract_counts_a_case_not_a_question():
    """The same 25 of 30 clean answers: scattered over cases they carry more information than in whole
    cases (a case's two phrasings breaking together count as one case's worth)."""
    scattered = _modules_clean([2] * 10 + [1] * 5, [2] * 15, [2] * 15)
    paired = _modules_clean([2] * 12 + [0] * 2 + [1], [2] * 15, [2] * 15)
    assert sum(scattered[0][1]) == sum(paired[0][1]) == 25
    assert sc.clustered_rate_interval(*scattered[0][1:])[1] < sc.clustered_rate_interval(*paired[0][1:])[1]


# -- prompt bounds -------------------------------------------------------------------------------
SIZES = designs._bounds_sizes(designs.PROMPT_BOUNDS.n)  # 15 dev cases × 7 parsed answers, 35 × 2


@pytest.mark.parametrize(
    ("breaches", "expected"),
    [
        ([1] + [0] * (len(SIZES) - 1), HOLDS),  # one breach is an existence proof
        ([0] * len(SIZES), REFUTED),  # 0 of 175 with the upper bound under 5 %
    ],
)
def test_observed_at_the_default_n(breaches, expected):
    assert sum(SIZES) == 175
    assert outcome(sc.verdict_observed(breaches, SIZES, "breaches", LEVEL)) == expected


def test_observed_cannot_refute_on_the_dev_answers_alone():
    """0 breaches among the 105 dev answers alone cannot exclude a 5 % rate at the family's level."""
    v = sc.verdict_observed([0] * DEV, [7] * DEV, "breaches", LEVEL)
    assert v.verdict == INCONCLUSIVE and "n too small" in v.why
    assert outcome(sc.verdict_observed([], [], "breaches", LEVEL)) == INCONCLUSIVE


# -- the grammar: a demonstration ----------------------------------------------------------------------
D = 2 * DEV


@pytest.mark.parametrize(
    ("chat", "grammar", "expected"),
    [
        ([1.0] * D, [0.0] * D, HOLDS),
        ([0.0] * D, [1.0] * D, REFUTED),
        ([0.0] * D, [0.0] * D, INCONCLUSIVE),  # no discordant question: the interval keeps its width
        ([1.0] + [0.0] * (D - 1), [0.0] * D, INCONCLUSIVE),
        ([1.0], [0.0], INCONCLUSIVE),  # one question cannot decide
    ],
)
def test_grammar_fixes_structure(chat, grammar, expected):
    assert outcome(sc.verdict_grammar_fixes_structure(chat, grammar)) == expected
    assert SPECS["grammar_fixes_structure"].kind == DEMONSTRATION


# -- confidence in words: a rate rule for an "always" claim --------------------------------------------
@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ([2] * 45 + [0] * 5, HOLDS),  # 90 of 100 answers giving a confidence give a word
        ([1] + [0] * 49, REFUTED),  # 1 of 100: the model answers with numbers (an existence rule said holds)
        ([0] * NOTES, REFUTED),
        ([2] * 25 + [0] * 25, INCONCLUSIVE),  # half, in whole cases: straddles 0.5
    ],
)
def test_confidence_in_words_at_the_default_n(words, expected):
    assert outcome(sc.verdict_confidence_in_words(words, [2] * NOTES, LEVEL)) == expected


def test_confidence_in_words_with_nothing_to_count():
    assert outcome(sc.verdict_confidence_in_words([], [], LEVEL)) == INCONCLUSIVE
    # no answer gives a confidence at all (bare condition names): nothing shows words against numbers
    assert outcome(sc.verdict_confidence_in_words(*sc.words_among_given(_outcomes(NOTES)), LEVEL)) == (
        INCONCLUSIVE
    )


def test_only_answers_that_give_a_confidence_are_counted():
    """'condition: gout, confidence: high' gives a word, 'gout (0.8)' … a number, 'gout' nothing: the
    denominator is the answers that give one; an unparsed answer is not counted."""
    o = Outcomes(
        keys=("a:standard", "a:colloquial", "b:standard", "b:colloquial", "c:standard"),
        structural=(0.0, 0.0, 0.0, 1.0, 0.0),
        items=(1, 0, 2, 0, 1),
        not_numeric=(1.0, 0.0, 0.0, 0.0, 0.0),
        confidence_numbers=(0, 0, 2, 0, 1),
        confidence_words=(1, 0, 0, 0, 1),
    )
    assert sc.words_among_given(o) == ([1, 0, 1], [1, 1, 1])


# -- compile claims: compile sets × cases ---------------------------------------------------------------
K = config.FULL_COMPILES


def _table(value, rows=K, cols=DEV, wobble=0.5):
    """A rows × cols table of per-case differences around ``value``: a checkerboard of ±wobble."""
    return [[value + (wobble if (i + j) % 2 else -wobble) for j in range(cols)] for i in range(rows)]


@pytest.mark.parametrize(
    ("fn", "value", "expected"),
    [
        (sc.verdict_colloquial_gap, 0.6, HOLDS),
        (sc.verdict_colloquial_gap, -0.2, REFUTED),
        (sc.verdict_colloquial_gap, sc.GAP_MIN, INCONCLUSIVE),
        (sc.verdict_mix_lifts_colloquial, 0.6, HOLDS),
        (sc.verdict_mix_lifts_colloquial, -0.2, REFUTED),
        (sc.verdict_mix_lifts_colloquial, sc.LIFT_MIN, INCONCLUSIVE),
    ],
)
def test_compile_verdicts_at_the_full_profiles_n(fn, value, expected):
    assert outcome(fn(_table(value), LEVEL)) == expected


def test_compile_verdicts_need_a_table_with_spread():
    assert outcome(sc.verdict_colloquial_gap([], LEVEL)) == INCONCLUSIVE
    tied = sc.verdict_mix_lifts_colloquial([[0.0] * DEV] * K, LEVEL)  # identical programs: no interval
    assert tied.verdict == INCONCLUSIVE and "no interval" in tied.why


def test_one_compile_set_cannot_stand_for_compiling():
    """A compile-set effect shared by every case: one set's 15 cases look decisive, the table of sets does
    not (the compile set is a unit)."""
    one = [[0.5 + (0.1 if j % 2 else -0.1) for j in range(DEV)]]
    assert outcome(sc.verdict_colloquial_gap(one, LEVEL)) == HOLDS
    shifted = one + [[v - 0.6 for v in one[0]]] + [[v + 0.1 for v in one[0]]]
    assert outcome(sc.verdict_colloquial_gap(shifted, LEVEL)) == INCONCLUSIVE


@pytest.mark.parametrize(("candidates", "expected"), [(1, INCONCLUSIVE), (16, REFUTED)])
def test_random_search_refuted_only_at_its_documented_budget(candidates, expected):
    assert outcome(sc.verdict_random_search_beats(_table(-0.2), candidates, LEVEL)) == expected
    assert outcome(sc.verdict_random_search_beats(_table(0.6), 1, LEVEL)) == HOLDS
    assert outcome(sc.verdict_random_search_beats(_table(sc.RS_GAIN), 16, LEVEL)) == INCONCLUSIVE
    assert config.CompileConfig().num_candidates == sc.RS_CANDIDATES  # the documented budget is the default
    assert dataclasses.fields(config.CompileConfig)[8].metadata["max"] >= sc.RS_CANDIDATES


# -- the token limit -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tokens", "imputed", "expected", "why"),
    [
        (213, False, HOLDS, "213 tokens"),
        (190, True, HOLDS, "≥ 190 (its context of 256 filled)"),
        (17, False, HOLDS, "ignored"),
        (16, False, REFUTED, "kept the limit"),
        (None, False, INCONCLUSIVE, "not measured"),
    ],
)
def test_runaway(tokens, imputed, expected, why):
    v = sc.verdict_runaway(tokens, 16, 256, imputed)
    assert v.verdict == expected and why in v.why


@pytest.mark.parametrize(
    ("longest", "calls", "probes", "expected"),
    [
        (128, 50, (), HOLDS),
        (129, 50, (), REFUTED),
        (0, 0, (), INCONCLUSIVE),
        (0, 0, (16, 16, 12), HOLDS),
        (128, 50, (16, 17), REFUTED),
        (0, 0, (40,), REFUTED),
    ],
)
def test_limit_enforced(longest, calls, probes, expected):
    assert sc.verdict_limit_enforced(longest, 128, calls, probes, 16).verdict == expected


# -- operating characteristics -------------------------------------------------------------------------
DECIDED_AT_DEFAULTS = {
    "prompt_bounds_not_enforced",
    "confidence_in_words",
    "runaway_reproduced",
    "limit_enforced",
}


FULL_PROFILE = {"modules_serve_contract", "colloquial_mix_lifts"}
BEYOND_DATA = {"standard_only_gap": 150, "random_search_beats_bootstrap": 80}  # dev cases each needs


def test_which_rows_decide_at_defaults_in_the_full_profile_or_not_with_this_data():
    measured = {k for k, s in SPECS.items() if s.kind == MEASURED}
    decided = {k for k in measured if operating_characteristics(SPECS[k], DEFAULT).decided}
    assert decided == DECIDED_AT_DEFAULTS
    assert measured - decided == FULL_PROFILE | set(BEYOND_DATA)
    for key in FULL_PROFILE:
        d = SPECS[key].design
        assert d.full_n and d.full_minutes and d.full_minutes_source and not d.beyond_data, key
        oc = operating_characteristics(SPECS[key], FULL)
        assert oc.decided and oc.n == d.full_n, key
    assert SPECS["modules_serve_contract"].design.full_n == NOTES
    assert SPECS["colloquial_mix_lifts"].design.full_n == config.FULL_COMPILES
    level = operating_characteristics(SPECS["standard_only_gap"], DEFAULT).level
    for key, cases in BEYOND_DATA.items():
        d = SPECS[key].design
        assert (d.needed_n, d.full_n) == (cases, None) and f"{DEV} dev cases" in d.beyond_data
        assert simulate(SPECS[key], cases, level).decided  # the n the row names is the n that decides it
        assert not simulate(SPECS[key], DEV, level).decided  # ... which the data's dev cases are not


@pytest.mark.parametrize("key", sorted(DECIDED_AT_DEFAULTS))
def test_decided_rows_reach_the_bar(key):
    oc = operating_characteristics(SPECS[key], DEFAULT)
    assert oc.p_holds_if_true >= 0.8 and oc.p_refuted_if_false >= 0.8
    assert oc.p_refuted_if_true <= 0.05 and oc.p_holds_if_false <= 0.05


def test_the_old_rules_could_not_decide():
    """The compile claims at one compile set: whatever the truth, the default run cannot decide them."""
    for key in ("standard_only_gap", "colloquial_mix_lifts"):
        oc = operating_characteristics(SPECS[key], DEFAULT)
        assert oc.p_holds_if_true < 0.8 or oc.p_refuted_if_false < 0.8, key


# -- the ledger from a context's results --------------------------------------------------------------
def _outcomes(n_cases, hit=0.0, structural=0.0, breaches=0, not_numeric=0.0, prefix="c", numbers=0, words=0):
    keys = [f"{prefix}{i}:{s}" for i in range(n_cases) for s in ("standard", "colloquial")]
    hits = hit if isinstance(hit, list) else [hit] * len(keys)
    return Outcomes(
        keys=tuple(keys),
        hit=tuple(hits),
        clean=tuple([1.0 - structural] * len(keys)),
        structural=tuple([structural] * len(keys)),
        bound_breaches=tuple(
            () if structural else (("reasoning_over_50_words",) if i < breaches else ())
            for i in range(len(keys))
        ),
        items=tuple([0 if structural else 2] * len(keys)),
        not_numeric=tuple([not_numeric] * len(keys)),
        confidence_numbers=tuple([0 if structural else numbers] * len(keys)),
        confidence_words=tuple([0 if structural else words] * len(keys)),
    )


def _module_run(name, o):
    return ModuleRun(name, len(o), 0.0, 0.0, 0.0, 0.0, 0.0, AnswerBounds(), o)


def _modules(**runs):
    return ModulesMetrics(
        "json_grammar", "typed", ("dev",), DEV, tuple(_module_run(k, v) for k, v in runs.items())
    )


def _adapter(name, o):
    return AdapterRun(name, 0.0, ViolationCounts(), AnswerBounds(), o)


def _notes(o):
    return FieldNotesAnswers(
        "json_grammar",
        ("train", "val", "dev"),
        len(o),
        0.0,
        ViolationCounts(),
        AnswerBounds(),
        len(o),
        0,
        0,
        0,
        o,
    )


def _program(name, optimizer, seed, share, o):
    return CompiledRun(name, optimizer, seed, share, 10, int(10 * share), 1, 1, 0, 0.0, 0.0, 0.0, o)


def _compiled(*programs, compiles=1):
    return CompileMetrics(
        "predict",
        ModuleChoice("val", 10, ()),
        "json_grammar",
        2 * DEV,
        compiles,
        (0.0, 0.1),
        False,
        0,
        0,
        programs,
        0.0,
    )


def _token_limit(**fields):
    base = {
        "limit": 16,
        "dspy_limit_fields": ("max_completion_tokens",),
        "stock_dspy_tokens": 213,
        "stock_n_ctx": 256,
    }
    return TokenLimitMetrics(**{**base, **fields})


def _history(**fields):
    calls = {
        "calls": 300,
        "served": 300,
        "from_cache": 0,
        "completion_tokens": 9000,
        "max_completion_tokens": 128,
        "over_max_tokens": 0,
        "max_tokens": 128,
    }
    return HistoryMetrics(calls=LMCalls(**{**calls, **fields}), seconds=12.0)


def test_bounds_count_each_request_once():
    """The modules' predict under the grammar and the contracts' json_grammar are one request per question;
    the field notes' signature's answers count too, grouped by case."""
    modules = _modules(predict=_outcomes(DEV, breaches=2), cot=_outcomes(DEV), hybrid=_outcomes(DEV))
    contracts = ContractsMetrics(
        "predict",
        "typed",
        2 * DEV,
        (
            _adapter("chat", _outcomes(DEV, structural=1.0)),
            _adapter("json_grammar", _outcomes(DEV, breaches=2)),
        ),
        _notes(_outcomes(NOTES, prefix="n")),
    )
    (breaches, answers), requests = sc.request_bounds(modules, contracts)
    assert requests == 4 * 2 * DEV + 2 * NOTES and sum(answers) == 3 * 2 * DEV + 2 * NOTES
    assert sum(breaches) == 2 and len(answers) == DEV + NOTES


def test_judge_reads_every_row_from_a_contexts_results():
    std_only = [1.0 if k.endswith("standard") else 0.0 for k in _outcomes(DEV).keys]
    modules = _modules(predict=_outcomes(DEV), cot=_outcomes(DEV), hybrid=_outcomes(DEV))
    contracts = ContractsMetrics(
        "predict",
        "typed",
        2 * DEV,
        (_adapter("chat", _outcomes(DEV, structural=1.0)), _adapter("json_grammar", _outcomes(DEV))),
        _notes(_outcomes(NOTES, not_numeric=0.0, prefix="n", numbers=2)),
    )
    compiled = _compiled(
        _program("BFS 0% colloquial", "bootstrap", 0, 0.0, _outcomes(DEV, std_only)),
        _program("BFS 10% colloquial", "bootstrap", 0, 0.1, _outcomes(DEV, 1.0)),
    )
    with Context() as ctx:
        for slug, m in (
            ("modules", modules),
            ("contracts", contracts),
            ("compile", compiled),
            ("token_limit", _token_limit()),
            ("history", _history()),
        ):
            ctx.keep(slug, Result(metrics=m))
        rows = {r.key: r for r in sc.judge(ctx)}
    assert {k: r.verdict for k, r in rows.items()} == {
        "modules_serve_contract": INCONCLUSIVE,  # not decided at defaults
        "prompt_bounds_not_enforced": REFUTED,  # 0 of 190 parsed answers breach
        "grammar_fixes_structure": HOLDS,
        "confidence_in_words": REFUTED,  # every one of 100 answers gives a number
        "standard_only_gap": INCONCLUSIVE,
        "colloquial_mix_lifts": INCONCLUSIVE,
        "random_search_beats_bootstrap": INCONCLUSIVE,
        "runaway_reproduced": HOLDS,
        "limit_enforced": HOLDS,
    }
    for key in ("modules_serve_contract", "colloquial_mix_lifts"):
        assert (
            rows[key].why.startswith("not decided at defaults: needs n ≥")
            and "run the full profile" in rows[key].why
        )
        assert not rows[key].decided_at_defaults
    for key, cases in BEYOND_DATA.items():
        assert f"needs n ≥ {cases} dev cases — with" in rows[key].why
        assert f"the shipped data has {DEV} dev cases" in rows[key].why
        assert "no profile decides it" in rows[key].why
    assert (
        rows["grammar_fixes_structure"].kind == DEMONSTRATION
        and rows["grammar_fixes_structure"].p_holds_if_true is None
    )
    assert "Holm" in rows["confidence_in_words"].why
    assert "0 of 100 answers giving a confidence give it as a word" in rows["confidence_in_words"].measured
    assert "50 cases" in rows["confidence_in_words"].n
    assert "1 compile set(s) × 15 dev cases" in rows["standard_only_gap"].n
    assert "module chosen on 10 val questions" in rows["standard_only_gap"].n
    assert "+1.000" in rows["colloquial_mix_lifts"].measured


def test_a_warm_run_counts_only_the_calls_it_served():
    warm = _history(calls=300, served=4, from_cache=296, completion_tokens=60, max_completion_tokens=16)
    r = sc.read_limit(_token_limit(), warm)
    assert "over 4 calls served" in r.measured and "296 more answered from DSPy's cache" in r.measured
    cold = sc.read_limit(
        _token_limit(nbkit_max_tokens=16, nbkit_max_completion_tokens=16, dspy_through_session=16),
        _history(served=0, from_cache=300, calls=300, max_completion_tokens=0),
    )
    assert sc.verdict_limit_enforced(*cold.args).verdict == HOLDS and "3 limit probes" in cold.n
    assert (
        sc.verdict_limit_enforced(
            *sc.read_limit(_token_limit(), _history(served=0, from_cache=300, max_completion_tokens=0)).args
        ).verdict
        == INCONCLUSIVE
    )


def test_the_runaway_row_marks_an_imputed_count():
    r = sc.read_runaway(
        _token_limit(stock_dspy_tokens=190, stock_tokens_imputed=True, stock_context_full=True)
    )
    assert "imputed: the context of 256 filled" in r.measured and sc.verdict_runaway(*r.args).verdict == HOLDS
