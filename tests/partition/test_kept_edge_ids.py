"""A graph partitioned into one part keeps its input's node and edge IDs (as DGL does): the partition's
edge IDs are then not its CSR positions, and every reader (the server's sampling, exclusion, weights
and ``find_edges``; the co-located device graph; edge data by ID) goes through the partition's
``in_eid``. Checked against the input arrays, which a standalone script indexes by the same IDs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphstore.client.constants import EID, NID
from graphstore.client.context import set_context
from graphstore.client.dataloader import DistNodeDataLoader
from graphstore.client.dist_graph import DistGraph
from graphstore.client.samplers import NeighborSampler
from graphstore.client.sampling import find_edges, sample_neighbors
from graphstore.partition import load_partition, partition_graph, read_config
from graphstore.partition.validate import check_partition_data
from tests.utils.graphs import make_graph

NUM_NODES = 300


@pytest.fixture
def one_part(tmp_path):
    """``(config path, input arrays)`` of a graph partitioned into one part; edge data ``eid`` holds each
    edge's input ID and ``w`` a weight that is zero on the even IDs."""
    graph = make_graph(NUM_NODES, avg_degree=6, seed=3)
    num_edges = graph["src"].shape[0]
    graph["eid"] = np.arange(num_edges, dtype=np.int64)
    graph["w"] = (np.arange(num_edges) % 2).astype(np.float32)
    result = partition_graph(graph, "kept", 1, str(tmp_path / "p"))
    return result.config_path, graph, result


def test_one_partition_keeps_node_and_edge_ids(one_part):
    config, graph, result = one_part
    np.testing.assert_array_equal(result.orig_nid, np.arange(NUM_NODES))
    np.testing.assert_array_equal(result.orig_eid, np.arange(graph["src"].shape[0]))
    data = load_partition(config, 0)
    check_partition_data(data)
    assert data.in_eid is not None  # the input is not sorted by destination
    # Format 3: a reader that does not know in_eid.npy refuses it instead of misreading edge IDs.
    assert read_config(config)["format_version"] == 3
    np.testing.assert_array_equal(np.asarray(data.edge_feats["_N:_E:_N"]["eid"]), graph["eid"])
    # Position p holds the edge whose ID is in_eid[p]: its source is the input's.
    np.testing.assert_array_equal(np.asarray(data.in_src), graph["src"][np.asarray(data.in_eid)])
    np.testing.assert_array_equal(data.positions_of(data.edge_ids_at(np.arange(5))), np.arange(5))


def test_several_partitions_still_number_edges_by_position(tmp_path):
    graph = make_graph(NUM_NODES, avg_degree=6, seed=3)
    result = partition_graph(graph, "two", 2, str(tmp_path / "p"), part_method="random")
    assert load_partition(result.config_path, 0).in_eid is None
    assert read_config(result.config_path)["format_version"] == 2


@pytest.fixture
def standalone(one_part):
    config, graph, _ = one_part
    g = DistGraph("kept", part_config=config)
    yield g, graph
    set_context(None).close()


def test_standalone_reads_sample_and_find_edges_by_the_input_ids(standalone):
    g, graph = standalone
    eids = torch.arange(0, 40)
    assert torch.equal(g.edata["eid"][eids], eids)
    src, dst = find_edges(g, eids)
    np.testing.assert_array_equal(src.numpy(), graph["src"][:40])
    np.testing.assert_array_equal(dst.numpy(), graph["dst"][:40])
    seeds = torch.arange(0, NUM_NODES, 3)
    frontier = sample_neighbors(g, seeds, 4)
    s, d = frontier.edges()
    ids = frontier.edata[EID].numpy()
    np.testing.assert_array_equal(graph["src"][ids], s.numpy())
    np.testing.assert_array_equal(graph["dst"][ids], d.numpy())
    # Weights are read by ID: edges of weight 0 (even IDs) are never drawn.
    weighted = sample_neighbors(g, seeds, 4, prob="w").edata[EID].numpy()
    assert weighted.size and (weighted % 2 == 1).all()
    # Excluded IDs are never drawn, and the other in-edges still are.
    exclude = torch.from_numpy(ids)
    again = sample_neighbors(g, seeds, -1, exclude_edges=exclude).edata[EID].numpy()
    assert not np.isin(again, ids).any() and again.size


def test_the_colocated_device_graph_samples_by_the_input_ids(standalone):
    g, graph = standalone
    loader = DistNodeDataLoader(
        g, torch.arange(NUM_NODES), NeighborSampler([3, 3], prob="w"), batch_size=64, placement="device"
    )
    for _, _, blocks in loader:
        for block in blocks:
            src, dst = block.edges()
            ids = block.edata[EID].numpy()
            np.testing.assert_array_equal(graph["src"][ids], block.srcdata[NID][src].numpy())
            np.testing.assert_array_equal(graph["dst"][ids], block.dstdata[NID][dst].numpy())
            assert (ids % 2 == 1).all()
