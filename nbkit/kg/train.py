"""Training one rung: full batch, mini-batch on sampled neighbourhoods, and rung 6's own loop.

Every loop keeps the epoch with the best MRR on the SELECTING half of the validation queries
(:func:`nbkit.kg.ranking.query_halves`; :class:`Loop` holds that state), stops early on that half
(``patience``) or at a step or time budget, and returns ``(RungResult, model, graph)`` with validation
figures only — the MRR and AUC of each half apart, so the other half judges a run its own choices never
looked at; the test split is scored once, elsewhere (:func:`nbkit.kg.ranking.score_test`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

from nbkit.errors import UsageError
from nbkit.kg import neighbor_sampler
from nbkit.kg.config import TrainConfig
from nbkit.kg.graph import KGSplit
from nbkit.kg.ladder import NEGATIVES, ModelGraph, Rung, RungResult, build_model, model_graph
from nbkit.kg.ranking import eval_sample, evaluate, query_halves, true_index

FULL_SCORE_MAX_NODES = 20000


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
    return F.cross_entropy(torch.cat([pos.unsqueeze(1), s_t], 1), target) + F.cross_entropy(
        torch.cat([pos.unsqueeze(1), s_h], 1), target
    )


def train_rung(
    split: KGSplit,
    rung: Rung,
    cfg: TrainConfig,
    *,
    device=None,
    live=None,
    progress: bool = True,
    valid_negs=None,
    features=None,
    trace_prefix: str | None = None,
):
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
        fn = (
            _train_reciprocal
            if rung.encoder == "none"
            else _train_rung_minibatch
            if cfg.batch_size > 0
            else _train_rung
        )
        return fn(
            split,
            rung,
            cfg,
            device,
            live=live,
            progress=progress,
            valid_negs=valid_negs,
            features=features,
            trace_prefix=trace_prefix,
        )
    finally:
        torch.set_num_threads(threads_before)


@dataclass
class Loop:
    """The state one training loop carries: where it reports (``name``, the live figure, the progress
    bar), what it recorded (``history``), the best validation point so far and its clock.

    ``best_*`` is the validation point with the highest MRR on the selecting half of the validation
    queries: its epoch (a fraction of one for mid-epoch points of the mini-batch loop), the weights then
    (restored at the end) and its figures."""

    name: str
    cfg: TrainConfig
    split: KGSplit
    model: Any
    graph: ModelGraph  # the message graph validation embeds with
    filt: Any  # true_index(split): the known true triples filtered out of every ranking
    live: Any = None
    bar: Any = None
    history: dict[str, list] = field(
        default_factory=lambda: {
            "epoch": [],
            "loss": [],
            "valid_epoch": [],
            "valid_mrr": [],
            "valid_mrr_select": [],
        }
    )
    start: float = field(default_factory=time.perf_counter)
    best_mrr: float = -1.0
    best_epoch: float = 0
    best_state: dict | None = None
    best_metrics: dict | None = None

    def validate(self, epoch: float, per_query: bool = False) -> None:
        """Validation MRR at ``epoch`` (recorded, plotted); a new best MRR on the selecting half keeps the
        weights and figures. ``per_query``: also keep this point's per-query reciprocal ranks in
        ``history["valid_reciprocal_ranks"]``."""
        cfg, history = self.cfg, self.history
        m = evaluate(
            self.model,
            self.graph,
            self.split,
            "valid",
            filt=self.filt,
            max_triples=cfg.eval_max_triples,
            per_query=True,
            sample_slice=cfg.eval_slice,
        )
        ranks = m.pop("reciprocal_ranks")
        if per_query:
            history.setdefault("valid_reciprocal_ranks", []).append(ranks)
        history["valid_epoch"].append(epoch)
        history["valid_mrr"].append(m["mrr"])
        history["valid_mrr_select"].append(m["mrr_select"])
        if self.live is not None:
            self.live.add(f"{self.name} valid MRR", epoch, m["mrr"])
        # mid-epoch: the last step's loss (none yet at a step-0 point)
        losses = history["loss"] or history.get("step_loss")
        shown = {"loss": f"{losses[-1]:.3f}"} if losses else {}
        self.bar.set_postfix(**shown, valid_mrr=f"{m['mrr']:.3f}")
        if m["mrr_select"] > self.best_mrr:
            self.best_mrr, self.best_epoch, self.best_metrics = m["mrr_select"], epoch, m
            self.best_state = {k_: v.detach().clone() for k_, v in self.model.state_dict().items()}

    def patience_spent(self) -> bool:
        """Early stopping on the selecting half: ``cfg.patience`` evaluations in a row without a new best
        MRR there."""
        since_best = sum(1 for e in self.history["valid_epoch"] if e > self.best_epoch)
        return self.cfg.patience > 0 and since_best >= self.cfg.patience

    def epoch_end(self, epoch: int, loss: float, every: int) -> bool:
        """Record the epoch's loss, validate every ``every`` epochs; True once early stopping's patience
        is spent or the time budget ``cfg.max_seconds`` is."""
        self.history["epoch"].append(epoch)
        self.history["loss"].append(loss)
        if self.live is not None:
            self.live.add(f"{self.name} loss", epoch, loss)
        if epoch % every == 0 or epoch == self.cfg.epochs:
            self.validate(epoch)
            if self.patience_spent():
                return True
        return self.cfg.max_seconds is not None and time.perf_counter() - self.start > self.cfg.max_seconds

    def finish(self, rung: Rung, valid_negs, interrupted: bool) -> tuple[RungResult, Any, ModelGraph]:
        """Restore the best weights (chosen on the selecting half) and package the result: that point's
        validation figures (evaluation is deterministic, so they are reused, not recomputed — on a big
        graph one evaluation is a full-graph forward pass), plus the AUC on ``valid_negs`` over all
        validation triples and over each half apart (:func:`auc_halves`)."""
        seconds = time.perf_counter() - self.start
        cfg, model = self.cfg, self.model
        if self.best_state is not None:
            model.load_state_dict(self.best_state)
        if self.best_metrics is not None:
            m = dict(self.best_metrics)
        else:
            m = evaluate(
                model,
                self.graph,
                self.split,
                "valid",
                filt=self.filt,
                max_triples=cfg.eval_max_triples,
                per_query=True,
                sample_slice=cfg.eval_slice,
            )
            m.pop("reciprocal_ranks")
        if valid_negs is not None:
            m.update(auc_halves(model, self.graph, self.split, valid_negs, cfg))
        metrics = {f"valid_{k}": v for k, v in m.items()}
        res = RungResult(
            rung.key,
            rung.label,
            metrics,
            self.history,
            seconds,
            len(self.history["epoch"]),
            interrupted,
            self.best_epoch,
            cfg.seed,
        )
        return res, model, self.graph


def auc_halves(model, graph: ModelGraph, split: KGSplit, negatives, cfg: TrainConfig) -> dict[str, float]:
    """The field notes' AUC: each validation triple's score against its fixed negative (one filtered
    corruption per triple), over every evaluated triple (``auc``) and over each half of
    :func:`~nbkit.kg.ranking.query_halves` apart (``auc_select``, ``auc_judge``): the halves are split by
    triple, so the judging half's AUC rests on triples no choice of the run looked at."""
    import torch
    from sklearn.metrics import roc_auc_score

    triples = split.valid
    idx = eval_sample(len(triples), cfg.eval_max_triples, sample_slice=cfg.eval_slice)
    if idx is not None:
        triples, negatives = triples[idx], negatives[idx]
    model.eval()
    device = next(model.parameters()).device
    with torch.no_grad():
        z = model.embed(graph)
        pos = model.decoder(z, *(x.to(device) for x in triples.t())).cpu()
        neg = model.decoder(z, *(x.to(device) for x in negatives.t())).cpu()
    # query_halves orders queries as evaluate does: per batch of 1,024 triples, their tail queries, then
    # their head queries (the same triples): a triple's half is its tail query's.
    _, judge_q = query_halves(len(triples))
    n, bs = len(triples), 1024
    judge = torch.cat([judge_q[2 * lo : 2 * lo + min(bs, n - lo)] for lo in range(0, n, bs)])

    def auc(mask) -> float:
        y = torch.cat([torch.ones(int(mask.sum())), torch.zeros(int(mask.sum()))])
        return float(roc_auc_score(y.numpy(), torch.cat([pos[mask], neg[mask]]).numpy()))

    everything = torch.ones(n, dtype=torch.bool)
    return {"auc": auc(everything), "auc_select": auc(~judge), "auc_judge": auc(judge)}


def _epoch_bar(name: str, cfg: TrainConfig, progress: bool):
    """The epoch progress bar of a full-batch or rung-6 training loop."""
    from tqdm.auto import tqdm

    return tqdm(range(1, cfg.epochs + 1), desc=name, disable=not progress, leave=False)


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


def _check_split(split: KGSplit) -> None:
    """Training needs train triples, and validation triples to choose the epoch on (UsageError, not
    torch.cat)."""
    empty = [name for name in ("train", "valid") if len(getattr(split, name)) == 0]
    if empty:
        raise UsageError(
            f"{split.name or 'dataset'}: the {' and '.join(empty)} split(s) are empty ({split.sizes()}); "
            "training needs train triples and validation triples to choose the epoch on — give a bigger file "
            "or other shares"
        )


def _fused(device) -> bool | None:
    """``fused=True`` for Adam / Adagrad where torch has the fused kernel (CPU, CUDA): one pass over each
    parameter instead of one per update term (several times faster on hetero SAGE's stacked weights);
    the update is the same formula (last-bit rounding differs), still deterministic by seed."""
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
    name = trace_prefix or f"rung {rung.key}"
    bar = _epoch_bar(name, cfg, progress)
    loop = Loop(name, cfg, split, model, graph, filt, live, bar)
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
                raise FloatingPointError(
                    f"{name}: loss became {float(loss.detach())} at epoch {epoch} (lr={cfg.lr}); lower the "
                    "learning rate"
                )
            loss.backward()
            opt.step()
            if loop.epoch_end(epoch, float(loss.detach()), cfg.eval_every):
                break
    return loop.finish(rung, valid_negs, run.interrupted)


def _train_reciprocal(split, rung, cfg, device, *, live, progress, valid_negs, features, trace_prefix):
    """Rung 6 (no message passing): every train triple (h, r, t) also as (t, r + R, h); each epoch,
    shuffled mini-batches of ``cfg.complex_batch`` tail queries, softmax cross-entropy of the true tail
    against EVERY entity (1-N) plus ``cfg.complex_n3`` × N3 / batch size, Adagrad at ``cfg.complex_lr``.
    Validation every ``cfg.complex_eval_every`` epochs; early stopping and the best-epoch rule as the
    other rungs."""
    import torch
    import torch.nn.functional as F

    if features:
        raise ValueError(f"rung {rung.key} learns one embedding per entity; it takes no node features")
    graph = model_graph(split, rung.reverse, hetero=False).to(
        device
    )  # not read by the model; evaluate() takes it
    model = build_model(split, rung, cfg, graph).to(device)
    opt = torch.optim.Adagrad(model.parameters(), lr=cfg.complex_lr, fused=_fused(device))
    gen = torch.Generator().manual_seed(cfg.seed)
    filt = true_index(split)
    h, r, t = split.train.t()
    queries = torch.cat([split.train, torch.stack([t, r + split.num_relations, h], 1)])
    name = trace_prefix or f"rung {rung.key}"
    bar = _epoch_bar(name, cfg, progress)
    loop = Loop(name, cfg, split, model, graph, filt, live, bar)
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
                raise FloatingPointError(
                    f"{name}: loss became {total} at epoch {epoch} (complex_lr={cfg.complex_lr}); lower the "
                    "learning rate"
                )
            if loop.epoch_end(epoch, total / len(queries), cfg.complex_eval_every):
                break
    return loop.finish(rung, valid_negs, run.interrupted)


def negative_pool(sampler: NegativeSampler, r, k: int, side: str, generator):
    """``k`` distinct candidate entities shared by a mini-batch: any entity (uniform) or, for typed
    negatives, entities whose type is valid in that position for at least one relation of the batch
    (each positive then masks the ones invalid for its own relation)."""
    import torch

    if sampler.mode == "uniform":
        return torch.randperm(sampler.n, generator=generator)[:k]
    cand = torch.nonzero(sampler.valid[side][torch.unique(r)].any(0)).flatten()
    return cand[torch.randperm(len(cand), generator=generator)[:k]]


def minibatch_loss(
    model, batch, graph: ModelGraph, node_sampler, sampler: NegativeSampler, k: int, device, generator
):
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
        sub = replace(
            graph,
            edge_index=torch.stack([out.row, out.col]).to(device),
            edge_type=graph.edge_type[out.edge].to(device),
            edge_index_dict=None,
        )
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
    loss = F.cross_entropy(torch.cat([pos.unsqueeze(1), s_t], 1), target) + F.cross_entropy(
        torch.cat([pos.unsqueeze(1), s_h], 1), target
    )
    return loss, info


def _minibatch_optimizers(model, cfg: TrainConfig) -> list:
    """Adam at ``cfg.lr`` for every parameter; with ``cfg.embed_lr > 0`` the per-entity input tables apart,
    in their own Adagrad at that rate (their gradients are sparse: only the rows a step touched)."""
    import torch

    tables = (
        [m.weight for m in model.node_input.modules() if isinstance(m, torch.nn.Embedding)]
        if cfg.embed_lr > 0
        else []
    )
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
    metrics and best-epoch rule. ``cfg.max_steps`` is a budget in steps (the same work on any machine),
    ``cfg.max_seconds`` one in training time (validation excluded); ``cfg.eval_every_steps`` adds a
    validation point before the first step and every that many steps, ``cfg.eval_every_seconds`` one
    every that many seconds of training: a learning curve inside one epoch."""
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
            f"{name}: mini-batch training needs num_negatives > 0 (the size of the shared negative pool per "
            "batch); "
            "0 means 'score every entity', which only full-batch training (batch_size=0) does"
        )
    if not cfg.full_graph and len(cfg.num_neighbors) != cfg.layers:
        raise ValueError(
            f"num_neighbors={tuple(cfg.num_neighbors)} gives {len(cfg.num_neighbors)} hops but the encoder "
            f"has layers={cfg.layers}; give one fan-out per layer"
        )
    graph = model_graph(split, rung.reverse, hetero=False)  # CPU copy: the sampler reads it
    eval_graph = graph.to(device)
    model = build_model(split, rung, cfg, graph, features=features).to(device)
    opts = _minibatch_optimizers(model, cfg)
    gen = torch.Generator().manual_seed(cfg.seed)
    sampler = NegativeSampler(split, rung.negatives, gen)
    node_sampler = (
        None
        if cfg.full_graph
        else neighbor_sampler.TorchNeighborSampler(
            Data(edge_index=graph.edge_index, num_nodes=split.num_nodes), cfg.num_neighbors, generator=gen
        )
    )
    filt = true_index(split)
    train = split.train
    steps = math.ceil(len(train) / cfg.batch_size)
    history: dict[str, list] = {
        "epoch": [],
        "loss": [],
        "valid_epoch": [],
        "valid_mrr": [],
        "valid_mrr_select": [],
        "step_loss": [],
        "sampled_nodes": [],
        "sampled_edges": [],
        "valid_step": [],
        "valid_train_s": [],
        "eval_s": [],
    }
    loop = Loop(name, cfg, split, model, eval_graph, filt, live, history=history)
    eval_s = 0.0  # seconds spent validating: steps/s counts training only
    last_eval = 0.0
    budget_spent = False

    def validate(epoch_mark):
        nonlocal eval_s, last_eval
        t0 = time.perf_counter()
        loop.validate(epoch_mark, per_query=True)
        model.train()
        eval_s += time.perf_counter() - t0
        last_eval = time.perf_counter() - loop.start - eval_s
        history["valid_step"].append(len(history["step_loss"]))
        history["valid_train_s"].append(round(last_eval, 2))
        history["eval_s"].append(round(eval_s, 2))

    # Under a time budget the step count is unknown: the bar then shows steps and rate, not an ETA.
    total = cfg.epochs * steps if not cfg.max_steps else min(cfg.epochs * steps, cfg.max_steps)
    bar = tqdm(
        total=None if cfg.max_seconds is not None else total,
        desc=f"{name} (mini-batch)",
        unit="step",
        disable=not progress,
        leave=False,
    )
    loop.bar = bar
    if cfg.eval_every_steps:
        validate(0.0)  # the curve's step-0 point: what the model scores before any training
    with _Stoppable(bar) as run:
        for epoch in range(1, cfg.epochs + 1):
            model.train()
            perm = torch.randperm(len(train), generator=gen)
            losses = []
            for i in range(steps):
                batch = train[perm[i * cfg.batch_size : (i + 1) * cfg.batch_size]]
                for opt in opts:
                    opt.zero_grad()
                loss, info = minibatch_loss(
                    model,
                    batch,
                    eval_graph if cfg.full_graph else graph,
                    node_sampler,
                    sampler,
                    cfg.num_negatives,
                    device,
                    gen,
                )
                if not torch.isfinite(loss):
                    raise FloatingPointError(
                        f"{name}: loss became {float(loss.detach())} at epoch {epoch} step {i + 1} "
                        f"(lr={cfg.lr}); lower the learning rate"
                    )
                loss.backward()
                # Adagrad's sparse update builds sparse tensors from indices it produced
                # itself: checking their
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
                trained = time.perf_counter() - loop.start - eval_s
                done = len(history["step_loss"])
                if (cfg.max_seconds is not None and trained > cfg.max_seconds) or (
                    cfg.max_steps and done >= cfg.max_steps
                ):
                    budget_spent = True
                    break
                if i + 1 < steps and (
                    (cfg.eval_every_steps and done % cfg.eval_every_steps == 0)
                    or (cfg.eval_every_seconds and trained - last_eval >= cfg.eval_every_seconds)
                ):
                    validate(epoch - 1 + (i + 1) / steps)  # mid-epoch point of the learning curve
            history["epoch"].append(epoch)
            history["loss"].append(sum(losses) / len(losses))
            if epoch % cfg.eval_every == 0 or epoch == cfg.epochs or budget_spent:
                validate(epoch - 1 + len(losses) / steps)
                if loop.patience_spent():
                    break
            if budget_spent:
                break
    return loop.finish(rung, valid_negs, run.interrupted)
