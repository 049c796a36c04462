"""Encoders and decoders for the ablation ladder: ``torch.nn.Module`` classes defined at module level.

This module imports torch and torch_geometric at its top (a theme module may: ``import nbkit`` stays
instant because ``nbkit/__init__`` imports no theme). All encoders map global node ids to embeddings
``z [num_nodes, hidden]`` and run on pure torch: GCNConv, SAGEConv (inside HeteroConv) and RGCNConv
need neither torch_scatter nor torch_sparse; RGCNConv without pyg-lib loops over relations, which
:class:`StackedRGCNConv` replaces by one stacked product.
"""

from __future__ import annotations

import atexit
import math
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GCNConv, RGCNConv


def structural_inputs(edge_index, num_nodes: int, dim: int, *, hops: int = 2, seed: int = 0):
    """``[num_nodes, dim]`` input vectors that already carry the graph's structure: seeded Gaussian vectors,
    each replaced ``hops`` times by the mean over the node's incoming edges of ``edge_index`` (train edges;
    with inverse edges both directions), centred and scaled to unit norm per node.

    Why: after two hops a node's vector is the mean of random vectors over its 2-hop neighbourhood. Nodes
    whose neighbours lie in the same groups (on a clustered graph: the same cluster — the path out along a
    relation and back along it lands among the cluster's own members) get correlated vectors; unrelated
    nodes get near-orthogonal ones. Per-entity tables started there need far fewer updates per entity
    to show the structure than tables started from independent noise. Nodes without incoming edges keep
    their random vector."""
    g = torch.Generator().manual_seed(seed)
    x0 = torch.randn(num_nodes, dim, generator=g)
    src, dst = edge_index[0].cpu(), edge_index[1].cpu()
    deg = torch.bincount(dst, minlength=num_nodes)
    mean_in = _csr(dst, src, 1.0 / deg[dst].float(), (num_nodes, num_nodes))
    x = x0
    for _ in range(hops):
        x = torch.sparse.mm(mean_in, x)
    x = torch.where((deg > 0).unsqueeze(1), x - x[deg > 0].mean(0), x0)
    return x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)


def _csr(rows, cols, values, shape):
    """A CSR matrix from (row, col, value) triples; duplicate positions add up. Built through COO because
    that is what accepts unsorted, repeated indices; the CSR "beta" warning is silenced because the one
    operation nbkit uses on it (``torch.sparse.mm`` with a dense matrix) is stable."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
        return (
            torch.sparse_coo_tensor(torch.stack([rows, cols]), values, shape, check_invariants=False)
            .coalesce()
            .to_sparse_csr()
        )


def default_type_dim(count: int, hidden: int) -> int:
    """Per-type input width: big types get more capacity than tiny ones (at least 8)."""
    return int(max(8, min(2 * hidden, round(8 * count**0.5))))


def _key(name: str) -> str:
    # ModuleDict keys cannot contain '.'
    return str(name).replace(".", "_")


class StackedRGCNConv(RGCNConv):
    """``RGCNConv`` whose forward runs every relation at once (same parameters, same function).

    Without ``pyg-lib`` (no wheels for this torch) PyG's ``RGCNConv`` loops over relations — UMLS with
    inverses has 92, Hetionet 48 — and the per-relation overhead dominated each epoch. Here each edge's
    message is weighted by its relation's basis coefficients (``comp``) and 1/degree (``aggr="mean"``
    is a per-relation mean), summed per (destination, relation) — one ``index_add`` on a sampled subgraph,
    one sparse-matrix product on a whole graph —, combined by the bases' coefficients and multiplied by
    the bases once; without bases, every node is projected under every relation (in chunks) and each
    edge picks its row. Block-diagonal decomposition and index (non-float) inputs fall back to PyG's loop.
    Checked equal to ``RGCNConv`` in tests/unit/test_kg_train.py.
    """

    def _relation_operator(self, edge_index, edge_type, n: int, x):
        """CSR [n × relations, n]: row dst·R + r holds, per edge src → dst of relation r, its weight
        (1 / that row's edge count for ``aggr="mean"``, 1 for ``"add"``; duplicate edges add up, as
        they do in the per-edge sum). Cached for the graph it was built from (holding its tensors, so
        their ids cannot be reused while the entry lives); a plain attribute, not in state_dict."""
        key = (n, x.dtype, x.device, self.aggr, self.num_relations)
        hit = getattr(self, "_operator_cache", None)
        if hit is not None and hit[0] is edge_index and hit[1] is edge_type and hit[2] == key:
            return hit[3]
        rows = edge_index[1] * self.num_relations + edge_type
        w = torch.ones(rows.numel(), dtype=x.dtype, device=x.device)
        if self.aggr == "mean":
            w = w / torch.bincount(rows, minlength=n * self.num_relations)[rows].to(x.dtype)
        op = _csr(rows, edge_index[0], w, (n * self.num_relations, n))
        self._operator_cache = (edge_index, edge_type, key, op)
        return op

    def forward(self, x, edge_index, edge_type=None):
        if (
            self.num_blocks is not None
            or isinstance(x, tuple)
            or x is None
            or not torch.is_floating_point(x)
            or not isinstance(edge_index, torch.Tensor)
            or self.aggr not in ("mean", "add")
        ):
            return super().forward(x, edge_index, edge_type)
        n, src, dst = x.size(0), edge_index[0], edge_index[1]
        if (
            self.num_bases is not None
            and 4 * src.numel() >= n * self.num_relations
            and n * self.num_relations * x.size(1) <= (1 << 26)
        ):
            # Whole graphs (validation, full-graph training): the per-(node, relation) weighted sums of
            # neighbour inputs are one sparse [nodes x relations, nodes] matrix times x, built once per
            # graph and kept; on the 47k-entity graph (3.2M message edges) this replaced gathering a
            # [edges, width] tensor per layer and call (timings: nbkit.kg.config.ScaleConfig).
            agg = torch.sparse.mm(self._relation_operator(edge_index, edge_type, n, x), x)
            agg = torch.einsum("nrh,rb->nbh", agg.view(n, self.num_relations, -1), self.comp)
            out = x @ self.root + (self.bias if self.bias is not None else 0)
            return out + agg.reshape(n, -1) @ self.weight.reshape(-1, self.out_channels)
        if self.aggr == "mean":
            key = edge_type * n + dst
            w = 1.0 / torch.bincount(key, minlength=self.num_relations * n)[key].to(x.dtype)
        else:
            w = torch.ones(src.numel(), dtype=x.dtype, device=x.device)
        out = x @ self.root + (self.bias if self.bias is not None else 0)
        if src.numel() == 0:
            return out
        chunk = max(1, (1 << 24) // max(1, x.size(1) * (self.num_bases or 1)))
        if self.num_bases is not None and 4 * src.numel() < n * self.num_relations:
            # Sparse graphs (a neighbour-sampled mini-batch: most nodes are leaves that receive
            # nothing): sum per (destination, relation) pair that OCCURS, not per every pair; whole
            # graphs take the sparse-matrix path above. Timings: nbkit.kg.config.ScaleConfig.
            # Only nodes that receive a message pay for the bases' [bases x width, out] product.
            pair, inv = torch.unique(dst * self.num_relations + edge_type, return_inverse=True)
            agg = x.new_zeros(pair.numel(), x.size(1)).index_add(0, inv, x[src] * w[:, None])
            basis = agg.unsqueeze(1) * self.comp[pair % self.num_relations].unsqueeze(
                2
            )  # [pairs, bases, width]
            receivers, at = torch.unique_consecutive(
                pair // self.num_relations, return_inverse=True
            )  # pair is sorted
            per_node = x.new_zeros(receivers.numel(), self.num_bases, x.size(1)).index_add(0, at, basis)
            return out.index_add(
                0,
                receivers,
                per_node.reshape(receivers.numel(), -1) @ self.weight.reshape(-1, self.out_channels),
            )
        if self.num_bases is not None:  # big graphs: never hold [nodes, relations, width]
            agg = x.new_zeros(n, self.num_bases, x.size(1))
            for lo in range(0, src.numel(), chunk):
                s_, d_, t_ = src[lo : lo + chunk], dst[lo : lo + chunk], edge_type[lo : lo + chunk]
                coef = self.comp[t_] * w[lo : lo + chunk, None]  # [e, bases]
                agg = agg.index_add(0, d_, x[s_].unsqueeze(1) * coef.unsqueeze(2))
            return out + agg.reshape(n, -1) @ self.weight.reshape(-1, self.out_channels)
        step = max(1, (1 << 24) // max(1, n * self.out_channels))
        for lo in range(0, self.num_relations, step):
            sel = (edge_type >= lo) & (edge_type < lo + step)
            if not bool(sel.any()):
                continue
            proj = torch.einsum("nh,rhk->rnk", x, self.weight[lo : lo + step])
            out = out.index_add(0, dst[sel], proj[edge_type[sel] - lo, src[sel]] * w[sel, None])
        return out


def _cands(z, cand):
    """Candidate embeddings for ``score_tails``/``score_heads``: every node, or the rows ``cand``.

    ``score_*`` return [len(h), num_candidates]: one matmul instead of gathering [B, k, hidden].
    """
    return z if cand is None else z[cand]


class NodeInput(nn.Module):
    """Node inputs in global-id order.

    typed: one ``nn.Embedding`` per node type with its own width (or given features), each projected
    by its own Linear to the common ``hidden`` width (field notes §2.1); untyped: one shared table.
    """

    def __init__(
        self,
        split,
        hidden: int,
        typed: bool,
        type_dims: dict[str, int] | None = None,
        features: dict[str, Any] | None = None,
        sparse: bool = False,
    ):
        super().__init__()
        self.typed = typed
        self.types = list(split.entity_types)
        self.counts = [len(split.entities[t]) for t in self.types]
        features = features or {}
        if not typed:
            self.table = nn.Embedding(split.num_nodes, hidden, sparse=sparse)
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
                self.tables[key] = nn.Embedding(n, dim, sparse=sparse)
                nn.init.normal_(self.tables[key].weight, std=0.1)
                self.proj[key] = nn.Linear(dim, hidden)

    def max_dim(self) -> int:
        """The widest per-entity table (what :meth:`init_from` needs)."""
        tables = [self.table] if not self.typed else list(self.tables.values())
        return max((t.embedding_dim for t in tables), default=0)

    def init_from(self, vectors, std: float = 0.1):
        """Start every per-entity table from ``vectors`` (unit-norm rows in global-id order; a table of
        width d takes the first d columns), rescaled to ``std`` per coordinate like the random init."""
        if not self.typed:
            pieces = [(self.table, vectors)]
        else:  # a type's rows are consecutive global ids; types with features have no table
            pieces, start = [], 0
            for t, n in zip(self.types, self.counts, strict=True):
                if _key(t) in self.tables:
                    pieces.append((self.tables[_key(t)], vectors[start : start + n]))
                start += n
        with torch.no_grad():
            for table, v in pieces:
                d = table.embedding_dim
                table.weight.copy_(
                    v[:, :d] * (std * d**0.5 / v[:, :d].norm(dim=1, keepdim=True).clamp_min(1e-12))
                )

    def forward(self, n_id=None):
        """Inputs of every node in global-id order, or only of the global ids ``n_id`` (mini-batches)."""
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


class GCNEncoder(nn.Module):
    """Rung 1: relation-blind GCN over one node type."""

    def __init__(self, hidden: int, layers: int = 2):
        super().__init__()
        self.convs = nn.ModuleList([GCNConv(hidden, hidden) for _ in range(layers)])

    def forward(self, x, graph):

        for i, conv in enumerate(self.convs):
            x = conv(x, graph.edge_index)
            if i < len(self.convs) - 1:
                x = F.relu(x)
        return x


# Elements of one chunk of hetero SAGE's neighbour projection (nodes x edge types x hidden, 128 MB in float32)
SAGE_CHUNK_ELEMENTS = 1 << 25


class HeteroSAGEEncoder(nn.Module):
    """Rungs 2-3: typed message passing, one SAGE convolution per (src_type, relation, dst_type).

    Computes exactly what
    ``HeteroConv({edge_type: SAGEConv(hidden, hidden, aggr="mean")}, aggr=type_aggr)`` computes
    (``to_hetero(GraphSAGE)``; checked against it in tests/unit/test_kg_graph.py), but with the
    per-edge-type weights stacked into tensors: HeteroConv runs one SAGEConv per edge type, and UMLS with
    inverse relations has 596 of them, whose per-op overhead dominated each epoch; stacked, one einsum
    per layer. Per edge type e = (s, r, d) and destination node i of type d:
    ``lin_l_e(mean_{j in N_e(i)} x_j) + lin_r_e(x_i)`` (``lin_l`` with bias), combined over the edge
    types into d by ``type_aggr`` (``"sum"`` or ``"mean"``: on UMLS a node type receives up to ~40 edge
    types, so the sum can dwarf a node's own input; which one is used is chosen on VALIDATION MRR by
    ``nbkit.kg.experiments.run_selection``). Node types that receive no edge type keep their input.
    """

    def __init__(self, hidden: int, edge_types, layers: int = 2, type_aggr: str = "mean"):
        super().__init__()
        if type_aggr not in ("sum", "mean"):
            raise ValueError(f"type_aggr must be 'sum' or 'mean', got {type_aggr!r}")
        self.edge_types = list(edge_types)
        self.type_aggr = type_aggr
        n, bound = len(self.edge_types), 1 / math.sqrt(hidden)  # nn.Linear's default init range

        def param(*shape):
            return torch.nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))

        self.w_l = torch.nn.ParameterList([param(n, hidden, hidden) for _ in range(layers)])
        self.b_l = torch.nn.ParameterList([param(n, hidden) for _ in range(layers)])
        self.w_r = torch.nn.ParameterList([param(n, hidden, hidden) for _ in range(layers)])

    def _neighbours(self, i, x, src, dst, et, inv_deg):
        """Layer ``i``'s neighbour part: every node transformed under every edge type's lin_l (chunks of
        edge types bound the memory), each edge's source row picked, weighted by 1/deg (mean within the
        edge type), summed per destination."""
        out = torch.zeros_like(x)
        n_nodes, hidden = x.shape
        step = max(1, SAGE_CHUNK_ELEMENTS // max(1, n_nodes * hidden))
        for lo in range(0, len(self.edge_types), step):
            sel = (et >= lo) & (et < lo + step)
            if not bool(sel.any()):
                continue
            # [nodes, edge types, hidden]: the product einsum("nh,ehk->enk") computes (one [nodes x hidden]
            # @ [hidden x types·hidden] matmul, the same numbers to the bit), read in the order it comes
            # out in — einsum's [types, nodes, hidden] order copies the whole product, and its gradient
            # back, every layer and epoch
            w = self.w_l[i][lo : lo + step]
            proj = (x @ w.permute(1, 0, 2).reshape(hidden, -1)).view(n_nodes, w.size(0), hidden)
            out.index_add_(0, dst[sel], proj[src[sel], et[sel] - lo] * inv_deg[sel, None])
        return out

    def _layer(self, i, x, graph, src, dst, et, inv_deg, dst_type_of_et, fan_in):
        out = self._neighbours(i, x, src, dst, et, inv_deg)
        hidden = x.size(1)
        # Root part and biases: the sum over edge types into type d of lin_r_e is one matrix per d.
        n_types = len(graph.types)
        w_root = torch.zeros(n_types, hidden, hidden, device=x.device, dtype=x.dtype).index_add(
            0, dst_type_of_et, self.w_r[i]
        )
        b_root = torch.zeros(n_types, hidden, device=x.device, dtype=x.dtype).index_add(
            0, dst_type_of_et, self.b_l[i]
        )
        parts, start = [], 0
        for t, count in enumerate(graph.counts):
            xs = x[start : start + count]
            if fan_in[t] == 0:
                parts.append(xs)  # no edge type ends here: the input passes through (HeteroConv drops it)
            else:
                y = out[start : start + count] + xs @ w_root[t] + b_root[t]
                parts.append(y / fan_in[t] if self.type_aggr == "mean" else y)
            start += count
        return torch.cat(parts)

    def _edges(self, x, graph):
        """Flat (src, dst, edge type) ids, 1/degree per edge type and the type fan-in of ``graph``.

        They depend on the graph only, so they are built once per graph and reused every epoch: the
        loop over the ~600 edge types is a large share of a forward pass."""
        cached = getattr(self, "_edges_cache", None)
        if (
            cached is not None
            and cached[0] is graph.edge_index_dict
            and cached[1] == (x.size(0), x.device, x.dtype)
        ):
            return cached[2]
        offsets = torch.tensor([0, *graph.counts], device=x.device).cumsum(0)
        index = {t: k for k, t in enumerate(graph.types)}
        src, dst, et = [], [], []
        for k, (s, _, d) in enumerate(self.edge_types):
            ei = graph.edge_index_dict[(s, _, d)]
            src.append(ei[0] + offsets[index[s]])
            dst.append(ei[1] + offsets[index[d]])
            et.append(torch.full((ei.size(1),), k, dtype=torch.long, device=x.device))
        src, dst, et = torch.cat(src), torch.cat(dst), torch.cat(et)
        key = et * x.size(0) + dst
        _, inverse, counts = torch.unique(key, return_inverse=True, return_counts=True)
        inv_deg = 1.0 / counts[inverse].to(x.dtype)
        dst_type_of_et = torch.tensor(
            [index[d] for _, _, d in self.edge_types], dtype=torch.long, device=x.device
        )
        fan_in = torch.bincount(dst_type_of_et, minlength=len(graph.types)).tolist()
        out = (src, dst, et, inv_deg, dst_type_of_et, fan_in)
        # A plain attribute, not a buffer (kept out of state_dict); holding the dict itself means
        # its id cannot be reused.
        self._edges_cache = (graph.edge_index_dict, (x.size(0), x.device, x.dtype), out)
        return out

    def forward(self, x, graph):

        src, dst, et, inv_deg, dst_type_of_et, fan_in = self._edges(x, graph)
        for i in range(len(self.w_l)):
            x = self._layer(i, x, graph, src, dst, et, inv_deg, dst_type_of_et, fan_in)
            if i < len(self.w_l) - 1:
                x = F.relu(x)
        return x


class RGCNEncoder(nn.Module):
    """Rung 4: RGCNConv with basis (or block) decomposition; ``aggr`` mean or add.

    A residual connection keeps each node's own embedding in the output: on small dense KGs plain
    RGCN over-smooths and its link-prediction MRR stalls well below embedding models.
    """

    def __init__(
        self,
        hidden: int,
        num_relations: int,
        layers: int = 2,
        num_bases: int | None = None,
        num_blocks: int | None = None,
        aggr: str = "mean",
        dropout: float = 0.0,
        residual: bool = True,
    ):
        super().__init__()
        self.convs = nn.ModuleList(
            [
                StackedRGCNConv(
                    hidden, hidden, num_relations, num_bases=num_bases, num_blocks=num_blocks, aggr=aggr
                )
                for _ in range(layers)
            ]
        )
        self.dropout = dropout
        self.residual = residual

    def forward(self, x, graph):

        for i, conv in enumerate(self.convs):
            h = conv(F.dropout(x, self.dropout, self.training), graph.edge_index, graph.edge_type)
            if i < len(self.convs) - 1:
                h = F.relu(h)
            x = x + h if self.residual else h
        return x


class DotDecoder(nn.Module):
    """Relation-blind: score(h, r, t) = <z_h, z_t>."""

    def __init__(self, num_relations: int, hidden: int):
        super().__init__()

    def forward(self, z, h, r, t):
        return (z[h] * z[t]).sum(-1)

    def score_tails(self, z, h, r, cand=None):
        return z[h] @ _cands(z, cand).t()

    def score_heads(self, z, r, t, cand=None):
        return z[t] @ _cands(z, cand).t()


class DistMultDecoder(nn.Module):
    """score(h, r, t) = <z_h, w_r, z_t> with one diagonal relation vector per (base) relation."""

    def __init__(self, num_relations: int, hidden: int):
        super().__init__()
        self.rel = torch.nn.Parameter(torch.empty(num_relations, hidden))
        torch.nn.init.normal_(self.rel, std=0.1)

    def forward(self, z, h, r, t):
        return (z[h] * self.rel[r] * z[t]).sum(-1)

    def score_tails(self, z, h, r, cand=None):
        return (z[h] * self.rel[r]) @ _cands(z, cand).t()

    def score_heads(self, z, r, t, cand=None):
        return (z[t] * self.rel[r]) @ _cands(z, cand).t()


class ComplExDecoder(nn.Module):
    """DistMult in complex space (Trouillon et al. 2016): Re(<z_h, w_r, conj(z_t)>).

    DistMult's score is symmetric in head and tail, so it cannot tell (h, r, t) from (t, r, h); most
    UMLS relations are asymmetric. Splitting the width into real/imaginary halves keeps the diagonal
    (DistMult-style) cost and adds direction.
    """

    def __init__(self, num_relations: int, hidden: int):
        super().__init__()
        if hidden % 2:
            raise ValueError(f"ComplEx needs an even hidden size, got {hidden}")
        self.half = hidden // 2
        self.rel = torch.nn.Parameter(torch.empty(num_relations, hidden))
        torch.nn.init.normal_(self.rel, std=0.1)

    def _parts(self, x):
        # chunk, not two slices: its backward writes both halves' gradients in one cat instead of
        # zero-filling a full-width tensor per slice (a visible share of a rung-6 step; same values)
        return x.chunk(2, -1)

    def forward(self, z, h, r, t):
        hr, hi = self._parts(z[h])
        tr, ti = self._parts(z[t])
        rr, ri = self._parts(self.rel[r])
        return (hr * rr * tr + hi * rr * ti + hr * ri * ti - hi * ri * tr).sum(-1)

    def score_tails(self, z, h, r, cand=None):
        hr, hi = self._parts(z[h])
        rr, ri = self._parts(self.rel[r])
        # [Re, Im] of (h * r) against [Re, Im] of every candidate: one matmul instead of two plus an add
        return torch.cat((hr * rr - hi * ri, hi * rr + hr * ri), -1) @ _cands(z, cand).t()

    def score_heads(self, z, r, t, cand=None):
        tr, ti = self._parts(z[t])
        rr, ri = self._parts(self.rel[r])
        if not torch.is_grad_enabled():
            # Ranking: Re(<h, r, conj(t)>) = <h_re, t_re r_re + t_im r_im> + <h_im, t_im r_re - t_re r_im>
            # is one matmul against every candidate's [Re, Im], as score_tails; the two half-width
            # products and their sum take twice as long. Training keeps them: its recorded figures
            # were computed with them, to the last bit.
            return torch.cat((tr * rr + ti * ri, ti * rr - tr * ri), -1) @ _cands(z, cand).t()
        zr, zi = self._parts(_cands(z, cand))
        return (tr * rr + ti * ri) @ zr.t() + (ti * rr - tr * ri) @ zi.t()


class ReciprocalComplExDecoder(ComplExDecoder):
    """ComplEx with reciprocal relations (Lacroix et al. 2018, "Canonical Tensor Decomposition for
    Knowledge Base Completion"): relation ``r + R`` is the learnt inverse of ``r``, so a head query
    (?, r, t) is answered as the tail query (t, r⁻¹, ?) — every query is a tail query, scored against
    all entities by one matmul. ``n3`` is the paper's regulariser on the factors of a batch.
    """

    def __init__(self, num_relations: int, hidden: int):
        super().__init__(2 * num_relations, hidden)
        self.base = num_relations

    def score_heads(self, z, r, t, cand=None):
        return self.score_tails(z, t, r + self.base, cand)

    def n3(self, z, h, r, t):
        """Sum over the batch of the cubed moduli of the head, relation and tail factors (N3)."""
        total = 0.0
        for x in (z[h], self.rel[r], z[t]):
            re, im = self._parts(x)
            # as the paper; a modulus of exactly 0 never occurs from a normal init
            modulus = (re * re + im * im).sqrt()
            total = total + (modulus * modulus * modulus).sum()  # products: pow() is many times slower on CPU
        return total


class NoEncoder(nn.Module):
    """No message passing: each entity's embedding is its own row of the input table."""

    def forward(self, x, graph):
        return x


DECODERS = {
    "dot": DotDecoder,
    "distmult": DistMultDecoder,
    "complex": ComplExDecoder,
    "complex_reciprocal": ReciprocalComplExDecoder,
}


class LinkPredictor(nn.Module):
    """NodeInput -> encoder -> decoder; ``embed(graph)`` gives z for every node."""

    def __init__(self, node_input, encoder, decoder):
        super().__init__()
        self.node_input = node_input
        self.encoder = encoder
        self.decoder = decoder

    def embed(self, graph, n_id=None):
        """z for every node, or for the nodes ``n_id`` of a sampled subgraph ``graph`` (local edge
        ids)."""
        return self.encoder(self.node_input(n_id), graph)

    def forward(self, graph, h, r, t):
        return self.decoder(self.embed(graph), h, r, t)


def remove_generated_modules() -> None:
    """Remove the modules PyG generated into the temp folder for this process's message-passing classes.

    ``torch_geometric.template.module_from_template`` writes each class's ``propagate`` as a temporary
    ``<module>_<random>.py`` (``delete=False``) and imports it; nothing removes the file, so every process
    that builds a GCN or RGCN layer left a few in the temp folder. Once imported they are not read again, so
    this runs once a model is built, and at exit (a notebook's kernel is often ended before its exit hooks
    run). Cheap: a string test per loaded module."""
    tmp = tempfile.gettempdir()
    roots = tuple({os.path.join(tmp, ""), os.path.join(os.path.realpath(tmp), "")})
    for name, module in list(sys.modules.items()):
        origin = getattr(getattr(module, "__spec__", None), "origin", None)
        if not origin or not origin.startswith(roots):
            continue
        path = Path(origin)
        if path.name.startswith(f"{name}_") and path.suffix == ".py":
            path.unlink(missing_ok=True)


atexit.register(remove_generated_modules)
