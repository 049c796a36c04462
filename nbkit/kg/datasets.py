"""``load_dataset``: a bundled name (``umls``, ``kinships``, ``synthetic``, ``hetionet``) or a path to a
triples / RDF file, read by the reader it names."""

from __future__ import annotations

from pathlib import Path

from nbkit.errors import UsageError
from nbkit.kg.hetionet import load_hetionet
from nbkit.kg.synthetic import synthetic_kg
from nbkit.kg.triples import RDF_SUFFIXES, KGTriples, load_kinships, load_rdf, load_triples_file, load_umls

BUNDLED = ("umls", "kinships", "synthetic", "hetionet")
LOAD_KWARGS = {
    "umls": (),
    "kinships": (),
    "hetionet": (),
    "synthetic": ("num_entities", "num_triples", "seed", "num_clusters"),
    "rdf": ("allowed_types",),
    "table": ("allowed_types", "sep"),
}


def load_dataset(name_or_path: str, **kwargs) -> KGTriples:
    """``umls`` | ``kinships`` | ``synthetic`` | ``hetionet`` | a path to a .csv/.tsv/.parquet/.nt/.ttl file.

    Keyword arguments go to the loader; one it does not take is a ``UsageError`` (never ignored).
    """
    key = str(name_or_path).strip()
    path = Path(key).expanduser()
    kind = key.lower() if key.lower() in BUNDLED else None
    if kind is None and path.exists():
        kind = "rdf" if path.name.lower().removesuffix(".gz").endswith(RDF_SUFFIXES) else "table"
    if kind is None:
        raise FileNotFoundError(
            f"DATASET={name_or_path!r}: not a bundled name ({', '.join(BUNDLED)}) and no such file"
        )
    unknown = sorted(set(kwargs) - set(LOAD_KWARGS[kind]))
    if unknown:
        takes = ", ".join(LOAD_KWARGS[kind]) or "none"
        raise UsageError(
            f"load_dataset({name_or_path!r}): unknown keyword argument(s) {unknown}; this loader takes: "
            f"{takes}"
        )
    if kind == "umls":
        return load_umls()
    if kind == "kinships":
        return load_kinships()
    if kind == "synthetic":
        return synthetic_kg(**kwargs)
    if kind == "hetionet":
        return load_hetionet()
    return load_rdf(path, **kwargs) if kind == "rdf" else load_triples_file(path, **kwargs)
