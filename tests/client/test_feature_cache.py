"""RemoteFeatureCache on the CPU: the rows equal an uncached pull, the counters count what was served and
pulled, the byte budget holds, and access ranking after a warm-up holds the most read remote rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphstore.client.context import set_context
from graphstore.client.dataloader import DistNodeDataLoader, RemoteFeatureCache
from graphstore.client.dist_graph import DistGraph
from graphstore.client.samplers import NeighborSampler
from tests.client.conftest import LOADER_GRAPH_FEAT_DIM as FEAT_DIM
from tests.client.conftest import LOADER_GRAPH_NODES as NUM_NODES
from tests.utils.graphs import make_partitioned_graph


def local_range(g) -> tuple[int, int]:
    ctx = g._ctx
    return int(ctx.book.node_bounds[ctx.local_part_id]), int(ctx.book.node_bounds[ctx.local_part_id + 1])


def remote_nodes(g) -> np.ndarray:
    start, end = local_range(g)
    return np.setdiff1d(np.arange(NUM_NODES), np.arange(start, end))


ROW_BYTES = FEAT_DIM * 4


def test_reads_equal_an_uncached_pull_and_are_counted(standalone_graph):
    g, new = standalone_graph
    cache = RemoteFeatureCache(g, "feat", 0.3, device="cpu")
    start, end = local_range(g)
    ids = np.random.default_rng(1).integers(0, NUM_NODES, 2000)
    rows = cache.read(torch.from_numpy(ids))
    assert rows.device.type == "cpu"
    torch.testing.assert_close(rows, g.ndata["feat"][torch.from_numpy(ids)], rtol=0, atol=0)
    np.testing.assert_array_equal(rows.numpy(), new["feat"][ids])

    stats = cache.stats()
    remote = (ids < start) | (ids >= end)
    hits = int(np.isin(ids, cache.node_ids).sum())
    assert stats.lookups == ids.size
    assert stats.hits == hits > 0
    assert stats.remote_lookups == int(remote.sum())
    assert stats.rows_pulled == int(remote.sum()) - hits
    assert stats.bytes_pulled == stats.rows_pulled * ROW_BYTES
    assert stats.hit_rate == pytest.approx(hits / ids.size)
    assert stats.remote_hit_rate == pytest.approx(hits / remote.sum())
    assert stats.cached_rows == cache.node_ids.size == round(0.3 * remote_nodes(g).size)
    assert stats.cached_bytes == cache.nbytes == cache.node_ids.size * ROW_BYTES

    # all hits, all misses, nothing: still the graph's rows
    cached = cache.node_ids[:7]
    np.testing.assert_array_equal(cache.read(cached).numpy(), new["feat"][cached])
    uncached = np.setdiff1d(np.arange(NUM_NODES), cache.node_ids)[:5]
    np.testing.assert_array_equal(cache.read(uncached).numpy(), new["feat"][uncached])
    assert cache.read(np.empty(0, dtype=np.int64)).shape == (0, FEAT_DIM)
    assert cache.stats(reset=True).lookups == ids.size + 12
    assert cache.stats().lookups == 0 and cache.stats().cached_rows == cache.node_ids.size


def test_byte_budget_is_respected(standalone_graph):
    g, new = standalone_graph
    budget = 10 * ROW_BYTES + ROW_BYTES // 2
    cache = RemoteFeatureCache(g, "feat", max_bytes=budget, device="cpu")
    assert cache.node_ids.size == 10 and cache.nbytes <= budget
    # with both limits, the smaller holds
    assert RemoteFeatureCache(g, "feat", 0.01, max_bytes=budget).node_ids.size == round(
        0.01 * remote_nodes(g).size
    )
    assert RemoteFeatureCache(g, "feat", 1.0, max_bytes=budget).node_ids.size == 10
    # the ten of highest out-degree among the remote nodes
    degree = np.bincount(new["src"], minlength=NUM_NODES)
    remote = remote_nodes(g)
    assert degree[cache.node_ids].min() >= np.sort(degree[remote])[::-1][10]
    # a zero budget holds nothing and only counts
    meter = RemoteFeatureCache(g, "feat", max_bytes=0)
    ids = np.arange(NUM_NODES)
    np.testing.assert_array_equal(meter.read(ids).numpy(), new["feat"])
    stats = meter.stats()
    assert (stats.cached_rows, stats.hits, stats.rows_pulled) == (0, 0, remote.size)
    assert stats.bytes_pulled == remote.size * ROW_BYTES


def test_access_ranking_holds_the_most_read_remote_rows_after_the_warmup(standalone_graph):
    g, new = standalone_graph
    start, end = local_range(g)
    remote = remote_nodes(g)
    hot, warm, cold = remote[:3], remote[3:6], remote[6:40]
    local = np.arange(start, min(end, start + 10))
    cache = RemoteFeatureCache(g, "feat", max_bytes=6 * ROW_BYTES, rank_by="access", warmup_batches=3)
    assert cache.node_ids.size == 0
    reads = [
        np.concatenate([hot, warm, cold[:10], local]),
        np.concatenate([hot, warm, cold[10:20], local]),
        np.concatenate([hot, cold[20:], local]),
    ]
    for batch in reads[:2]:
        np.testing.assert_array_equal(cache.read(batch).numpy(), new["feat"][batch])
        assert cache.node_ids.size == 0
    np.testing.assert_array_equal(cache.read(reads[2]).numpy(), new["feat"][reads[2]])
    # hot read 3 times, warm twice, the co-located nodes (read 3 times) are never held
    np.testing.assert_array_equal(cache.node_ids, np.sort(np.concatenate([hot, warm])))
    assert cache.stats().hits == 0
    batch = np.concatenate([cold[:4], hot, local])
    np.testing.assert_array_equal(cache.read(batch).numpy(), new["feat"][batch])
    stats = cache.stats()
    assert stats.hits == hot.size and stats.rows_pulled == sum(r.size - local.size for r in reads) + 4


def test_bad_arguments_name_the_value(standalone_graph):
    g, _ = standalone_graph
    with pytest.raises(ValueError, match="fraction"):
        RemoteFeatureCache(g, "feat", 1.5)
    with pytest.raises(ValueError, match="neither"):
        RemoteFeatureCache(g, "feat")
    with pytest.raises(ValueError, match="max_bytes"):
        RemoteFeatureCache(g, "feat", max_bytes=-1)
    with pytest.raises(ValueError, match="rank_by"):
        RemoteFeatureCache(g, "feat", 0.1, rank_by="random")
    with pytest.raises(ValueError, match="warmup_batches"):
        RemoteFeatureCache(g, "feat", 0.1, rank_by="access", warmup_batches=0)
    with pytest.raises(ValueError, match="device"):
        RemoteFeatureCache(g, "feat", 0.1, device="mps:0")


def test_loader_reports_its_caches_counters(standalone_graph):
    g, new = standalone_graph
    loader = DistNodeDataLoader(
        g, torch.arange(240), NeighborSampler([4, 4], seed=0), batch_size=80, cache_remote_features=0.5
    )
    assert loader.feature_caches["feat"].device == torch.device("cpu")
    rows = 0
    for input_nodes, _, blocks in loader:
        np.testing.assert_array_equal(blocks[0].srcdata["feat"].numpy(), new["feat"][input_nodes.numpy()])
        rows += input_nodes.numel()
    stats = loader.cache_stats(reset=True)["feat"]
    assert stats.lookups == rows and 0 < stats.hits < stats.remote_lookups
    assert loader.cache_stats()["feat"].lookups == 0


def test_ids_outside_the_rows_are_refused(standalone_graph):
    g, _ = standalone_graph
    cache = RemoteFeatureCache(g, "feat", 0.2)
    for bad in ([NUM_NODES], [-1]):
        with pytest.raises(IndexError, match=str(bad[0])):
            cache.read(np.array(bad))


@pytest.mark.parametrize("feat_dtype", ["float16", "bfloat16"])
def test_half_precision_rows_keep_their_dtype(tmp_path, feat_dtype):
    config, _ = make_partitioned_graph(tmp_path, num_nodes=300, num_parts=2, feat_dtype=feat_dtype)
    g = DistGraph("testgraph", part_config=config)
    try:
        cache = RemoteFeatureCache(g, "feat", 0.5)
        assert cache.stats().cached_bytes == cache.node_ids.size * g.ndata["feat"].shape[1] * 2
        ids = torch.from_numpy(np.random.default_rng(2).integers(0, 300, 500))
        rows = cache.read(ids)
        assert rows.dtype == getattr(torch, feat_dtype)
        assert 0 < cache.stats().hits < ids.numel()
        assert torch.equal(rows, g.ndata["feat"][ids])
    finally:
        set_context(None).close()
