"""Pitfall detectors (seed §4.1): each returns a ``Finding`` with evidence, never just a boolean.

* ``detect_inplace_edge_mutation`` - did a forward pass change ``edge_index`` in place?
* ``check_features`` / ``robust_scale`` - NaN / Inf / unscaled node features, and the fix;
* ``check_edge_indices`` - edge ids out of range, entities missing from the mapping;
* ``diagnose_auc_near_chance`` - AUC stuck near 0.5 and its likely cause;
* ``coalesce_experiment`` - what ``coalesce`` does and does not prevent (seed §3.1 claim).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Finding:
    check: str
    ok: bool
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"[{'ok' if self.ok else 'PROBLEM'}] {self.check}: {self.message}"

    def row(self) -> dict[str, Any]:
        return {"check": self.check, "ok": self.ok, "message": self.message, "evidence": _short(self.evidence)}


def _short(ev: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={v}" for k, v in ev.items())
    return text if len(text) < 200 else text[:197] + "..."


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
        return Finding("edge_index mutation", True, "forward left edge_index untouched", {"version_bumps": 0})
    diff_at = torch.nonzero(edge_index != before)[:3].tolist() if changed > 0 else []
    return Finding(
        "edge_index mutation",
        False,
        f"forward modified edge_index in place ({bumps} in-place op(s), {changed} entries changed); "
        "use edge_index = edge_index.clone() (or an out-of-place op) before changing it",
        {"version_bumps": bumps, "entries_changed": changed, "first_changed_positions": diff_at},
    )


def check_features(x, name: str = "x", scale_ratio: float = 100.0) -> Finding:
    """NaN / Inf counts and scale: per-column robust spread (IQR) compared across columns and to 1."""
    import torch

    x = torch.as_tensor(x, dtype=torch.float)
    nan = int(torch.isnan(x).sum())
    inf = int(torch.isinf(x).sum())
    finite = x[torch.isfinite(x).all(1)] if x.dim() == 2 else x[torch.isfinite(x)]
    ev: dict[str, Any] = {"shape": tuple(x.shape), "nan": nan, "inf": inf}
    if finite.numel() == 0:
        return Finding(f"features {name}", False, "no finite rows", ev)
    q = torch.quantile(finite.double(), torch.tensor([0.25, 0.5, 0.75], dtype=torch.double), dim=0)
    iqr = (q[2] - q[0]).abs()
    ev["max_abs"] = round(float(finite.abs().max()), 3)
    ev["median_iqr"] = round(float(iqr.median()), 4)
    ev["max_iqr"] = round(float(iqr.max()), 4)
    problems = []
    if nan or inf:
        problems.append(f"{nan} NaN and {inf} Inf values (they turn every embedding they touch into NaN)")
    if ev["max_abs"] > scale_ratio * max(ev["median_iqr"], 1e-6) or ev["max_abs"] > 1e3:
        problems.append(f"unscaled: max |x| = {ev['max_abs']} vs median IQR {ev['median_iqr']}; apply robust_scale (median/IQR)")
    if problems:
        return Finding(f"features {name}", False, "; ".join(problems), ev)
    return Finding(f"features {name}", True, "finite and on a comparable scale", ev)


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
            bad[str(et)] = {"src_out_of_range": over_s, "dst_out_of_range": over_d, "max_src": int(ei[0].max()), "num_src": ns, "max_dst": int(ei[1].max()), "num_dst": nd}
    if not bad:
        return Finding("edge indices", True, "every edge index is within its node store", {"edge_types": len(stores)})
    first = next(iter(bad))
    return Finding(
        "edge indices",
        False,
        f"{len(bad)} edge type(s) point past their node store (first: {first}: {bad[first]}); "
        "entities are missing from the mapping — build it from heads AND tails of every triple",
        {"bad_edge_types": bad},
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
        return Finding("node mapping", True, "every head and tail has an id", {"entities": len(known)})
    tails_only = sum(1 for c, _, _ in missing if c == "tail")
    ex = sorted(missing)[:3]
    return Finding(
        "node mapping",
        False,
        f"{len({(t, e) for _, t, e in missing})} entities have no id ({tails_only} occurrences as tails) — "
        "the mapping was built from heads only",
        {"examples": ex},
    )


def diagnose_auc_near_chance(auc: float, *, loss_history=None, embeddings=None, split=None, reverse: str | None = None, tol: float = 0.05) -> Finding:
    """AUC within ``tol`` of 0.5: name the most likely cause from the evidence given."""
    import torch

    ev: dict[str, Any] = {"auc": round(float(auc), 4)}
    if abs(auc - 0.5) > tol:
        return Finding("AUC near chance", True, f"AUC {auc:.3f} is away from 0.5", ev)
    causes = []
    if loss_history is not None and len(loss_history) >= 4:
        first, last = float(loss_history[0]), float(loss_history[-1])
        ev["loss_first"], ev["loss_last"] = round(first, 4), round(last, 4)
        if not (last < 0.95 * first):
            causes.append("the loss did not decrease: learning rate too low/high or gradients not reaching the embeddings")
    if embeddings is not None:
        z = torch.as_tensor(embeddings, dtype=torch.float)
        if not torch.isfinite(z).all():
            causes.append("embeddings contain NaN/Inf (unscaled features?)")
        spread = float(z.std(0).mean())
        ev["embedding_std"] = round(spread, 5)
        if spread < 1e-3:
            causes.append("embeddings collapsed to (nearly) one point: over-smoothing or a dead activation")
    if split is not None and reverse == "none":
        from nbkit.kg.graph import message_graph

        mg = message_graph(split, "none")
        receives = torch.zeros(split.num_nodes, dtype=torch.bool)
        receives[mg.edge_index[1]] = True
        share = 1 - float(receives.float().mean())
        ev["nodes_without_incoming_messages"] = round(share, 3)
        if share > 0.1:
            causes.append(f"{share:.0%} of nodes receive no messages in the directed graph: add reverse (rel__inv) edges")
    if not causes:
        causes.append("no single cause found in the evidence given; check that labels/negatives are not shuffled")
    return Finding("AUC near chance", False, "; ".join(causes), ev)


def coalesce_experiment(num_nodes: int = 50, num_edges: int = 400, num_relations: int = 4, seed: int = 0) -> dict[str, Any]:
    """Seed claim: "coalesce() prevents IndexError in RGCNConv". Measure three cases.

    1. unsorted, duplicated edges, without coalesce -> does RGCNConv raise? do outputs differ from
       the coalesced graph (duplicates double-count under ``add``, reweight under ``mean``)?
    2. an edge pointing past ``num_nodes`` -> does RGCNConv raise IndexError, with or without coalesce?
    """
    import torch
    from torch_geometric.nn import RGCNConv
    from torch_geometric.utils import coalesce

    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, num_nodes, (2, num_edges), generator=g)
    et = torch.randint(0, num_relations, (num_edges,), generator=g)
    ei = torch.cat([ei, ei[:, : num_edges // 4]], 1)  # duplicates
    et = torch.cat([et, et[: num_edges // 4]])
    perm = torch.randperm(ei.size(1), generator=g)
    ei, et = ei[:, perm], et[perm]
    x = torch.randn(num_nodes, 16, generator=g)
    out: dict[str, Any] = {}
    for aggr in ("add", "mean"):
        torch.manual_seed(seed)
        conv = RGCNConv(16, 16, num_relations, aggr=aggr)
        conv.requires_grad_(False)
        try:
            y_raw = conv(x, ei, et)
            out[f"unsorted_duplicates_{aggr}_error"] = None
        except Exception as exc:  # the claim says this raises; record what actually happens
            out[f"unsorted_duplicates_{aggr}_error"] = f"{type(exc).__name__}: {exc}"
            continue
        ei_c, et_c = coalesce(ei, et, num_nodes=num_nodes, reduce="max")
        y_c = conv(x, ei_c, et_c)
        out[f"coalesced_vs_raw_max_abs_diff_{aggr}"] = float((y_raw - y_c).detach().abs().max())
    bad = ei.clone()
    bad[1, 0] = num_nodes + 3  # an entity missing from the mapping
    for label, (ei_b, et_b) in (("out_of_range_raw", (bad, et)), ("out_of_range_after_coalesce", (None, None))):
        try:
            if ei_b is None:
                ei_b, et_b = coalesce(bad, et, num_nodes=num_nodes + 4, reduce="max")
            RGCNConv(16, 16, num_relations)(x, ei_b, et_b)
            out[f"{label}_error"] = None
        except Exception as exc:
            out[f"{label}_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    out["unsorted_raises"] = any(out.get(f"unsorted_duplicates_{a}_error") for a in ("add", "mean"))
    out["out_of_range_raises_even_after_coalesce"] = out["out_of_range_after_coalesce_error"] is not None
    return out
