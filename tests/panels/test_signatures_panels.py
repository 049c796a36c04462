"""Notebook 03's panels with widgets, on a context backed by dspy.utils.DummyLM (no server)."""

import pytest

dspy = pytest.importorskip("dspy")

from nbkit.errors import UsageError  # noqa: E402
from nbkit.result import Result  # noqa: E402
from nbkit.signatures import claims, experiments  # noqa: E402
from nbkit.signatures.context import SignaturesContext  # noqa: E402
from nbkit.signatures.lm import LMHandle  # noqa: E402


def echo_lm():
    """DummyLM in dictionary mode: every prompt contains 'symptoms', so every call gets the same
    contract-clean differential naming 'gout' (deterministic and endless)."""
    answer = {
        "reasoning": "Classic gout.",
        "diagnoses": [{"condition": "gout", "confidence": 0.7}],
        "diagnosis": "condition: gout, confidence: 0.7",
    }
    return dspy.utils.DummyLM({"symptoms": answer})


@pytest.fixture
def ctx():
    s = SignaturesContext("cpu", handle=LMHandle(echo_lm(), "dummy", 64))
    yield s
    s.close()


def test_modules_panel_click_updates_figure(ctx):
    p = experiments.panel("modules", ctx, widget=True)
    p.controls["cases"].value = 1
    p.controls["modules"].value = ("predict", "hybrid")
    p.click()
    assert p.error is None, p.error
    assert isinstance(p.result, Result)
    assert list(p.live.figure.data[0].x) == ["predict", "hybrid"]
    assert [(r.module, r.questions) for r in p.result.metrics.runs] == [("predict", 2), ("hybrid", 2)]
    p.controls["modules"].value = ("cot",)
    p.click()
    assert list(p.live.figure.data[0].x) == ["cot"]


def test_modules_default_evaluates_every_dev_question(ctx):
    result = experiments.panel("modules", ctx, widget=False).run(modules=("predict",))
    n = 2 * len(ctx.splits.dev)
    assert n >= 30 and [(r.module, r.questions) for r in result.metrics.runs] == [("predict", n)]
    assert len(set(result.metrics.run("predict").outcomes.keys)) == n and result.metrics.cases == n // 2


def test_modules_budget_asks_dev_then_val_then_train_never_test(ctx):
    """The modules' budget is a count of cases: dev's first (the questions every other experiment asks), then
    val's and train's; the full profile's asks every case outside test."""
    assert experiments.REGISTRY["modules"].config(False, "full").cases == 50
    some = experiments.panel("modules", ctx, widget=False).run(
        modules=("predict",), cases=len(ctx.splits.dev) + 1
    )
    asked = list(dict.fromkeys(k.rsplit(":", 1)[0] for k in some.metrics.run("predict").outcomes.keys))
    assert asked == [c["id"] for c in ctx.splits.dev] + [ctx.splits.val[0]["id"]]
    assert some.metrics.splits == ("val", "dev")
    result = experiments.panel("modules", ctx, widget=False).run(modules=("predict",), cases=50)
    n = len(ctx.splits.train) + len(ctx.splits.val) + len(ctx.splits.dev)
    assert result.metrics.cases == n == 50 and result.metrics.run("predict").questions == 2 * n
    test_ids = {c["id"] for c in ctx.splits.test}
    assert not test_ids & {k.rsplit(":", 1)[0] for k in result.metrics.run("predict").outcomes.keys}


def test_contracts_panel_counts_by_adapter(ctx):
    p = experiments.panel("contracts", ctx, widget=True)
    p.controls["n_dev"].value = 1
    p.controls["adapters"].value = ("chat",)
    p.click()
    assert p.error is None, p.error
    assert list(p.live.figure.data[0].x) == ["chat"]
    assert p.result.metrics.run("chat").violation_rate == 0.0
    assert p.result.metrics.field_notes_signature.violation_rate == 0.0
    assert p.result.metrics.run("json_grammar") is None  # no local server: no grammar
    # the field notes' signature is asked on train + val + the dev cases shown, and judged per answer
    notes = p.result.metrics.field_notes_signature
    assert notes.splits == ("train", "val", "dev")
    assert notes.questions == 2 * (len(ctx.splits.train) + len(ctx.splits.val) + 1)
    assert notes.answers_with_items == notes.questions and notes.answers_not_numeric == 0


def test_compile_panel_runs_mixes(ctx):
    p = experiments.panel("compile", ctx, widget=True)
    p.controls["n_dev"].value = 1
    p.controls["compile_size"].value = 2
    p.controls["max_demos"].value = 1
    p.controls["mixes"].value = (0.0, 0.5)
    p.controls["random_search"].value = False
    p.controls["module"].value = "predict"
    p.click()
    assert p.error is None, p.error
    assert list(p.live.figure.data[0].x) == ["uncompiled", "BFS 0% colloquial", "BFS 50% colloquial"]
    assert [r.name for r in p.result.metrics.programs] == [
        "uncompiled",
        "BFS 0% colloquial",
        "BFS 50% colloquial",
    ]
    assert all(len(r.outcomes) == 2 for r in p.result.metrics.programs)


def test_compile_sets_one_per_seed_each_at_every_mix(ctx):
    """compiles=2: each compile set (one per seed) compiled at both mixes; the 10 % mix of a 10-example set is
    one colloquial example, and a set's two mixes share its cases."""
    result = experiments.panel("compile", ctx, widget=False).run(n_dev=1, compiles=2, module="predict")
    m = result.metrics
    assert [(r.optimizer, r.compile_seed, r.colloquial_share) for r in m.programs[1:]] == [
        ("bootstrap", 0, 0.0),
        ("bootstrap", 0, 0.1),
        ("bootstrap", 1, 0.0),
        ("bootstrap", 1, 0.1),
    ]
    assert [r.colloquial_in_compile_set for r in m.of("bootstrap", 0.1)] == [1, 1]
    assert all(r.compile_set == 10 for r in m.programs[1:]) and m.compiles == 2


def test_compile_module_is_chosen_on_validation_questions(ctx):
    """module='auto' (the default) scores every module uncompiled on the val questions, never on dev."""
    from nbkit.signatures.modules import MODULES

    result = experiments.panel("compile", ctx, widget=False).run(
        n_dev=1, compile_size=2, max_demos=1, mixes=(0.0,), random_search=False, n_val=2
    )
    on = result.metrics.module_chosen_on
    assert on.split == "val" and on.questions == 4 and {x.module for x in on.scores} == set(MODULES)
    hit = {s.module: s.hit_at_3 for s in on.scores}
    assert result.metrics.module == max(MODULES, key=lambda k: (hit[k], -MODULES.index(k)))


def test_retrieval_is_chosen_on_validation(ctx):
    result = experiments.panel("retrieval", ctx, widget=False).run(retrievers=("bm25",))
    assert result.metrics.chosen == "bm25" == ctx.retriever_kind
    assert result.metrics.chosen_on == "val" and result.metrics.val_cases == len(ctx.splits.val)
    assert list(result.table["split"]) == ["val", "test (chosen, once)"]


def test_ask_panel_shows_structured_answer_and_bad_input(ctx):
    p = experiments.panel("ask", ctx, widget=True)
    p.controls["symptoms"].value = "big toe is red and swollen"
    p.controls["modules"].value = ("predict", "cot")
    p.click()
    assert p.error is None, p.error
    assert [t.name for t in p.live.figure.data] == ["predict", "cot"]
    assert list(p.result.table["contract"]) == ["holds", "holds"]
    p.controls["symptoms"].value = "   "
    p.click()
    assert p.error and "type some symptoms" in p.error


def test_history_panel_reports_calls(ctx):
    experiments.panel("ask", ctx, widget=True).click()
    h = experiments.panel("history", ctx, widget=True)
    h.click()
    assert h.error is None, h.error
    assert "gout" in h.result.data["text"] and len(h.live.figure.data) == 2
    assert h.result.metrics.calls.calls == 1 and h.result.metrics.calls.over_max_tokens == 0


def test_data_and_signature_experiments(ctx):
    """The notebook's data and example-first cells: counts of what the context loaded, the derived bounds."""
    data = experiments.run("data", ctx)
    assert data.metrics.cases == len(ctx.cases) and data.metrics.dev == len(ctx.splits.dev)
    assert list(data.table.columns) == ["id", "conditions", "standard", "colloquial"] and len(data.table) == 3
    signature = experiments.run("signature", ctx, smoke=True)
    assert (
        signature.metrics.max_reasoning_words >= 50
        and 0 <= signature.metrics.confidence_min < signature.metrics.confidence_max
    )
    assert signature.table["signature"].nunique() == 2 and not any(
        k.endswith("desc") for k in vars(signature.metrics)
    )


def test_save_load_roundtrip_and_headline(ctx):
    with pytest.raises(UsageError, match="run the compile experiment first"):
        experiments.run("roundtrip", ctx)
    experiments.panel("compile", ctx, smoke=True, widget=False).run(n_dev=1, mixes=(0.0,))
    roundtrip = experiments.run("roundtrip", ctx).metrics
    assert roundtrip.program == "BFS 0% colloquial" and roundtrip.bytes > 0
    assert (
        roundtrip.same_demos and roundtrip.same_answer
    )  # DummyLM answers alike: the loaded program is the same
    experiments.panel("modules", ctx, smoke=True, widget=False).run(modules=("predict", "cot"))
    experiments.panel("contracts", ctx, smoke=True, widget=False).run(
        adapters=("chat",), field_notes_signature=False
    )
    history = experiments.panel("history", ctx, widget=False).run()
    headline = claims.headline(ctx)
    assert headline["questions_per_module"] == 4 and 0 <= headline["best_module_hit_at_3"] <= 1
    assert headline["chat_violation_rate"] == 0.0 and headline["grammar_violation_rate"] is None
    assert headline["notebook_seconds"] == history.metrics.seconds > 0
    assert headline["lm_calls_from_cache"] == history.metrics.calls.from_cache


def test_the_full_profile_runs_and_judges_its_rows():
    """PROFILE="full": the modules on every train, val and dev case, compile sets at both mixes with every val
    case for choices (three sets here, of the full profile's budget); a row its design cannot decide says so
    with the budget that ran, and the judge reads the sets that ran, not the budget."""
    from nbkit.signatures.config import FULL_COMPILES

    ctx = SignaturesContext("cpu", profile="full", handle=LMHandle(echo_lm(), "dummy", 64))
    try:
        modules = experiments.run("modules", ctx).metrics
        assert modules.splits == ("train", "val", "dev") and modules.cases == 50
        experiments.run("contracts", ctx, adapters=("chat",))
        compiled = experiments.run("compile", ctx, compiles=3)
        assert compiled.config.n_val == 0 and compiled.metrics.val_questions == 0
        assert len(compiled.metrics.of("bootstrap", 0.0)) == len(compiled.metrics.of("bootstrap", 0.1)) == 3
        rows = {r.key: r for r in claims.judge(ctx)}
    finally:
        ctx.close()
    assert experiments.REGISTRY["compile"].config(False, "full").compiles == FULL_COMPILES
    # DummyLM's one answer is contract-clean everywhere and the same for every program
    modules_why = rows["modules_serve_contract"].why
    assert modules_why.startswith("not decided at the full profile: up to 50 asked cases")
    assert rows["colloquial_mix_lifts"].n.startswith("3 compile set(s) × 15 dev cases")
    assert rows["colloquial_mix_lifts"].why.startswith(
        "not decided at the full profile: up to 3 compile sets"
    )
    assert "no interval" in rows["colloquial_mix_lifts"].why  # identical programs: no spread to judge


def test_the_compile_loop_stops_when_its_rows_are_decided(ctx, monkeypatch):
    """The compile loop asks its stop hook after each compile set, with the metrics of the sets done so far,
    and stops when it says so."""
    asked = []

    def stopper(slug, context, cfg):
        assert (slug, context, cfg.compiles) == ("compile", ctx, 4)
        return lambda metrics: asked.append(metrics.compiles) or metrics.compiles == 2

    monkeypatch.setattr(experiments.REGISTRY, "stopper", stopper)
    result = experiments.run("compile", ctx, n_dev=1, compiles=4, module="predict", mixes=(0.0, 0.1))
    assert asked == [1, 2] and result.metrics.compiles == 2
    assert [p.compile_seed for p in result.metrics.programs[1:]] == [0, 0, 1, 1]
