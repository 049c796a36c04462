"""A user's own contract: their signature, their JSONL dev set, a stated metric — on DummyLM."""

import json
import types

import pytest

dspy = pytest.importorskip("dspy")

from nbkit.signatures import experiments  # noqa: E402
from nbkit.signatures import user_contract as uc  # noqa: E402
from nbkit.signatures.context import SignaturesContext  # noqa: E402
from nbkit.signatures.lm import LMHandle  # noqa: E402

ROWS = [
    {"question": f"capital of country {i}?", "answer": "paris" if i % 2 else "rome", "id": i}
    for i in range(12)
]


@pytest.fixture
def dev_set(tmp_path):
    path = tmp_path / "dev.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    return path


def session_answering(answer):
    return SignaturesContext("cpu", handle=LMHandle(dspy.utils.DummyLM({"question": answer}), "dummy", 64))


def test_string_signature_dev_set_and_metrics(dev_set):
    sig = uc.load_signature("question -> answer")
    examples = uc.load_dev_set(dev_set, sig)
    assert len(examples) == 12 and examples[3].line == 4 and list(examples[0].inputs().keys()) == ["question"]
    exact, contains = uc.make_metric("exact", sig), uc.make_metric("contains", sig)
    ex = examples[1]  # gold "paris"
    assert (
        exact(ex, dspy.Prediction(answer=" Paris.")) == 1.0
        and exact(ex, dspy.Prediction(answer="It is Paris")) == 0.0
    )
    assert (
        contains(ex, dspy.Prediction(answer="It is Paris")) == 1.0
        and contains(ex, dspy.Prediction(answer="Rome")) == 0.0
    )
    assert uc.make_metric("json:dumps", sig) is json.dumps  # module:function


def test_run_user_contract_scores_and_compares_modules(dev_set):
    session = session_answering({"answer": "paris", "reasoning": "r"})
    result = experiments.panel(
        "user_contract",
        session,
        widget=False,
        signature="question -> answer",
        dev_set=str(dev_set),
        metric="exact",
        adapters=("chat",),
    ).run()
    m = result.metrics
    assert m.ran and m.examples == 12
    assert [(s.module, s.score) for s in m.score] == [("predict", 0.5), ("cot", 0.5)]  # right on 6 odd rows
    assert [(a.adapter, a.violation_rate) for a in m.violation_rate] == [("chat", 0.0)]
    # identical answers on 12 rows: no discordant pair, so Newcombe's interval straddles the 0.05 gain (a
    # bootstrap said "refuted")
    (cot,) = m.vs_predict
    assert (cot.module, cot.verdict, cot.n) == ("cot", "inconclusive", 12) and cot.interval.startswith("[")
    not_given = experiments.panel(
        "user_contract", session, widget=False
    ).run()  # nothing given: not run, said so
    assert not not_given.metrics.ran and "set SIGNATURE and DEV_SET" in not_given.metrics.why


def test_unparseable_answers_are_counted_as_violations(dev_set):
    session = session_answering({"nonsense": "x"})
    p = experiments.panel(
        "user_contract",
        session,
        widget=False,
        signature="question -> answer",
        dev_set=str(dev_set),
        modules=("predict",),
        adapters=("chat",),
    )
    m = p.run().metrics
    assert [(a.adapter, a.violation_rate) for a in m.violation_rate] == [("chat", 1.0)]
    assert [(s.module, s.score) for s in m.score] == [("predict", 0.0)]


def test_the_grammar_follows_the_module_signature_so_chain_of_thought_may_reason(dev_set, monkeypatch):
    """Under json_grammar, ChainOfThought's answers carry a `reasoning` field: a grammar built from the user's
    fields alone forbade it, and every CoT answer was counted as missing a field (seen on the real
    SmolLM2)."""
    session = session_answering({"answer": "paris", "reasoning": "r"})
    session.llm.handle.server = types.SimpleNamespace(
        kind="llama-cpp-python"
    )  # as with the local llama.cpp pool: json_grammar sends a schema
    seen = {}

    def fake_evaluate(program, examples, *, lm, **kwargs):
        seen[type(program).__name__] = set(lm.kwargs["response_format"]["schema"]["properties"])
        return {
            "records": [{"key": f"line {e.line}", "score": 1.0, "violations": []} for e in examples],
            "seconds": 0.0,
        }

    monkeypatch.setattr(uc, "evaluate", fake_evaluate)
    p = experiments.panel(
        "user_contract",
        session,
        widget=False,
        signature="question -> answer",
        dev_set=str(dev_set),
        adapters=("json_grammar",),
        adapter="json_grammar",
    )
    assert p.run().metrics.ran
    assert seen == {"Predict": {"answer"}, "ChainOfThought": {"reasoning", "answer"}}
