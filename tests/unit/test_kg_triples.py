"""Loaders: every bad row is an error naming file+line, or a report entry; nothing vanishes silently."""

from pathlib import Path

import pytest

from nbkit.kg import datasets as kgdata
from nbkit.kg import hetionet as kghet
from nbkit.kg import rdf_bench as kgrdf
from nbkit.kg import synthetic as kgsyn
from nbkit.kg import triples as kgt

FIX = Path(__file__).parent / "kg_fixtures"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_csv_bad_rows_are_reported_with_their_lines(tmp_path):
    p = write(
        tmp_path,
        "kg.csv",
        "head,relation,tail,head_type,tail_type\n"
        "a,r,b,gene,gene\n"
        "b,r,c,gene,gene,extra\n"  # line 3: wrong column count
        "c,,d,gene,gene\n"  # line 4: empty relation
        "d,s,a,gene,gene\n"
        "a,r,b,gene,gene\n"  # duplicate
        "e,s,e,gene,gene\n",  # self-loop
    )
    kg = kgt.load_triples_file(p)
    rep = kg.report
    lines = {d["reason"].split(":")[0]: d["line"] for d in rep.dropped}
    assert lines == {"wrong column count": 3, "empty field(s) relation": 4}
    assert rep.duplicate_triples == 1 and rep.self_loops == 1
    assert rep.rows_read == 6 and rep.rows_kept == 3 == len(kg)
    assert rep.tail_only_entities == 1  # b is only ever a tail among kept rows
    assert "line 3" in str(rep)


def test_tsv_without_types_gets_default_type(tmp_path):
    p = write(tmp_path, "kg.tsv", "head\trelation\ttail\nx\tr\ty\ny\tr\tz\n")
    kg = kgt.load_triples_file(p)
    assert kg.entity_types == [kgt.DEFAULT_TYPE]
    assert kg.report.single_edge_relations == []


def test_single_edge_relation_is_reported(tmp_path):
    p = write(tmp_path, "kg.tsv", "head\trelation\ttail\nx\tr\ty\ny\tr\tz\nz\trare\tx\n")
    assert kgt.load_triples_file(p).report.single_edge_relations == ["rare"]


def test_not_a_triples_file(tmp_path):
    p = write(tmp_path, "other.csv", "name,age\nann,3\n")
    with pytest.raises(
        kgt.KGFormatError, match=r"other.csv: not a triples file.*missing \['head', 'relation', 'tail'\]"
    ):
        kgt.load_triples_file(p)


def test_conflicting_entity_types_name_the_line(tmp_path):
    p = write(
        tmp_path, "kg.csv", "head,relation,tail,head_type,tail_type\na,r,b,gene,gene\nb,t,c,drug,gene\n"
    )
    with pytest.raises(
        kgt.KGFormatError, match=r"kg.csv:3: entity 'b' has type 'drug' here but 'gene' earlier"
    ):
        kgt.load_triples_file(p)


def test_unknown_types_are_dropped_into_the_report(tmp_path):
    p = write(
        tmp_path, "kg.csv", "head,relation,tail,head_type,tail_type\na,r,b,gene,gene\nb,t,c,gene,planet\n"
    )
    kg = kgt.load_triples_file(p, allowed_types={"gene", "drug"})
    assert len(kg) == 1
    assert (
        kg.report.dropped[0]["line"] == 3 and "unknown node type 'planet'" in kg.report.dropped[0]["reason"]
    )


def test_all_rows_bad_is_an_error(tmp_path):
    p = write(tmp_path, "kg.csv", "head,relation,tail\n,,\n")
    with pytest.raises(kgt.KGFormatError, match="no usable triples"):
        kgt.load_triples_file(p)


def test_parquet_roundtrip(tmp_path):
    kg = kgsyn.synthetic_kg(60, 300, seed=1)
    p = tmp_path / "kg.parquet"
    kg.df.to_parquet(p)
    back = kgt.load_triples_file(p)
    assert len(back) == len(kg) and back.entity_types == kg.entity_types


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        kgt.load_triples_file("/nonexistent/nope.csv")


def test_ntriples_relation_is_last_iri_segment_and_types_come_from_rdf_type(tmp_path):
    p = write(
        tmp_path,
        "kg.nt",
        "<http://x.org/gene/EGFR> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://x.org/onto#Gene> "
        ".\n"
        "<http://x.org/drug/gefitinib> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> "
        "<http://x.org/onto#Drug> .\n"
        "<http://x.org/drug/gefitinib> <http://x.org/onto#targets> <http://x.org/gene/EGFR> .\n"
        '<http://x.org/gene/EGFR> <http://x.org/rel/name> "EGFR" .\n',
    )
    kg = kgt.load_rdf(p)
    row = kg.df.iloc[0]
    assert (row["relation"], row["head_type"], row["tail_type"]) == ("targets", "Drug", "Gene")
    assert kg.report.dropped_by_reason == {"object is a literal (not an entity)": 1}


def test_turtle_syntax_error_names_file_and_line(tmp_path):
    p = write(
        tmp_path, "bad.ttl", "@prefix ex: <http://x.org/> .\nex:a ex:r ex:b .\nex:c ex:r ex:d\nex:e ex:r .\n"
    )
    with pytest.raises(kgt.KGFormatError, match=r"bad.ttl: .*syntax error.*line 4"):
        kgt.load_rdf(p)


def test_ntriples_writer_roundtrip(tmp_path):
    kg = kgsyn.synthetic_kg(60, 300, seed=2)
    back = kgt.load_rdf(kgt.write_ntriples(kg, tmp_path / "s.nt"))
    assert len(back) == len(kg)
    assert sorted(back.relations) == sorted(kg.relations)
    cmp = kgrdf.compare_rdf_parsers(tmp_path / "s.nt")
    assert cmp["pyoxigraph_triples"] == cmp["rdflib_triples"] > len(kg)


def test_hetionet_fixture_format():
    kg = kghet.load_hetionet(FIX / "hetionet-mini-nodes.tsv", FIX / "hetionet-mini-edges.sif.gz")
    assert len(kg) == 9 and set(kg.relations) == {"GiG", "CbG", "CtD", "DaG", "DlA"}
    assert set(kg.entity_types) == {"Gene", "Compound", "Disease", "Anatomy"}
    (drop,) = kg.report.dropped
    assert drop["line"] == 11 and "Gene::9999" in drop["text"]


def test_hetionet_wrong_header(tmp_path):
    p = write(tmp_path, "nodes.tsv", "a\tb\tc\n")
    with pytest.raises(kgt.KGFormatError, match="expected id, name, kind"):
        kghet.load_hetionet(p, FIX / "hetionet-mini-edges.sif.gz")


def test_synthetic_is_seeded_and_long_tailed():
    a, b, c = (
        kgsyn.synthetic_kg(200, 2000, seed=3),
        kgsyn.synthetic_kg(200, 2000, seed=3),
        kgsyn.synthetic_kg(200, 2000, seed=4),
    )
    assert a.df.equals(b.df) and not a.df.equals(c.df)
    counts = a.df["relation"].value_counts()
    assert counts.iloc[0] > 10 * counts.iloc[-1]
    assert set(a.entity_types) == {"gene", "drug", "disease"}


def test_load_dataset_dispatch_and_unknown_name(tmp_path):
    assert kgdata.load_dataset("synthetic").name == "synthetic"
    with pytest.raises(FileNotFoundError, match="not a bundled name"):
        kgdata.load_dataset("no_such_dataset")


def test_umls_from_the_pykeen_wheel_with_semantic_groups():
    pytest.importorskip("pykeen")
    kg = kgt.load_umls()
    assert len(kg) == 6529 and len(kg.relations) == 46
    assert kg.df["split"].value_counts().to_dict() == {"train": 5216, "test": 661, "valid": 652}
    assert len(set(kg.df["head"]) | set(kg.df["tail"])) == 135
    assert len(kg.entity_types) == 15
    table = kgt.umls_semantic_groups()
    assert len(table) == 135 and table["tui"].str.match(r"^T\d{3}$").all()
    group = table.set_index("umls_kg_name")["group"]
    assert (
        group["disease_or_syndrome"] == "DISO"
        and group["gene_or_genome"] == "GENE"
        and group["pharmacologic_substance"] == "CHEM"
    )


def test_gzipped_rdf_loads_like_plain_and_errors_name_the_gz_file(tmp_path):
    import gzip

    kg = kgsyn.synthetic_kg(60, 300, seed=2)
    plain = kgt.write_ntriples(kg, tmp_path / "s.nt")
    gz = tmp_path / "s.nt.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = kgt.load_rdf(plain), kgt.load_rdf(gz)
    assert a.df.equals(b.df) and a.report.summary()["rows_kept"] == b.report.summary()["rows_kept"]
    # load_dataset dispatches on the name under .gz too
    assert len(kgdata.load_dataset(str(gz))) == len(a)
    bad = tmp_path / "bad.ttl.gz"
    bad.write_bytes(
        gzip.compress(b"@prefix ex: <http://x.org/> .\nex:a ex:r ex:b .\nex:c ex:r ex:d\nex:e ex:r .\n")
    )
    with pytest.raises(kgt.KGFormatError, match=r"bad.ttl.gz: .*syntax error.*line 4"):
        kgt.load_rdf(bad)
    other = tmp_path / "s.rdf.gz"
    other.write_bytes(gzip.compress(b"x"))
    with pytest.raises(kgt.KGFormatError, match=r"s.rdf.gz: unknown RDF extension"):
        kgt.load_rdf(other)
