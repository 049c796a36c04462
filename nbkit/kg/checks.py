"""Pitfall detectors (field notes §4.1): each returns the core ``nbkit.findings.Finding`` (check slug,
title, status pass/fail, summary, figures, fix) with evidence, never just a boolean.

* ``detect_inplace_edge_mutation`` - did a forward pass change ``edge_index`` in place?
* ``check_features`` / ``robust_scale`` - NaN / Inf / unscaled node features, and the fix;
* ``check_edge_indices`` - edge ids out of range, entities missing from the mapping;
* ``diagnose_auc_near_chance`` - AUC stuck near 0.5 and its likely cause;
* ``coalesce_experiment`` - what ``coalesce`` does and does not prevent (field notes §3.1 claim).
"""

from __future__ import annotations

from typing import Any

from nbkit.findings import Finding
from nbkit.kg.graph import coalesce_typed, message_graph
from nbkit.kg.metrics import CoalesceMetrics

TITLES = {
    "edge-index-mutation": "edge_index mutated in place",
    "features": "node features finite and scaled",
    "edge-indices": "edge indices within their node stores",
    "node-mapping": "every head and tail has an id",
    "auc-near-chance": "AUC away from chance",
}


def _finding(
    check: str, ok: bool, summary: str, figures: dict[str, Any], *, fix: str = "", table=None, title: str = ""
) -> Finding:
    return Finding(
        check,
        title or TITLES[check],
        "pass" if ok else "fail",
        summary,
        figures=figures,
        table=table or [],
        fix="" if ok else fix,
    )


def detect_inplace_edge_mutation(forward, edge_index, *args, **kwargs) -> Finding:
    """Call ``forward(edge_index, *args, **kwargs)`` and compare ``edge_index`` before and after.

    Uses the tensor's version counter (bumped by every in-place op) and a content comparison, so it
    names the mutation even when the values happen to be restored.
    """
    import torch

    before = edge_index.clone()
    version = edge_index._version
    forward(edge_index, *args, **kwargs)
    bumps = edge_index._version - version
    changed = int((edge_index != before).sum()) if edge_index.shape == before.shape else -1
    if bumps == 0 and changed == 0:
        return _finding(
            "edge-index-mutation",
            True,
            "forward left edge_index untouched",
            {"version_bumps": 0, "entries_changed": 0},
        )
    diff_at = torch.nonzero(edge_index != before)[:3].tolist() if changed > 0 else []
    return _finding(
        "edge-index-mutation",
        False,
        f"forward modified edge_index in place ({bumps} in-place op(s), {changed} entries changed)",
        {"version_bumps": bumps, "entries_changed": changed},
        fix="use edge_index = edge_index.clone() (or an out-of-place op) before changing it",
        table=[{"position": p} for p in diff_at],
    )


def check_features(x, name: str = "x", scale_ratio: float = 100.0) -> Finding:
    """NaN / Inf counts and scale: per-column robust spread (IQR) compared across columns and to 1."""
    import torch

    x = torch.as_tensor(x, dtype=torch.float)
    nan = int(torch.isnan(x).sum())
    inf = int(torch.isinf(x).sum())
    finite = x[torch.isfinite(x).all(1)] if x.dim() == 2 else x[torch.isfinite(x)]
    ev: dict[str, Any] = {"rows": int(x.shape[0]), "nan": nan, "inf": inf}
    title = f"node features {name!r} finite and scaled"
    if finite.numel() == 0:
        return _finding(
            "features", False, "no finite rows", ev, fix="drop or impute the NaN/Inf rows", title=title
        )
    q = torch.quantile(finite.double(), torch.tensor([0.25, 0.5, 0.75], dtype=torch.double), dim=0)
    iqr = (q[2] - q[0]).abs()
    ev["max_abs"] = round(float(finite.abs().max()), 3)
    ev["median_iqr"] = round(float(iqr.median()), 4)
    ev["max_iqr"] = round(float(iqr.max()), 4)
    problems = []
    if nan or inf:
        problems.append(f"{nan} NaN and {inf} Inf values (they turn every embedding they touch into NaN)")
    if ev["max_abs"] > scale_ratio * max(ev["median_iqr"], 1e-6) or ev["max_abs"] > 1e3:
        problems.append(f"unscaled: max |x| = {ev['max_abs']} vs median IQR {ev['median_iqr']}")
    if problems:
        return _finding(
            "features",
            False,
            "; ".join(problems),
            ev,
            fix="apply robust_scale (median/IQR scaling, NaN/Inf filled)",
            title=title,
        )
    return _finding("features", True, "finite and on a comparable scale", ev, title=title)


def robust_scale(x, *, fill_nan: float = 0.0):
    """Median/IQR scaling (sklearn RobustScaler), NaN/Inf replaced by ``fill_nan`` after scaling."""
    import numpy as np
    import torch
    from sklearn.preprocessing import RobustScaler

    arr = torch.as_tensor(x, dtype=torch.float).numpy().astype(np.float64)
    arr[~np.isfinite(arr)] = np.nan
    scaled = RobustScaler().fit_transform(arr)  # ignores NaN when fitting
    scaled = np.nan_to_num(scaled, nan=fill_nan)
    return torch.as_tensor(scaled, dtype=torch.float)


def check_edge_indices(data) -> Finding:
    """For a ``HeteroData`` (or ``Data``): ids outside [0, num_nodes) per edge type."""
    bad: dict[str, Any] = {}
    stores = data.edge_types if hasattr(data, "edge_types") else [None]
    for et in stores:
        ei = data[et].edge_index if et is not None else data.edge_index
        if et is not None:
            ns, nd = data[et[0]].num_nodes, data[et[2]].num_nodes
        else:
            ns = nd = data.num_nodes
        over_s = int((ei[0] >= ns).sum() + (ei[0] < 0).sum())
        over_d = int((ei[1] >= nd).sum() + (ei[1] < 0).sum())
        if over_s or over_d:
            bad[str(et)] = {
                "src_out_of_range": over_s,
                "dst_out_of_range": over_d,
                "max_src": int(ei[0].max()),
                "num_src": ns,
                "max_dst": int(ei[1].max()),
                "num_dst": nd,
            }
    if not bad:
        return _finding(
            "edge-indices",
            True,
            "every edge index is within its node store",
            {"edge_types": len(stores), "bad_edge_types": 0},
        )
    first = next(iter(bad))
    return _finding(
        "edge-indices",
        False,
        f"{len(bad)} edge type(s) point past their node store (first: {first}: {bad[first]}); entities are "
        "missing from the mapping",
        {"edge_types": len(stores), "bad_edge_types": len(bad)},
        fix="build the mapping from heads AND tails of every triple",
        table=[{"edge_type": k, **v} for k, v in bad.items()],
    )


def check_mapping_covers(df, entities: dict[str, list[str]]) -> Finding:
    """Entities of a triples table that the per-type mapping does not contain."""
    known = {(t, e) for t, es in entities.items() for e in es}
    missing = set()
    for col, tcol in (("head", "head_type"), ("tail", "tail_type")):
        for e, t in zip(df[col], df[tcol], strict=False):
            if (t, e) not in known:
                missing.add((col, t, e))
    if not missing:
        return _finding(
            "node-mapping", True, "every head and tail has an id", {"entities": len(known), "missing": 0}
        )
    tails_only = sum(1 for c, _, _ in missing if c == "tail")
    n_missing = len({(t, e) for _, t, e in missing})
    return _finding(
        "node-mapping",
        False,
        f"{n_missing} entities have no id ({tails_only} occurrences as tails) — the mapping was built from "
        "heads only",
        {"entities": len(known), "missing": n_missing, "missing_as_tail": tails_only},
        fix="build the mapping from heads AND tails of every triple (nbkit.kg.graph.build_index)",
        table=[{"column": c, "type": t, "entity": e} for c, t, e in sorted(missing)[:3]],
    )


def diagnose_auc_near_chance(
    auc: float,
    *,
    loss_history=None,
    embeddings=None,
    split=None,
    reverse: str | None = None,
    tol: float = 0.05,
) -> Finding:
    """AUC within ``tol`` of 0.5: name the most likely cause from the evidence given."""
    import torch

    ev: dict[str, Any] = {"auc": round(float(auc), 4)}
    if abs(auc - 0.5) > tol:
        return _finding("auc-near-chance", True, f"AUC {auc:.3f} is away from 0.5", ev)
    causes = []
    if loss_history is not None and len(loss_history) >= 4:
        first, last = float(loss_history[0]), float(loss_history[-1])
        ev["loss_first"], ev["loss_last"] = round(first, 4), round(last, 4)
        if not (last < 0.95 * first):
            causes.append(
                "the loss did not decrease: learning rate too low/high or gradients not reaching the "
                "embeddings"
            )
    if embeddings is not None:
        z = torch.as_tensor(embeddings, dtype=torch.float)
        if not torch.isfinite(z).all():
            causes.append("embeddings contain NaN/Inf (unscaled features?)")
        spread = float(z.std(0).mean())
        ev["embedding_std"] = round(spread, 5)
        if spread < 1e-3:
            causes.append("embeddings collapsed to (nearly) one point: over-smoothing or a dead activation")
    if split is not None and reverse == "none":
        mg = message_graph(split, "none")
        receives = torch.zeros(split.num_nodes, dtype=torch.bool)
        receives[mg.edge_index[1]] = True
        share = 1 - float(receives.float().mean())
        ev["nodes_without_incoming_messages"] = round(share, 3)
        if share > 0.1:
            causes.append(
                f"{share:.0%} of nodes receive no messages in the directed graph: add reverse (rel__inv) "
                "edges"
            )
    if not causes:
        causes.append(
            "no single cause found in the evidence given; check that labels/negatives are not shuffled"
        )
    return _finding(
        "auc-near-chance", False, "; ".join(causes), ev, fix="see the causes named in the summary"
    )


def coalesce_experiment(
    num_nodes: int = 50, num_edges: int = 400, num_relations: int = 4, seed: int = 0
) -> CoalesceMetrics:
    """Field-note claim: "coalesce() prevents IndexError in RGCNConv". Measure what happens.

    1. Unsorted edges with exact duplicates of (src, dst, relation), without coalesce: does RGCNConv
       raise (``add`` and ``mean``)? Coalescing per (src, dst, relation) (``coalesce_typed``: parallel
       edges of DIFFERENT relations are distinct messages and are kept) removes only the duplicates;
       the outputs then differ by exactly those: duplicates double-count under ``add`` and reweight
       the average under ``mean``.
    2. An edge pointing past ``num_nodes`` (an entity missing from the mapping): does RGCNConv raise,
       with or without coalesce?

    What RGCNConv does is PyG's own behaviour: the result names the installed PyG version.
    """
    import torch
    import torch_geometric
    from torch_geometric.nn import RGCNConv

    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, num_nodes, (2, num_edges), generator=g)
    et = torch.randint(0, num_relations, (num_edges,), generator=g)
    dup = num_edges // 4
    ei = torch.cat([ei, ei[:, :dup]], 1)  # exact duplicates: same (src, dst, relation)
    et = torch.cat([et, et[:dup]])
    perm = torch.randperm(ei.size(1), generator=g)
    ei, et = ei[:, perm], et[perm]
    ei_c, et_c = coalesce_typed(ei, et, num_nodes)
    typed = {(s, d, r) for (s, d), r in zip(ei.t().tolist(), et.tolist(), strict=True)}
    rels_per_pair: dict[tuple[int, int], int] = {}
    for s, d, _ in typed:
        rels_per_pair[(s, d)] = rels_per_pair.get((s, d), 0) + 1
    x = torch.randn(num_nodes, 16, generator=g)
    errors, diffs = {}, {}
    for aggr in ("add", "mean"):
        torch.manual_seed(seed)
        conv = RGCNConv(16, 16, num_relations, aggr=aggr)
        conv.requires_grad_(False)
        try:
            y_raw = conv(x, ei, et)
        except Exception as exc:  # the claim says this raises; record what actually happens
            errors[aggr], diffs[aggr] = f"{type(exc).__name__}: {exc}", float("nan")
            continue
        errors[aggr] = ""
        diffs[aggr] = float((conv(x, ei_c, et_c) - y_raw).abs().max())
    bad = ei.clone()
    bad[1, 0] = num_nodes + 3  # an entity missing from the mapping
    out_of_range = {}
    for label in ("raw", "after_coalesce"):
        try:
            ei_b, et_b = (bad, et) if label == "raw" else coalesce_typed(bad, et, num_nodes + 4)
            RGCNConv(16, 16, num_relations)(x, ei_b, et_b)
            out_of_range[label] = ""
        except Exception as exc:
            out_of_range[label] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    return CoalesceMetrics(
        pyg_version=torch_geometric.__version__,
        edges=int(ei.size(1)),
        distinct_typed_edges=len(typed),
        edges_after_coalesce=int(ei_c.size(1)),  # == distinct_typed_edges: only exact duplicates removed
        # (src, dst) pairs joined by edges of more than one relation: coalescing must keep them all
        pairs_with_several_relations=sum(1 for n in rels_per_pair.values() if n > 1),
        error_add=errors["add"],
        error_mean=errors["mean"],
        max_abs_diff_add=diffs["add"],
        max_abs_diff_mean=diffs["mean"],
        out_of_range_error=out_of_range["raw"],
        out_of_range_after_coalesce_error=out_of_range["after_coalesce"],
    )
