"""Filtered ranking metrics and AUC: the one way every rung is scored.

Metrics follow the link-prediction literature: for every evaluated triple both the tail (h, r, ?) and
the head (?, r, t) are ranked against ALL entities, other known true triples (train/valid/test) are
filtered out, ties get the average rank ("realistic" rank), and MRR / Hits@k average both sides.
The field notes' AUC is computed as well, on FIXED evaluation negatives (one filtered corruption per
triple, drawn once per split with its own seed) so every rung is scored on the same pairs.
"""

from __future__ import annotations

from typing import Any

from nbkit.errors import UsageError
from nbkit.kg.graph import KGSplit
from nbkit.kg.ladder import ModelGraph, RungResult


def true_index(split: KGSplit):
    """(h, r) -> true tails and (r, t) -> true heads over all splits (for filtering); read-only.

    The Python loop over every triple is slow on a Hetionet-sized graph, and one scale run needs it twice
    (training's filter and :func:`cluster_oracle_mrr`): it is kept on the split object itself, for the
    same split tensors, so it lives exactly as long as the split."""
    parts = (split.train, split.valid, split.test)
    hit = vars(split).get("_true_index")
    if hit is not None and all(a is b for a, b in zip(hit[0], parts, strict=True)):
        return hit[1]
    tails: dict[tuple[int, int], list[int]] = {}
    heads: dict[tuple[int, int], list[int]] = {}
    for h, r, t in split.all_true().tolist():
        tails.setdefault((h, r), []).append(t)
        heads.setdefault((r, t), []).append(h)
    vars(split)["_true_index"] = (
        parts,
        (tails, heads),
    )  # not a dataclass field: equality and replace() ignore it
    return vars(split)["_true_index"][1]


def eval_negatives(split: KGSplit, which: str = "test", seed: int = 12345):
    """One filtered corruption per triple (tail for even rows, head for odd), fixed by ``seed``."""
    import torch

    trip = getattr(split, which)
    known = {tuple(x) for x in split.all_true().tolist()}
    gen = torch.Generator().manual_seed(seed)
    neg = trip.clone()
    for i in range(len(trip)):
        col = 2 if i % 2 == 0 else 0
        for _ in range(1000):
            cand = int(torch.randint(0, split.num_nodes, (1,), generator=gen))
            row = neg[i].tolist()
            row[col] = cand
            if tuple(row) not in known:
                neg[i, col] = cand
                break
    return neg


_FILTER_INDEX: dict[tuple, tuple] = {}


def _filter_index(triples, filt: dict, side: str):
    """(rows, cols) of the known true entities to filter out for each query of ``triples`` (rows ascending).

    Validation runs every few epochs on the same triples with the same filter: the Python loop over the
    triples is done once per (triples, filter, side) and kept (a few recent entries; an entry holds the
    objects themselves, so their ids cannot be reused while it lives). A batch takes its slice of it
    (:func:`_batch_filter`), so the number of entries does not grow with the number of batches."""
    import torch

    key = (id(triples), id(filt), side)
    hit = _FILTER_INDEX.get(key)
    if hit is not None and hit[0] is triples and hit[1] is filt:
        return hit[2]
    rows, cols = [], []
    for i, (hh, rr, tt) in enumerate(triples.tolist()):
        others = filt.get((hh, rr) if side == "tail" else (rr, tt), [])
        rows.extend([i] * len(others))
        cols.extend(others)
    out = (torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long))
    if len(_FILTER_INDEX) >= 8:
        _FILTER_INDEX.pop(next(iter(_FILTER_INDEX)))
    _FILTER_INDEX[key] = (triples, filt, out)
    return out


def _batch_filter(index, start: int, stop: int):
    """The part of a :func:`_filter_index` that belongs to queries ``start:stop``, rows renumbered from 0."""
    import torch

    rows, cols = index
    lo, hi = torch.searchsorted(rows, torch.tensor([start, stop])).tolist()
    return rows[lo:hi] - start, cols[lo:hi]


def filtered_ranks(score_all, triples, filt: dict, side: str, index=None):
    """Realistic filtered ranks (ties averaged) of the true entity among all entities (``index``: the
    filter index of these triples, when the caller has it — see :func:`_filter_index`).

    Rank = 1 + (entities scoring above the true one) + ½ (entities tying with it), counted over the
    entities that are neither the true one nor another known true answer. Both counts are taken over
    every entity, then what the excluded ones contributed is subtracted: ``score_all`` is only read
    (no copy of it is masked), and a few (query, entity) pairs are looked up instead of a second pass.
    """
    import torch

    h, r, t = triples.t()
    true_ent = (t if side == "tail" else h).to(score_all.device)
    n_q, n_e = score_all.shape
    target = score_all.gather(1, true_ent.unsqueeze(1))
    greater = (score_all > target).sum(1)
    equal = (score_all == target).sum(1)
    rows, cols = index if index is not None else _filter_index(triples, filt, side)
    # the excluded pairs: each query's other known true answers and its true entity, each pair once
    rows = torch.cat([rows.to(score_all.device), torch.arange(n_q, device=score_all.device)])
    pair = torch.unique(rows * n_e + torch.cat([cols.to(score_all.device), true_ent]))
    rows, cols = pair // n_e, pair % n_e
    excluded, at = score_all[rows, cols], target[rows, 0]
    greater = greater.index_add(0, rows, -(excluded > at).long())
    equal = equal.index_add(0, rows, -(excluded == at).long())
    return greater.float() + 1 + equal.float() / 2


# Queries scored at once while ranking: a block of about this many scores (4 bytes each) stays in a core's
# share of the cache while both counts read it; one [1,024 × 47k] block (188 MB) ran at about half the
# speed on a 2-core EPYC, and building it page by page cost as much again.
SCORE_BLOCK = 1 << 21


def _side_ranks(decoder, z, triples, side: str, index, device, rows: int):
    """Filtered ranks of one side's queries of ``triples``, ``rows`` queries scored at a time (same order)."""
    import torch

    out = []
    for lo in range(0, len(triples), rows):
        part = triples[lo : lo + rows]
        h, r, t = (x.to(device) for x in part.t())
        scores = decoder.score_tails(z, h, r) if side == "tail" else decoder.score_heads(z, r, t)
        out.append(filtered_ranks(scores, part, None, side, _batch_filter(index, lo, lo + len(part))).cpu())
    return torch.cat(out) if out else torch.zeros(0)


def eval_sample(n: int, max_triples: int = 0, sample_seed: int = 12345, sample_slice: int = 0):
    """Sorted indices of the evaluated triples out of ``n``, or None for all of them.

    ``max_triples > 0`` takes block ``sample_slice`` of ``max_triples`` indices from one seeded
    permutation: slices never share a triple, so a claim can be judged on a slice other than the one
    its settings were chosen on.
    """
    import torch

    if max_triples <= 0 or (max_triples >= n and sample_slice == 0):
        return None
    if (sample_slice + 1) * max_triples > n:
        raise ValueError(
            f"evaluation slice {sample_slice} of {max_triples} triples needs "
            f"{(sample_slice + 1) * max_triples} triples; "
            f"the split has {n}"
        )
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(sample_seed))
    return perm[sample_slice * max_triples : (sample_slice + 1) * max_triples].sort().values


def query_halves(n_triples: int, batch_size: int = 1024, seed: int = 12345):
    """Two disjoint halves of :func:`evaluate`'s per-query reciprocal ranks, split by TRIPLE (both
    queries of a triple fall in one half): (select, judge) boolean masks in ``reciprocal_ranks`` order.
    One half chooses, the other judges: a choice never scores itself."""
    import torch

    judge_triple = torch.zeros(n_triples, dtype=torch.bool)
    judge_triple[
        torch.randperm(n_triples, generator=torch.Generator().manual_seed(seed))[: n_triples // 2]
    ] = True
    order = []
    for start in range(
        0, n_triples, batch_size
    ):  # evaluate's order: a batch's tail queries, then its head queries
        block = judge_triple[start : start + batch_size]
        order += [block, block]
    judge = torch.cat(order) if order else torch.zeros(0, dtype=torch.bool)
    return ~judge, judge


def evaluate(
    model,
    graph: ModelGraph,
    split: KGSplit,
    which: str = "test",
    negatives=None,
    filt=None,
    batch_size: int = 1024,
    max_triples: int = 0,
    sample_seed: int = 12345,
    per_query: bool = False,
    sample_slice: int = 0,
) -> dict[str, Any]:
    """MRR, Hits@1/3/10 (filtered, both sides, ties averaged) and AUC on fixed negatives.

    ``max_triples > 0`` scores a seeded sample of that many triples (same sample for every model with
    the same ``sample_seed`` and ``sample_slice``, see :func:`eval_sample`) and reports its size as
    ``eval_triples``. ``per_query`` adds ``reciprocal_ranks``: one per query (tail and head query of
    each triple), in the same order on every call with the same triples — two evaluations of one run
    pair up query by query — and the MRR of the two halves of :func:`query_halves` (``mrr_select``,
    ``mrr_judge``).
    """
    import torch
    from sklearn.metrics import roc_auc_score

    model.eval()
    device = next(model.parameters()).device
    trip = getattr(split, which)
    if len(trip) == 0:
        raise UsageError(
            f"{split.name or 'dataset'}: the {which} split is empty ({split.sizes()}); nothing to evaluate"
        )
    idx = eval_sample(len(trip), max_triples, sample_seed, sample_slice)
    sampled = idx is not None
    if sampled:
        trip = trip[idx]
        negatives = negatives[idx] if negatives is not None else None
    tails, heads = filt if filt is not None else true_index(split)
    with torch.no_grad():
        z = model.embed(graph)
        # on CPU a cache-sized block of queries at a time; an accelerator takes the whole batch
        rows = max(1, SCORE_BLOCK // max(1, z.size(0))) if device.type == "cpu" else batch_size
        ranks = []
        for start in range(0, len(trip), batch_size):
            b = trip[start : start + batch_size]
            stop = start + len(b)
            for side, known in (("tail", tails), ("head", heads)):  # a batch's tail queries, then its heads
                index = _batch_filter(_filter_index(trip, known, side), start, stop)
                ranks.append(_side_ranks(model.decoder, z, b, side, index, device, rows))
        ranks = torch.cat(ranks)
        out = {
            "mrr": float((1.0 / ranks).mean()),
            "hits_at_1": float((ranks <= 1).float().mean()),
            "hits_at_3": float((ranks <= 3).float().mean()),
            "hits_at_10": float((ranks <= 10).float().mean()),
            "mean_rank": float(ranks.mean()),
        }
        if per_query:
            rr = 1.0 / ranks
            out["reciprocal_ranks"] = rr.tolist()
            select, judge = query_halves(len(trip), batch_size)
            out["mrr_select"], out["mrr_judge"] = float(rr[select].mean()), float(rr[judge].mean())
        if negatives is not None:
            pos = model.decoder(z, *(x.to(device) for x in trip.t())).cpu()
            neg = model.decoder(z, *(x.to(device) for x in negatives.t())).cpu()
            y = torch.cat([torch.ones_like(pos), torch.zeros_like(neg)])
            out["auc"] = float(roc_auc_score(y.numpy(), torch.cat([pos, neg]).numpy()))
    if sampled:
        out["eval_triples"] = len(trip)
    return out


def cluster_oracle_mrr(
    split: KGSplit,
    clusters: dict[str, int],
    which: str = "valid",
    max_triples: int = 0,
    sample_seed: int = 12345,
    sample_slice: int = 0,
) -> float:
    """The MRR ceiling of a graph whose tails are predictable only up to a latent cluster
    (``synthetic.synthetic_kg``): an oracle that knows each true entity's cluster puts every entity of
    that type and cluster first, in an order that does not depend on which one is true (the members of
    a cluster are exchangeable: no model can do better in expectation); filtered, both sides, on the
    same seeded sample of ``max_triples`` as :func:`evaluate`. With K candidates left in the cluster
    (the true one included, the other known true ones filtered away) the true one's rank is uniform
    on 1..K: expected reciprocal rank H_K / K (harmonic number). Scoring the cluster as one tie instead
    (rank 1 + (K − 1) / 2, what :func:`evaluate` gives tied scores) understates it ~2.5× at K ≈ 100,
    and a trained model, whose scores do not tie, passed that figure."""
    import torch

    trip = getattr(split, which)
    idx = eval_sample(len(trip), max_triples, sample_seed, sample_slice)
    if idx is not None:
        trip = trip[idx]
    names = split.entity_names()
    cl = torch.tensor([clusters[n] for n in names])
    group = split.node_type * (int(cl.max()) + 1) + cl  # (type, cluster) of every entity
    size = torch.bincount(group)
    harmonic = torch.cat(
        [
            torch.zeros(1, dtype=torch.float64),
            torch.cumsum(1.0 / torch.arange(1, int(size.max()) + 1, dtype=torch.float64), 0),
        ]
    )
    tails, heads = true_index(split)
    recip = []
    for h, r, t in trip.tolist():
        for true, others in ((t, tails.get((h, r), [])), (h, heads.get((r, t), []))):
            g = int(group[true])
            filtered = sum(1 for o in others if o != true and int(group[o]) == g)
            k = (
                int(size[g]) - filtered
            )  # the cluster's candidates left after filtering, the true one included
            recip.append(float(harmonic[k]) / k)
    return sum(recip) / len(recip)


def score_test(
    split: KGSplit, res: RungResult, model, graph, *, negatives=None, max_triples: int = 0
) -> dict[str, float]:
    """The one look at the test split: filtered MRR / Hits@k (and AUC on ``negatives``) of a chosen
    model, stored in ``res.test_metrics`` with ``test_`` keys and returned."""
    m = evaluate(model, graph, split, "test", negatives=negatives, max_triples=max_triples)
    res.test_metrics = {f"test_{k}": v for k, v in m.items()}
    return res.test_metrics
