"""Notebook 03's panels with widgets, on a session backed by dspy.utils.DummyLM (no server)."""

import pytest

dspy = pytest.importorskip("dspy")

from nbkit.signatures.data import load_cases, load_knowledge_base, split_cases  # noqa: E402
from nbkit.signatures.lm import LMHandle  # noqa: E402
from nbkit.signatures.panels import SignatureSession, make_panels  # noqa: E402


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


def bar_names(panel):
    return sorted({t.name for t in panel.live.figure.data})


def test_modules_panel_click_updates_figure(session):
    panels = make_panels(session, widget=True)
    p = panels["modules"]
    p.controls["n_dev"].value = 1
    p.controls["modules"].value = ("predict", "hybrid")
    p.click()
    assert p.error is None, p.error
    x = list(p.live.figure.data[0].x)
    assert x == ["predict", "hybrid"]
    p.controls["modules"].value = ("cot",)
    p.click()
    assert list(p.live.figure.data[0].x) == ["cot"]


def test_contracts_panel_counts_by_adapter(session):
    p = make_panels(session, widget=True)["contracts"]
    p.controls["n_dev"].value = 1
    p.controls["adapters"].value = ("chat",)
    p.click()
    assert p.error is None, p.error
    assert list(p.live.figure.data[0].x) == ["chat"]
    assert p.result["rates"]["chat"] == 0.0


def test_compile_panel_runs_mixes(session):
    p = make_panels(session, widget=True)["compile"]
    p.controls["n_dev"].value = 1
    p.controls["compile_size"].value = 2
    p.controls["max_demos"].value = 1
    p.controls["mixes"].value = (0.0, 0.5)
    p.controls["random_search"].value = False
    p.click()
    assert p.error is None, p.error
    programs = list(p.live.figure.data[0].x)
    assert programs == ["uncompiled", "BFS 0% colloquial", "BFS 50% colloquial"]
    assert set(p.result["gains"]) == {"BFS 0% colloquial", "BFS 50% colloquial"}


def test_ask_panel_shows_structured_answer_and_bad_input(session):
    p = make_panels(session, widget=True)["ask"]
    p.controls["symptoms"].value = "big toe is red and swollen"
    p.controls["modules"].value = ("predict", "cot")
    p.click()
    assert p.error is None, p.error
    assert [t.name for t in p.live.figure.data] == ["predict", "cot"]
    assert list(p.result["table"]["contract"]) == ["holds", "holds"]
    p.controls["symptoms"].value = "   "
    p.click()
    assert p.error and "type some symptoms" in p.error


def test_history_panel_reports_calls(session):
    panels = make_panels(session, widget=True)
    panels["ask"].click()
    h = panels["history"]
    h.click()
    assert h.error is None, h.error
    assert "gout" in h.result["text"] and len(h.live.figure.data) == 2
