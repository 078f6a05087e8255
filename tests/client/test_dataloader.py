"""Mini-batch loaders: epoch coverage, equal batch counts across trainer ranks, prefetching threads,
error propagation, early exit, link-prediction batches."""

from __future__ import annotations

import json
import os
import socket
import threading

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from graphstore.client.block import to_block
from graphstore.client.constants import EID, NID
from graphstore.client.context import set_context
from graphstore.client.dataloader import (
    LOADER_THREAD_PREFIX,
    DistDataLoader,
    DistEdgeDataLoader,
    DistNodeDataLoader,
)
from graphstore.client.dataloader.batching import batch_plan, num_batches
from graphstore.client.dist_graph import DistGraph
from graphstore.client.samplers import NeighborSampler, Uniform
from graphstore.client.sampling import sample_neighbors
from tests.utils.graphs import make_partitioned_graph, relabeled

NUM_NODES = 1200


@pytest.fixture(scope="module")
def graph_files(tmp_path_factory):
    config, graph = make_partitioned_graph(
        tmp_path_factory.mktemp("loader"), num_nodes=NUM_NODES, num_parts=2
    )
    return config, relabeled(graph)


@pytest.fixture
def standalone(graph_files):
    config, new = graph_files
    g = DistGraph("testgraph", part_config=config)
    yield g, new
    set_context(None).close()


def loader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(LOADER_THREAD_PREFIX)]


# -- pure batch planning ---------------------------------------------------------------------------------


@pytest.mark.parametrize("num_items", [1, 7, 10, 23])
@pytest.mark.parametrize("batch_size", [1, 3, 10, 30])
@pytest.mark.parametrize("drop_last", [False, True])
def test_batch_plan_covers_once_then_pads_with_full_batches(num_items, batch_size, drop_last):
    order = np.random.default_rng(num_items).permutation(num_items)
    own = num_batches(num_items, batch_size, drop_last)
    plan = batch_plan(num_items, batch_size, own + 3, drop_last, order)
    assert len(plan) == own + 3
    covered = np.concatenate(plan[:own]) if own else np.empty(0, np.int64)
    if drop_last:
        assert len(covered) == own * batch_size and len(np.unique(covered)) == len(covered)
    else:
        np.testing.assert_array_equal(np.sort(covered), np.arange(num_items))
    for batch in plan[own:]:
        assert len(batch) == min(batch_size, num_items)
        assert len(np.unique(batch)) == len(batch)


def test_batch_plan_without_items_cannot_pad():
    assert batch_plan(0, 4, 0, False) == []
    with pytest.raises(ValueError, match="no items"):
        batch_plan(0, 4, 2, False)


# -- DistDataLoader --------------------------------------------------------------------------------------


def test_dist_data_loader_dgl_example(standalone):
    """The reference's example: collate_fn samples and builds a block; the loop reads srcdata[NID]."""
    g, new = standalone
    nodes = torch.arange(0, NUM_NODES, 2)

    def sample(seeds):
        seeds = torch.LongTensor(np.asarray(seeds))
        frontier = sample_neighbors(g, seeds, 10)
        return to_block(frontier, seeds)

    loader = DistDataLoader(dataset=nodes, batch_size=100, collate_fn=sample, shuffle=True, seed=0)
    assert len(loader) == 6
    seen = []
    for block in loader:
        feat = g.ndata["feat"][block.srcdata[NID]]
        assert feat.shape == (block.num_src_nodes(), new["feat"].shape[1])
        np.testing.assert_allclose(feat.numpy(), new["feat"][block.srcdata[NID].numpy()])
        seen.append(block.dstdata[NID].numpy())
    np.testing.assert_array_equal(np.sort(np.concatenate(seen)), nodes.numpy())
    assert not loader_threads()


# -- DistNodeDataLoader ----------------------------------------------------------------------------------


@pytest.mark.parametrize("prefetch", [0, 2])
def test_node_loader_epoch_covers_every_node_once_with_data(standalone, prefetch):
    g, new = standalone
    train = np.flatnonzero(new["train_mask"])
    loader = DistNodeDataLoader(
        g,
        torch.from_numpy(train),
        NeighborSampler([4, 3]),
        batch_size=64,
        shuffle=True,
        prefetch=prefetch,
        seed=3,
    )
    assert len(loader) == -(-len(train) // 64)
    for _epoch in range(2):
        outputs = []
        count = 0
        for input_nodes, output_nodes, blocks in loader:
            count += 1
            outputs.append(output_nodes.numpy())
            assert torch.equal(blocks[0].srcdata[NID], input_nodes)
            assert torch.equal(blocks[-1].dstdata[NID], output_nodes)
            np.testing.assert_allclose(blocks[0].srcdata["feat"].numpy(), new["feat"][input_nodes.numpy()])
            np.testing.assert_array_equal(
                blocks[-1].dstdata["label"].numpy(), new["label"][output_nodes.numpy()]
            )
            for block in blocks:
                u, v = block.edges()
                eid = block.edata[EID].numpy()
                np.testing.assert_array_equal(new["src"][eid], block.srcdata[NID][u].numpy())
                np.testing.assert_array_equal(new["dst"][eid], block.dstdata[NID][v].numpy())
        assert count == len(loader)
        np.testing.assert_array_equal(np.sort(np.concatenate(outputs)), train)
    assert not loader_threads()


def test_node_loader_batches_kept_by_the_caller_stay_intact(standalone):
    """Feature memory is recycled only once a batch is dropped: keeping every batch keeps its values."""
    from graphstore.client.buffers import RowBufferPool

    g, new = standalone
    train = np.flatnonzero(new["train_mask"])
    loader = DistNodeDataLoader(
        g, torch.from_numpy(train), NeighborSampler([4, 3]), batch_size=len(train) // 8, prefetch=2
    )
    loader._buffers = RowBufferPool(max_buffers=2, min_bytes=0)  # recycle even this small graph's rows
    kept = [(input_nodes, blocks[0].srcdata["feat"]) for input_nodes, _, blocks in loader]
    assert len(kept) >= 8 and loader._buffers.allocated >= len(kept)
    for input_nodes, feat in kept:
        np.testing.assert_allclose(feat.numpy(), new["feat"][input_nodes.numpy()])
    del kept
    reused_before = loader._buffers.reused
    for input_nodes, _, blocks in loader:  # dropped batch by batch: memory comes back
        np.testing.assert_allclose(blocks[0].srcdata["feat"].numpy(), new["feat"][input_nodes.numpy()])
    assert loader._buffers.reused > reused_before


def test_node_loader_drop_last_and_mask_input(standalone):
    g, new = standalone
    mask = torch.from_numpy(new["train_mask"])
    loader = DistNodeDataLoader(
        g, mask, NeighborSampler([2]), batch_size=50, drop_last=True, load_labels=None
    )
    sizes = [len(out) for _, out, _ in loader]
    assert sizes == [50] * (int(mask.sum()) // 50) and len(loader) == len(sizes)


def test_unknown_feature_names_rejected(standalone):
    g, _ = standalone
    with pytest.raises(KeyError, match="nope"):
        DistNodeDataLoader(g, torch.arange(10), NeighborSampler([2]), load_features=("nope",))
    with pytest.raises(ValueError, match="batch_size"):
        DistNodeDataLoader(g, torch.arange(10), NeighborSampler([2]), batch_size=0)


class FailingSampler(NeighborSampler):
    """Raises on its third batch."""

    def __init__(self):
        super().__init__([2])
        self.calls = 0
        self.lock = threading.Lock()

    def sample_blocks(self, g, seed_nodes, exclude_eids=None):
        with self.lock:
            self.calls += 1
            call = self.calls
        if call == 3:
            raise RuntimeError("sampling failed on purpose")
        return super().sample_blocks(g, seed_nodes, exclude_eids)


def test_background_error_reaches_the_caller_and_threads_end(standalone):
    g, _ = standalone
    loader = DistNodeDataLoader(g, torch.arange(400), FailingSampler(), batch_size=50, prefetch=3)
    got = 0
    with pytest.raises(RuntimeError, match="on purpose"):
        for _ in loader:
            got += 1
    assert got == 2
    assert not loader_threads()


def test_early_break_stops_background_threads(standalone):
    g, _ = standalone
    loader = DistNodeDataLoader(
        g, torch.arange(NUM_NODES), NeighborSampler([5, 5]), batch_size=20, prefetch=4
    )
    for index, _ in enumerate(loader):
        assert loader_threads(), "batches should be produced in background threads"
        if index == 2:
            break
    assert not loader_threads()
    # an iterator held by the caller is stopped by close()
    iterator = iter(loader)
    next(iterator)
    iterator.close()
    assert not loader_threads()
    with pytest.raises(StopIteration):
        next(iterator)


# -- DistEdgeDataLoader ----------------------------------------------------------------------------------


@pytest.mark.parametrize("exclude", [None, "self", "reverse_id"])
def test_edge_loader_pairs_negatives_and_exclusion(standalone, exclude):
    g, new = standalone
    num_edges = new["src"].shape[0]
    reverse = (np.arange(num_edges) + 7) % num_edges  # any mapping: exclusion must follow it
    eids = torch.arange(0, num_edges, 3)
    loader = DistEdgeDataLoader(
        g,
        eids,
        NeighborSampler([-1, -1]),
        batch_size=128,
        shuffle=True,
        negative_sampler=Uniform(2, seed=0),
        exclude=exclude,
        reverse_eids=torch.from_numpy(reverse) if exclude == "reverse_id" else None,
        seed=1,
    )
    seen = []
    for input_nodes, pair, neg_pair, blocks in loader:
        nodes = pair.ndata[NID]
        assert torch.equal(neg_pair.ndata[NID], nodes) and torch.equal(blocks[-1].dstdata[NID], nodes)
        assert torch.equal(blocks[0].srcdata[NID], input_nodes)
        np.testing.assert_allclose(blocks[0].srcdata["feat"].numpy(), new["feat"][input_nodes.numpy()])
        batch = pair.edata[EID].numpy()
        seen.append(batch)
        u, v = pair.edges()
        np.testing.assert_array_equal(nodes[u].numpy(), new["src"][batch])
        np.testing.assert_array_equal(nodes[v].numpy(), new["dst"][batch])
        nu, nv = neg_pair.edges()
        assert neg_pair.num_edges() == 2 * pair.num_edges()
        np.testing.assert_array_equal(nodes[nu].numpy(), np.repeat(new["src"][batch], 2))
        sampled = np.concatenate([b.edata[EID].numpy() for b in blocks])
        if exclude is None:
            # full neighborhoods of the endpoints contain the batch's own edges
            assert np.isin(batch, sampled).all()
        else:
            assert not np.isin(batch, sampled).any()
        if exclude == "reverse_id":
            assert not np.isin(reverse[batch], sampled).any()
    np.testing.assert_array_equal(np.sort(np.concatenate(seen)), eids.numpy())


def test_edge_loader_without_negatives_and_bad_exclude(standalone):
    g, new = standalone
    loader = DistEdgeDataLoader(g, torch.arange(100), NeighborSampler([3]), batch_size=40)
    items = list(loader)
    assert len(items) == 3 and all(len(item) == 3 for item in items)
    with pytest.raises(ValueError, match="exclude"):
        DistEdgeDataLoader(g, torch.arange(100), NeighborSampler([3]), exclude="reverse_types")
    with pytest.raises(ValueError, match="reverse_eids"):
        DistEdgeDataLoader(g, torch.arange(100), NeighborSampler([3]), exclude="reverse_id")


# -- two trainer processes -------------------------------------------------------------------------------


def _trainer(rank: int, world_size: int, port: int, config: str, out_dir: str) -> None:
    import torch.distributed as dist

    from graphstore.client.split import node_split

    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size)
    )
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        g = DistGraph("testgraph", part_config=config)
        bounds = g.get_partition_book().node_bounds
        # Skewed training set: most of partition 0, a few nodes of partition 1.
        mask = np.zeros(g.num_nodes(), dtype=bool)
        mask[bounds[0] : bounds[1] - 20] = True
        mask[bounds[1] : bounds[1] + 37] = True
        nids = node_split(torch.from_numpy(mask), g.get_partition_book(), force_even=False)
        loader = DistNodeDataLoader(g, nids, NeighborSampler([3, 3]), batch_size=32, shuffle=True, seed=rank)
        epochs = []
        for _ in range(2):
            epochs.append([out.tolist() for _, out, _ in loader])
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(
                {"nids": nids.tolist(), "len": len(loader), "own": loader.num_own_batches, "epochs": epochs},
                f,
            )
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(120)
def test_two_trainers_cover_training_nodes_once_with_equal_batch_counts(graph_files, tmp_path):
    config, _ = graph_files
    mp.start_processes(_trainer, args=(2, free_port(), config, str(tmp_path)), nprocs=2, start_method="spawn")
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    own = [r["own"] for r in results]
    assert own[0] != own[1], "the split should be uneven for this test to mean something"
    assert results[0]["len"] == results[1]["len"] == max(own)
    union = np.sort(np.concatenate([r["nids"] for r in results]))
    assert len(np.unique(union)) == len(union)
    for epoch in range(2):
        covered = []
        for result in results:
            batches = result["epochs"][epoch]
            assert len(batches) == max(own)
            covered += [n for batch in batches[: result["own"]] for n in batch]
            # padding batches repeat the rank's own nodes
            for batch in batches[result["own"] :]:
                assert set(batch) <= set(result["nids"])
        np.testing.assert_array_equal(np.sort(covered), union)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_node_loader_puts_batches_on_the_gpu(standalone):
    from graphstore.client.nn import GraphSAGE

    g, new = standalone
    loader = DistNodeDataLoader(g, torch.arange(256), NeighborSampler([4, 4]), batch_size=64, device="cuda")
    model = GraphSAGE(new["feat"].shape[1], 16, 4).cuda()
    for input_nodes, output_nodes, blocks in loader:
        assert input_nodes.is_cuda and output_nodes.is_cuda
        assert all(b.device.type == "cuda" and b.srcdata["feat"].is_cuda for b in blocks)
        logits = model(blocks, blocks[0].srcdata["feat"])
        torch.nn.functional.cross_entropy(logits, blocks[-1].dstdata["label"]).backward()


@pytest.mark.parametrize("dense", [True, False])
def test_remote_feature_cache_serves_the_same_rows(standalone, monkeypatch, dense):
    from graphstore.client.dataloader import RemoteFeatureCache

    g, new = standalone
    if not dense:
        monkeypatch.setattr(RemoteFeatureCache, "_DENSE_SLOTS_MAX_NODES", 0)
    cache = RemoteFeatureCache(g, "feat", 0.25)
    ctx = g._ctx
    start, end = ctx.book.node_bounds[ctx.local_part_id], ctx.book.node_bounds[ctx.local_part_id + 1]
    remote = np.setdiff1d(np.arange(NUM_NODES), np.arange(start, end))
    assert cache.node_ids.size == round(0.25 * remote.size)
    assert np.isin(cache.node_ids, remote).all()
    # the cached nodes are the remote ones of highest out-degree
    degree = np.bincount(new["src"], minlength=NUM_NODES)
    assert degree[cache.node_ids].min() >= np.sort(degree[remote])[::-1][cache.node_ids.size]
    ids = np.random.default_rng(0).integers(0, NUM_NODES, 3000)
    np.testing.assert_array_equal(cache.read(torch.from_numpy(ids)).numpy(), new["feat"][ids])
    assert 0 < cache.hit_rate < 1
    loader = DistNodeDataLoader(
        g, torch.arange(300), NeighborSampler([5, 5], seed=0), batch_size=100, cache_remote_features=0.5
    )
    for input_nodes, _, blocks in loader:
        np.testing.assert_array_equal(blocks[0].srcdata["feat"].numpy(), new["feat"][input_nodes.numpy()])
    # half the remote nodes, the most sampled ones: well over a quarter of all input rows
    assert loader.feature_caches["feat"].hit_rate > 0.3
    with pytest.raises(ValueError, match="fraction"):
        RemoteFeatureCache(g, "feat", 1.5)
