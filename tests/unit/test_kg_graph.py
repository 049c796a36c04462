"""Index, split, leakage meter, message graphs and HeteroData on tiny hand-made graphs."""

import pandas as pd
import pytest
import torch

from nbkit.kg import graph as kgg
from nbkit.kg import synthetic as kgsyn
from nbkit.kg import triples as kgt
from nbkit.kg.neighbor_sampler import link_neighbor_loader


def kg_from(rows, split=None):
    df = pd.DataFrame(rows, columns=["head", "relation", "tail", "head_type", "tail_type"])
    if split is not None:
        df["split"] = split
    return kgt.finalize(df, kgt.LoadReport("test"))


ROWS = [
    ("g1", "targets", "g2", "gene", "gene"),
    ("d1", "targets", "g1", "drug", "gene"),
    ("d1", "treats", "x1", "drug", "disease"),
    ("d2", "treats", "x1", "drug", "disease"),
    ("g2", "causes", "x2", "gene", "disease"),  # x2 only ever a tail
    ("x1", "treats", "d1", "disease", "drug"),
]


def test_index_uses_heads_and_tails_sorted_per_type():
    types, ents = kgg.build_index(kg_from(ROWS).df)
    assert types == ["disease", "drug", "gene"]
    assert ents == {"disease": ["x1", "x2"], "drug": ["d1", "d2"], "gene": ["g1", "g2"]}
    split = kgg.split_kg(kg_from(ROWS, ["train"] * 6), allow_empty=True)
    assert split.entity_id("x2") == 1 and split.entity_id("g1") == 4
    assert split.node_type.tolist() == [0, 0, 1, 1, 2, 2]
    with pytest.raises(KeyError, match="not in the mapping"):
        split.entity_id("nope")


def test_shipped_split_and_leakage_meter():
    split = kgg.split_kg(
        kg_from(ROWS, ["train", "train", "test", "train", "train", "test"]), allow_empty=True
    )
    assert split.sizes()["test"] == 2
    leak = kgg.leakage_meter(split)["test"]
    # test (d1 treats x1): no reverse (x1,*,d1) in train, no other relation on (d1,x1) -> 0
    # test (x1 treats d1): (d1,*,x1)? d1 treats x1 is test, not train -> 0
    assert leak["reversed_pair_share"] == 0.0
    split2 = kgg.split_kg(
        kg_from(ROWS, ["train", "train", "train", "train", "train", "test"]), allow_empty=True
    )
    leak2 = kgg.leakage_meter(split2)["test"]
    assert leak2["reversed_pair_share"] == 1.0 and leak2["same_pair_other_relation_share"] == 0.0


def test_random_split_is_seeded_and_transductive():
    kg = kgsyn.synthetic_kg(120, 1500, seed=0)
    a, b = kgg.split_kg(kg, seed=5), kgg.split_kg(kg, seed=5)
    assert torch.equal(a.test, b.test)
    seen = set(a.train[:, 0].tolist()) | set(a.train[:, 2].tolist())
    assert set(a.test[:, 0].tolist()) <= seen and set(a.test[:, 2].tolist()) <= seen
    assert a.sizes()["train"] + a.sizes()["valid"] + a.sizes()["test"] == len(kg)


def test_message_graph_modes_and_no_leak():
    split = kgg.split_kg(kg_from(ROWS, ["train", "train", "test", "train", "valid", "train"]))
    R = split.num_relations
    none = kgg.message_graph(split, "none")
    inv = kgg.message_graph(split, "inverse")
    und = kgg.message_graph(split, "undirected")
    n_train = len(split.train)
    assert none.edge_index.size(1) == n_train and none.num_relations == R
    assert inv.edge_index.size(1) == 2 * n_train and inv.num_relations == 2 * R
    assert inv.relation_names[R:] == [r + "__inv" for r in split.relations]
    assert und.edge_index.size(1) == 2 * n_train and und.num_relations == R
    # with (d1 treats x1) AND (x1 treats d1) in train, the naive merge collapses the pair into one relation
    all_train = kgg.split_kg(kg_from(ROWS, ["train"] * 6), allow_empty=True)
    assert kgg.message_graph(all_train, "undirected").edge_index.size(1) == 2 * 6 - 2
    assert kgg.message_graph(all_train, "inverse").edge_index.size(1) == 2 * 6
    edges = {(s, d) for s, d in inv.edge_index.t().tolist()}
    for h, _, t in torch.cat([split.valid, split.test]).tolist():
        if (h, t) not in {(a, b) for a, _, b in split.train.tolist()} and (t, h) not in {
            (a, b) for a, _, b in split.train.tolist()
        }:
            assert (h, t) not in edges and (t, h) not in edges
    with pytest.raises(ValueError, match="reverse must be one of"):
        kgg.message_graph(split, "both")


def test_hetero_data_validates_and_keeps_direction():
    split = kgg.split_kg(kg_from(ROWS, ["train"] * 6), allow_empty=True)
    data = kgg.build_hetero_data(split, "inverse", features={"gene": torch.randn(2, 5)})
    assert ("drug", "targets", "gene") in data.edge_types and (
        "gene",
        "targets__inv",
        "drug",
    ) in data.edge_types
    assert data["gene"].x.shape == (2, 5) and data["drug"].num_nodes == 2
    summ = kgg.hetero_summary(data)
    assert summ["nodes"] == 6 and summ["isolated_nodes"] == 0 and summ["nodes_without_incoming_messages"] == 0
    directed = kgg.hetero_summary(kgg.build_hetero_data(split, "none"))
    assert directed["nodes_without_incoming_messages"] > 0  # d2 is never a tail
    with pytest.raises(ValueError, match=r"features\['gene'\] has shape \(3, 5\)"):
        kgg.build_hetero_data(split, "none", features={"gene": torch.randn(3, 5)})


def test_link_neighbor_loader_clear_error_or_batches():
    from torch_geometric.typing import WITH_PYG_LIB, WITH_TORCH_SPARSE

    split = kgg.split_kg(kg_from(ROWS, ["train"] * 6), allow_empty=True)
    data = kgg.build_hetero_data(split, "inverse")
    et = ("drug", "treats", "disease")
    if not (WITH_PYG_LIB or WITH_TORCH_SPARSE):
        with pytest.raises(ImportError, match="pyg-lib' or 'torch-sparse'.*to_homogeneous"):
            link_neighbor_loader(data, et)
        # the homogeneous form works without compiled extensions (nbkit's pure-torch sampler)
        homo = data.to_homogeneous()
        batch = next(iter(link_neighbor_loader(homo, batch_size=2)))
        assert batch.edge_label_index.size(1) == 4  # 2 positives + 2 negatives
        return
    batch = next(iter(link_neighbor_loader(data, et, batch_size=2)))
    assert batch[et].edge_label_index.size(1) >= 2
