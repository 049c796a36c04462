"""Readers: every source becomes ONE typed triples table plus a ``LoadReport``.

The table is a pandas DataFrame with string columns ``head, relation, tail, head_type, tail_type``
and, where the source ships a split (UMLS in PyKEEN), a ``split`` column (train/valid/test).
Nothing is dropped silently: each dropped row becomes a report entry naming file, line and reason;
suspicious-but-kept rows (duplicates, self-loops, relations with a single edge, entities seen only
as tails) are counted in the report. Here: the table and its report, triples files (CSV / TSV /
Parquet), RDF (N-Triples / Turtle) and PyKEEN's bundled UMLS and Kinships; Hetionet is read in
:mod:`nbkit.kg.hetionet`, the synthetic graph generated in :mod:`nbkit.kg.synthetic`, and
:func:`nbkit.kg.datasets.load_dataset` picks the reader for a name or path.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.errors import UsageError  # stdlib-only: importing nbkit.kg stays instant

COLUMNS = ("head", "relation", "tail")
TYPE_COLUMNS = ("head_type", "tail_type")
DEFAULT_TYPE = "entity"
DATA_DIR = Path(__file__).resolve().parent / "data"
UMLS_GROUPS_FILE = DATA_DIR / "umls_semantic_groups.tsv"

TABLE_SUFFIXES = (".csv", ".tsv", ".txt", ".sif")  # optionally .gz
PARQUET_SUFFIXES = (".parquet", ".pq")
RDF_SUFFIXES = (".nt", ".ttl")  # optionally .gz
READ_BLOCK = 1 << 24  # pyarrow's CSV block: one line may not straddle two blocks


class KGFormatError(UsageError):
    """Input that is not a usable triples source; the message names file, line and expectation."""


def _check_path(path: Path, what: str) -> None:
    """A path that exists and is a regular file (FileNotFoundError / KGFormatError otherwise)."""
    if not path.exists():
        raise FileNotFoundError(f"{what} not found: {path}")
    if not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise KGFormatError(f"{path}: is {kind}, not a {what}; give the path of one file")


def _check_text(path: Path, head: bytes) -> None:
    """Refuse binary content up front (pyarrow would print raw bytes and a decode error)."""
    nul = head.find(b"\x00")
    if nul >= 0:
        raise KGFormatError(
            f"{path}: binary content (a NUL byte at offset {nul}); expected a UTF-8 text triples file"
        )
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a multi-byte character cut at the end of the sample
            raise KGFormatError(
                f"{path}: not UTF-8 text (byte 0x{head[exc.start]:02x} at offset {exc.start}); expected a "
                "UTF-8 text triples file"
            ) from None


def _read_head(path: Path, n: int = 1 << 16) -> bytes:
    """The first ``n`` bytes of the (decompressed) file; a broken gzip is named with its file."""
    try:
        with gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb") as fh:
            return fh.read(n)
    except (
        OSError,
        EOFError,
        zlib.error,
    ) as exc:  # gzip.BadGzipFile is an OSError; a corrupt stream is zlib.error
        raise KGFormatError(f"{path}: not a readable gzip file ({type(exc).__name__}: {exc})") from None


@dataclass
class LoadReport:
    source: str
    rows_read: int = 0
    rows_kept: int = 0
    dropped: list[dict[str, Any]] = field(default_factory=list)  # {"line", "reason", "text"}
    duplicate_triples: int = 0
    self_loops: int = 0
    tail_only_entities: int = 0
    single_edge_relations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def drop(self, line: int | None, reason: str, text: str = "") -> None:
        self.dropped.append({"line": line, "reason": reason, "text": text[:200]})

    @property
    def dropped_by_reason(self) -> dict[str, int]:
        return dict(Counter(d["reason"] for d in self.dropped))

    def summary(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "rows_read": self.rows_read,
            "rows_kept": self.rows_kept,
            "rows_dropped": len(self.dropped),
            "dropped_by_reason": self.dropped_by_reason,
            "duplicate_triples": self.duplicate_triples,
            "self_loops": self.self_loops,
            "tail_only_entities": self.tail_only_entities,
            "single_edge_relations": len(self.single_edge_relations),
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        s = self.summary()
        lines = [
            f"load report for {s['source']}: {s['rows_read']} rows read, {s['rows_kept']} kept, "
            f"{s['rows_dropped']} dropped"
        ]
        for reason, n in s["dropped_by_reason"].items():
            first = next(d for d in self.dropped if d["reason"] == reason)
            lines.append(f"  dropped {n} x {reason} (first at line {first['line']}: {first['text']!r})")
        lines.append(
            f"  duplicates removed: {s['duplicate_triples']}, self-loops kept: {s['self_loops']}, "
            f"entities seen only as tails: {s['tail_only_entities']}, relations with a single edge: "
            f"{s['single_edge_relations']}"
        )
        if self.single_edge_relations:
            lines.append(f"    single-edge relations: {', '.join(self.single_edge_relations[:10])}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


@dataclass
class KGTriples:
    """One typed triples table and how it was loaded."""

    df: Any  # pandas.DataFrame
    report: LoadReport
    name: str = ""
    # Generated graphs only: each entity's latent cluster (what a tail is predictable up to).
    clusters: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.df)

    @property
    def entity_types(self) -> list[str]:
        return sorted(set(self.df["head_type"]) | set(self.df["tail_type"]))

    @property
    def relations(self) -> list[str]:
        return sorted(set(self.df["relation"]))


# ---------------------------------------------------------------------------------------------
# shared clean-up
# ---------------------------------------------------------------------------------------------
def finalize(
    df, report: LoadReport, *, line_numbers=None, allowed_types=None, dedupe: bool = True, name: str = ""
) -> KGTriples:
    """Validate a raw table: empty fields, unknown/conflicting types, duplicates, self-loops, tail-only."""
    import pandas as pd

    df = df.copy()
    for col in TYPE_COLUMNS:
        if col not in df.columns:
            df[col] = DEFAULT_TYPE
    cols = list(COLUMNS + TYPE_COLUMNS) + (["split"] if "split" in df.columns else [])
    df = df[cols]
    lines = pd.Series(line_numbers if line_numbers is not None else range(1, len(df) + 1), index=df.index)
    for col in cols:
        df[col] = df[col].astype("string").str.strip()
    report.rows_read = max(report.rows_read, len(df) + len(report.dropped))

    empty = df[list(COLUMNS + TYPE_COLUMNS)].isna() | (df[list(COLUMNS + TYPE_COLUMNS)] == "")
    bad = empty.any(axis=1)
    for idx in df.index[bad]:
        missing = [c for c in COLUMNS + TYPE_COLUMNS if empty.at[idx, c]]
        report.drop(
            int(lines[idx]),
            f"empty field(s) {', '.join(missing)}",
            "\t".join(str(v) for v in df.loc[idx].tolist()),
        )
    df = df[~bad]

    if allowed_types is not None:
        allowed = set(allowed_types)
        unknown = ~(df["head_type"].isin(allowed) & df["tail_type"].isin(allowed))
        for idx in df.index[unknown]:
            bad_t = [t for t in (df.at[idx, "head_type"], df.at[idx, "tail_type"]) if t not in allowed]
            report.drop(
                int(lines[idx]),
                f"unknown node type {bad_t[0]!r} (expected one of {sorted(allowed)})",
                f"{df.at[idx, 'head']} {df.at[idx, 'relation']} {df.at[idx, 'tail']}",
            )
        df = df[~unknown]

    # An entity must have one type: a conflict is a data error we cannot resolve by guessing.
    ent_types = pd.concat(
        [
            df[["head", "head_type"]].set_axis(["e", "t"], axis=1),
            df[["tail", "tail_type"]].set_axis(["e", "t"], axis=1),
        ]
    ).drop_duplicates()
    conflicts = ent_types[ent_types.duplicated("e", keep=False)]
    if len(conflicts):
        e = conflicts["e"].iloc[0]
        ts = sorted(conflicts[conflicts["e"] == e]["t"])
        first_type = None
        for idx, h, ht, t, tt in df[["head", "head_type", "tail", "tail_type"]].itertuples():
            seen = ht if h == e else tt if t == e else None
            if seen is None:
                continue
            if first_type is None:
                first_type = seen
            elif seen != first_type:
                raise KGFormatError(
                    f"{report.source}:{int(lines[idx])}: entity {e!r} has type {seen!r} here but "
                    f"{first_type!r} earlier "
                    f"({conflicts['e'].nunique()} entities with conflicting types); give each entity one type"
                )
        raise KGFormatError(f"{report.source}: entity {e!r} has conflicting types {ts}")

    if dedupe:
        dup = df.duplicated(list(COLUMNS), keep="first")
        report.duplicate_triples = int(dup.sum())
        df = df[~dup]
    report.self_loops = int((df["head"] == df["tail"]).sum())
    report.tail_only_entities = len(set(df["tail"]) - set(df["head"]))
    counts = df["relation"].value_counts()
    report.single_edge_relations = sorted(counts[counts == 1].index.tolist())
    if len(df) == 0:
        raise KGFormatError(
            f"{report.source}: no usable triples left ({len(report.dropped)} rows dropped: "
            f"{report.dropped_by_reason})"
        )
    report.rows_kept = len(df)
    return KGTriples(df.reset_index(drop=True), report, name=name or Path(str(report.source)).name)


# ---------------------------------------------------------------------------------------------
# triples files
# ---------------------------------------------------------------------------------------------
def load_triples_file(path, *, allowed_types=None, sep: str | None = None) -> KGTriples:
    """CSV / TSV (optionally .gz) / Parquet with columns head, relation, tail [, head_type, tail_type].

    CSV/TSV go through pyarrow's reader; rows with the wrong column count are dropped into the report
    with their line number (pyarrow's ``invalid_row_handler``) instead of failing the whole file.
    """
    path = Path(path)
    _check_path(path, "triples file")
    report = LoadReport(str(path))
    suffixes = "".join(path.suffixes).lower()
    if suffixes.endswith(PARQUET_SUFFIXES):
        import pandas as pd

        try:
            df = pd.read_parquet(path, engine="pyarrow")
        except Exception as exc:
            raise KGFormatError(
                f"{path}: not a readable Parquet file ({type(exc).__name__}: {exc})"
            ) from None
        _check_columns(df.columns, path)
        _check_parquet_types(df, path, report)
        return finalize(df, report, line_numbers=range(1, len(df) + 1), allowed_types=allowed_types)
    if not suffixes.removesuffix(".gz").endswith(TABLE_SUFFIXES):
        raise KGFormatError(
            f"{path}: unknown extension {''.join(path.suffixes) or '(none)'}; expected one of "
            f"{', '.join(TABLE_SUFFIXES + PARQUET_SUFFIXES + RDF_SUFFIXES)} (text formats optionally .gz)"
        )
    _check_text(path, _read_head(path))

    import pyarrow as pa
    import pyarrow.csv as pacsv

    if sep is None:
        sep = "\t" if (".tsv" in suffixes or ".sif" in suffixes or ".txt" in suffixes) else ","
    invalid: list[tuple[int, str, str]] = []

    def on_invalid(row):
        invalid.append(
            (
                row.number,
                f"wrong column count: expected {row.expected_columns}, got {row.actual_columns}",
                row.text or "",
            )
        )
        return "skip"

    try:
        table = pacsv.read_csv(
            path,
            # use_threads=False so pyarrow knows the line number of each bad row.
            read_options=pacsv.ReadOptions(block_size=READ_BLOCK, use_threads=False),
            parse_options=pacsv.ParseOptions(
                delimiter=sep, invalid_row_handler=on_invalid, ignore_empty_lines=True
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={c: pa.string() for c in COLUMNS + TYPE_COLUMNS}, strings_can_be_null=True
            ),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        if "straddling" in str(exc) or "block size" in str(exc):
            raise KGFormatError(
                f"{path}: a line longer than {READ_BLOCK >> 20} MiB; a triples file has one short triple per "
                "line "
                "(is this a single-line JSON or binary file?)"
            ) from None
        raise KGFormatError(
            f"{path}: not a {'TSV' if sep == chr(9) else 'CSV'} triples file ({str(exc).splitlines()[0]})"
        ) from None
    except (OSError, EOFError, zlib.error) as exc:  # a gzip stream broken past its first block
        raise KGFormatError(f"{path}: not readable ({type(exc).__name__}: {exc})") from None
    df = table.to_pandas()
    _check_columns(df.columns, path)
    for number, reason, text in invalid:
        report.drop(number, reason, text)
    # Line numbers of kept rows: header is line 1; invalid rows (pyarrow's 1-based row number counts
    # the header) are the gaps.
    skipped = {n for n, _, _ in invalid if n is not None}
    line_numbers, line = [], 2
    while len(line_numbers) < len(df):
        if line not in skipped:
            line_numbers.append(line)
        line += 1
    return finalize(df, report, line_numbers=line_numbers, allowed_types=allowed_types)


def _check_parquet_types(df, path, report: LoadReport) -> None:
    """Parquet columns must hold strings; integer ids are accepted as text and the report says so,
    anything else (floats, booleans, dates) is refused with the column named."""
    from pandas.api import types as ptypes

    for col in [c for c in COLUMNS + TYPE_COLUMNS if c in df.columns]:
        dt = df[col].dtype
        if (
            ptypes.is_string_dtype(dt)
            or ptypes.is_object_dtype(dt)
            and df[col].map(lambda v: v is None or isinstance(v, str)).all()
        ):
            continue
        if ptypes.is_integer_dtype(dt):
            report.notes.append(
                f"column {col!r} holds integers ({dt}); they were read as entity/relation names (text)"
            )
            continue
        raise KGFormatError(f"{path}: column {col!r} has type {dt}; expected strings (or integer ids)")


def _check_columns(columns, path) -> None:
    cols = [str(c) for c in columns]
    missing = [c for c in COLUMNS if c not in cols]
    if missing:
        raise KGFormatError(
            f"{path}: not a triples file: line 1 has columns {cols[:8]}, expected head, relation, tail "
            f"[, head_type, tail_type] (missing {missing})"
        )


# ---------------------------------------------------------------------------------------------
# RDF
# ---------------------------------------------------------------------------------------------
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


def iri_local_name(iri: str) -> str:
    """Last path segment of an IRI: ``http://x.org/onto#treats`` -> ``treats``."""
    return re.split(r"[/#]", iri.rstrip("/#"))[-1]


def rdf_format(path: Path):
    import pyoxigraph as ox

    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".nt"):
        return ox.RdfFormat.N_TRIPLES
    if name.endswith(".ttl"):
        return ox.RdfFormat.TURTLE
    raise KGFormatError(f"{path}: unknown RDF extension (expected .nt or .ttl)")


def load_rdf(path, *, allowed_types=None) -> KGTriples:
    """N-Triples / Turtle via pyoxigraph (Rust parser; ``nbkit.kg.rdf_bench`` times it against rdflib).

    relation = last path segment of the predicate IRI; ``rdf:type`` statements give node types
    (local name of the class); triples whose object is a literal are dropped into the report.
    """
    import pandas as pd
    import pyoxigraph as ox

    path = Path(path)
    _check_path(path, "RDF file")
    report = LoadReport(str(path))
    fmt = rdf_format(path)
    _check_text(path, _read_head(path))
    heads, rels, tails, types = [], [], [], {}
    n_read = 0
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            for quad in ox.parse(fh, format=fmt):
                n_read += 1
                s, p, o = quad.subject, quad.predicate, quad.object
                if isinstance(o, ox.Literal):
                    report.drop(None, "object is a literal (not an entity)", f"{s} {p} {o}")
                    continue
                if p.value == RDF_TYPE:
                    types[s.value] = iri_local_name(o.value)
                    n_read -= 1  # a type statement is not a triple of the graph
                    continue
                heads.append(s.value)
                rels.append(iri_local_name(p.value))
                tails.append(o.value)
    except SyntaxError as exc:
        # pyoxigraph reports "<message> at line L column C"; keep it verbatim after the file name.
        raise KGFormatError(
            f"{path}: {fmt.name if hasattr(fmt, 'name') else 'RDF'} syntax error: {exc}"
        ) from None
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile / truncated stream: name the file
        raise KGFormatError(f"{path}: not readable ({type(exc).__name__}: {exc})") from None
    df = pd.DataFrame({"head": heads, "relation": rels, "tail": tails})
    df["head_type"] = [types.get(h, DEFAULT_TYPE) for h in heads]
    df["tail_type"] = [types.get(t, DEFAULT_TYPE) for t in tails]
    report.rows_read = n_read
    report.notes.append(f"{len(types)} rdf:type statements used as node types")
    # Dropped literals have no line numbers in pyoxigraph's quad stream; the report says so.
    return finalize(df, report, line_numbers=None, allowed_types=allowed_types)


def write_ntriples(kg: KGTriples, path, base: str = "http://example.org/kg/") -> Path:
    """Write a KG as N-Triples (entities and relations as IRIs, node types as rdf:type)."""
    path = Path(path)

    def iri(kind: str, name: str) -> str:
        return f"<{base}{kind}/{re.sub(r'[^A-Za-z0-9_.-]', '_', str(name))}>"

    with open(path, "w", encoding="utf-8") as fh:
        seen = set()
        for h, r, t, ht, tt in kg.df[list(COLUMNS + TYPE_COLUMNS)].itertuples(index=False):
            for e, et in ((h, ht), (t, tt)):
                if e not in seen:
                    seen.add(e)
                    fh.write(f"{iri('entity', e)} <{RDF_TYPE}> {iri('type', et)} .\n")
            fh.write(f"{iri('entity', h)} {iri('relation', r)} {iri('entity', t)} .\n")
    return path


# ---------------------------------------------------------------------------------------------
# UMLS (bundled in PyKEEN's wheel)
# ---------------------------------------------------------------------------------------------
def umls_semantic_groups():
    """The shipped mapping table (135 UMLS semantic types -> 15 semantic groups), as a DataFrame."""
    import pandas as pd

    return pd.read_csv(UMLS_GROUPS_FILE, sep="\t", comment="#", dtype=str)


def _pykeen_split_frame(ds):
    """A PyKEEN dataset's three shipped splits as one head/relation/tail/split table (labels, not ids)."""
    import pandas as pd

    parts = []
    for split, tf in (("train", ds.training), ("valid", ds.validation), ("test", ds.testing)):
        ids = tf.mapped_triples.numpy()  # ids -> labels ourselves (tf.triples warns and is slow)
        ent = {i: e for e, i in tf.entity_to_id.items()}
        rel = {i: r for r, i in tf.relation_to_id.items()}
        part = pd.DataFrame(
            {
                "head": [ent[i] for i in ids[:, 0]],
                "relation": [rel[i] for i in ids[:, 1]],
                "tail": [ent[i] for i in ids[:, 2]],
            }
        )
        part["split"] = split
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def load_umls() -> KGTriples:
    """The UMLS KG (135 semantic types, 46 relations, 6,529 triples) from PyKEEN's wheel, with its split.

    Node types are UMLS semantic groups (``data/umls_semantic_groups.tsv``). No network access:
    PyKEEN ships these three files inside the package.
    """
    from pykeen.datasets import UMLS

    groups = umls_semantic_groups().set_index("umls_kg_name")["group"].to_dict()
    df = _pykeen_split_frame(UMLS())
    missing = sorted((set(df["head"]) | set(df["tail"])) - set(groups))
    if missing:
        raise KGFormatError(
            f"{UMLS_GROUPS_FILE}: no semantic group for UMLS entities {missing[:5]} ({len(missing)} in all)"
        )
    df["head_type"] = df["head"].map(groups)
    df["tail_type"] = df["tail"].map(groups)
    report = LoadReport("pykeen.datasets.UMLS (bundled in the pykeen wheel)")
    report.notes.append(
        "node types = UMLS semantic groups (NLM SemGroups), see nbkit/kg/data/umls_semantic_groups.tsv"
    )
    report.notes.append("split = PyKEEN's published train/valid/test split")
    return finalize(df, report, name="umls")


def load_kinships() -> KGTriples:
    """The Kinships KG (104 people, 25 kinship terms, 10,686 triples) from PyKEEN's wheel, with its split.

    It has no node types (every entity is a person): the untyped case, bundled.
    """
    from pykeen.datasets import Kinships

    report = LoadReport("pykeen.datasets.Kinships (bundled in the pykeen wheel)")
    report.notes.append(
        "no node types (one type, 'entity'); split = PyKEEN's published train/valid/test split"
    )
    return finalize(_pykeen_split_frame(Kinships()), report, name="kinships")
