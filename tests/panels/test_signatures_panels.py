"""Notebook 03's panels with widgets, on a session backed by dspy.utils.DummyLM (no server)."""

import pytest

dspy = pytest.importorskip("dspy")

from nbkit.result import Result  # noqa: E402
from nbkit.signatures import panels  # noqa: E402
from nbkit.signatures.cases import load_cases, load_knowledge_base, split_cases  # noqa: E402
from nbkit.signatures.experiments import SignatureSession  # noqa: E402
from nbkit.signatures.lm import LMHandle  # noqa: E402


def echo_lm():
    """DummyLM in dictionary mode: every prompt contains 'symptoms', so every call gets the same
    contract-clean differential naming 'gout' (deterministic and endless)."""
    answer = {"reasoning": "Classic gout.", "diagnoses": [{"condition": "gout", "confidence": 0.7}], "diagnosis": "condition: gout, confidence: 0.7"}
    return dspy.utils.DummyLM({"symptoms": answer})


@pytest.fixture
def session():
    kb = load_knowledge_base()
    cases = load_cases(kb=kb)
    s = SignatureSession(LMHandle(echo_lm(), "dummy", 64), kb, cases, split_cases(cases, 0))
    yield s
    s.close()


def test_modules_panel_click_updates_figure(session):
    p = panels.modules_panel(session, widget=True)
    p.controls["n_dev"].value = 1
    p.controls["modules"].value = ("predict", "hybrid")
    p.click()
    assert p.error is None, p.error
    assert isinstance(p.result, Result)
    assert list(p.live.figure.data[0].x) == ["predict", "hybrid"]
    assert p.result.metrics["dev_questions_evaluated"] == {"predict": 2, "hybrid": 2}
    p.controls["modules"].value = ("cot",)
    p.click()
    assert list(p.live.figure.data[0].x) == ["cot"]


def test_modules_default_evaluates_every_dev_question(session):
    result = panels.modules_panel(session, widget=False).run(modules=("predict",))
    n = 2 * len(session.splits.dev)
    assert n >= 30 and result.metrics["dev_questions_evaluated"] == {"predict": n}
    assert len(set(result.metrics["questions"]["predict"]["keys"])) == n


def test_contracts_panel_counts_by_adapter(session):
    p = panels.contracts_panel(session, widget=True)
    p.controls["n_dev"].value = 1
    p.controls["adapters"].value = ("chat",)
    p.click()
    assert p.error is None, p.error
    assert list(p.live.figure.data[0].x) == ["chat"]
    assert p.result.metrics["violation_rate"]["chat"] == 0.0
    assert p.result.metrics["field_notes_signature"]["violation_rate"] == 0.0
    assert "json_grammar" not in p.result.metrics["violation_rate"]  # no local server: no grammar
    # the field notes' signature is asked on train + val + the dev cases shown, and judged per answer
    notes = p.result.metrics["field_notes_signature"]
    assert notes["splits"] == ["train", "val", "dev"]
    assert notes["questions"] == 2 * (len(session.splits.train) + len(session.splits.val) + 1)
    assert notes["answers_with_items"] == notes["questions"] and notes["answers_not_numeric"] == 0


def test_compile_panel_runs_mixes(session):
    p = panels.compile_panel(session, widget=True)
    p.controls["n_dev"].value = 1
    p.controls["compile_size"].value = 2
    p.controls["max_demos"].value = 1
    p.controls["mixes"].value = (0.0, 0.5)
    p.controls["random_search"].value = False
    p.controls["module"].value = "predict"
    p.click()
    assert p.error is None, p.error
    assert list(p.live.figure.data[0].x) == ["uncompiled", "BFS 0% colloquial", "BFS 50% colloquial"]
    assert set(p.result.metrics["gains"]) == {"BFS 0% colloquial", "BFS 50% colloquial"}
    assert set(p.result.metrics["questions"]) == {"uncompiled", "BFS 0% colloquial", "BFS 50% colloquial"}


def test_compile_module_is_chosen_on_validation_questions(session):
    """module='auto' (the default) scores every module uncompiled on the val questions, never on dev."""
    from nbkit.signatures.modules import MODULES

    result = panels.compile_panel(session, widget=False).run(n_dev=1, compile_size=2, max_demos=1, mixes=(0.0,), random_search=False, n_val=2)
    on = result.metrics["module_chosen_on"]
    assert on["split"] == "val" and on["questions"] == 4 and set(on["hit@3"]) == set(MODULES)
    assert result.metrics["module"] == max(MODULES, key=lambda k: (on["hit@3"][k], -MODULES.index(k)))


def test_retrieval_is_chosen_on_validation(session):
    result = panels.retrieval_panel(session, widget=False).run(retrievers=("bm25",))
    assert result.metrics["chosen"] == "bm25" == session.retriever_kind
    assert result.metrics["chosen_on"] == "val" and result.metrics["val_cases"] == len(session.splits.val)
    assert list(result.table["split"]) == ["val", "test (chosen, once)"]


def test_ask_panel_shows_structured_answer_and_bad_input(session):
    p = panels.ask_panel(session, widget=True)
    p.controls["symptoms"].value = "big toe is red and swollen"
    p.controls["modules"].value = ("predict", "cot")
    p.click()
    assert p.error is None, p.error
    assert [t.name for t in p.live.figure.data] == ["predict", "cot"]
    assert list(p.result.table["contract"]) == ["holds", "holds"]
    p.controls["symptoms"].value = "   "
    p.click()
    assert p.error and "type some symptoms" in p.error


def test_history_panel_reports_calls(session):
    panels.ask_panel(session, widget=True).click()
    h = panels.history_panel(session, widget=True)
    h.click()
    assert h.error is None, h.error
    assert "gout" in h.result.data["text"] and len(h.live.figure.data) == 2
    assert h.result.metrics["calls"]["calls"] == 1 and h.result.metrics["calls"]["over_max_tokens"] == 0
