"""From a triples table to indices, a leak-free split, message graphs and a validated ``HeteroData``.

* Entity ids are built from heads AND tails of every triple (field notes §4.1: an entity seen only as a
  tail must still get an id), per type, sorted, contiguous; global id = type offset + local id.
* Splits never leak: the message-passing graph is built from TRAIN triples only, so neither valid/test
  edges nor their reverses are in it.
* Reverse relations: ``"inverse"`` adds explicit ``rel__inv`` edge types (direction kept);
  ``"undirected"`` is the naive merge (the reverse edge gets the SAME relation); ``"none"`` keeps
  only the stated direction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nbkit.errors import UsageError
from nbkit.kg.triples import KGTriples

REVERSE_MODES = ("none", "inverse", "undirected")
INV_SUFFIX = "__inv"


@dataclass
class KGSplit:
    """Everything a model needs: indices, node types, (h, r, t) id tensors per split."""

    entity_types: list[str]
    entities: dict[str, list[str]]  # type -> sorted entity names
    relations: list[str]
    train: Any  # LongTensor [n, 3] of global (head, relation, tail) ids
    valid: Any
    test: Any
    node_type: Any  # LongTensor [num_nodes]: index into entity_types
    report: dict[str, Any] = field(default_factory=dict)
    name: str = ""

    @property
    def num_nodes(self) -> int:
        return int(self.node_type.numel())

    @property
    def num_relations(self) -> int:
        return len(self.relations)

    @property
    def offsets(self) -> dict[str, int]:
        out, acc = {}, 0
        for t in self.entity_types:
            out[t] = acc
            acc += len(self.entities[t])
        return out

    def entity_names(self) -> list[str]:
        return [e for t in self.entity_types for e in self.entities[t]]

    def entity_id(self, name: str) -> int:
        for t, off in self.offsets.items():
            ents = self.entities[t]
            import bisect

            i = bisect.bisect_left(ents, name)
            if i < len(ents) and ents[i] == name:
                return off + i
        raise KeyError(f"entity {name!r} is not in the mapping")

    def all_true(self):
        import torch

        return torch.cat([self.train, self.valid, self.test])

    def sizes(self) -> dict[str, int]:
        return {
            "entities": self.num_nodes,
            "node_types": len(self.entity_types),
            "relations": self.num_relations,
            "train": len(self.train),
            "valid": len(self.valid),
            "test": len(self.test),
        }


def build_index(df) -> tuple[list[str], dict[str, list[str]]]:
    """Per-type sorted entity lists from heads AND tails (so tail-only entities get ids too)."""
    import pandas as pd

    ents = pd.concat(
        [
            df[["head", "head_type"]].set_axis(["e", "t"], axis=1),
            df[["tail", "tail_type"]].set_axis(["e", "t"], axis=1),
        ]
    ).drop_duplicates()
    types = sorted(ents["t"].unique().tolist())
    return types, {t: sorted(ents.loc[ents["t"] == t, "e"].tolist()) for t in types}


def split_kg(
    kg: KGTriples,
    valid_share: float = 0.1,
    test_share: float = 0.1,
    seed: int = 0,
    *,
    allow_empty: bool = False,
) -> KGSplit:
    """Index the KG and split it; a shipped ``split`` column (UMLS) is used as is.

    Shares must be numbers in (0, 1) summing below 1. A shipped split without validation (or test)
    rows gets them carved from train at that share (seeded; the report counts them). A split that
    still leaves train, validation or test empty is refused with a ``UsageError``
    (``allow_empty=True`` keeps the shipped split as it is: graph-only uses).

    Random splits keep the evaluation transductive: a valid/test triple whose head, tail or relation
    never occurs in train is moved to train, and the report counts how many.
    """
    import numpy as np
    import torch

    _check_shares(valid_share, test_share)
    df = kg.df
    types, entities = build_index(df)
    offsets, acc = {}, 0
    for t in types:
        offsets[t] = acc
        acc += len(entities[t])
    # Each entity has one type (finalize refuses conflicts), so one name -> global id table serves heads
    # and tails; pandas' hashed map instead of a Python loop (Hetionet-sized tables have millions of rows).
    gid = {e: offsets[t] + i for t in types for i, e in enumerate(entities[t])}
    relations = sorted(df["relation"].unique().tolist())
    rel_id = {r: i for i, r in enumerate(relations)}
    h = df["head"].map(gid).to_numpy(dtype=np.int64)
    t_ = df["tail"].map(gid).to_numpy(dtype=np.int64)
    r = df["relation"].map(rel_id).to_numpy(dtype=np.int64)
    triples = np.stack([h, r, t_], axis=1)
    report: dict[str, Any] = {}
    if "split" in df.columns:
        part = df["split"].to_numpy()
        unknown = sorted(set(part) - {"train", "valid", "test"})
        if unknown:
            raise UsageError(
                f"{kg.report.source}: split column has values {unknown}; expected train/valid/test"
            )
        report["split_source"] = "shipped"
        rng = np.random.default_rng(seed)
        for name, share in (("valid", valid_share), ("test", test_share)):
            train_rows = np.flatnonzero(part == "train")
            if allow_empty or (part == name).any() or len(train_rows) < 3:
                continue
            # A shipped split without this part: carve it from train (seeded) and say so in the report.
            take = rng.choice(train_rows, size=max(1, int(round(share * len(train_rows)))), replace=False)
            part = part.astype(object)
            part[take] = name
            report[f"{name}_carved_from_train"] = int(len(take))
    else:
        rng = np.random.default_rng(seed)
        u = rng.random(len(df))
        part = np.where(u < test_share, "test", np.where(u < test_share + valid_share, "valid", "train"))
        report["split_source"] = f"random (seed={seed}, valid={valid_share}, test={test_share})"
        train_mask = part == "train"
        seen_e = set(triples[train_mask, 0]) | set(triples[train_mask, 2])
        seen_r = set(triples[train_mask, 1])
        moved = 0
        # Only rows with an entity or relation unseen in train can move (the seen sets only grow), so
        # the sequential pass below visits those alone: same result, no Python loop over every row.
        known_e = np.fromiter(seen_e, dtype=np.int64, count=len(seen_e))
        known_r = np.fromiter(seen_r, dtype=np.int64, count=len(seen_r))
        maybe = ~train_mask & ~(
            np.isin(triples[:, 0], known_e)
            & np.isin(triples[:, 2], known_e)
            & np.isin(triples[:, 1], known_r)
        )
        for i in np.flatnonzero(maybe):
            hh, rr, tt = triples[i]
            if hh not in seen_e or tt not in seen_e or rr not in seen_r:
                part[i] = "train"
                seen_e.update((hh, tt))
                seen_r.add(rr)
                moved += 1
        report["moved_to_train_unseen_entity_or_relation"] = moved
    node_type = torch.cat([torch.full((len(entities[t]),), i, dtype=torch.long) for i, t in enumerate(types)])
    as_t = lambda m: torch.as_tensor(triples[part == m], dtype=torch.long).reshape(-1, 3)  # noqa: E731
    split = KGSplit(
        types, entities, relations, as_t("train"), as_t("valid"), as_t("test"), node_type, report, kg.name
    )
    empty = [name for name in ("train", "valid", "test") if len(getattr(split, name)) == 0]
    if empty and not allow_empty:
        how = report["split_source"]
        raise UsageError(
            f"{kg.report.source}: {len(df)} usable triples give an empty {' and '.join(empty)} split ({how}: "
            f"{split.sizes()}); "
            "link prediction needs train, validation (to choose epochs and models) and test triples — "
            "give more triples, larger valid/test shares, or a file with a split column (train/valid/test)"
        )
    return split


def _check_shares(valid_share, test_share) -> None:
    """Shares are finite numbers in (0, 1) whose sum is below 1 (else: UsageError naming the value)."""
    import math

    for name, v in (("valid_share", valid_share), ("test_share", test_share)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v < 1:
            raise UsageError(f"split_kg: {name}={v!r}; expected a number strictly between 0 and 1 (e.g. 0.1)")
    if valid_share + test_share >= 1:
        raise UsageError(
            f"split_kg: valid_share + test_share = {valid_share + test_share:g}; expected < 1 so that train "
            "triples remain"
        )


# ---------------------------------------------------------------------------------------------
# leakage meter
# ---------------------------------------------------------------------------------------------
def leakage_meter(split: KGSplit) -> dict[str, Any]:
    """Share of valid/test triples an inverse-aware model can answer by lookup in train.

    ``reversed_pair``: (t, *, h) is in train; ``same_pair_other_relation``: (h, r', t) with r' != r is
    in train. These are the shortcuts that let reverse edges inflate link-prediction scores.
    """
    tr = split.train.tolist()
    pairs = {(h, t) for h, _, t in tr}
    pair_rels: dict[tuple[int, int], set[int]] = {}
    for h, r, t in tr:
        pair_rels.setdefault((h, t), set()).add(r)
    out: dict[str, Any] = {}
    for name, trip in (("valid", split.valid), ("test", split.test)):
        rows = trip.tolist()
        n = max(len(rows), 1)
        rev = sum((t, h) in pairs for h, _, t in rows)
        same = sum(bool(pair_rels.get((h, t), set()) - {r}) for h, r, t in rows)
        either = sum(((t, h) in pairs) or bool(pair_rels.get((h, t), set()) - {r}) for h, r, t in rows)
        out[name] = {
            "triples": len(rows),
            "reversed_pair_share": rev / n,
            "same_pair_other_relation_share": same / n,
            "either_share": either / n,
        }
    return out


# ---------------------------------------------------------------------------------------------
# message graphs
# ---------------------------------------------------------------------------------------------
@dataclass
class MessageGraph:
    edge_index: Any  # LongTensor [2, E] global ids
    edge_type: Any  # LongTensor [E]
    relation_names: list[str]
    reverse: str

    @property
    def num_relations(self) -> int:
        return len(self.relation_names)


def message_graph(split: KGSplit, reverse: str = "inverse") -> MessageGraph:
    """Train-only edges for message passing, with reverse edges per ``reverse``; coalesced."""
    import torch

    if reverse not in REVERSE_MODES:
        raise ValueError(f"reverse must be one of {REVERSE_MODES}, got {reverse!r}")
    h, r, t = split.train.t()
    R = split.num_relations
    names = list(split.relations)
    src, dst, et = [h], [t], [r]
    if reverse == "inverse":
        src.append(t), dst.append(h), et.append(r + R)
        names += [n + INV_SUFFIX for n in split.relations]
    elif reverse == "undirected":
        src.append(t), dst.append(h), et.append(r)
    edge_index, edge_type = coalesce_typed(
        torch.stack([torch.cat(src), torch.cat(dst)]), torch.cat(et), split.num_nodes
    )
    return MessageGraph(edge_index, edge_type, names, reverse)


def coalesce_typed(edge_index, edge_type, num_nodes: int):
    """Sort edges and drop exact duplicates of (src, dst, relation); parallel edges of DIFFERENT
    relations are kept (``torch_geometric.utils.coalesce`` on (src, dst) alone would merge them).

    The relation is folded into the source id (``type * N + src``), coalesced, and unfolded.
    """
    import torch
    from torch_geometric.utils import coalesce

    n = int(num_nodes)
    num_types = int(edge_type.max()) + 1 if edge_type.numel() else 1
    key_index = coalesce(torch.stack([edge_index[0] + edge_type * n, edge_index[1]]), num_nodes=n * num_types)
    return torch.stack([key_index[0] % n, key_index[1]]), key_index[0] // n


def build_hetero_data(split: KGSplit, reverse: str = "inverse", features: dict[str, Any] | None = None):
    """A validated ``HeteroData``: one node store per type, one edge store per (src_type, rel, dst_type).

    ``features`` maps a node type to a [num_nodes_of_type, dim] tensor (given features); types
    without features get ``num_nodes`` only (the model learns an embedding for them).
    """
    import torch
    from torch_geometric.data import HeteroData
    from torch_geometric.utils import coalesce

    mg = message_graph(split, reverse)
    data = HeteroData()
    offsets = split.offsets
    for t in split.entity_types:
        n = len(split.entities[t])
        data[t].num_nodes = n
        data[t].node_id = torch.arange(n)
        if features and t in features:
            x = torch.as_tensor(features[t], dtype=torch.float)
            if x.dim() != 2 or x.size(0) != n:
                raise ValueError(f"features[{t!r}] has shape {tuple(x.shape)}, expected ({n}, dim)")
            data[t].x = x
    ntype = split.node_type
    src_t = ntype[mg.edge_index[0]]
    dst_t = ntype[mg.edge_index[1]]
    key = (src_t * len(mg.relation_names) + mg.edge_type) * len(split.entity_types) + dst_t
    for k in torch.unique(key).tolist():
        mask = key == k
        st, rest = divmod(k, len(mg.relation_names) * len(split.entity_types))
        rel, dt = divmod(rest, len(split.entity_types))
        s_name, d_name = split.entity_types[st], split.entity_types[dt]
        ei = mg.edge_index[:, mask].clone()
        ei[0] -= offsets[s_name]
        ei[1] -= offsets[d_name]
        store = data[s_name, mg.relation_names[rel], d_name]
        store.edge_index = coalesce(
            ei, num_nodes=max(len(split.entities[s_name]), len(split.entities[d_name]))
        )
    data.validate(raise_on_error=True)
    return data


def hetero_summary(data) -> dict[str, Any]:
    """Counts a reader checks at a glance: nodes per type, edge types, edges, isolated nodes."""
    import torch

    nodes = {t: int(data[t].num_nodes) for t in data.node_types}
    has_in = {t: torch.zeros(n, dtype=torch.bool) for t, n in nodes.items()}
    has_any = {t: torch.zeros(n, dtype=torch.bool) for t, n in nodes.items()}
    for (s, _, d), ei in data.edge_index_dict.items():
        has_in[d][ei[1]] = True
        has_any[d][ei[1]] = True
        has_any[s][ei[0]] = True
    return {
        "node_types": len(nodes),
        "nodes": sum(nodes.values()),
        "nodes_per_type": nodes,
        "edge_types": len(data.edge_types),
        "edges": int(sum(ei.size(1) for ei in data.edge_index_dict.values())),
        "nodes_without_incoming_messages": int(sum((~m).sum() for m in has_in.values())),
        "isolated_nodes": int(sum((~m).sum() for m in has_any.values())),
    }
