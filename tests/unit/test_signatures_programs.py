"""Modules, evaluation, compiling and save/load — on dspy.utils.DummyLM (no server)."""

import pytest

dspy = pytest.importorskip("dspy")

from nbkit.signatures import compiling, evaluation  # noqa: E402
from nbkit.signatures.cases import load_cases, load_knowledge_base, split_cases, to_examples  # noqa: E402
from nbkit.signatures.contracts import typed_medical_diagnosis_signature  # noqa: E402
from nbkit.signatures.modules import build_module  # noqa: E402
from nbkit.signatures.retrieval import build_retriever, recall_at_k  # noqa: E402


@pytest.fixture(scope="module")
def kb():
    return load_knowledge_base()


@pytest.fixture(scope="module")
def splits(kb):
    return split_cases(load_cases(kb=kb), 0)


def good(case_conditions, n=50):
    return [
        {
            "diagnoses": [{"condition": case_conditions[0], "confidence": 0.8}],
            "reasoning": "Classic presentation.",
        }
    ] * n


def test_all_three_modules_serve_the_same_contract(kb, splits):
    sig = typed_medical_diagnosis_signature()
    retriever = build_retriever("bm25", kb)
    example = to_examples(splits.dev[:1], slices=("standard",))[0]
    for kind in ("predict", "cot", "hybrid"):
        answers = [
            {"reasoning": "Classic.", "diagnoses": [{"condition": example.conditions[0], "confidence": 0.8}]}
        ]
        lm = dspy.utils.DummyLM(answers)
        res = evaluation.evaluate_program(
            build_module(kind, sig, retriever), [example], lm=lm, kb=kb, label=kind, progress=False
        )
        assert res.records[0]["violations"] == [], (kind, res.records[0])
        assert res.score == 1.0
    with pytest.raises(ValueError, match="needs a retriever"):
        build_module("hybrid", sig)
    with pytest.raises(ValueError, match="unknown module"):
        build_module("nope", sig)


def test_hybrid_puts_retrieved_passages_in_the_prompt(kb, splits):
    retriever = build_retriever("bm25", kb)
    lm = dspy.utils.DummyLM([{"diagnoses": [{"condition": "gout", "confidence": 0.9}], "reasoning": "x"}])
    module = build_module("hybrid", typed_medical_diagnosis_signature(), retriever)
    with dspy.context(lm=lm):
        pred = module(symptoms="big toe red hot swollen after beer")
    assert len(pred.context) == 3
    prompt = "\n".join(m["content"] for m in lm.history[-1]["messages"])
    assert "gout" in prompt.lower() and "[[ ## context ## ]]" in prompt


def test_garbage_answers_are_counted_not_raised(kb, splits):
    examples = to_examples(splits.dev[:2])
    lm = dspy.utils.DummyLM([{"nonsense": "```python\nprint(1)```"}] * 10)
    res = evaluation.evaluate_program(
        build_module("predict", typed_medical_diagnosis_signature()), examples, lm=lm, kb=kb, progress=False
    )
    assert res.violation_rate == 1.0 and res.score == 0.0
    assert res.violation_counts().missing_field == len(examples)
    shown = evaluation.violation_examples(res)
    assert shown and "python" in shown[0]["raw LM text"]
    assert set(res.score_by_slice()) == {"standard", "colloquial"}


def test_the_outcomes_say_which_answers_give_a_confidence_and_how(kb, splits):
    """The field notes' string signature: an answer giving 'high', one giving 0.8, one a bare name."""
    from nbkit.signatures.contracts import medical_diagnosis_signature

    examples = to_examples(splits.dev[:2])  # two cases × two phrasings
    texts = ["condition: gout, confidence: high", "condition: gout, confidence: 0.8", "gout", "gout"]
    lm = dspy.utils.DummyLM([{"diagnosis": t, "reasoning": "x"} for t in texts])
    res = evaluation.evaluate_program(
        build_module("predict", medical_diagnosis_signature()),
        examples,
        lm=lm,
        kb=kb,
        progress=False,
        output_fields=("diagnosis", "reasoning"),
    )
    o = res.outcomes()
    assert sorted(zip(o.confidence_numbers, o.confidence_words, strict=True)) == [
        (0, 0),
        (0, 0),
        (0, 1),
        (1, 0),
    ]
    assert sum(o.items) == 2 and o.structural == (0.0,) * 4


def test_metric_demands_a_clean_contract_only_while_bootstrapping(kb, splits):
    example = to_examples(splits.dev[:1], slices=("standard",))[0]
    metric = evaluation.make_metric(kb)
    pred = dspy.Prediction(diagnoses=[{"condition": example.conditions[0], "confidence": 3.0}], reasoning="x")
    assert metric(example, pred) == 1.0
    assert metric(example, pred, trace=[]) is False
    ok = dspy.Prediction(diagnoses=[{"condition": example.conditions[0], "confidence": 0.7}], reasoning="x")
    assert metric(example, ok, trace=[]) is True


def test_bootstrap_compile_save_load_roundtrip(kb, splits, tmp_path):
    trainset = to_examples(splits.train[:3], slices=("standard",))
    answers = [
        {"diagnoses": [{"condition": e.conditions[0], "confidence": 0.8}], "reasoning": "Classic."}
        for e in trainset
    ]
    lm = dspy.utils.DummyLM(answers * 3)
    student = build_module("predict", typed_medical_diagnosis_signature())
    program = compiling.compile_program(
        "bootstrap", student, trainset, metric=evaluation.make_metric(kb), lm=lm, max_demos=2
    )
    counts = compiling.demo_counts(program)
    assert counts["bootstrapped"] >= 1 and sum(counts.values()) <= 2
    assert compiling.demo_counts(student) == {"bootstrapped": 0, "labeled": 0}  # student untouched
    path = compiling.save_program(program, tmp_path / "p.json")
    loaded = compiling.load_program(build_module("predict", typed_medical_diagnosis_signature()), path)
    assert compiling.demo_counts(loaded) == counts
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(ValueError, match="not a saved DSPy program"):
        compiling.load_program(
            build_module("predict", typed_medical_diagnosis_signature()), tmp_path / "bad.json"
        )
    with pytest.raises(FileNotFoundError):
        compiling.load_program(student, tmp_path / "missing.json")


def test_random_search_needs_a_real_validation_set(kb, splits):
    trainset = to_examples(splits.train[:2], slices=("standard",))
    with pytest.raises(ValueError, match="validation set"):
        compiling.compile_program(
            "random_search",
            build_module("predict", typed_medical_diagnosis_signature()),
            trainset,
            metric=evaluation.make_metric(kb),
            lm=dspy.utils.DummyLM([]),
            valset=None,
        )


def test_random_search_scores_candidates_on_the_valset(kb, splits):
    trainset = to_examples(splits.train[:2], slices=("standard",))
    valset = to_examples(splits.val[:1], slices=("standard",))
    lm = dspy.utils.DummyLM(
        [{"diagnoses": [{"condition": valset[0].conditions[0], "confidence": 0.6}], "reasoning": "x"}] * 40
    )
    program = compiling.compile_program(
        "random_search",
        build_module("predict", typed_medical_diagnosis_signature()),
        trainset,
        metric=evaluation.make_metric(kb),
        lm=lm,
        valset=valset,
        max_demos=1,
        num_candidates=1,
    )
    seeds = [c["seed"] for c in compiling.candidate_scores(program)]
    assert sorted(seeds) == [-2, -1, 0]  # zero-shot (-3) is skipped: the notebook measured it already


def test_retrievers_recall_by_slice(kb, splits):
    r = build_retriever("bm25", kb)
    recall = recall_at_k(r, splits.dev, 3)
    assert set(recall) == {"standard", "colloquial"}
    # BM25 finds a condition named verbatim; a query with none of the KB's words finds nothing relevant.
    case = dict(splits.dev[0], standard=splits.dev[0]["conditions"][0], colloquial="zzz qqq")
    assert recall_at_k(r, [case], 3) == {"standard": 1.0, "colloquial": 0.0}
    with pytest.raises(ValueError, match="unknown retriever"):
        build_retriever("tfidf", kb)


@pytest.mark.slow
def test_minilm_batched_search_matches_single_queries(kb, splits):
    r = build_retriever("minilm", kb)
    queries = [c["colloquial"] for c in splits.dev[:4]]
    assert r.search_many(queries, 3) == [r.search(q, 3) for q in queries]


def test_bootstrap_compiles_the_hybrid_module(kb, splits):
    """The notebook's default compiles HybridRetriever: its traced prediction must not carry the
    retrieved context as an output too (DSPy builds each demo from inputs + outputs)."""
    trainset = to_examples(splits.train[:3], slices=("standard",))
    answers = [
        {"diagnoses": [{"condition": e.conditions[0], "confidence": 0.8}], "reasoning": "Classic."}
        for e in trainset
    ]
    lm = dspy.utils.DummyLM(answers * 3)
    student = build_module("hybrid", typed_medical_diagnosis_signature(), build_retriever("bm25", kb))
    program = compiling.compile_program(
        "bootstrap", student, trainset, metric=evaluation.make_metric(kb), lm=lm, max_demos=2
    )
    assert compiling.demo_counts(program)["bootstrapped"] >= 1
    with dspy.context(lm=dspy.utils.DummyLM(answers)):
        assert len(program(symptoms="big toe red hot swollen after beer").context) == 3
