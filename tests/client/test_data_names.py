"""The loaders' default features and labels come from the graph's own data (no hard-coded ``feat``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphstore.client import DistGraph, DistNodeDataLoader, DistTensor, NeighborSampler, exit_client
from graphstore.client.dataloader import DistEdgeDataLoader
from graphstore.partition import partition_graph


def _partition(tmp_path, node_arrays: dict, name: str = "names") -> tuple[str, dict]:
    rng = np.random.default_rng(0)
    arrays = {"src": rng.integers(0, 100, 400), "dst": rng.integers(0, 100, 400), **node_arrays}
    result = partition_graph(arrays, name, 2, str(tmp_path / name), part_method="random")
    return result.config_path, {k: v[result.orig_nid] for k, v in node_arrays.items()}


@pytest.fixture
def open_graph():
    exit_client()
    yield lambda config, name="names": DistGraph(name, part_config=config)
    exit_client()


def test_pyg_names_are_pulled_by_default(tmp_path, open_graph):
    rng = np.random.default_rng(1)
    config, ref = _partition(
        tmp_path,
        {
            "x": rng.random((100, 4), dtype=np.float32),
            "y": rng.integers(0, 3, 100),
            "train_mask": np.ones(100, bool),
        },
    )
    g = open_graph(config)
    g.ndata["h_runtime"] = torch.zeros(100, 2)  # created at run time: never a default feature
    loader = DistNodeDataLoader(g, torch.arange(0, 100, 7), NeighborSampler([3]), batch_size=8)
    assert loader.load_features == ("x",) and loader.load_labels == "y"
    input_nodes, seeds, blocks = next(iter(loader))
    np.testing.assert_array_equal(blocks[0].srcdata["x"].numpy(), ref["x"][input_nodes.numpy()])
    np.testing.assert_array_equal(blocks[-1].dstdata["y"].numpy(), ref["y"][seeds.numpy()])
    edges = DistEdgeDataLoader(g, torch.arange(20), NeighborSampler([2]), batch_size=10)
    assert edges.load_features == ("x",)


def test_feat_and_label_win_and_a_graph_without_labels_loads_none(tmp_path, open_graph):
    rng = np.random.default_rng(2)
    config, _ = _partition(
        tmp_path,
        {
            "feat": rng.random((100, 3), dtype=np.float32),
            "emb": rng.random((100, 2), dtype=np.float32),
            "label": rng.integers(0, 3, 100),
            "year": rng.integers(0, 3, 100),
        },
        "preferred",
    )
    g = open_graph(config, "preferred")
    loader = DistNodeDataLoader(g, torch.arange(10), NeighborSampler([2]), batch_size=5)
    assert loader.load_features == ("feat",) and loader.load_labels == "label"
    exit_client()
    config, _ = _partition(
        tmp_path,
        {"a": rng.random((100, 3), dtype=np.float32), "b": rng.random((100, 2), dtype=np.float32)},
        "plain",
    )
    g = open_graph(config, "plain")
    DistTensor((100,), torch.int64, name="runtime_labels")
    loader = DistNodeDataLoader(g, torch.arange(10), NeighborSampler([2]), batch_size=5)
    assert loader.load_features == ("a", "b") and loader.load_labels is None
    with pytest.raises(KeyError, match="'feat' does not exist"):
        DistNodeDataLoader(g, torch.arange(10), NeighborSampler([2]), load_features=("feat",))
