"""Encoders and decoders for the ablation ladder (torch / torch_geometric imported inside).

All encoders map global node ids to embeddings ``z [num_nodes, hidden]`` and run on pure torch:
GCNConv, SAGEConv (inside HeteroConv) and RGCNConv need neither torch_scatter nor torch_sparse;
RGCNConv without pyg-lib loops over relations, which is fast at UMLS scale.
"""

from __future__ import annotations

from typing import Any


def _nn():
    import torch

    return torch.nn


class NodeInput(_nn().Module):
    """Node inputs in global-id order.

    typed: one ``nn.Embedding`` per node type with its own width (or given features), each projected
    by its own Linear to the common ``hidden`` width (seed §2.1); untyped: one shared table.
    """

    def __init__(self, split, hidden: int, typed: bool, type_dims: dict[str, int] | None = None, features: dict[str, Any] | None = None):
        import torch

        super().__init__()
        nn = torch.nn
        self.typed = typed
        self.types = list(split.entity_types)
        self.counts = [len(split.entities[t]) for t in self.types]
        features = features or {}
        if not typed:
            self.table = nn.Embedding(split.num_nodes, hidden)
            nn.init.normal_(self.table.weight, std=0.1)
            return
        self.tables = nn.ModuleDict()
        self.proj = nn.ModuleDict()
        self.feature_types = set()
        for t, n in zip(self.types, self.counts, strict=False):
            key = _key(t)
            if t in features:
                x = torch.as_tensor(features[t], dtype=torch.float)
                self.register_buffer(f"feat_{key}", x)
                self.feature_types.add(t)
                self.proj[key] = nn.Linear(x.size(1), hidden)
            else:
                dim = (type_dims or {}).get(t, default_type_dim(n, hidden))
                self.tables[key] = nn.Embedding(n, dim)
                nn.init.normal_(self.tables[key].weight, std=0.1)
                self.proj[key] = nn.Linear(dim, hidden)

    def forward(self, n_id=None):
        """Inputs of every node in global-id order, or only of the global ids ``n_id`` (mini-batches)."""
        import torch

        if not self.typed:
            return self.table.weight if n_id is None else self.table(n_id)
        if n_id is None:
            parts = []
            for t in self.types:
                key = _key(t)
                x = getattr(self, f"feat_{key}") if t in self.feature_types else self.tables[key].weight
                parts.append(self.proj[key](x))
            return torch.cat(parts)
        # Subset: each type's rows go through that type's own table and projection.
        bounds = torch.tensor(self.counts, device=n_id.device).cumsum(0)
        type_of = torch.bucketize(n_id, bounds, right=True)
        out = None
        for i, t in enumerate(self.types):
            mask = type_of == i
            if not bool(mask.any()):
                continue
            key = _key(t)
            local = n_id[mask] - (int(bounds[i - 1]) if i else 0)
            x = getattr(self, f"feat_{key}")[local] if t in self.feature_types else self.tables[key](local)
            y = self.proj[key](x)
            if out is None:
                out = y.new_empty(n_id.numel(), y.size(1))
            out[mask] = y
        return out


def default_type_dim(count: int, hidden: int) -> int:
    """Per-type input width: big types get more capacity than tiny ones (at least 8)."""
    return int(max(8, min(2 * hidden, round(8 * count**0.5))))


def _key(name: str) -> str:
    # ModuleDict keys cannot contain '.'
    return str(name).replace(".", "_")


class GCNEncoder(_nn().Module):
    """Rung 1: relation-blind GCN over one node type."""

    def __init__(self, hidden: int, layers: int = 2):
        from torch_geometric.nn import GCNConv

        super().__init__()
        self.convs = _nn().ModuleList([GCNConv(hidden, hidden) for _ in range(layers)])

    def forward(self, x, graph):
        import torch.nn.functional as F

        for i, conv in enumerate(self.convs):
            x = conv(x, graph.edge_index)
            if i < len(self.convs) - 1:
                x = F.relu(x)
        return x


class HeteroSAGEEncoder(_nn().Module):
    """Rungs 2-3: typed message passing, one SAGEConv per (src_type, relation, dst_type) via HeteroConv.

    This is what ``to_hetero(GraphSAGE)`` builds; written with HeteroConv so node types that receive
    no messages (possible without reverse edges) keep their input instead of vanishing. Messages from
    different edge types are AVERAGED (``type_aggr="mean"``): on UMLS a node type receives up to ~40 edge
    types and summing them blew up the scores (measured: test AUC 0.52 with sum vs 0.78 with mean).
    """

    def __init__(self, hidden: int, edge_types, layers: int = 2, aggr: str = "mean", type_aggr: str = "mean"):
        from torch_geometric.nn import HeteroConv, SAGEConv

        super().__init__()
        self.convs = _nn().ModuleList(
            [HeteroConv({et: SAGEConv(hidden, hidden, aggr=aggr) for et in edge_types}, aggr=type_aggr) for _ in range(layers)]
        )

    def forward(self, x, graph):
        import torch
        import torch.nn.functional as F

        x_dict = dict(zip(graph.types, torch.split(x, graph.counts), strict=False))
        for i, conv in enumerate(self.convs):
            out = conv(x_dict, graph.edge_index_dict)
            x_dict = {t: (out[t] if t in out else x_dict[t]) for t in graph.types}
            if i < len(self.convs) - 1:
                x_dict = {t: F.relu(v) for t, v in x_dict.items()}
        return torch.cat([x_dict[t] for t in graph.types])


class RGCNEncoder(_nn().Module):
    """Rung 4: RGCNConv with basis (or block) decomposition; ``aggr`` mean or add.

    A residual connection keeps each node's own embedding in the output: on small dense KGs plain
    RGCN over-smooths and its link-prediction MRR stalls well below embedding models.
    """

    def __init__(self, hidden: int, num_relations: int, layers: int = 2, num_bases: int | None = None, num_blocks: int | None = None, aggr: str = "mean", dropout: float = 0.0, residual: bool = True):
        from torch_geometric.nn import RGCNConv

        super().__init__()
        self.convs = _nn().ModuleList(
            [RGCNConv(hidden, hidden, num_relations, num_bases=num_bases, num_blocks=num_blocks, aggr=aggr) for _ in range(layers)]
        )
        self.dropout = dropout
        self.residual = residual

    def forward(self, x, graph):
        import torch.nn.functional as F

        for i, conv in enumerate(self.convs):
            h = conv(F.dropout(x, self.dropout, self.training), graph.edge_index, graph.edge_type)
            if i < len(self.convs) - 1:
                h = F.relu(h)
            x = x + h if self.residual else h
        return x


def _cands(z, cand):
    """Candidate embeddings for ``score_tails``/``score_heads``: every node, or the rows ``cand``.

    ``score_*`` return [len(h), num_candidates]: one matmul instead of gathering [B, k, hidden].
    """
    return z if cand is None else z[cand]


class DotDecoder(_nn().Module):
    """Relation-blind: score(h, r, t) = <z_h, z_t>."""

    def __init__(self, num_relations: int, hidden: int):
        super().__init__()

    def forward(self, z, h, r, t):
        return (z[h] * z[t]).sum(-1)

    def score_tails(self, z, h, r, cand=None):
        return z[h] @ _cands(z, cand).t()

    def score_heads(self, z, r, t, cand=None):
        return z[t] @ _cands(z, cand).t()


class DistMultDecoder(_nn().Module):
    """score(h, r, t) = <z_h, w_r, z_t> with one diagonal relation vector per (base) relation."""

    def __init__(self, num_relations: int, hidden: int):
        import torch

        super().__init__()
        self.rel = torch.nn.Parameter(torch.empty(num_relations, hidden))
        torch.nn.init.normal_(self.rel, std=0.1)

    def forward(self, z, h, r, t):
        return (z[h] * self.rel[r] * z[t]).sum(-1)

    def score_tails(self, z, h, r, cand=None):
        return (z[h] * self.rel[r]) @ _cands(z, cand).t()

    def score_heads(self, z, r, t, cand=None):
        return (z[t] * self.rel[r]) @ _cands(z, cand).t()


class ComplExDecoder(_nn().Module):
    """DistMult in complex space (Trouillon et al. 2016): Re(<z_h, w_r, conj(z_t)>).

    DistMult's score is symmetric in head and tail, so it cannot tell (h, r, t) from (t, r, h); most
    UMLS relations are asymmetric. Splitting the width into real/imaginary halves keeps the diagonal
    (DistMult-style) cost and adds direction.
    """

    def __init__(self, num_relations: int, hidden: int):
        import torch

        super().__init__()
        if hidden % 2:
            raise ValueError(f"ComplEx needs an even hidden size, got {hidden}")
        self.half = hidden // 2
        self.rel = torch.nn.Parameter(torch.empty(num_relations, hidden))
        torch.nn.init.normal_(self.rel, std=0.1)

    def _parts(self, x):
        return x[..., : self.half], x[..., self.half :]

    def forward(self, z, h, r, t):
        hr, hi = self._parts(z[h])
        tr, ti = self._parts(z[t])
        rr, ri = self._parts(self.rel[r])
        return (hr * rr * tr + hi * rr * ti + hr * ri * ti - hi * ri * tr).sum(-1)

    def score_tails(self, z, h, r, cand=None):
        hr, hi = self._parts(z[h])
        rr, ri = self._parts(self.rel[r])
        zr, zi = self._parts(_cands(z, cand))
        return (hr * rr - hi * ri) @ zr.t() + (hi * rr + hr * ri) @ zi.t()

    def score_heads(self, z, r, t, cand=None):
        tr, ti = self._parts(z[t])
        rr, ri = self._parts(self.rel[r])
        zr, zi = self._parts(_cands(z, cand))
        return (tr * rr + ti * ri) @ zr.t() + (ti * rr - tr * ri) @ zi.t()


DECODERS = {"dot": DotDecoder, "distmult": DistMultDecoder, "complex": ComplExDecoder}


class LinkPredictor(_nn().Module):
    """NodeInput -> encoder -> decoder; ``embed(graph)`` gives z for every node."""

    def __init__(self, node_input, encoder, decoder):
        super().__init__()
        self.node_input = node_input
        self.encoder = encoder
        self.decoder = decoder

    def embed(self, graph, n_id=None):
        """z for every node, or for the nodes ``n_id`` of a sampled subgraph ``graph`` (local edge ids)."""
        return self.encoder(self.node_input(n_id), graph)

    def forward(self, graph, h, r, t):
        return self.decoder(self.embed(graph), h, r, t)
