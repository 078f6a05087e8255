"""The DGL compatibility namespace in-process (standalone mode): the names a DGL distributed script uses
exist under the same paths, accept DGL's arguments, and behave like the native API."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import graphstore.compat.dgl as dgl
from tests.utils.graphs import make_partitioned_graph

DGL_NAMES = {
    "graphstore.compat.dgl": ["NID", "EID", "to_block", "distributed", "dataloading", "nn"],
    "graphstore.compat.dgl.distributed": [
        "initialize",
        "exit_client",
        "DistGraph",
        "DistTensor",
        "DistEmbedding",
        "node_split",
        "edge_split",
        "sample_neighbors",
        "find_edges",
        "in_subgraph",
        "DistDataLoader",
        "DistNodeDataLoader",
        "DistEdgeDataLoader",
        "SparseAdagrad",
        "SparseAdam",
        "optim",
        "load_partition",
        "load_partition_book",
        "GraphPartitionBook",
        "PartitionPolicy",
        "NodePartitionPolicy",
        "EdgePartitionPolicy",
    ],
    "graphstore.compat.dgl.distributed.optim": ["SparseAdagrad", "SparseAdam"],
    "graphstore.compat.dgl.dataloading": [
        "NeighborSampler",
        "MultiLayerNeighborSampler",
        "MultiLayerFullNeighborSampler",
        "DistNodeDataLoader",
        "DistEdgeDataLoader",
        "DistDataLoader",
        "negative_sampler",
    ],
    "graphstore.compat.dgl.dataloading.negative_sampler": ["Uniform"],
    "graphstore.compat.dgl.nn": ["SAGEConv", "GATConv", "pytorch"],
    "graphstore.compat.dgl.nn.pytorch": ["SAGEConv", "GATConv"],
}


@pytest.mark.parametrize("module_name", sorted(DGL_NAMES))
def test_every_dgl_name_is_importable_from_its_dgl_path(module_name):
    module = importlib.import_module(module_name)
    missing = [name for name in DGL_NAMES[module_name] if not hasattr(module, name)]
    assert not missing, f"{module_name} lacks {missing}"


def test_attribute_paths_match_import_paths():
    from graphstore.compat.dgl.nn.pytorch import SAGEConv

    assert dgl.nn.pytorch.SAGEConv is SAGEConv is dgl.nn.SAGEConv
    assert dgl.distributed.optim.SparseAdagrad is dgl.distributed.SparseAdagrad
    assert dgl.NID == "_ID" and dgl.EID == "_ID"


@pytest.fixture(scope="module")
def standalone_graph(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compat-graph")
    config, graph = make_partitioned_graph(folder, num_nodes=600, num_parts=2, feat_dim=8, method="random")
    g = dgl.distributed.DistGraph("testgraph", part_config=config)
    yield g, graph
    dgl.distributed.exit_client()


def test_node_split_and_sampler_prefetch_lists(standalone_graph):
    g, graph = standalone_graph
    pb = g.get_partition_book()
    train = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    expected = np.flatnonzero(graph["train_mask"][graph["orig_nid"]])
    assert np.array_equal(np.sort(train.numpy()), expected)

    sampler = dgl.dataloading.NeighborSampler([5, 5], prefetch_node_feats=["feat"], prefetch_labels=["label"])
    loader = dgl.dataloading.DistNodeDataLoader(
        g, train, sampler, batch_size=64, shuffle=True, drop_last=False
    )
    seen = []
    for input_nodes, seeds, blocks in loader:
        assert torch.equal(blocks[0].srcdata[dgl.NID], input_nodes)
        assert torch.equal(blocks[0].srcdata["feat"], g.ndata["feat"][input_nodes])
        assert torch.equal(blocks[-1].dstdata["label"], g.ndata["label"][seeds])
        seen.append(seeds)
    assert np.array_equal(np.sort(torch.cat(seen).numpy()), expected)


def test_loader_without_prefetch_lists_pulls_nothing_like_dgl(standalone_graph):
    g, _ = standalone_graph
    sampler = dgl.dataloading.MultiLayerFullNeighborSampler(1)
    loader = dgl.dataloading.DistNodeDataLoader(g, torch.arange(50), sampler, batch_size=50)
    (input_nodes, _, blocks) = next(iter(loader))
    assert "feat" not in blocks[0].srcdata and "label" not in blocks[-1].dstdata
    # Full neighbors: the block holds every in-edge of the 50 nodes.
    assert blocks[0].num_edges() == int(g.in_degrees(torch.arange(50)).sum())


def test_dgl_only_arguments_give_clear_errors(standalone_graph):
    g, _ = standalone_graph
    with pytest.raises(NotImplementedError, match="node_trainer_ids"):
        dgl.distributed.node_split(
            g.ndata["train_mask"], node_trainer_ids=torch.zeros(600, dtype=torch.int64)
        )
    with pytest.raises(NotImplementedError, match="mask"):
        dgl.dataloading.NeighborSampler([5], mask="train_edges")
    with pytest.raises(FileNotFoundError, match="ip_config"):
        dgl.distributed.initialize("/nonexistent/ip_config.txt")


def test_sample_neighbors_accepts_dgl_keywords(standalone_graph):
    g, graph = standalone_graph
    frontier = dgl.distributed.sample_neighbors(g, torch.arange(20), 3, etype_sorted=True, output_device=None)
    src, dst = frontier.edges()
    assert src.numel() == dst.numel() > 0
    assert set(dst.tolist()) <= set(range(20))
    block = dgl.to_block(frontier, torch.arange(20))
    assert block.num_dst_nodes() == 20
