"""Ranking metrics, negatives and the ladder on a tiny synthetic KG (seconds, not minutes)."""

import dataclasses

import pytest
import torch

from nbkit.kg import graph as kgg
from nbkit.kg import train as kgtrain
from nbkit.kg import triples as kgt


@pytest.fixture(scope="module")
def split():
    return kgg.split_kg(kgt.synthetic_kg(90, 900, seed=0, num_clusters=3), seed=0)


def test_filtered_ranks_average_ties_and_filter_known_triples():
    scores = torch.tensor([[0.1, 0.9, 0.5, 0.5, 0.9]])
    trip = torch.tensor([[0, 0, 2]])  # true tail 2 scores 0.5
    # unfiltered: two entities (1, 4) above, one tie (3) -> rank 3 + 0.5
    assert kgtrain.filtered_ranks(scores, trip, {}, "tail").item() == 3.5
    # entity 1 is another known true tail of (0, 0): filtered away
    assert kgtrain.filtered_ranks(scores, trip, {(0, 0): [1, 2]}, "tail").item() == 2.5


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
    a, b = kgtrain.eval_negatives(split, seed=1), kgtrain.eval_negatives(split, seed=1)
    assert torch.equal(a, b)
    known = {tuple(x) for x in split.all_true().tolist()}
    assert not any(tuple(x) in known for x in a.tolist())


@pytest.mark.slow
def test_ladder_runs_every_rung_and_learning_beats_chance(split):
    cfg = kgtrain.TrainConfig(epochs=30, hidden=16, eval_every=10, lr=0.02)
    results, table = kgtrain.run_ladder(split, (1, 2, 3, 4, 5), cfg, progress=False)
    assert list(table["rung"]) == [1, 2, 3, 4, 5]
    for col in ("mrr", "hits_at_1", "hits_at_10", "auc", "valid_mrr"):
        assert table[col].between(0, 1).all(), col
    chance_mrr = sum(1 / k for k in range(1, split.num_nodes + 1)) / split.num_nodes
    best = max(results, key=lambda r: r.metrics["mrr"])
    assert best.metrics["mrr"] > 3 * chance_mrr
    assert results[-1].history["loss"][-1] < results[-1].history["loss"][0]


def test_sampled_negatives_path(split):
    cfg = kgtrain.TrainConfig(epochs=5, hidden=16, eval_every=5, num_negatives=4)
    res, _, _ = kgtrain.train_rung(split, kgtrain.LADDER[4], cfg, progress=False)
    assert res.epochs_run == 5 and 0 <= res.metrics["mrr"] <= 1


def test_ctrl_c_stops_training_and_still_evaluates(split):
    class StopAfter:
        def __init__(self):
            self.n = 0

        def add(self, name, x, y):
            self.n += 1
            if self.n == 6:
                raise KeyboardInterrupt

    cfg = kgtrain.TrainConfig(epochs=50, hidden=16, eval_every=2)
    res, _, _ = kgtrain.train_rung(split, kgtrain.LADDER[1], cfg, progress=False, live=StopAfter())
    assert res.interrupted and res.epochs_run < 50 and "mrr" in res.metrics


def test_diverging_loss_is_one_clear_error(split):
    rung = dataclasses.replace(kgtrain.LADDER[5])
    cfg = kgtrain.TrainConfig(epochs=3, hidden=16, lr=1e30, eval_every=1)
    with pytest.raises(FloatingPointError, match="loss became"):
        kgtrain.train_rung(split, rung, cfg, progress=False)
