"""Bad input to the DSPy theme's entry points: one clear UsageError naming the file, line or key
(table-driven)."""

import dataclasses
import json

import pytest

from nbkit.errors import UsageError
from nbkit.signatures import cases as cs
from nbkit.signatures import server as srv
from nbkit.signatures.experiments import REGISTRY

GOOD = {"id": "x1", "conditions": ["gout"], "standard": "a", "colloquial": "b", "rationale": "r"}
KB_GOOD = {"condition": "gout", "aliases": ["podagra"], "symptoms": "red toe", "notes": "nsaid"}


def _lines(*rows):
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in rows)


CASES = [
    # (name, file bytes, message pattern)
    (
        "non-utf8",
        _lines(GOOD, b'{"id": "x2", "standard": "caf\xe9"}'),
        r"cases.jsonl:2: not UTF-8 text \(byte 0xe9 at column 30\)",
    ),
    (
        "typo key",
        _lines(dict({k: v for k, v in GOOD.items() if k != "colloquial"}, colloqial="b")),
        r":1: unknown key 'colloqial'.*did you mean 'colloquial'",
    ),
    ("extra key", _lines(dict(GOOD, severity="high")), r":1: unknown key 'severity'"),
    (
        "4th condition",
        _lines(dict(GOOD, conditions=["gout", "gout", "gout", "gout"])),
        r":1 \(x1\): 4 conditions; the contract allows at most 3",
    ),
    (
        "condition not a string",
        _lines(dict(GOOD, conditions=["gout", 3])),
        r":1: key 'conditions' must list non-empty strings",
    ),
    ("empty string", _lines(dict(GOOD, standard="  ")), r":1: key 'standard' must be a non-empty str"),
    (
        "missing key",
        _lines({k: v for k, v in GOOD.items() if k != "rationale"}),
        r":1: missing key 'rationale'",
    ),
    ("not json", _lines(GOOD, b"{oops"), r":2: not valid JSON"),
    ("not an object", _lines([1, 2]), r":1: expected a JSON object, got list"),
    ("duplicate id", _lines(GOOD, GOOD), r":2: duplicate id 'x1'"),
    (
        "unknown condition",
        _lines(dict(GOOD, conditions=["dragon pox"])),
        r":1 \(x1\): conditions \['dragon pox'\] are not in the knowledge base",
    ),
    ("empty file", b"\n\n", r"no records \(the file is empty\)"),
]


@pytest.fixture(scope="module")
def kb():
    return cs.load_knowledge_base()


@pytest.mark.parametrize(("name", "content", "pattern"), CASES, ids=[c[0] for c in CASES])
def test_bad_cases_file(tmp_path, kb, name, content, pattern):
    path = tmp_path / "cases.jsonl"
    path.write_bytes(content)
    with pytest.raises(UsageError, match=pattern):
        cs.load_cases(path, kb)


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (lambda p: p, r"is a directory; expected a JSONL file"),
        (lambda p: p / "missing.jsonl", r"missing.jsonl: file not found"),
    ],
)
def test_bad_paths(tmp_path, kb, make, pattern):
    with pytest.raises(UsageError, match=pattern):
        cs.load_cases(make(tmp_path), kb)


def test_bad_knowledge_base(tmp_path):
    path = tmp_path / "kb.jsonl"
    path.write_bytes(_lines(KB_GOOD, KB_GOOD))
    with pytest.raises(UsageError, match=r"kb.jsonl:2: condition 'gout' appears twice \(first on line 1\)"):
        cs.load_knowledge_base(path)
    path.write_bytes(_lines(dict(KB_GOOD, alias=["x"])))
    with pytest.raises(UsageError, match=r"unknown key 'alias'.*did you mean 'aliases'"):
        cs.load_knowledge_base(path)


@pytest.mark.parametrize(
    ("fractions", "pattern"),
    [
        ((1.2, -0.2, 0.0, 0.0), r"each lie in \[0, 1\]"),
        ((0.5, 0.5, 0.5, -0.5), r"each lie in \[0, 1\]"),
        ((float("nan"), 0.5, 0.25, 0.25), r"each lie in \[0, 1\]"),
        ((0.4, 0.2, 0.2, 0.1), r"sum to 1.*sum 0.9"),
        ((0.5, 0.5), r"four numbers.*got 2"),
        (("a", 0.5, 0.25, 0.25), r"four numbers"),
    ],
)
def test_bad_split_fractions(kb, fractions, pattern):
    with pytest.raises(UsageError, match=pattern):
        cs.split_cases(cs.load_cases(kb=kb), 0, fractions)


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (lambda p: "", r"model path is empty; expected the path of a \.gguf model file"),
        (lambda p: "   ", r"model path is empty"),
        (lambda p: p, r"is a directory; expected a \.gguf model file"),
        (lambda p: p / "nope.gguf", r"nope.gguf does not exist; expected a \.gguf model file"),
    ],
)
def test_bad_model_path(tmp_path, make, pattern):
    with pytest.raises(UsageError, match=pattern):
        srv.LocalLMServer(make(tmp_path))


def test_the_context_takes_the_sessions_options_and_nothing_else():
    """``SignaturesContext(DEVICE, smoke=, profile=, **options)``: an unknown option is one UsageError naming
    SessionConfig's fields (the device is the context's own, not an option); a bad profile too."""
    from nbkit.signatures.config import SessionConfig
    from nbkit.signatures.context import SignaturesContext

    assert "device" not in {f.name for f in dataclasses.fields(SessionConfig)}
    with pytest.raises(UsageError, match="SessionConfig has no field lm_modle"):
        SignaturesContext("cpu", lm_modle="local")
    with pytest.raises(UsageError, match="profile must be one of"):
        SignaturesContext("cpu", profile="fast")
    ctx = SignaturesContext("cpu", seed=3, server="llama-cpp-python")
    assert ctx.options.seed == ctx.seed == 3 and not ctx.llm.started  # the LM starts on first use


def test_bad_pool_size_and_config_override():
    with pytest.raises(UsageError, match="n_servers must be a positive int, got 0"):
        srv.LocalLMPool(0)
    with pytest.raises(UsageError, match="ModulesConfig has no field n_deev"):
        REGISTRY["modules"].config(smoke=True, n_deev=3)


@pytest.mark.parametrize(
    ("signature", "rows", "metric", "pattern"),
    [
        (
            "question -> answer",
            [{"question": "q", "answer": "a"}, {"question": "q2"}],
            "exact",
            r"dev.jsonl:2: missing field 'answer' of the signature",
        ),
        ("question -> answer", [{"answer": "a"}], "exact", r"dev.jsonl:1: missing field 'question'"),
        ("question -> answer", [], "exact", r"dev.jsonl: no examples"),
        ("question answer", [{"question": "q"}], "exact", r"not a DSPy string signature.*exactly one '->'"),
        ("", [{"question": "q"}], "exact", r"SIGNATURE is empty"),
        (
            "nbkit_no_such_module:Sig",
            [{"question": "q"}],
            "exact",
            r"cannot import module 'nbkit_no_such_module'",
        ),
        ("json:dumps", [{"question": "q"}], "exact", r"is not a dspy.Signature subclass"),
        (
            "question -> answer",
            [{"question": "q", "answer": "a"}],
            "fuzzy",
            r"METRIC 'fuzzy': expected one of \('exact', 'contains'\)",
        ),
        (
            "question -> answer",
            [{"question": "q", "answer": "a"}],
            "json:nope",
            r"module 'json' has no 'nope'",
        ),
    ],
)
def test_bad_user_contract(tmp_path, signature, rows, metric, pattern):
    pytest.importorskip("dspy")
    from nbkit.signatures import user_contract as uc

    path = tmp_path / "dev.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UsageError, match=pattern):
        sig = uc.load_signature(signature)
        uc.load_dev_set(path, sig)
        uc.make_metric(metric, sig)


def test_nbkit_run_with_a_dev_set_row_lacking_a_field_exits_2_naming_file_and_line(
    tmp_path, monkeypatch, capsys
):
    """`nbkit run 03 -p DEV_SET bad.jsonl`: the notebook's first cell loads the contract (as notebook 03 does,
    before any LM starts), so the run stops there: one line naming file, line and field, exit 2, no run
    folder."""
    pytest.importorskip("dspy")
    from runner_notebooks import make_notebook

    from nbkit.cli import main

    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    make_notebook(
        nb_dir / "03_sig.ipynb",
        body="import pathlib\nfrom nbkit.signatures import experiments\n"
        "experiments.check_user_contract(SIGNATURE, DEV_SET, METRIC)\n"
        "pathlib.Path('ran.txt').write_text('ran')\n",
        parameters="SMOKE = False\nSIGNATURE = 'text -> sentiment'\nDEV_SET = ''\nMETRIC = 'exact'\n",
    )
    dev = tmp_path / "dev.jsonl"
    dev.write_text(
        json.dumps({"text": "great", "sentiment": "positive"})
        + "\n"
        + json.dumps({"text": "awful", "label": "negative"})
        + "\n"
    )
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(nb_dir))
    out = tmp_path / "run"
    rc = main(["run", "03", "-p", "DEV_SET", json.dumps(str(dev)), "--output", str(out), "-q"])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("nbkit: error:")]
    assert rc == 2, err
    assert len(lines) == 1 and f"{dev}:2: missing field 'sentiment' of the signature" in lines[0], err
    assert "Traceback" not in err
    assert not (nb_dir / "ran.txt").exists() and not out.exists()


def test_half_a_user_contract_is_an_error_not_a_silent_skip():
    pytest.importorskip("dspy")
    from nbkit.signatures import user_contract as uc

    assert uc.load_contract("", "", "exact") is None  # neither given: nothing to check, said so by the panel
    with pytest.raises(UsageError, match="DEV_SET is empty"):
        uc.load_contract("question -> answer", "", "exact")
    with pytest.raises(UsageError, match="SIGNATURE is empty"):
        uc.load_contract("", "dev.jsonl", "exact")
