"""Full-batch training, filtered ranking metrics and AUC, and the ablation ladder.

Metrics follow the link-prediction literature: for every test triple both the tail (h, r, ?) and the
head (?, r, t) are ranked against ALL entities, other known true triples (train/valid/test) are
filtered out, ties get the average rank ("realistic" rank), and MRR / Hits@k average both sides.
The field notes' AUC is computed as well, on FIXED evaluation negatives (one filtered corruption per test
triple, drawn once per split with its own seed) so every rung is scored on the same pairs.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

from nbkit.errors import UsageError
from nbkit.kg import models
from nbkit.kg.config import TrainConfig
from nbkit.kg.graph import KGSplit, build_hetero_data, message_graph
from nbkit.kg.neighbor_sampler import TorchNeighborSampler

ENCODERS = ("gcn", "hetero_sage", "rgcn", "none")
FULL_SCORE_MAX_NODES = 20000
NEGATIVES = ("uniform", "typed")


@dataclass(frozen=True)
class Rung:
    """One step of the ablation ladder: what the model knows about the graph."""

    key: int
    label: str
    typed: bool
    reverse: str
    encoder: str
    decoder: str
    negatives: str


LADDER: dict[int, Rung] = {
    1: Rung(1, "1 naive: one node type, GCN, undirected, uniform negatives", False, "undirected", "gcn", "dot", "uniform"),
    2: Rung(2, "2 typed nodes (per-type embeddings, hetero SAGE, stated direction only)", True, "none", "hetero_sage", "dot", "uniform"),
    3: Rung(3, "3 + explicit reverse relations (rel__inv)", True, "inverse", "hetero_sage", "dot", "uniform"),
    # "relational" = TrainConfig.decoder: DistMult, or ComplEx (DistMult in complex space, which can score
    # asymmetric relations); experiments.run_selection chooses between them on validation MRR.
    4: Rung(4, "4 RGCN + relation-specific (type-constrained) negatives + DistMult/ComplEx", True, "inverse", "rgcn", "relational", "typed"),
    # Rung 5 differs from 4 only in the negatives: every entity, not just type-valid ones. Ranking is
    # over ALL entities, and type-constrained negatives never teach the model to push the others down.
    5: Rung(5, "5 = rung 4 with negatives from all entities", True, "inverse", "rgcn", "relational", "uniform"),
    # Rung 6: the no-message-passing baseline the RGCN rungs are judged against (Lacroix et al. 2018):
    # ComplEx with reciprocal relations, 1-N cross-entropy over all entities, N3, Adagrad. Untyped.
    6: Rung(6, "6 ComplEx-N3, no message passing (reciprocal relations, 1-N cross-entropy, N3, Adagrad)", False, "none", "none",
            "complex_reciprocal", "uniform"),
}
MESSAGE_PASSING_RUNGS = (4, 5)  # the RGCN rungs, compared with rung 6 by the message-passing claim
BASELINE_RUNG = 6


@dataclass
class RungResult:
    """One trained rung. ``metrics``: VALIDATION figures at the best validation epoch (``valid_mrr``,
    ``valid_hits_at_k``, ``valid_auc`` when validation negatives were given). ``test_metrics`` stays
    empty until :func:`score_test` is called — once, at the end, for the chosen model."""

    rung: int
    label: str
    metrics: dict[str, float]
    history: dict[str, list] = field(default_factory=dict)
    train_seconds: float = 0.0
    epochs_run: int = 0
    interrupted: bool = False
    best_epoch: int = 0
    seed: int = 0
    test_metrics: dict[str, float] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {"rung": self.rung, "seed": self.seed, "label": self.label, **self.metrics, **self.test_metrics,
                "epochs": self.epochs_run, "best_epoch": self.best_epoch, "train_s": round(self.train_seconds, 1)}


# ---------------------------------------------------------------------------------------------
# graph inputs for a rung
# ---------------------------------------------------------------------------------------------
@dataclass
class ModelGraph:
    edge_index: Any
    edge_type: Any
    num_relations: int
    types: list[str]
    counts: list[int]
    edge_index_dict: dict | None = None

    def to(self, device):
        ei = {k: v.to(device) for k, v in self.edge_index_dict.items()} if self.edge_index_dict is not None else None
        return replace(self, edge_index=self.edge_index.to(device), edge_type=self.edge_type.to(device), edge_index_dict=ei)


def model_graph(split: KGSplit, reverse: str, hetero: bool) -> ModelGraph:
    mg = message_graph(split, reverse)
    ei_dict = None
    if hetero:
        import warnings

        with warnings.catch_warnings():
            # PyG warns about '__' in 'rel__inv'; it matters only for to_hetero's string keys, unused here.
            warnings.filterwarnings("ignore", message=".*double underscores.*")
            ei_dict = build_hetero_data(split, reverse).edge_index_dict
    return ModelGraph(mg.edge_index, mg.edge_type, mg.num_relations, list(split.entity_types), [len(split.entities[t]) for t in split.entity_types], ei_dict)


def build_model(split: KGSplit, rung: Rung, cfg: TrainConfig, graph: ModelGraph, features=None):
    if rung.encoder == "none":
        import torch

        node_input = models.NodeInput(split, cfg.complex_dim, typed=False)
        dec = models.DECODERS[rung.decoder](split.num_relations, cfg.complex_dim)
        with torch.no_grad():  # small initial factors, as in the paper: N3 and Adagrad start near zero
            node_input.table.weight.normal_(std=cfg.complex_init)
            dec.rel.normal_(std=cfg.complex_init)
        return models.LinkPredictor(node_input, models.NoEncoder(), dec)
    if not cfg.embed_lr >= 0:
        raise ValueError(f"embed_lr must be >= 0 (0 = the entity tables train with Adam at lr), got {cfg.embed_lr!r}")
    node_input = models.NodeInput(split, cfg.hidden, rung.typed, features=features,
                                  sparse=cfg.embed_lr > 0 and cfg.batch_size > 0)
    if cfg.input_init == "structural":
        node_input.init_from(models.structural_inputs(graph.edge_index, split.num_nodes, node_input.max_dim(), seed=cfg.seed))
    elif cfg.input_init != "random":
        raise ValueError(f"input_init must be 'random' or 'structural', got {cfg.input_init!r}")
    if rung.encoder == "gcn":
        enc = models.GCNEncoder(cfg.hidden, cfg.layers)
    elif rung.encoder == "hetero_sage":
        enc = models.HeteroSAGEEncoder(cfg.hidden, list(graph.edge_index_dict), cfg.layers, type_aggr=cfg.type_aggr)
    elif rung.encoder == "rgcn":
        enc = models.RGCNEncoder(cfg.hidden, graph.num_relations, cfg.layers, num_bases=cfg.num_bases, aggr=cfg.aggr, dropout=cfg.dropout)
    else:
        raise ValueError(f"encoder must be one of {ENCODERS}, got {rung.encoder!r}")
    name = cfg.decoder if rung.decoder == "relational" else rung.decoder
    if name not in models.DECODERS:
        raise ValueError(f"decoder must be one of {sorted(models.DECODERS)}, got {name!r}")
    dec = models.DECODERS[name](split.num_relations, cfg.hidden)
    return models.LinkPredictor(node_input, enc, dec)


# ---------------------------------------------------------------------------------------------
# negatives
# ---------------------------------------------------------------------------------------------
class NegativeSampler:
    """``uniform``: corrupt head or tail with any entity. ``typed``: only with entities whose node
    type occurs in that position of that relation in train (relation-specific negatives)."""

    def __init__(self, split: KGSplit, mode: str, generator):
        import torch

        if mode not in NEGATIVES:
            raise ValueError(f"negatives must be one of {NEGATIVES}, got {mode!r}")
        self.mode, self.gen, self.n = mode, generator, split.num_nodes
        if mode == "typed":
            nt = split.node_type
            R = split.num_relations
            cands = {"head": [], "tail": []}
            for side, col in (("head", 0), ("tail", 2)):
                for r in range(R):
                    rows = split.train[split.train[:, 1] == r]
                    types = torch.unique(nt[rows[:, col]]) if len(rows) else torch.unique(nt)
                    cands[side].append(torch.nonzero(torch.isin(nt, types)).flatten())
            self.tables, self.sizes, self.valid = {}, {}, {}
            for side, lst in cands.items():
                valid = torch.zeros(R, self.n, dtype=torch.bool)
                for r, c in enumerate(lst):
                    valid[r, c] = True
                self.valid[side] = valid
                width = max(len(c) for c in lst)
                table = torch.zeros(R, width, dtype=torch.long)
                for r, c in enumerate(lst):
                    table[r, : len(c)] = c
                self.tables[side] = table
                self.sizes[side] = torch.tensor([len(c) for c in lst])

    def sample(self, r, k: int, side: str):
        import torch

        if self.mode == "uniform":
            return torch.randint(0, self.n, (len(r), k), generator=self.gen)
        u = torch.rand(len(r), k, generator=self.gen)
        idx = (u * self.sizes[side][r].unsqueeze(1)).long()
        return self.tables[side][r.unsqueeze(1), idx]


# ---------------------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------------------
def true_index(split: KGSplit):
    """(h, r) -> true tails and (r, t) -> true heads over all splits (for filtering); read-only.

    The Python loop over every triple costs ~8 s on a 2M-triple graph, and one scale run needs it twice
    (training's filter and :func:`cluster_oracle_mrr`): it is kept on the split object itself, for the
    same split tensors, so it lives exactly as long as the split (on that graph it holds ~3M keys)."""
    parts = (split.train, split.valid, split.test)
    hit = vars(split).get("_true_index")
    if hit is not None and all(a is b for a, b in zip(hit[0], parts, strict=True)):
        return hit[1]
    tails: dict[tuple[int, int], list[int]] = {}
    heads: dict[tuple[int, int], list[int]] = {}
    for h, r, t in split.all_true().tolist():
        tails.setdefault((h, r), []).append(t)
        heads.setdefault((r, t), []).append(h)
    vars(split)["_true_index"] = (parts, (tails, heads))  # not a dataclass field: equality and replace() ignore it
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
    filter index of these triples, when the caller has it — see :func:`_filter_index`)."""

    h, r, t = triples.t()
    true_ent = t if side == "tail" else h
    scores = score_all.clone()
    target = scores.gather(1, true_ent.unsqueeze(1))
    rows, cols = index if index is not None else _filter_index(triples, filt, side)
    if len(rows):
        scores[rows, cols] = float("-inf")
    scores.scatter_(1, true_ent.unsqueeze(1), float("-inf"))  # the true entity itself is not a competitor
    greater = (scores > target).sum(1).float()
    equal = (scores == target).sum(1).float()  # ties with OTHER entities: averaged (half counted)
    return greater + 1 + equal / 2


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
        raise ValueError(f"evaluation slice {sample_slice} of {max_triples} triples needs {(sample_slice + 1) * max_triples} triples; "
                         f"the split has {n}")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(sample_seed))
    return perm[sample_slice * max_triples : (sample_slice + 1) * max_triples].sort().values


def query_halves(n_triples: int, batch_size: int = 1024, seed: int = 12345):
    """Two disjoint halves of :func:`evaluate`'s per-query reciprocal ranks, split by TRIPLE (both
    queries of a triple fall in one half): (select, judge) boolean masks in ``reciprocal_ranks`` order.
    One half chooses, the other judges: a choice never scores itself."""
    import torch

    judge_triple = torch.zeros(n_triples, dtype=torch.bool)
    judge_triple[torch.randperm(n_triples, generator=torch.Generator().manual_seed(seed))[: n_triples // 2]] = True
    order = []
    for start in range(0, n_triples, batch_size):  # evaluate's order: a batch's tail queries, then its head queries
        block = judge_triple[start : start + batch_size]
        order += [block, block]
    judge = torch.cat(order) if order else torch.zeros(0, dtype=torch.bool)
    return ~judge, judge


def evaluate(model, graph: ModelGraph, split: KGSplit, which: str = "test", negatives=None, filt=None, batch_size: int = 1024, max_triples: int = 0,
             sample_seed: int = 12345, per_query: bool = False, sample_slice: int = 0) -> dict[str, Any]:
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
        raise UsageError(f"{split.name or 'dataset'}: the {which} split is empty ({split.sizes()}); nothing to evaluate")
    idx = eval_sample(len(trip), max_triples, sample_seed, sample_slice)
    sampled = idx is not None
    if sampled:
        trip = trip[idx]
        negatives = negatives[idx] if negatives is not None else None
    tails, heads = filt if filt is not None else true_index(split)
    with torch.no_grad():
        z = model.embed(graph)
        ranks = []
        for start in range(0, len(trip), batch_size):
            b = trip[start : start + batch_size]
            h, r, t = (x.to(device) for x in b.t())
            st = model.decoder.score_tails(z, h, r).cpu()
            sh = model.decoder.score_heads(z, r, t).cpu()
            stop = start + len(b)
            ranks.append(filtered_ranks(st, b, tails, "tail", _batch_filter(_filter_index(trip, tails, "tail"), start, stop)))
            ranks.append(filtered_ranks(sh, b, heads, "head", _batch_filter(_filter_index(trip, heads, "head"), start, stop)))
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


def cluster_oracle_mrr(split: KGSplit, clusters: dict[str, int], which: str = "valid", max_triples: int = 0, sample_seed: int = 12345,
                       sample_slice: int = 0) -> float:
    """The MRR ceiling of a graph whose tails are predictable only up to a latent cluster
    (``triples.synthetic_kg``): an oracle that knows each true entity's cluster puts every entity of
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
    harmonic = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(1.0 / torch.arange(1, int(size.max()) + 1, dtype=torch.float64), 0)])
    tails, heads = true_index(split)
    recip = []
    for h, r, t in trip.tolist():
        for true, others in ((t, tails.get((h, r), [])), (h, heads.get((r, t), []))):
            g = int(group[true])
            filtered = sum(1 for o in others if o != true and int(group[o]) == g)
            k = int(size[g]) - filtered  # the cluster's candidates left after filtering, the true one included
            recip.append(float(harmonic[k]) / k)
    return sum(recip) / len(recip)


# ---------------------------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------------------------
def _sampled_loss(model, z, split, sampler, train, h, r, t, k, device):
    """Softmax cross-entropy of each positive against its k sampled corruptions, per side."""
    import torch
    import torch.nn.functional as F

    neg_t = sampler.sample(train[:, 1], k, "tail").to(device)
    neg_h = sampler.sample(train[:, 1], k, "head").to(device)
    pos = model.decoder(z, h, r, t)
    if split.num_nodes <= FULL_SCORE_MAX_NODES:
        # Score against every entity with one matmul and pick the negatives' columns: far cheaper
        # on CPU than gathering [B, k, hidden] tensors (whose backward is a slow scatter).
        s_t = model.decoder.score_tails(z, h, r).gather(1, neg_t)
        s_h = model.decoder.score_heads(z, r, t).gather(1, neg_h)
    else:
        s_t = model.decoder(z, h.unsqueeze(1).expand_as(neg_t), r.unsqueeze(1).expand_as(neg_t), neg_t)
        s_h = model.decoder(z, neg_h, r.unsqueeze(1).expand_as(neg_h), t.unsqueeze(1).expand_as(neg_h))
    target = torch.zeros(len(pos), dtype=torch.long, device=device)
    return F.cross_entropy(torch.cat([pos.unsqueeze(1), s_t], 1), target) + F.cross_entropy(torch.cat([pos.unsqueeze(1), s_h], 1), target)


def config_read_by(rung: Rung, cfg: TrainConfig) -> TrainConfig:
    """``cfg`` with every field that ``rung``'s training never reads set to its default: two configs equal
    under this train the same model (``experiments`` reuses a run instead of training it twice).
    Rung 6 reads only its own ``complex_*`` fields and the loop's (epochs, patience, seed, ...)."""
    ignored = set()
    if rung.encoder == "none":
        ignored |= {"hidden", "lr", "weight_decay", "layers", "num_negatives", "aggr", "num_bases", "dropout", "decoder", "type_aggr",
                    "eval_every", "batch_size", "num_neighbors", "full_graph", "eval_every_seconds", "embed_lr", "input_init"}
    else:
        ignored |= {"complex_dim", "complex_lr", "complex_n3", "complex_batch", "complex_init", "complex_eval_every"}
        if rung.encoder != "rgcn":
            ignored |= {"aggr", "num_bases", "dropout"}
        if rung.encoder != "hetero_sage":
            ignored |= {"type_aggr"}
        if rung.decoder != "relational":
            ignored |= {"decoder"}
    default = TrainConfig()
    return replace(cfg, **{k: getattr(default, k) for k in ignored})


def train_rung(split: KGSplit, rung: Rung, cfg: TrainConfig, *, device=None, live=None, progress: bool = True, valid_negs=None, features=None, trace_prefix: str | None = None):
    """Train one rung (full batch, or mini-batch when ``cfg.batch_size > 0``) on ``device`` (a
    ``torch.device``, resolved by the caller; default CPU); keeps the epoch with the best validation MRR.

    Returns ``(RungResult, model, graph)`` with validation metrics only (plus ``valid_auc`` on
    ``valid_negs``); the test split is not touched here (see :func:`score_test`). Ctrl-C
    (KeyboardInterrupt) stops training early and keeps what was learnt so far (``interrupted=True``).
    """
    import torch

    _check_split(split)
    torch.manual_seed(cfg.seed)
    device = torch.device("cpu") if device is None else torch.device(device)
    threads_before = torch.get_num_threads()
    if device.type == "cpu" and cfg.cpu_threads:
        torch.set_num_threads(cfg.cpu_threads)
    try:
        fn = _train_reciprocal if rung.encoder == "none" else _train_rung_minibatch if cfg.batch_size > 0 else _train_rung
        return fn(split, rung, cfg, device, live=live, progress=progress, valid_negs=valid_negs, features=features, trace_prefix=trace_prefix)
    finally:
        torch.set_num_threads(threads_before)


def _validate(model, graph, split, cfg, filt, history, epoch, best, live, name, bar, per_query: bool = False):
    """Validation MRR at ``epoch`` (recorded, plotted); returns ``best`` = (mrr, epoch, state, metrics) updated.
    ``per_query``: also keep this point's per-query reciprocal ranks in ``history["valid_reciprocal_ranks"]``."""
    m = evaluate(model, graph, split, "valid", filt=filt, max_triples=cfg.eval_max_triples, per_query=per_query, sample_slice=cfg.eval_slice)
    if per_query:
        history.setdefault("valid_reciprocal_ranks", []).append(m.pop("reciprocal_ranks"))
    history["valid_epoch"].append(epoch)
    history["valid_mrr"].append(m["mrr"])
    if live is not None:
        live.add(f"{name} valid MRR", epoch, m["mrr"])
    last_loss = (history["loss"] or history.get("step_loss") or [float("nan")])[-1]  # mid-epoch: the last step's loss
    bar.set_postfix(loss=f"{last_loss:.3f}", valid_mrr=f"{m['mrr']:.3f}")
    if m["mrr"] > best[0]:
        best = (m["mrr"], epoch, {k_: v.detach().clone() for k_, v in model.state_dict().items()}, m)
    return best


def _patience_spent(cfg, history, best) -> bool:
    """Early stopping on validation: ``cfg.patience`` evaluations in a row without a new best MRR."""
    return cfg.patience > 0 and sum(1 for e in history["valid_epoch"] if e > best[1]) >= cfg.patience


def _start_loop(rung, cfg, trace_prefix, progress):
    """(name, history, best, start time, epoch progress bar) of a full-batch or rung-6 training loop."""
    from tqdm.auto import tqdm

    name = trace_prefix or f"rung {rung.key}"
    history: dict[str, list] = {"epoch": [], "loss": [], "valid_epoch": [], "valid_mrr": []}
    bar = tqdm(range(1, cfg.epochs + 1), desc=name, disable=not progress, leave=False)
    return name, history, (-1.0, 0, None, None), time.perf_counter(), bar


def _epoch_end(model, graph, split, cfg, filt, history, epoch, loss, best, live, name, bar, start, every):
    """Record the epoch's loss, validate every ``every`` epochs; returns (best, stop): stop once early
    stopping's patience is spent or the time budget ``cfg.max_seconds`` is."""
    history["epoch"].append(epoch)
    history["loss"].append(loss)
    if live is not None:
        live.add(f"{name} loss", epoch, loss)
    if epoch % every == 0 or epoch == cfg.epochs:
        best = _validate(model, graph, split, cfg, filt, history, epoch, best, live, name, bar)
        if _patience_spent(cfg, history, best):
            return best, True
    return best, cfg.max_seconds is not None and time.perf_counter() - start > cfg.max_seconds


class _Stoppable:
    """Wraps a training loop: Ctrl-C (KeyboardInterrupt, SIGTERM's Terminated too) ends it cleanly, keeping
    what was learnt (``interrupted`` says so); the progress bar closes either way. Shared by the full-batch,
    rung-6 and mini-batch loops."""

    def __init__(self, bar):
        self.bar, self.interrupted = bar, False

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        self.bar.close()
        self.interrupted = kind is not None and issubclass(kind, KeyboardInterrupt)
        return self.interrupted


def _finish(model, graph, split, rung, cfg, filt, history, best, valid_negs, seconds, interrupted):
    """Restore the best-validation weights and score them on the validation split; package the result.
    Without ``valid_negs`` (no AUC to add) the figures of that validation are those weights' scores as they
    stand (evaluation is deterministic): reused, not recomputed — on a 47k-entity graph one evaluation is
    a full-graph forward pass."""
    if best[2] is not None:
        model.load_state_dict(best[2])
    if valid_negs is None and best[3] is not None:
        m = best[3]
    else:
        # per_query: the MRR of each half of the validation queries too (``valid_mrr_select`` / ``valid_mrr_judge``),
        # so a choice between runs can be made on one half and judged on the other
        m = evaluate(model, graph, split, "valid", negatives=valid_negs, filt=filt, max_triples=cfg.eval_max_triples, per_query=True,
                     sample_slice=cfg.eval_slice)
        m.pop("reciprocal_ranks")
    metrics = {f"valid_{k}": v for k, v in m.items()}
    res = RungResult(rung.key, rung.label, metrics, history, seconds, len(history["epoch"]), interrupted, best[1], cfg.seed)
    return res, model, graph


def score_test(split: KGSplit, res: RungResult, model, graph, *, negatives=None, max_triples: int = 0) -> dict[str, float]:
    """The one look at the test split: filtered MRR / Hits@k (and AUC on ``negatives``) of a chosen
    model, stored in ``res.test_metrics`` with ``test_`` keys and returned."""
    m = evaluate(model, graph, split, "test", negatives=negatives, max_triples=max_triples)
    res.test_metrics = {f"test_{k}": v for k, v in m.items()}
    return res.test_metrics


def _check_split(split: KGSplit) -> None:
    """Training needs train triples, and validation triples to choose the epoch on (UsageError, not torch.cat)."""
    empty = [name for name in ("train", "valid") if len(getattr(split, name)) == 0]
    if empty:
        raise UsageError(
            f"{split.name or 'dataset'}: the {' and '.join(empty)} split(s) are empty ({split.sizes()}); "
            "training needs train triples and validation triples to choose the epoch on — give a bigger file or other shares"
        )


def _fused(device) -> bool | None:
    """``fused=True`` for Adam / Adagrad where torch has the fused kernel (CPU, CUDA): one pass over each
    parameter instead of one per update term. On hetero SAGE's ~10M stacked weights Adam's step took
    74 ms unfused vs 17 ms fused (measured here, 1 thread); the update is the same formula (last-bit
    rounding differs), still deterministic by seed."""
    return True if device.type in ("cpu", "cuda") else None


def _train_rung(split, rung, cfg, device, *, live, progress, valid_negs, features, trace_prefix):
    import torch
    import torch.nn.functional as F

    graph = model_graph(split, rung.reverse, hetero=rung.encoder == "hetero_sage").to(device)
    model = build_model(split, rung, cfg, graph, features=features).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, fused=_fused(device))
    gen = torch.Generator().manual_seed(cfg.seed)
    sampler = NegativeSampler(split, rung.negatives, gen)
    filt = true_index(split)
    train = split.train
    h, r, t = (x.to(device) for x in train.t())
    k = cfg.num_negatives
    name, history, best, start, bar = _start_loop(rung, cfg, trace_prefix, progress)
    with _Stoppable(bar) as run:
        for epoch in bar:
            model.train()
            opt.zero_grad()
            z = model.embed(graph)
            if k <= 0:
                # k <= 0: every candidate is a negative (1-vs-all softmax); under "typed" negatives the
                # candidates are the relation's type-valid entities only.
                s_t = model.decoder.score_tails(z, h, r)
                s_h = model.decoder.score_heads(z, r, t)
                if sampler.mode == "typed":
                    s_t = s_t.masked_fill(~sampler.valid["tail"][r].to(device), float("-inf"))
                    s_h = s_h.masked_fill(~sampler.valid["head"][r].to(device), float("-inf"))
                loss = F.cross_entropy(s_t, t) + F.cross_entropy(s_h, h)
            else:
                loss = _sampled_loss(model, z, split, sampler, train, h, r, t, k, device)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"{name}: loss became {float(loss.detach())} at epoch {epoch} (lr={cfg.lr}); lower the learning rate")
            loss.backward()
            opt.step()
            best, stop = _epoch_end(model, graph, split, cfg, filt, history, epoch, float(loss.detach()), best, live, name, bar, start, cfg.eval_every)
            if stop:
                break
    return _finish(model, graph, split, rung, cfg, filt, history, best, valid_negs, time.perf_counter() - start, run.interrupted)


def _train_reciprocal(split, rung, cfg, device, *, live, progress, valid_negs, features, trace_prefix):
    """Rung 6 (no message passing): every train triple (h, r, t) also as (t, r + R, h); each epoch,
    shuffled mini-batches of ``cfg.complex_batch`` tail queries, softmax cross-entropy of the true tail
    against EVERY entity (1-N) plus ``cfg.complex_n3`` × N3 / batch size, Adagrad at ``cfg.complex_lr``.
    Validation every ``cfg.complex_eval_every`` epochs; early stopping and the best-epoch rule as the other rungs."""
    import torch
    import torch.nn.functional as F

    if features:
        raise ValueError(f"rung {rung.key} learns one embedding per entity; it takes no node features")
    graph = model_graph(split, rung.reverse, hetero=False).to(device)  # not read by the model; evaluate() takes it
    model = build_model(split, rung, cfg, graph).to(device)
    opt = torch.optim.Adagrad(model.parameters(), lr=cfg.complex_lr, fused=_fused(device))
    gen = torch.Generator().manual_seed(cfg.seed)
    filt = true_index(split)
    h, r, t = split.train.t()
    queries = torch.cat([split.train, torch.stack([t, r + split.num_relations, h], 1)])
    name, history, best, start, bar = _start_loop(rung, cfg, trace_prefix, progress)
    with _Stoppable(bar) as run:
        for epoch in bar:
            model.train()
            perm = torch.randperm(len(queries), generator=gen)
            total = 0.0
            for lo in range(0, len(queries), cfg.complex_batch):
                qh, qr, qt = queries[perm[lo : lo + cfg.complex_batch]].to(device).t()
                z = model.node_input.table.weight
                fit = F.cross_entropy(model.decoder.score_tails(z, qh, qr), qt)
                loss = fit + cfg.complex_n3 * model.decoder.n3(z, qh, qr, qt) / len(qh)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(fit.detach()) * len(qh)
            if not math.isfinite(total):
                raise FloatingPointError(f"{name}: loss became {total} at epoch {epoch} (complex_lr={cfg.complex_lr}); lower the learning rate")
            best, stop = _epoch_end(model, graph, split, cfg, filt, history, epoch, total / len(queries), best, live, name, bar, start, cfg.complex_eval_every)
            if stop:
                break
    return _finish(model, graph, split, rung, cfg, filt, history, best, valid_negs, time.perf_counter() - start, run.interrupted)


def negative_pool(sampler: NegativeSampler, r, k: int, side: str, generator):
    """``k`` distinct candidate entities shared by a mini-batch: any entity (uniform) or, for typed
    negatives, entities whose type is valid in that position for at least one relation of the batch
    (each positive then masks the ones invalid for its own relation)."""
    import torch

    if sampler.mode == "uniform":
        return torch.randperm(sampler.n, generator=generator)[:k]
    cand = torch.nonzero(sampler.valid[side][torch.unique(r)].any(0)).flatten()
    return cand[torch.randperm(len(cand), generator=generator)[:k]]


def minibatch_loss(model, batch, graph: ModelGraph, node_sampler, sampler: NegativeSampler, k: int, device, generator):
    """Loss of one mini-batch of (h, r, t) triples.

    Seeds = heads, tails and the two shared negative pools; ``node_sampler`` (a PyG sampler) draws their
    multi-hop incoming neighbourhood and the encoder runs on that subgraph — or, with
    ``node_sampler=None``, on the whole message graph (``graph`` on ``device``): the loss is then
    identical and only the message passing differs. Each positive is scored against the pool of its
    side (softmax cross-entropy, pool entries equal to the true entity or type-invalid for the
    relation masked).
    """
    import torch
    import torch.nn.functional as F

    h, r, t = batch.t()
    B = len(batch)
    pool_t = negative_pool(sampler, r, k, "tail", generator)
    pool_h = negative_pool(sampler, r, k, "head", generator)
    if node_sampler is None:  # full-graph message passing, same loss
        z = model.embed(graph)
        seeds = torch.cat([h, t, pool_t, pool_h])
        inv = torch.arange(len(seeds))
        z = z[seeds.to(device)]
        info = {"sampled_nodes": sum(graph.counts), "sampled_edges": int(graph.edge_index.size(1))}
    else:
        seeds, inv = torch.unique(torch.cat([h, t, pool_t, pool_h]), return_inverse=True)
        out = node_sampler.sample(seeds)  # seeds come first in out.node, so local id == index in seeds
        sub = replace(graph, edge_index=torch.stack([out.row, out.col]).to(device), edge_type=graph.edge_type[out.edge].to(device), edge_index_dict=None)
        z = model.embed(sub, out.node.to(device))
        info = {"sampled_nodes": int(out.node.numel()), "sampled_edges": int(out.row.numel())}
    kt = len(pool_t)
    hl, tl = inv[:B].to(device), inv[B : 2 * B].to(device)
    ptl, phl = inv[2 * B : 2 * B + kt].to(device), inv[2 * B + kt :].to(device)
    rd = r.to(device)
    pos = model.decoder(z, hl, rd, tl)
    s_t = model.decoder.score_tails(z, hl, rd, cand=ptl)
    s_h = model.decoder.score_heads(z, rd, tl, cand=phl)
    bad_t = pool_t.unsqueeze(0) == t.unsqueeze(1)
    bad_h = pool_h.unsqueeze(0) == h.unsqueeze(1)
    if sampler.mode == "typed":
        bad_t |= ~sampler.valid["tail"][r][:, pool_t]
        bad_h |= ~sampler.valid["head"][r][:, pool_h]
    s_t = s_t.masked_fill(bad_t.to(device), float("-inf"))
    s_h = s_h.masked_fill(bad_h.to(device), float("-inf"))
    target = torch.zeros(B, dtype=torch.long, device=device)
    loss = F.cross_entropy(torch.cat([pos.unsqueeze(1), s_t], 1), target) + F.cross_entropy(torch.cat([pos.unsqueeze(1), s_h], 1), target)
    return loss, info


def _minibatch_optimizers(model, cfg: TrainConfig) -> list:
    """Adam at ``cfg.lr`` for every parameter; with ``cfg.embed_lr > 0`` the per-entity input tables apart,
    in their own Adagrad at that rate (their gradients are sparse: only the rows a step touched)."""
    import torch

    tables = [m.weight for m in model.node_input.modules() if isinstance(m, torch.nn.Embedding)] if cfg.embed_lr > 0 else []
    ids = {id(p) for p in tables}
    rest = [p for p in model.parameters() if id(p) not in ids]
    opts = [torch.optim.Adam(rest, lr=cfg.lr, weight_decay=cfg.weight_decay)]
    if tables:
        # Adagrad leaves a row whose gradient is zero exactly where it was (Adam's momentum would keep moving
        # it), so sparse and dense gradients give the same update: full-graph mode (dense) optimises alike.
        opts.append(torch.optim.Adagrad(tables, lr=cfg.embed_lr))
    return opts


def _train_rung_minibatch(split, rung, cfg, device, *, live, progress, valid_negs, features, trace_prefix):
    """Mini-batch twin of ``_train_rung``: neighbour-sampled subgraphs (or, with ``cfg.full_graph``, the
    whole message graph) for training, the full message graph for validation embeddings; same model,
    metrics and best-epoch rule. Under ``cfg.max_seconds`` the budget counts training time only
    (validation excluded); ``cfg.eval_every_seconds`` adds mid-epoch validation points."""
    import torch
    from torch_geometric.data import Data
    from tqdm.auto import tqdm

    name = trace_prefix or f"rung {rung.key}"
    if rung.encoder == "hetero_sage":
        raise ValueError(
            f"{name}: mini-batch training (batch_size={cfg.batch_size}) runs the global-graph encoders "
            "(gcn, rgcn: rungs 1, 4, 5); this rung's per-type HeteroConv trains full-batch (batch_size=0)"
        )
    if cfg.num_negatives <= 0:
        raise ValueError(
            f"{name}: mini-batch training needs num_negatives > 0 (the size of the shared negative pool per batch); "
            "0 means 'score every entity', which only full-batch training (batch_size=0) does"
        )
    if not cfg.full_graph and len(cfg.num_neighbors) != cfg.layers:
        raise ValueError(f"num_neighbors={tuple(cfg.num_neighbors)} gives {len(cfg.num_neighbors)} hops but the encoder has layers={cfg.layers}; give one fan-out per layer")
    graph = model_graph(split, rung.reverse, hetero=False)  # CPU copy: the sampler reads it
    eval_graph = graph.to(device)
    model = build_model(split, rung, cfg, graph, features=features).to(device)
    opts = _minibatch_optimizers(model, cfg)
    gen = torch.Generator().manual_seed(cfg.seed)
    sampler = NegativeSampler(split, rung.negatives, gen)
    node_sampler = None if cfg.full_graph else TorchNeighborSampler(Data(edge_index=graph.edge_index, num_nodes=split.num_nodes), cfg.num_neighbors, generator=gen)
    filt = true_index(split)
    train = split.train
    steps = math.ceil(len(train) / cfg.batch_size)
    history: dict[str, list] = {"epoch": [], "loss": [], "valid_epoch": [], "valid_mrr": [], "step_loss": [], "sampled_nodes": [], "sampled_edges": [],
                                "valid_step": [], "valid_train_s": [], "eval_s": []}
    best = (-1.0, 0, None, None)
    start = time.perf_counter()
    eval_s = 0.0  # seconds spent validating: steps/s counts training only
    last_eval = 0.0
    out_of_time = False

    def validate(epoch_mark):
        nonlocal best, eval_s, last_eval
        t0 = time.perf_counter()
        best = _validate(model, eval_graph, split, cfg, filt, history, epoch_mark, best, live, name, bar, per_query=True)
        model.train()
        eval_s += time.perf_counter() - t0
        last_eval = time.perf_counter() - start - eval_s
        history["valid_step"].append(len(history["step_loss"]))
        history["valid_train_s"].append(round(last_eval, 2))
        history["eval_s"].append(round(eval_s, 2))

    # Under a time budget the step count is unknown: the bar then shows steps and rate, not an ETA.
    bar = tqdm(total=None if cfg.max_seconds is not None else cfg.epochs * steps, desc=f"{name} (mini-batch)", unit="step", disable=not progress, leave=False)
    with _Stoppable(bar) as run:
        for epoch in range(1, cfg.epochs + 1):
            model.train()
            perm = torch.randperm(len(train), generator=gen)
            losses = []
            for i in range(steps):
                batch = train[perm[i * cfg.batch_size : (i + 1) * cfg.batch_size]]
                for opt in opts:
                    opt.zero_grad()
                loss, info = minibatch_loss(model, batch, eval_graph if cfg.full_graph else graph, node_sampler, sampler, cfg.num_negatives, device, gen)
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"{name}: loss became {float(loss.detach())} at epoch {epoch} step {i + 1} (lr={cfg.lr}); lower the learning rate")
                loss.backward()
                # Adagrad's sparse update builds sparse tensors from indices it produced itself: checking their
                # invariants is switched off explicitly (torch warns when it is off only implicitly)
                with torch.sparse.check_sparse_tensor_invariants(enable=False):
                    for opt in opts:
                        opt.step()
                losses.append(float(loss.detach()))
                history["step_loss"].append(losses[-1])
                history["sampled_nodes"].append(info["sampled_nodes"])
                history["sampled_edges"].append(info["sampled_edges"])
                if live is not None:
                    live.add(f"{name} loss", epoch - 1 + (i + 1) / steps, losses[-1])
                bar.update(1)
                trained = time.perf_counter() - start - eval_s
                if cfg.max_seconds is not None and trained > cfg.max_seconds:
                    out_of_time = True
                    break
                if cfg.eval_every_seconds and trained - last_eval >= cfg.eval_every_seconds and i + 1 < steps:
                    validate(epoch - 1 + (i + 1) / steps)  # mid-epoch point of the learning curve
            history["epoch"].append(epoch)
            history["loss"].append(sum(losses) / len(losses))
            if epoch % cfg.eval_every == 0 or epoch == cfg.epochs or out_of_time:
                validate(epoch - 1 + len(losses) / steps)
                if _patience_spent(cfg, history, best):
                    break
            if out_of_time:
                break
    return _finish(model, eval_graph, split, rung, cfg, filt, history, best, valid_negs, time.perf_counter() - start, run.interrupted)
