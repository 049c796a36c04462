"""Ranking metrics, negatives and the ladder on a tiny synthetic KG (seconds, not minutes)."""

import dataclasses

import pytest
import torch

from nbkit.kg import graph as kgg
from nbkit.kg import ladder as kgladder
from nbkit.kg import ranking as kgranking
from nbkit.kg import synthetic as kgsyn
from nbkit.kg import train as kgtrain


@pytest.fixture(scope="module")
def split():
    return kgg.split_kg(kgsyn.synthetic_kg(90, 900, seed=0, num_clusters=3), seed=0)


def test_filtered_ranks_average_ties_and_filter_known_triples():
    scores = torch.tensor([[0.1, 0.9, 0.5, 0.5, 0.9]])
    trip = torch.tensor([[0, 0, 2]])  # true tail 2 scores 0.5
    # unfiltered: two entities (1, 4) above, one tie (3) -> rank 3 + 0.5
    assert kgranking.filtered_ranks(scores, trip, {}, "tail").item() == 3.5
    # entity 1 is another known true tail of (0, 0): filtered away
    assert kgranking.filtered_ranks(scores, trip, {(0, 0): [1, 2]}, "tail").item() == 2.5


def test_filtered_ranks_equal_ranking_with_the_excluded_entities_masked():
    """Counting over every entity and subtracting the excluded ones gives the ranks of masking them away:
    many ties, duplicate filter entries, and the true entity listed among its own known answers."""
    for seed in range(10):
        g = torch.Generator().manual_seed(seed)
        n_e, n_q = 30, 25
        scores = torch.randint(0, 5, (n_q, n_e), generator=g).float()
        heads, tails = (torch.randint(0, n_e, (n_q,), generator=g) for _ in range(2))
        trip = torch.stack([heads, torch.zeros(n_q, dtype=torch.long), tails], 1)
        filt: dict = {}
        for h, r, t in trip.tolist():
            filt.setdefault((h, r), []).extend([t, *torch.randint(0, n_e, (4,), generator=g).tolist()])
        masked = scores.clone()
        target = scores.gather(1, trip[:, 2:])
        for i, (h, r, t) in enumerate(trip.tolist()):
            masked[i, filt[(h, r)]] = float("-inf")
            masked[i, t] = float("-inf")
        expected = (masked > target).sum(1) + 1 + (masked == target).sum(1) / 2
        assert torch.equal(kgranking.filtered_ranks(scores, trip, filt, "tail"), expected.float())


def test_evaluate_ranks_the_same_in_blocks_of_queries(split, monkeypatch):
    cfg = kgtrain.TrainConfig(epochs=2, hidden=8, seed=0, decoder="complex")
    _, model, graph = kgtrain.train_rung(split, kgladder.LADDER[5], cfg, progress=False)
    whole = kgranking.evaluate(model, graph, split, "valid", per_query=True, batch_size=16)
    monkeypatch.setattr(kgranking, "SCORE_BLOCK", 3 * split.num_nodes)  # 3 queries at a time
    blocks = kgranking.evaluate(model, graph, split, "valid", per_query=True, batch_size=16)
    assert blocks["reciprocal_ranks"] == whole["reciprocal_ranks"] and blocks["mrr"] == whole["mrr"]


def test_complex_head_scores_ranking_and_training_agree():
    """Ranking (no autograd) scores the heads in one matmul, training in two half-width products: the
    same numbers up to float rounding."""
    from nbkit.kg.models import ComplExDecoder

    torch.manual_seed(0)
    dec = ComplExDecoder(3, 16)
    z, r, t = torch.randn(40, 16), torch.tensor([0, 1, 2, 1]), torch.tensor([5, 7, 9, 39])
    trained = dec.score_heads(z, r, t)
    with torch.no_grad():
        ranked = dec.score_heads(z, r, t)
    assert trained.requires_grad and not ranked.requires_grad
    assert torch.allclose(ranked, trained.detach(), atol=1e-5)
    brute = torch.stack([dec(z, torch.arange(40), r[i].repeat(40), t[i].repeat(40)) for i in range(4)])
    assert torch.allclose(ranked, brute.detach(), atol=1e-5)


def test_true_index_is_built_once_per_split(split):
    first = kgranking.true_index(split)
    assert (
        kgranking.true_index(split) is first
    )  # kept on the split: the scale run's oracle and training share it
    other = dataclasses.replace(split, valid=split.valid[:5])
    assert kgranking.true_index(other) is not first and kgranking.true_index(split) is first


def test_batch_slices_of_the_filter_index_rank_as_the_whole(split):
    # evaluate() builds one filter index per evaluated triples and hands each batch its slice
    tails, heads = kgranking.true_index(split)
    trip = split.valid
    scores = torch.randn(len(trip), split.num_nodes, generator=torch.Generator().manual_seed(0))
    for filt, side in ((tails, "tail"), (heads, "head")):
        whole = kgranking.filtered_ranks(scores, trip, filt, side)
        index = kgranking._filter_index(trip, filt, side)
        assert len(index[0]) > 0  # the filter removes something here
        parts = [
            kgranking.filtered_ranks(
                scores[a : a + 7],
                trip[a : a + 7],
                filt,
                side,
                kgranking._batch_filter(index, a, min(a + 7, len(trip))),
            )
            for a in range(0, len(trip), 7)
        ]
        assert torch.equal(torch.cat(parts), whole)


def test_typed_negatives_respect_relation_types(split):
    sampler = kgtrain.NegativeSampler(split, "typed", torch.Generator().manual_seed(0))
    r = split.train[:, 1]
    neg = sampler.sample(r, 8, "tail")
    for rel in range(split.num_relations):
        rows = split.train[split.train[:, 1] == rel]
        allowed = set(split.node_type[rows[:, 2]].tolist())
        assert set(split.node_type[neg[r == rel]].flatten().tolist()) <= allowed
    with pytest.raises(ValueError, match="negatives must be one of"):
        kgtrain.NegativeSampler(split, "hard", torch.Generator())


def test_eval_negatives_are_fixed_and_not_true(split):
    a, b = kgranking.eval_negatives(split, seed=1), kgranking.eval_negatives(split, seed=1)
    assert torch.equal(a, b)
    known = {tuple(x) for x in split.all_true().tolist()}
    assert not any(tuple(x) in known for x in a.tolist())


@pytest.mark.slow
def test_ablation_runs_every_rung_chooses_on_validation_and_beats_chance():
    from nbkit.kg import experiments as ex
    from nbkit.kg.config import AblationConfig
    from nbkit.kg.context import KGContext

    ctx = KGContext("cpu")
    cfg = AblationConfig(
        dataset="synthetic", rungs=(1, 2, 3, 4, 5), seeds=2, epochs=30, hidden=16, eval_every=10, lr=0.02
    )
    res = ex.run_ablation(cfg, ctx)
    table = res.table
    assert list(table["rung"]) == [1, 2, 3, 4, 5] and set(table["seeds"]) == {2}
    for col in ("valid_mrr", "valid_hits_at_10", "valid_auc", "valid_mrr_judge", "valid_auc_judge"):
        assert table[col].between(0, 1).all(), col
    rungs = res.metrics.rungs
    # the best rung is chosen on the selecting half of the validation queries
    assert res.metrics.rung(res.metrics.best_rung).valid_mrr_select == max(r.valid_mrr_select for r in rungs)
    # only the chosen rung was scored on the test split, once per seed
    scored = [r for rs in res.data["runs"].values() for r, _, _ in rs if r.test_metrics]
    assert {r.rung for r in scored} == {res.metrics.best_rung} and len(scored) == 2
    split = ctx.split("synthetic", 0)
    chance_mrr = sum(1 / k for k in range(1, split.num_nodes + 1)) / split.num_nodes
    assert res.metrics.test_mrr > 3 * chance_mrr


def test_hetero_sage_matches_heteroconv_of_sageconvs(split):
    """The stacked encoder computes exactly HeteroConv({et: SAGEConv}) (weights copied across)."""
    import torch.nn.functional as F
    from torch_geometric.nn import HeteroConv, SAGEConv

    from nbkit.kg.models import HeteroSAGEEncoder

    for reverse in ("none", "inverse"):
        g = kgladder.model_graph(split, reverse, hetero=True)
        for type_aggr in ("sum", "mean"):
            torch.manual_seed(0)
            enc = HeteroSAGEEncoder(8, list(g.edge_index_dict), 2, type_aggr=type_aggr)
            convs = [
                HeteroConv({et: SAGEConv(8, 8, aggr="mean") for et in g.edge_index_dict}, aggr=type_aggr)
                for _ in range(2)
            ]
            for i, conv in enumerate(convs):
                for k, et in enumerate(g.edge_index_dict):
                    with torch.no_grad():
                        conv.convs[et].lin_l.weight.copy_(enc.w_l[i][k].T)
                        conv.convs[et].lin_l.bias.copy_(enc.b_l[i][k])
                        conv.convs[et].lin_r.weight.copy_(enc.w_r[i][k].T)
            x = torch.randn(split.num_nodes, 8)
            xd = dict(zip(g.types, torch.split(x, g.counts), strict=True))
            for i, conv in enumerate(convs):
                out = conv(xd, g.edge_index_dict)
                xd = {t: (out[t] if t in out else xd[t]) for t in g.types}
                xd = {t: F.relu(v) for t, v in xd.items()} if i == 0 else xd
            ref = torch.cat([xd[t] for t in g.types])
            assert torch.allclose(enc(x, g), ref, atol=1e-5), (reverse, type_aggr)


@pytest.mark.parametrize("chunk_types", [None, 3])
def test_hetero_sage_trains_to_the_bit_as_with_einsum(split, monkeypatch, chunk_types):
    """The neighbour projection is read in the order its matmul produces it: training rungs 2 and 3 gives, to
    the bit, the losses and weights of the einsum("nh,ehk->enk") form it replaced (all edge types in one
    chunk, and three at a time)."""
    from nbkit.kg import models

    hidden = 16
    if chunk_types is not None:
        monkeypatch.setattr(models, "SAGE_CHUNK_ELEMENTS", chunk_types * split.num_nodes * hidden)

    def einsum_neighbours(self, i, x, src, dst, et, inv_deg):
        out = torch.zeros_like(x)
        step = max(1, models.SAGE_CHUNK_ELEMENTS // (x.size(0) * x.size(1)))
        for lo in range(0, len(self.edge_types), step):
            sel = (et >= lo) & (et < lo + step)
            if bool(sel.any()):
                proj = torch.einsum("nh,ehk->enk", x, self.w_l[i][lo : lo + step])
                out.index_add_(0, dst[sel], proj[et[sel] - lo, src[sel]] * inv_deg[sel, None])
        return out

    def train(rung):
        cfg = kgtrain.TrainConfig(epochs=3, hidden=hidden, eval_every=3, seed=1)
        res, model, _ = kgtrain.train_rung(split, kgladder.LADDER[rung], cfg, progress=False)
        return res.history["loss"], res.metrics, model.state_dict()

    for rung in (2, 3):
        ours = train(rung)
        with monkeypatch.context() as m:
            m.setattr(models.HeteroSAGEEncoder, "_neighbours", einsum_neighbours)
            theirs = train(rung)
        assert ours[0] == theirs[0] and ours[1] == theirs[1], rung
        assert all(torch.equal(ours[2][k], theirs[2][k]) for k in ours[2]), rung


def test_training_keeps_test_untouched_and_score_test_reads_it_once(split):
    cfg = kgtrain.TrainConfig(epochs=4, hidden=16, eval_every=2)
    res, model, graph = kgtrain.train_rung(split, kgladder.LADDER[1], cfg, progress=False)
    assert res.test_metrics == {} and all(k.startswith("valid_") for k in res.metrics)
    test = kgranking.score_test(split, res, model, graph)
    assert res.test_metrics is test and 0 < test["test_mrr"] <= 1


def test_sampled_negatives_path(split):
    cfg = kgtrain.TrainConfig(epochs=5, hidden=16, eval_every=5, num_negatives=4)
    res, _, _ = kgtrain.train_rung(split, kgladder.LADDER[4], cfg, progress=False)
    assert res.epochs_run == 5 and 0 < res.metrics["valid_mrr"] <= 1


def test_ctrl_c_stops_training_and_still_evaluates(split):
    class StopAfter:
        def __init__(self):
            self.n = 0

        def add(self, name, x, y):
            self.n += 1
            if self.n == 6:
                raise KeyboardInterrupt

    cfg = kgtrain.TrainConfig(epochs=50, hidden=16, eval_every=2)
    res, _, _ = kgtrain.train_rung(split, kgladder.LADDER[1], cfg, progress=False, live=StopAfter())
    assert res.interrupted and res.epochs_run < 50 and 0 < res.metrics["valid_mrr"] <= 1


def test_diverging_loss_is_one_clear_error(split):
    rung = dataclasses.replace(kgladder.LADDER[5])
    cfg = kgtrain.TrainConfig(epochs=3, hidden=16, lr=1e30, eval_every=1)
    with pytest.raises(FloatingPointError, match="loss became"):
        kgtrain.train_rung(split, rung, cfg, progress=False)


@pytest.mark.parametrize("num_bases", [4, None])
@pytest.mark.parametrize("aggr", ["mean", "add"])
@pytest.mark.parametrize("nodes", [30, 3000])  # 3000 nodes, 300 edges: the sparse (sampled mini-batch) path
def test_stacked_rgcn_conv_equals_pyg_rgcn_conv(num_bases, aggr, nodes):
    """Same parameters, same outputs and gradients as RGCNConv's per-relation loop."""
    from torch_geometric.nn import RGCNConv

    from nbkit.kg.models import StackedRGCNConv

    g = torch.Generator().manual_seed(0)
    ei, et = torch.randint(0, nodes, (2, 300), generator=g), torch.randint(0, 7, (300,), generator=g)
    x = torch.randn(nodes, 16, generator=g, requires_grad=True)
    torch.manual_seed(1)
    ref = RGCNConv(16, 12, 7, num_bases=num_bases, aggr=aggr)
    fast = StackedRGCNConv(16, 12, 7, num_bases=num_bases, aggr=aggr)
    fast.load_state_dict(ref.state_dict())
    ya, yb = ref(x, ei, et), fast(x, ei, et)
    assert torch.allclose(ya, yb, atol=1e-5)
    ga = torch.autograd.grad(ya.square().sum(), [x, *ref.parameters()])
    gb = torch.autograd.grad(yb.square().sum(), [x, *fast.parameters()])
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-3) for a, b in zip(ga, gb, strict=True))


def test_reciprocal_complex_scores_heads_through_the_inverse_relation_and_n3_is_the_cubed_modulus():
    from nbkit.kg.models import ComplExDecoder, ReciprocalComplExDecoder

    torch.manual_seed(0)
    dec = ReciprocalComplExDecoder(3, 4)
    assert dec.rel.shape == (6, 4)
    z = torch.randn(5, 4)
    h, r, t = torch.tensor([0, 1]), torch.tensor([2, 0]), torch.tensor([3, 4])
    # a head query (?, r, t) is the tail query (t, r + R, ?)
    assert torch.allclose(dec.score_heads(z, r, t), dec.score_tails(z, t, r + 3))
    # the one-matmul tail scores equal ComplEx's triple score, entity by entity
    full = dec.score_tails(z, h, r)
    for e in range(5):
        assert torch.allclose(
            full[:, e], ComplExDecoder.forward(dec, z, h, r, torch.full_like(h, e)), atol=1e-6
        )
    z1 = torch.tensor([[3.0, 0.0, 4.0, 1.0]])  # complex parts (3 + 4i, 0 + 1i): moduli 5 and 1
    with torch.no_grad():
        dec.rel.zero_()
        dec.rel[0] = torch.tensor([0.0, 2.0, 0.0, 0.0])  # moduli 0 and 2
    zero = torch.tensor([0])
    assert dec.n3(z1, zero, zero, zero).item() == pytest.approx(2 * (125 + 1) + 8)


def test_rung6_learns_on_a_tiny_graph_keeps_test_untouched_and_stops_early(split):
    cfg = kgtrain.TrainConfig(
        epochs=60, complex_dim=32, complex_batch=256, complex_eval_every=2, patience=2, seed=0
    )
    res, model, graph = kgtrain.train_rung(split, kgladder.LADDER[6], cfg, progress=False)
    assert res.test_metrics == {} and res.history["valid_epoch"][0] == 2
    chance = sum(1 / k for k in range(1, split.num_nodes + 1)) / split.num_nodes
    assert res.metrics["valid_mrr"] > 3 * chance
    # early stopping on validation: stopped `patience` checks after its best one, or ran every epoch
    assert res.epochs_run == min(60, res.best_epoch + 2 * 2) or res.epochs_run == 60
    with pytest.raises(ValueError, match="no node features"):
        kgtrain.train_rung(
            split, kgladder.LADDER[6], cfg, progress=False, features={"gene": torch.zeros(1, 1)}
        )


def test_cluster_oracle_mrr_is_the_ceiling_of_the_synthetic_graph():
    kg = kgsyn.synthetic_kg(90, 900, seed=0, num_clusters=3)
    sp = kgg.split_kg(kg, seed=0)
    ceiling = kgranking.cluster_oracle_mrr(sp, kg.clusters, "valid")
    # every (type, cluster) group has ~6-18 members and the true one is ranked anywhere among them: far
    # below 1
    assert 0.1 < ceiling < 0.6
    # it is the expectation for an oracle that ranks the true entity's cluster first in a random order:
    # check by
    # ranking so, with evaluate()'s filtered ranks, under 30 random orders
    group = sp.node_type * 10 + torch.tensor([kg.clusters[e] for e in sp.entity_names()])
    tails, heads = kgranking.true_index(sp)
    h, _, t = sp.valid.t()
    mrrs = []
    for seed in range(30):
        jitter = torch.rand(len(sp.valid), sp.num_nodes, generator=torch.Generator().manual_seed(seed)) * 1e-3
        ranks = [
            kgranking.filtered_ranks(
                (group.unsqueeze(0) == group[true].unsqueeze(1)).float() + jitter, sp.valid, filt, side
            )
            for true, filt, side in ((t, tails, "tail"), (h, heads, "head"))
        ]
        mrrs.append(float((1 / torch.cat(ranks)).mean()))
    assert sum(mrrs) / len(mrrs) == pytest.approx(ceiling, rel=0.05)
    one_cluster = {e: 0 for e in kg.clusters}  # no latent structure: the oracle ties every entity of the type
    assert kgranking.cluster_oracle_mrr(sp, one_cluster, "valid") < ceiling


def test_minibatch_validates_inside_the_time_budget(split):
    cfg = kgtrain.TrainConfig(
        epochs=1,
        hidden=8,
        batch_size=16,
        num_negatives=8,
        num_neighbors=(5, 5),
        eval_every=1,
        eval_every_seconds=1e-9,
        eval_max_triples=20,
    )
    res, _, _ = kgtrain.train_rung(split, kgladder.LADDER[5], cfg, progress=False)
    h = res.history
    steps = len(h["step_loss"])
    # one validation after every step (the last one at the epoch's end): a learning curve inside one epoch
    assert h["valid_step"] == list(range(1, steps + 1)) and len(h["valid_mrr"]) == steps > 1
    assert h["valid_epoch"][0] == pytest.approx(1 / steps) and h["valid_epoch"][-1] == 1


def test_minibatch_has_a_step_budget_with_a_step_0_point(split):
    cfg = kgtrain.TrainConfig(
        epochs=5,
        hidden=8,
        batch_size=16,
        num_negatives=8,
        num_neighbors=(5, 5),
        eval_every=100,
        max_steps=12,
        eval_every_steps=4,
        eval_max_triples=20,
    )
    res, _, _ = kgtrain.train_rung(split, kgladder.LADDER[5], cfg, progress=False)
    h = res.history
    # the budget is work, not time: exactly 12 steps on any machine, validated before the first and every 4
    assert len(h["step_loss"]) == 12 and h["valid_step"] == [0, 4, 8, 12]
    again, _, _ = kgtrain.train_rung(split, kgladder.LADDER[5], cfg, progress=False)
    assert again.history["valid_mrr"] == h["valid_mrr"]  # deterministic by seed


def test_the_epoch_is_chosen_on_the_selecting_half_and_the_auc_reported_per_half(split):
    from nbkit.kg.ranking import eval_negatives

    cfg = kgtrain.TrainConfig(epochs=30, hidden=16, eval_every=3, patience=2, lr=0.02, seed=0)
    negs = eval_negatives(split, "valid", 12345)
    res, model, graph = kgtrain.train_rung(split, kgladder.LADDER[5], cfg, progress=False, valid_negs=negs)
    h = res.history
    best = max(range(len(h["valid_mrr_select"])), key=lambda i: (h["valid_mrr_select"][i], -i))
    assert res.best_epoch == h["valid_epoch"][best]
    assert res.metrics["valid_mrr_select"] == h["valid_mrr_select"][best]
    halves = kgtrain.auc_halves(model, graph, split, negs, cfg)
    assert halves == {k: res.metrics[f"valid_{k}"] for k in ("auc", "auc_select", "auc_judge")}
    assert len({round(v, 9) for v in halves.values()}) == 3  # two disjoint halves, each its own AUC


def test_the_selection_never_trains_a_run_a_later_experiment_is_judged_on():
    """The candidates train at seed + SELECTION_SEED_OFFSET; the ablation trains every run itself, at
    seeds seed .. seed + seeds - 1."""
    from nbkit.kg import experiments as ex
    from nbkit.kg.config import SELECTION_SEED_OFFSET, AblationConfig, SelectionConfig
    from nbkit.kg.context import KGContext

    ctx = KGContext("cpu")
    common = dict(dataset="synthetic", hidden=16, eval_every=5, patience=1)
    sel = ex.run_selection(
        SelectionConfig(
            epochs=20,
            complex_dims=(32,),
            complex_n3s=(0.01,),
            decoders=("distmult",),
            rgcn_hiddens=(16,),
            type_aggrs=("mean",),
            **common,
        ),
        ctx,
    )
    assert sel.metrics.train_seed == SELECTION_SEED_OFFSET
    assert [r["choice"] for r in sel.metrics.validation] == [
        "RGCN (rung 5), aggr=mean",
        "RGCN (rung 5), aggr=add",
        "hetero SAGE edge-type aggregation (rung 2)",
        "rung 6: ComplEx-N3",
    ]
    assert all(r["chosen"] for r in sel.metrics.validation)  # one candidate each: each chosen
    res = ex.run_ablation(
        AblationConfig(rungs=(6,), seeds=2, epochs=20, **common, **sel.metrics.chosen.overrides()), ctx
    )
    assert [r.seed for r, _, _ in res.data["runs"][6]] == [0, 1]
    assert {k[0] for k in ctx._cache} <= {"kg", "split", "negatives"}  # no trained run kept for reuse
