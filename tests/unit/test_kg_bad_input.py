"""Bad input to the KG loaders and splits: one clear UsageError naming the input and what was
expected — no traceback from pyarrow/gzip, no silent coercion, no crash deep in torch."""

import gzip
import math

import pandas as pd
import pytest

from nbkit.errors import UsageError
from nbkit.kg import datasets as kgdata
from nbkit.kg import graph as kgg
from nbkit.kg import synthetic as kgsyn
from nbkit.kg import triples as kgt

GOOD = "head,relation,tail\na,r,b\nb,r,c\nc,s,a\n"


def _binary(tmp_path):
    p = tmp_path / "garbage.csv"
    p.write_bytes(bytes(range(256)) * 8)
    return p


def _latin1(tmp_path):
    p = tmp_path / "latin.csv"
    p.write_bytes(("head,relation,tail\n" + "caf\xe9,r,b\n" * 50).encode("latin-1"))
    return p


def _unknown_ext(tmp_path):
    p = tmp_path / "kg.json"
    p.write_text(GOOD)
    return p


def _directory(tmp_path):
    d = tmp_path / "folder.csv"
    d.mkdir()
    return d


def _broken_ttl_gz(tmp_path):
    p = tmp_path / "broken.ttl.gz"
    p.write_bytes(gzip.compress(b"@prefix ex: <http://x.org/> .\n" * 100)[:25])
    return p


def _broken_csv_gz(tmp_path):
    p = tmp_path / "broken.csv.gz"
    p.write_bytes(b"\x1f\x8b\x08\x00garbage-not-deflate")
    return p


def _float_parquet(tmp_path):
    p = tmp_path / "floats.parquet"
    pd.DataFrame({"head": [1.5, 2.5], "relation": ["r", "r"], "tail": [2.5, 3.5]}).to_parquet(p)
    return p


LOADER_CASES = [
    (_binary, r"garbage.csv: binary content .*expected a UTF-8 text triples file"),
    (_latin1, r"latin.csv: not UTF-8 text \(byte 0xe9 at offset \d+\)"),
    (_unknown_ext, r"kg.json: unknown extension .json; expected one of .csv, .tsv"),
    (_directory, r"folder.csv: is a directory, not a triples file"),
    (_broken_ttl_gz, r"broken.ttl.gz: not a readable gzip file|broken.ttl.gz: not readable"),
    (_broken_csv_gz, r"broken.csv.gz: not a readable gzip file"),
    (_float_parquet, r"floats.parquet: column 'head' has type float64; expected strings"),
]


@pytest.mark.parametrize(
    ("make", "message"), LOADER_CASES, ids=[m.__name__.strip("_") for m, _ in LOADER_CASES]
)
def test_bad_files_give_one_usage_error_naming_the_file(tmp_path, make, message, capfd):
    path = make(tmp_path)
    with pytest.raises(UsageError, match=message):
        kgdata.load_dataset(str(path))
    out, err = capfd.readouterr()
    assert "Traceback" not in err and "Exception ignored" not in err and "\\x" not in out + err


def test_integer_parquet_ids_are_read_as_text_and_the_report_says_so(tmp_path):
    p = tmp_path / "ids.parquet"
    pd.DataFrame({"head": [1, 2, 3], "relation": ["r", "r", "s"], "tail": [2, 3, 1]}).to_parquet(p)
    kg = kgdata.load_dataset(str(p))
    assert set(kg.df["head"]) == {"1", "2", "3"}
    assert any("column 'head' holds integers" in n for n in kg.report.notes)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_entities": -5}, r"num_entities=-5; expected an integer >= 3"),
        ({"num_triples": -1}, r"num_triples=-1; expected an integer >= 1"),
        ({"num_clusters": 0}, r"num_clusters=0; expected an integer >= 1"),
        ({"num_triples": 2.5}, r"num_triples=2.5; expected an integer"),
    ],
)
def test_synthetic_with_bad_sizes(kwargs, message):
    with pytest.raises(UsageError, match=message):
        kgdata.load_dataset("synthetic", **kwargs)


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        (
            "umls",
            {"seed": 3},
            r"load_dataset\('umls'\): unknown keyword argument\(s\) \['seed'\]; this loader takes: none",
        ),
        (
            "synthetic",
            {"entities": 10},
            r"unknown keyword argument\(s\) \['entities'\]; this loader takes: num_entities",
        ),
    ],
)
def test_unknown_keyword_arguments_are_refused(name, kwargs, message):
    with pytest.raises(UsageError, match=message):
        kgdata.load_dataset(name, **kwargs)


def test_unknown_keyword_argument_for_a_file(tmp_path):
    p = tmp_path / "kg.csv"
    p.write_text(GOOD)
    with pytest.raises(
        UsageError,
        match=r"unknown keyword argument\(s\) \['delimiter'\]; this loader takes: allowed_types, sep",
    ):
        kgdata.load_dataset(str(p), delimiter=";")


@pytest.fixture(scope="module")
def small_kg():
    return kgsyn.synthetic_kg(60, 400, seed=0)


@pytest.mark.parametrize(
    ("valid", "test", "message"),
    [
        (-0.5, 0.1, r"valid_share=-0.5; expected a number strictly between 0 and 1"),
        (0.1, 1.5, r"test_share=1.5; expected a number strictly between 0 and 1"),
        (math.nan, 0.1, r"valid_share=nan"),
        (0.6, 0.4, r"valid_share \+ test_share = 1; expected < 1"),
        (0.7, 0.5, r"valid_share=0.7.*|valid_share \+ test_share = 1.2"),
        ("0.1", 0.1, r"valid_share='0.1'"),
        (True, 0.1, r"valid_share=True"),
    ],
)
def test_split_shares_are_checked(small_kg, valid, test, message):
    with pytest.raises(UsageError, match=message):
        kgg.split_kg(small_kg, valid_share=valid, test_share=test)


def test_a_file_too_small_for_validation_and_test_is_one_clear_error(tmp_path):
    p = tmp_path / "tiny.csv"
    p.write_text(GOOD)
    kg = kgdata.load_dataset(str(p))
    with pytest.raises(UsageError, match=r"tiny.csv: 3 usable triples give an empty valid and test split"):
        kgg.split_kg(kg)


def test_training_on_an_empty_validation_split_is_a_usage_error_not_torch_cat(tmp_path):
    from nbkit.kg.config import TrainConfig
    from nbkit.kg.ladder import LADDER
    from nbkit.kg.train import train_rung

    rows = [("a", "r", "b", "train"), ("b", "r", "c", "train"), ("c", "r", "a", "test")]
    df = pd.DataFrame(rows, columns=["head", "relation", "tail", "split"])
    split = kgg.split_kg(kgt.finalize(df, kgt.LoadReport("shipped.csv")), allow_empty=True)
    with pytest.raises(UsageError, match=r"the valid split\(s\) are empty"):
        train_rung(split, LADDER[1], TrainConfig(epochs=1), progress=False)


def test_a_shipped_split_column_with_unknown_values(tmp_path):
    df = pd.DataFrame(
        [("a", "r", "b", "train"), ("b", "r", "c", "dev")], columns=["head", "relation", "tail", "split"]
    )
    with pytest.raises(UsageError, match=r"split column has values \['dev'\]; expected train/valid/test"):
        kgg.split_kg(kgt.finalize(df, kgt.LoadReport("x.csv")))


def test_a_shipped_split_without_validation_gets_it_carved_from_train_and_reported():
    kg = kgsyn.synthetic_kg(60, 400, seed=0)
    kg.df["split"] = ["test" if i % 10 == 0 else "train" for i in range(len(kg.df))]
    split = kgg.split_kg(kg, valid_share=0.1)
    assert (
        split.report["valid_carved_from_train"] == len(split.valid) > 0
        and "test_carved_from_train" not in split.report
    )
    assert len(split.train) + len(split.valid) + len(split.test) == len(kg.df)


def test_an_untyped_file_skips_the_downstream_section_and_says_why(tmp_path):
    from nbkit.kg import claims
    from nbkit.kg import experiments as ex
    from nbkit.kg.config import DownstreamConfig
    from nbkit.kg.context import KGContext

    p = tmp_path / "untyped.tsv"
    kgsyn.synthetic_kg(60, 400, seed=0).df[["head", "relation", "tail"]].to_csv(p, sep="\t", index=False)
    res = ex.run_downstream(DownstreamConfig(dataset=str(p), epochs=1), KGContext("cpu"))
    assert res.metrics.skipped.startswith("the labels (node types) give 1 class(es)")
    reading = claims.read_f1(res.metrics)
    assert "node types" in reading.missing and reading.measured.startswith("not measured")


def _untyped_file(tmp_path, kind):
    """A user's own triples file: no node types; 'one_relation' also has a single relation; 'no_valid'
    ships a split column without validation rows."""
    df = kgsyn.synthetic_kg(60, 500, seed=0).df[["head", "relation", "tail"]].copy()
    if kind == "one_relation":
        df["relation"] = "linked_to"
        df = df.drop_duplicates(["head", "relation", "tail"])
    if kind == "no_valid":
        df["split"] = ["test" if i % 8 == 0 else "train" for i in range(len(df))]
    p = tmp_path / f"{kind}.tsv"
    df.to_csv(p, sep="\t", index=False)
    return str(p)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["untyped", "one_relation", "no_valid"])
def test_a_users_untyped_file_runs_every_section_that_applies(tmp_path, kind):
    """Notebook 01's sections on such a file (smoke sizes): the ladder with rung 6 and the message-passing
    claim run; the downstream section says why it is skipped; no crash."""
    from nbkit.kg import claims
    from nbkit.kg import experiments as ex
    from nbkit.kg.context import KGContext

    path = _untyped_file(tmp_path, kind)
    ctx = KGContext("cpu", smoke=True)
    common = {"dataset": path, "hidden": 16, "complex_dim": 32}
    load = ex.run("load", ctx, dataset=path, compare_rdf=False)
    assert load.metrics.split_sizes["node_types"] == 1 and load.metrics.split_sizes["valid"] > 0
    if kind == "no_valid":
        assert load.data["split"].report["valid_carved_from_train"] == load.metrics.split_sizes["valid"]
    sel = ex.run(
        "selection",
        ctx,
        **common,
        complex_dims=(32,),
        complex_n3s=(0.01,),
        rgcn_hiddens=(16,),
        type_aggrs=("mean",),
    )
    abl = ex.run("ablation", ctx, **{**common, **sel.metrics.chosen.overrides()}, rungs=(2, 3, 5, 6))
    down = ex.run("downstream", ctx, **common)
    rows = {r.key: r for r in claims.judge(ctx)}
    assert down.metrics.skipped and "node types" in rows["downstream_f1"].measured
    assert rows["downstream_f1"].verdict == "not judged"  # a smoke context judges nothing
    assert rows["message_passing_helps"].n == "2 seeds" and rows["message_passing_helps"].measured.startswith(
        "rung 5 (RGCN)"
    )
    assert 0 < abl.metrics.test_mrr <= 1


@pytest.mark.parametrize(
    ("over", "match"),
    [
        (
            {"eval_max_triples": 1000, "eval_slice": 1},
            r"ScaleConfig.eval_slice: slice 1 of 1000 evaluated triples needs 2000 validation triples; this "
            r"split has \d+",
        ),
        (
            {"eval_max_triples": 200, "eval_slice": 5},
            r"ScaleConfig.eval_slice: slice 5 of 200 evaluated triples needs 1200 validation triples",
        ),
    ],
)
def test_a_validation_slice_the_split_cannot_hold_is_a_usage_error(over, match):
    """The scale run scores a slice of the validation split its defaults were not chosen on; a graph too small
    for that slice is refused before training, naming the key and the sizes."""
    from nbkit.kg import experiments as ex
    from nbkit.kg.config import ScaleConfig
    from nbkit.kg.context import KGContext

    cfg = ScaleConfig(entities=200, triples=3000, clusters=4, max_steps=5, epochs=1, hidden=16, **over)
    with pytest.raises(UsageError, match=match):
        ex.run_minibatch(cfg, KGContext("cpu"))


def test_evaluation_slices_never_share_a_triple():
    from nbkit.kg.ranking import eval_sample, query_halves

    a, b = eval_sample(5000, 1000, sample_slice=0), eval_sample(5000, 1000, sample_slice=1)
    assert len(a) == len(b) == 1000 and not set(a.tolist()) & set(b.tolist())
    assert eval_sample(500, 1000) is None and eval_sample(500, 0, sample_slice=3) is None  # all triples
    with pytest.raises(ValueError, match="slice 1 of 400 triples needs 800 triples; the split has 500"):
        eval_sample(500, 400, sample_slice=1)
    select, judge = query_halves(2500, batch_size=1024)
    assert len(select) == 5000 and not (select & judge).any() and int(judge.sum()) == 2 * (2500 // 2)
