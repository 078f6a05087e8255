"""Loaders and the feature cache on a GPU: whole batches on the device, pinned staging with non-blocking
copies on a side stream, a GPU-resident RemoteFeatureCache. Skipped without CUDA."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphstore.client.dataloader import DistEdgeDataLoader, DistNodeDataLoader, PairGraph, RemoteFeatureCache
from graphstore.client.dataloader.device_transfer import BatchTransfer, host_to_device, iter_tensors
from graphstore.client.samplers import NeighborSampler, Uniform
from tests.client.conftest import LOADER_GRAPH_NODES
from tests.client.test_device_transfer import a_block

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.usefixtures("unbound_device"),
]

GPU = torch.device("cuda", 0)


def test_pinned_staging_and_non_blocking_copies():
    host = torch.arange(1000, dtype=torch.float32)
    on_gpu = host_to_device(host, GPU)
    torch.cuda.current_stream(GPU).synchronize()
    assert on_gpu.device == GPU and torch.equal(on_gpu.cpu(), host)
    pinned = BatchTransfer(torch.device("cpu"), pin_memory=True).move((host, {"a": torch.ones(3)}))
    assert all(t.is_pinned() and t.device.type == "cpu" for t in iter_tensors(pinned))
    assert torch.equal(pinned[0], host)
    assert BatchTransfer(GPU).pin_memory is True
    block = a_block()
    pinned_block = block.pin_memory()
    assert (
        all(t.is_pinned() for t in iter_tensors(pinned_block)) and block.srcdata["feat"].is_pinned() is False
    )
    pair = PairGraph(torch.tensor([0]), torch.tensor([1]), torch.tensor([3, 4])).pin_memory()
    assert all(t.is_pinned() for t in iter_tensors(pair))


def test_staged_batch_is_ready_on_the_consumers_stream():
    transfer = BatchTransfer(GPU)
    batch = {"x": torch.randn(4096, 64), "ids": torch.arange(4096)}
    with transfer.producing():
        assert torch.cuda.current_stream(GPU) != torch.cuda.default_stream(GPU)
        staged = transfer.stage(batch)
    out = transfer.deliver(staged)
    assert all(t.device == GPU for t in iter_tensors(out))
    assert torch.equal(out["x"].cpu(), batch["x"]) and torch.equal(out["ids"].cpu(), batch["ids"])


@pytest.mark.parametrize("prefetch", [0, 2])
def test_node_loader_batches_are_wholly_on_the_gpu(standalone_graph, prefetch):
    g, new = standalone_graph
    loader = DistNodeDataLoader(
        g, torch.arange(300), NeighborSampler([4, 4], seed=0), batch_size=64, device="cuda", prefetch=prefetch
    )
    assert loader.device == GPU and loader.pin_memory
    for _epoch in range(2):
        for input_nodes, output_nodes, blocks in loader:
            tensors = [input_nodes, output_nodes, *iter_tensors(blocks)]
            assert all(t.device == GPU for t in tensors)
            np.testing.assert_array_equal(
                blocks[0].srcdata["feat"].cpu().numpy(), new["feat"][input_nodes.cpu().numpy()]
            )
            np.testing.assert_array_equal(
                blocks[-1].dstdata["label"].cpu().numpy(), new["label"][output_nodes.cpu().numpy()]
            )


def test_edge_loader_batches_are_wholly_on_the_gpu(standalone_graph):
    g, _ = standalone_graph
    loader = DistEdgeDataLoader(
        g, torch.arange(256), NeighborSampler([3]), batch_size=64, negative_sampler=Uniform(2), device="cuda"
    )
    for batch in loader:
        assert all(t.device == GPU for t in iter_tensors(batch))


def test_sampler_output_device_and_features_agree(standalone_graph):
    g, _ = standalone_graph
    loader = DistNodeDataLoader(
        g, torch.arange(64), NeighborSampler([3], output_device="cuda:0"), batch_size=32
    )
    assert loader.device == GPU
    for batch in loader:
        assert all(t.device == GPU for t in iter_tensors(batch))


def test_feature_cache_on_the_gpu(standalone_graph):
    g, new = standalone_graph
    cache = RemoteFeatureCache(g, "feat", 0.4, device="cuda")
    assert cache.device == GPU and cache.nbytes > 0
    ids = np.random.default_rng(0).integers(0, LOADER_GRAPH_NODES, 3000)
    rows = cache.read(ids)
    assert rows.device == GPU
    np.testing.assert_array_equal(rows.cpu().numpy(), new["feat"][ids])
    assert cache.stats().hits == int(np.isin(ids, cache.node_ids).sum()) > 0
    hot = cache.node_ids[:10]
    np.testing.assert_array_equal(cache.read(hot).cpu().numpy(), new["feat"][hot])
    loader = DistNodeDataLoader(
        g,
        torch.arange(200),
        NeighborSampler([4, 4], seed=0),
        batch_size=50,
        device="cuda",
        cache_remote_features=0.5,
    )
    assert loader.feature_caches["feat"].device == GPU
    for input_nodes, _, blocks in loader:
        feat = blocks[0].srcdata["feat"]
        assert feat.device == GPU
        np.testing.assert_array_equal(feat.cpu().numpy(), new["feat"][input_nodes.cpu().numpy()])
    assert loader.cache_stats()["feat"].hits > 0
