"""Hetionet v1.0 (CC0): the download into a local cache, verified by its published counts, and its reader."""

from __future__ import annotations

import hashlib
from pathlib import Path

from nbkit.cache import cache_dir as nbkit_cache_dir
from nbkit.kg.triples import KGFormatError, KGTriples, LoadReport, finalize

HETIONET_URLS = {
    "nodes": "https://github.com/hetio/hetionet/raw/main/hetnet/tsv/hetionet-v1.0-nodes.tsv",
    "edges": "https://github.com/hetio/hetionet/raw/main/hetnet/tsv/hetionet-v1.0-edges.sif.gz",
}
# Published size of Hetionet v1.0 (hetio/hetionet README): the check that a download is complete.
HETIONET_V1_COUNTS = {"nodes": 47031, "edges": 2250197}


def hetionet_cache_dir() -> Path:
    return nbkit_cache_dir("hetionet-v1.0")


def download_hetionet(cache_dir=None, *, timeout: float = 60.0) -> dict[str, Path]:
    """Download Hetionet v1.0 (CC0) once into the cache; verified by the published node/edge counts."""
    import urllib.request

    cache = Path(cache_dir) if cache_dir else hetionet_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    paths = {k: cache / url.rsplit("/", 1)[-1] for k, url in HETIONET_URLS.items()}
    for key, url in HETIONET_URLS.items():
        dest = paths[key]
        if dest.exists():
            continue
        tmp = dest.with_suffix(dest.suffix + ".part")
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as fh:
                while chunk := resp.read(1 << 20):
                    fh.write(chunk)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise ConnectionError(
                f"cannot download Hetionet from {url} ({exc}); this machine may be offline — "
                f"put hetionet-v1.0-nodes.tsv and hetionet-v1.0-edges.sif.gz in {cache} by hand"
            ) from None
        tmp.rename(dest)
    kg = load_hetionet(paths["nodes"], paths["edges"])
    n_nodes = len(set(kg.df["head"]) | set(kg.df["tail"]))
    if kg.report.rows_read != HETIONET_V1_COUNTS["edges"]:
        raise KGFormatError(
            f"{paths['edges']}: {kg.report.rows_read} edges, Hetionet v1.0 has "
            f"{HETIONET_V1_COUNTS['edges']}; delete the file to re-download"
        )
    (cache / "VERIFIED").write_text(
        f"edges={kg.report.rows_read} connected_nodes={n_nodes} sha256_edges={_sha256(paths['edges'])}\n"
    )
    return paths


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def load_hetionet(nodes_path=None, edges_path=None) -> KGTriples:
    """Hetionet's TSV release: nodes (id, name, kind) and edges (source, metaedge, target; .sif[.gz]).

    Without paths, uses the cache (downloading once when online).
    """
    import pandas as pd

    if nodes_path is None or edges_path is None:
        paths = download_hetionet()
        nodes_path, edges_path = paths["nodes"], paths["edges"]
    nodes_path, edges_path = Path(nodes_path), Path(edges_path)
    for p in (nodes_path, edges_path):
        if not p.exists():
            raise FileNotFoundError(f"Hetionet file not found: {p}")
    nodes = pd.read_csv(nodes_path, sep="\t", dtype=str)
    if list(nodes.columns[:3]) != ["id", "name", "kind"]:
        raise KGFormatError(
            f"{nodes_path}: line 1 has columns {list(nodes.columns)}, expected id, name, kind"
        )
    edges = pd.read_csv(edges_path, sep="\t", dtype=str, compression="infer")
    if list(edges.columns[:3]) != ["source", "metaedge", "target"]:
        raise KGFormatError(
            f"{edges_path}: line 1 has columns {list(edges.columns)}, expected source, metaedge, target"
        )
    kind = nodes.set_index("id")["kind"]
    df = pd.DataFrame({"head": edges["source"], "relation": edges["metaedge"], "tail": edges["target"]})
    df["head_type"] = df["head"].map(kind)
    df["tail_type"] = df["tail"].map(kind)
    report = LoadReport(str(edges_path))
    missing = df["head_type"].isna() | df["tail_type"].isna()
    for idx in df.index[missing]:
        report.drop(
            int(idx) + 2,
            f"node not in {nodes_path.name}",
            f"{df.at[idx, 'head']} {df.at[idx, 'relation']} {df.at[idx, 'tail']}",
        )
    df = df[~missing]
    report.rows_read = len(edges)
    return finalize(df, report, line_numbers=[i + 2 for i in df.index], name="hetionet")
