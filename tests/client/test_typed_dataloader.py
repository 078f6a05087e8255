"""Typed loaders on a typed graph: the node loader over ``{ntype: IDs}`` covers each training node once per
epoch with its features and labels per type; the edge loader over ``{etype: IDs}`` gives typed pair
graphs, per-type negatives and keeps the batch's edges and their reverse-type edges out of the blocks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphstore.client import api
from graphstore.client.constants import EID, NID
from graphstore.client.dataloader import DistEdgeDataLoader, DistNodeDataLoader
from graphstore.client.dist_graph import DistGraph
from graphstore.client.samplers import MultiLayerNeighborSampler, NeighborSampler, Uniform
from tests.utils.typed_graphs import CANONICAL_ETYPES, NUM_NODES, make_typed_partitions, relabeled_typed

WRITES, CITES, AFFILIATED, HAS_TOPIC, REV_WRITES = CANONICAL_ETYPES


@pytest.fixture(scope="module")
def typed_files(tmp_path_factory):
    result, arrays = make_typed_partitions(tmp_path_factory.mktemp("typed"), 2, "metis")
    return result, relabeled_typed(result, arrays)


@pytest.fixture
def g(typed_files):
    api.exit_client()
    try:
        yield DistGraph("typed", part_config=typed_files[0].config_path)
    finally:
        api.exit_client()


def test_node_loader_covers_each_training_node_once_with_typed_blocks(g, typed_files):
    _, new = typed_files
    train = torch.from_numpy(np.flatnonzero(new["nodes"]["paper"]["train_mask"]))
    authors = torch.arange(0, NUM_NODES["author"], 4)
    sampler = MultiLayerNeighborSampler(
        [{"writes": 2, "cites": 2, "affiliated_with": 1, "has_topic": 0, "rev_writes": 3}, 3],
        prefetch_node_feats={"paper": ["feat"], "author": ["age"]},
    )
    loader = DistNodeDataLoader(
        g,
        {"paper": train, "author": authors},
        sampler,
        batch_size=16,
        shuffle=True,
        seed=0,
        load_labels={"paper": "label"},
    )
    assert len(loader) == -(-(train.numel() + authors.numel()) // 16)
    for _epoch in range(2):
        seen = {"paper": [], "author": []}
        for input_nodes, output_nodes, blocks in loader:
            assert set(output_nodes) == {"paper", "author"} and set(input_nodes) == set(NUM_NODES)
            for ntype, ids in output_nodes.items():
                seen[ntype].append(ids.numpy())
                assert torch.equal(blocks[-1].dstnodes[ntype].data[NID], ids)
            for outer, inner in zip(blocks[:-1], blocks[1:], strict=True):
                for ntype in NUM_NODES:
                    assert torch.equal(outer.dstnodes[ntype].data[NID], inner.srcnodes[ntype].data[NID])
            assert blocks[-1].num_edges(HAS_TOPIC) == 0
            papers, writers = input_nodes["paper"].numpy(), input_nodes["author"].numpy()
            np.testing.assert_array_equal(
                blocks[0].srcdata["feat"]["paper"].numpy(), new["nodes"]["paper"]["feat"][papers]
            )
            np.testing.assert_array_equal(
                blocks[0].srcnodes["author"].data["age"].numpy(), new["nodes"]["author"]["age"][writers]
            )
            labels = blocks[-1].dstdata["label"]
            assert set(labels) == {"paper"}
            np.testing.assert_array_equal(
                labels["paper"].numpy(), new["nodes"]["paper"]["label"][output_nodes["paper"].numpy()]
            )
        np.testing.assert_array_equal(np.sort(np.concatenate(seen["paper"])), train.numpy())
        np.testing.assert_array_equal(np.sort(np.concatenate(seen["author"])), authors.numpy())


def test_node_loader_bad_names(g):
    with pytest.raises(KeyError, match="node type 'author' has no data 'feat'"):
        DistNodeDataLoader(g, {"paper": [0]}, NeighborSampler([2]), load_features={"author": "feat"})
    with pytest.raises(KeyError, match="unknown node type 'venue'"):
        DistNodeDataLoader(g, {"venue": [0]}, NeighborSampler([2]))
    with pytest.raises(KeyError, match="node data 'missing' does not exist"):
        DistNodeDataLoader(g, {"paper": [0]}, NeighborSampler([2]), load_features=["missing"])
    with pytest.raises(ValueError, match="one node type"):
        next(
            iter(
                DistNodeDataLoader(g, {"paper": [0]}, NeighborSampler([2], edge_dir="out"), load_labels=None)
            )
        )


@pytest.mark.parametrize("exclude", ["self", "reverse_types"])
def test_edge_loader_typed_pairs_negatives_and_reverse_type_exclusion(g, typed_files, exclude):
    _, new = typed_files
    writes_src, writes_dst = new["edges"][WRITES]
    loader = DistEdgeDataLoader(
        g,
        {"writes": torch.arange(0, 400, 2)},
        NeighborSampler([-1]),
        batch_size=32,
        shuffle=True,
        negative_sampler=Uniform(3, seed=0),
        exclude=exclude,
        reverse_etypes={"writes": "rev_writes", "rev_writes": "writes"},
        load_features={"paper": "feat"},
        seed=2,
    )
    seen, reverse_seen = [], 0
    for input_nodes, pair, neg_pair, blocks in loader:
        block = blocks[0]
        nodes = pair.ndata[NID]
        for ntype in NUM_NODES:
            assert torch.equal(neg_pair.ndata[NID][ntype], nodes[ntype])
            assert torch.equal(block.dstnodes[ntype].data[NID], nodes[ntype])
        batch = pair.edata[EID][WRITES].numpy()
        seen.append(batch)
        assert pair.num_edges() == pair.num_edges("writes") == batch.size
        u, v = pair.edges(etype="writes")
        np.testing.assert_array_equal(nodes["author"][u].numpy(), writes_src[batch])
        np.testing.assert_array_equal(nodes["paper"][v].numpy(), writes_dst[batch])
        nu, nv = neg_pair.edges(etype=WRITES)
        np.testing.assert_array_equal(nodes["author"][nu].numpy(), np.repeat(writes_src[batch], 3))
        assert neg_pair.num_edges() == 3 * batch.size and int(nodes["paper"][nv].max()) < NUM_NODES["paper"]
        relation = pair["writes"]
        assert relation.srcdata is pair.nodes["author"].data and relation.dstdata is pair.nodes["paper"].data
        np.testing.assert_array_equal(
            block.srcdata["feat"]["paper"].numpy(),
            new["nodes"]["paper"]["feat"][input_nodes["paper"].numpy()],
        )
        # Every in-edge of every endpoint is sampled except those excluded.
        assert not np.isin(batch, block.edata[EID][WRITES].numpy()).any()
        rev_src, rev_dst, _ = (t.numpy() for t in block.edges(form="all", etype=REV_WRITES))
        rev_pairs = set(
            zip(
                block.srcdata[NID]["paper"][rev_src].tolist(),
                block.dstdata[NID]["author"][rev_dst].tolist(),
                strict=True,
            )
        )
        reverse_of_batch = set(zip(writes_dst[batch].tolist(), writes_src[batch].tolist(), strict=True))
        reverse_seen += len(rev_pairs & reverse_of_batch)
        assert block.num_edges(REV_WRITES) > 0
    np.testing.assert_array_equal(np.sort(np.concatenate(seen)), np.arange(0, 400, 2))
    if exclude == "reverse_types":
        assert reverse_seen == 0
    else:
        assert reverse_seen > 0  # without reverse-type exclusion the model would see the answers


def test_edge_loader_typed_bad_input(g):
    with pytest.raises(ValueError, match="eids must be {etype: IDs}"):
        DistEdgeDataLoader(g, torch.arange(4), NeighborSampler([2]), load_features=())
    with pytest.raises(ValueError, match="reverse_etypes"):
        DistEdgeDataLoader(
            g, {"writes": [0]}, NeighborSampler([2]), exclude="reverse_types", load_features=()
        )
    with pytest.raises(ValueError, match="cannot be the reverse"):
        DistEdgeDataLoader(
            g,
            {"writes": [0]},
            NeighborSampler([2]),
            exclude="reverse_types",
            reverse_etypes={"writes": "cites"},
            load_features=(),
        )
    with pytest.raises(ValueError, match="one edge type"):
        DistEdgeDataLoader(
            g, {"writes": [0]}, NeighborSampler([2]), exclude="reverse_id", reverse_eids=[0], load_features=()
        )
