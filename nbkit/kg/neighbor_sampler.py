"""Neighbour sampling in pure torch, as a PyG ``BaseSampler``, for mini-batch training on big KGs.

Why written by hand: PyG's ``NeighborSampler`` (behind ``NeighborLoader`` / ``LinkNeighborLoader``)
runs its sampling loop in ``pyg-lib`` or ``torch-sparse``, compiled extensions published only on
data.pyg.org for specific torch builds; neither exists for the torch this project pins, and the PyPI
sdist of torch-sparse does not build against it. Everything around the sampling loop is PyG's own:
``edge_sample`` / ``node_sample`` handle seeds, negatives and label metadata, and PyG's
``NeighborLoader`` / ``LinkLoader`` accept this sampler unchanged (``node_sampler=`` / ``link_sampler=``).

Semantics match PyG's directed neighbour sampling: for each hop, every frontier node draws up to
``num_neighbors[hop]`` of its INCOMING edges uniformly without replacement (``-1`` = all), so messages
flow from the sampled neighbours to the seeds. Seeds come first in ``node`` (PyG's convention);
``edge`` holds the original edge ids, so edge attributes such as ``edge_type`` follow the edges.
Sampling is deterministic given the ``torch.Generator`` (or ``seed``) it was built with.
:func:`link_neighbor_loader` builds PyG link mini-batches on it (or on PyG's typed loader for ``HeteroData``).
"""

from __future__ import annotations

import functools
from typing import Any

# Rows whose degree is at most this multiple of the fan-out are sampled exactly by shuffling all
# their edges; higher-degree rows draw with replacement and drop repeats (cheaper for hub nodes).
_EXACT_DEGREE_FACTOR = 4


def _base_sampler():
    from torch_geometric.sampler import BaseSampler

    return BaseSampler


class CSCGraph:
    """Incoming-edge (CSC) index of a homogeneous graph: ``colptr``, source ``row`` and edge ids."""

    def __init__(self, edge_index, num_nodes: int):
        import torch

        edge_index = torch.as_tensor(edge_index, dtype=torch.long)
        if edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise ValueError(f"edge_index must have shape [2, E], got {tuple(edge_index.shape)}")
        if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
            raise ValueError(
                f"edge_index holds node ids in [{int(edge_index.min())}, {int(edge_index.max())}] but "
                f"num_nodes={num_nodes}"
            )
        src, dst = edge_index
        # Stable sort by destination keeps edges of one node in their original order (determinism).
        order = torch.argsort(dst, stable=True)
        self.row = src[order]
        self.edge_id = order
        counts = torch.bincount(dst, minlength=num_nodes)
        self.colptr = torch.zeros(num_nodes + 1, dtype=torch.long)
        torch.cumsum(counts, 0, out=self.colptr[1:])
        self.num_nodes = num_nodes

    def degree(self, nodes):
        return self.colptr[nodes + 1] - self.colptr[nodes]


def sample_incoming(csc: CSCGraph, nodes, k: int, generator):
    """For each node in ``nodes``: up to ``k`` incoming-edge positions (CSC order), without replacement.

    Returns ``(pos, owner)``: positions into ``csc.row`` and, for each, the index into ``nodes`` of the
    node that sampled it. ``k < 0`` takes every edge.
    """
    import torch

    start = csc.colptr[nodes]
    deg = csc.degree(nodes)
    if k < 0:
        exact = torch.ones_like(deg, dtype=torch.bool)
    else:
        exact = deg <= _EXACT_DEGREE_FACTOR * k
    pos_parts, owner_parts = [], []

    # Exact rows: give every incident edge a random key, sort by (owner, key), keep the first k.
    ex = torch.nonzero(exact).flatten()
    if ex.numel():
        d = deg[ex]
        total = int(d.sum())
        if total:
            owner = torch.repeat_interleave(ex, d)
            first = torch.cumsum(d, 0) - d
            # Position within its owner's run; owners stay in the same runs after the sort below.
            rank = torch.arange(total) - torch.repeat_interleave(first, d)
            offset = rank
            if k >= 0:
                key = torch.rand(total, generator=generator)
                order = torch.argsort(key)
                order = order[torch.argsort(owner[order], stable=True)]
                owner, offset = owner[order], offset[order]
                keep = rank < k
                owner, offset = owner[keep], offset[keep]
            pos_parts.append(start[owner] + offset)
            owner_parts.append(owner)

    # Hub rows (degree > 4k): draws with replacement, repeats dropped in draw order, first k kept;
    # rows left short (rare: 2k draws from >= 4k edges give < k distinct with tiny probability)
    # draw again with twice as many.
    hub = torch.nonzero(~exact).flatten()
    draws = 2 * k
    while hub.numel():
        d = deg[hub]
        u = torch.rand(len(hub), draws, generator=generator)
        offset = (u * d.unsqueeze(1)).long().clamp_max_(d.unsqueeze(1) - 1)
        key = (torch.arange(len(hub)).unsqueeze(1) * int(d.max()) + offset).flatten()
        uniq, inverse = torch.unique(key, return_inverse=True)
        flat_pos = torch.arange(key.numel())
        first_at = torch.full((len(uniq),), key.numel(), dtype=torch.long).scatter_reduce_(
            0, inverse, flat_pos, "amin"
        )
        is_first = (first_at[inverse] == flat_pos).view(len(hub), draws)
        rank = torch.cumsum(is_first.long(), 1) - 1
        take = is_first & (rank < k)
        got = take.sum(1)
        done = got >= k
        rows = torch.nonzero(done).flatten()
        if rows.numel():
            sel = take[rows]
            owner = hub[rows].unsqueeze(1).expand(-1, draws)[sel]
            off = offset[rows][sel]
            pos_parts.append(start[owner] + off)
            owner_parts.append(owner)
        hub = hub[~done]
        draws *= 2
    if not pos_parts:
        empty = torch.empty(0, dtype=torch.long)
        return empty, empty
    pos = torch.cat(pos_parts)
    owner = torch.cat(owner_parts)
    # Group by owner (stable), so the output is deterministic and ordered like the frontier.
    order = torch.argsort(owner, stable=True)
    return pos[order], owner[order]


@functools.cache
def _sampler_class() -> type:
    """``TorchNeighborSampler``, defined on first use: its base class is PyG's ``BaseSampler``, so
    importing this module loads no torch_geometric (``neighbor_sampler.TorchNeighborSampler`` and
    ``from nbkit.kg.neighbor_sampler import TorchNeighborSampler`` reach it through ``__getattr__``)."""

    class TorchNeighborSampler(_base_sampler()):
        """PyG ``BaseSampler`` doing directed multi-hop neighbour sampling with torch ops only.

        ``data`` is a homogeneous ``Data`` (``edge_index``, ``num_nodes``; other edge attributes such as
        ``edge_type`` are carried into batches by PyG's loaders through the original edge ids).
        """

        def __init__(self, data, num_neighbors, *, seed: int | None = 0, generator=None):
            import torch
            from torch_geometric.data import HeteroData

            super().__init__()
            if isinstance(data, HeteroData):
                raise TypeError(
                    "TorchNeighborSampler samples homogeneous graphs; convert with data.to_homogeneous() "
                    "(node and edge types become node_type / edge_type attributes)"
                )
            self.num_neighbors = [int(k) for k in num_neighbors]
            if not self.num_neighbors or any(k == 0 or k < -1 for k in self.num_neighbors):
                raise ValueError(
                    "num_neighbors must be a non-empty list of positive fan-outs or -1 (all), got "
                    f"{list(num_neighbors)}"
                )
            self.num_nodes = int(data.num_nodes)
            self.csc = CSCGraph(data.edge_index, self.num_nodes)
            self.generator = (
                generator
                if generator is not None
                else torch.Generator().manual_seed(0 if seed is None else seed)
            )
            # Global -> local id scratch table; only touched entries are reset after each call.
            self._local = torch.full((self.num_nodes,), -1, dtype=torch.long)

        @property
        def edge_permutation(self):
            return None  # ``edge`` already holds original edge ids

        def sample(self, seed) -> Any:
            """Sample the ``len(num_neighbors)``-hop incoming neighbourhood of the (unique) ``seed`` nodes."""
            import torch
            from torch_geometric.sampler import SamplerOutput

            seed = torch.as_tensor(seed, dtype=torch.long).flatten()
            if seed.numel() and (int(seed.min()) < 0 or int(seed.max()) >= self.num_nodes):
                low, high = int(seed.min()), int(seed.max())
                raise ValueError(f"seed node ids must lie in [0, {self.num_nodes}), got [{low}, {high}]")
            if torch.unique(seed).numel() != seed.numel():
                raise ValueError(
                    "seed nodes must be unique (PyG's edge_sample de-duplicates them before calling the "
                    "sampler)"
                )
            local = self._local
            nodes = [seed]
            local[seed] = torch.arange(seed.numel())
            count = seed.numel()
            frontier = seed
            rows, cols, edges = [], [], []
            num_sampled_nodes, num_sampled_edges = [seed.numel()], []
            try:
                for k in self.num_neighbors:
                    pos, owner = sample_incoming(self.csc, frontier, k, self.generator)
                    src = self.csc.row[pos]
                    new = torch.unique(src[local[src] < 0])
                    local[new] = torch.arange(count, count + new.numel())
                    count += new.numel()
                    rows.append(local[src])
                    cols.append(local[frontier[owner]])
                    edges.append(self.csc.edge_id[pos])
                    nodes.append(new)
                    num_sampled_nodes.append(new.numel())
                    num_sampled_edges.append(pos.numel())
                    frontier = new
                node = torch.cat(nodes)
            finally:
                local[torch.cat(nodes)] = -1
            cat = lambda parts: torch.cat(parts) if parts else torch.empty(0, dtype=torch.long)  # noqa: E731
            return SamplerOutput(
                node=node,
                row=cat(rows),
                col=cat(cols),
                edge=cat(edges),
                num_sampled_nodes=num_sampled_nodes,
                num_sampled_edges=num_sampled_edges,
            )

        def _sample_fn(self, seed, seed_time=None, **kwargs):
            if seed_time is not None:
                raise ValueError("temporal sampling (seed_time) is not supported by TorchNeighborSampler")
            if isinstance(seed, dict):
                raise TypeError("TorchNeighborSampler samples homogeneous graphs; got per-type seeds")
            return self.sample(seed)

        def sample_from_nodes(self, inputs, **kwargs):
            from torch_geometric.sampler.neighbor_sampler import node_sample

            return node_sample(inputs, self._sample_fn)

        def sample_from_edges(self, inputs, neg_sampling=None):
            from torch_geometric.sampler.neighbor_sampler import edge_sample

            return edge_sample(inputs, self._sample_fn, self.num_nodes, False, None, neg_sampling)

    return TorchNeighborSampler


def __getattr__(name: str) -> Any:
    if name == "TorchNeighborSampler":
        return _sampler_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def link_neighbor_loader(
    data,
    edge_type=None,
    *,
    edge_label_index=None,
    num_neighbors=(10, 10),
    batch_size: int = 1024,
    neg_sampling_ratio: float = 1.0,
    shuffle: bool = True,
    seed: int = 0,
):
    """Link mini-batches with sampled neighbourhoods, as PyG ``Data`` batches (``n_id``, ``e_id``,
    local ``edge_index``, edge attributes such as ``edge_type``, ``edge_label_index``, ``edge_label``).

    * homogeneous ``Data`` (e.g. the RGCN message graph: global ids + ``edge_type``): PyG's ``LinkLoader``
      driven by nbkit's pure-torch ``TorchNeighborSampler`` (works without compiled extensions; seeded);
      ``edge_label_index`` defaults to every edge of ``data``;
    * ``HeteroData`` + ``edge_type``: PyG's ``LinkNeighborLoader``, whose typed sampling needs ``pyg-lib``
      or ``torch-sparse`` (compiled wheels from data.pyg.org, not on PyPI); without them one clear
      ImportError says so and how to go homogeneous.
    """
    import torch
    from torch_geometric.data import HeteroData

    if isinstance(data, HeteroData):
        from torch_geometric.typing import WITH_PYG_LIB, WITH_TORCH_SPARSE

        if edge_type is None or edge_type not in data.edge_types:
            raise KeyError(f"edge type {edge_type} not in the graph; known: {data.edge_types[:5]}...")
        if not (WITH_PYG_LIB or WITH_TORCH_SPARSE):
            raise ImportError(
                "LinkNeighborLoader on HeteroData needs 'pyg-lib' or 'torch-sparse' for typed neighbour "
                "sampling; install the wheel "
                f"matching torch {torch.__version__} from https://data.pyg.org/whl/ (not on PyPI), or pass "
                "data.to_homogeneous() "
                "(node/edge types become attributes) to use nbkit's pure-torch sampler"
            )
        from torch_geometric.loader import LinkNeighborLoader

        return LinkNeighborLoader(
            data,
            num_neighbors=list(num_neighbors),
            edge_label_index=(
                edge_type,
                data[edge_type].edge_index if edge_label_index is None else edge_label_index,
            ),
            neg_sampling_ratio=neg_sampling_ratio,
            batch_size=batch_size,
            shuffle=shuffle,
        )
    from torch_geometric.loader import LinkLoader

    if edge_type is not None:
        raise ValueError(
            "edge_type selects target edges of a HeteroData; for homogeneous Data pass edge_label_index"
        )
    labels = (
        data.edge_index if edge_label_index is None else torch.as_tensor(edge_label_index, dtype=torch.long)
    )
    sampler = _sampler_class()(data, num_neighbors, seed=seed)
    return LinkLoader(
        data,
        link_sampler=sampler,
        edge_label_index=labels,
        neg_sampling_ratio=neg_sampling_ratio or None,
        batch_size=batch_size,
        shuffle=shuffle,
        generator=torch.Generator().manual_seed(seed),
    )
