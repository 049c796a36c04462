"""The RDF parser comparison: the same file parsed by pyoxigraph (what :func:`nbkit.kg.triples.load_rdf`
uses) and by rdflib, seconds and triple counts for each."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from nbkit.kg.triples import rdf_format


def compare_rdf_parsers(path) -> dict[str, Any]:
    """Parse the same RDF file with pyoxigraph and rdflib; seconds and triple counts for each."""
    import pyoxigraph as ox
    import rdflib

    path = Path(path)
    fmt = rdf_format(path)
    t0 = time.perf_counter()
    with open(path, "rb") as fh:
        n_ox = sum(1 for _ in ox.parse(fh, format=fmt))
    t_ox = time.perf_counter() - t0
    t0 = time.perf_counter()
    g = rdflib.Graph()
    g.parse(path, format="nt" if fmt == ox.RdfFormat.N_TRIPLES else "turtle")
    n_rdflib = len(g)
    t_rdflib = time.perf_counter() - t0
    return {
        "file": str(path),
        "size_mb": round(path.stat().st_size / 1e6, 2),
        "pyoxigraph_s": round(t_ox, 3),
        "rdflib_s": round(t_rdflib, 3),
        "pyoxigraph_triples": n_ox,
        "rdflib_triples": n_rdflib,
        "speedup": round(t_rdflib / max(t_ox, 1e-9), 1),
    }
