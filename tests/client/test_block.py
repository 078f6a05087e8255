"""Blocks and to_block: dst-first source nodes, compact IDs, global IDs under NID / EID, relabeling paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphstore.client import local_ids as block_module
from graphstore.client.block import Block, to_block
from graphstore.client.constants import EID, NID
from graphstore.client.frontier import SampledSubgraph
from graphstore.client.local_ids import compact_ids


def random_frontier(rng, num_nodes=500, num_seeds=40, num_edges=300):
    seeds = rng.choice(num_nodes, num_seeds, replace=False)
    dst = rng.choice(seeds, num_edges)
    src = rng.integers(0, num_nodes, num_edges)
    eid = rng.permutation(10 * num_edges)[:num_edges]
    return seeds, SampledSubgraph(src, dst, eid, num_nodes)


def check_block_invariants(block: Block, frontier: SampledSubgraph, seeds: np.ndarray) -> None:
    src_nid = block.srcdata[NID].numpy()
    dst_nid = block.dstdata[NID].numpy()
    # dst nodes first among src nodes, in the order given.
    assert block.num_dst_nodes() == len(seeds)
    np.testing.assert_array_equal(dst_nid, seeds)
    np.testing.assert_array_equal(src_nid[: len(seeds)], seeds)
    # src nodes unique; exactly the seeds plus every frontier source.
    assert len(np.unique(src_nid)) == len(src_nid) == block.num_src_nodes()
    assert set(src_nid.tolist()) == set(seeds.tolist()) | set(frontier.src.tolist())
    # compact local IDs that map back to the frontier's global edges, in the same order.
    u, v = block.edges()
    assert u.dtype == v.dtype == torch.int64
    assert block.num_edges() == frontier.num_edges()
    if block.num_edges():
        assert 0 <= int(u.min()) and int(u.max()) < block.num_src_nodes()
        assert 0 <= int(v.min()) and int(v.max()) < block.num_dst_nodes()
    np.testing.assert_array_equal(src_nid[u.numpy()], frontier.src.numpy())
    np.testing.assert_array_equal(dst_nid[v.numpy()], frontier.dst.numpy())
    np.testing.assert_array_equal(block.edata[EID].numpy(), frontier.edata[EID].numpy())


@pytest.mark.parametrize("path", ["dense", "sorted"])
def test_to_block_invariants_on_both_relabel_paths(monkeypatch, path):
    if path == "sorted":
        monkeypatch.setattr(block_module, "_DENSE_MAX_NODES", 0)
        monkeypatch.setattr(block_module, "_DENSE_RATIO", 0)
    rng = np.random.default_rng(7)
    for _ in range(20):
        seeds, frontier = random_frontier(rng)
        block = to_block(frontier, torch.from_numpy(seeds))
        check_block_invariants(block, frontier, seeds)


def test_both_relabel_paths_agree_on_random_inputs():
    rng = np.random.default_rng(3)
    for trial in range(30):
        num_nodes = int(rng.integers(1, 2000))
        head = rng.choice(num_nodes, int(rng.integers(0, min(num_nodes, 50) + 1)), replace=False)
        rest = [rng.integers(0, num_nodes, int(rng.integers(0, 400))) for _ in range(int(rng.integers(1, 4)))]
        dense_ids, dense_local = block_module._compact_dense(head, rest, num_nodes)
        sorted_ids, sorted_local = block_module._compact_sorted(head, rest)
        np.testing.assert_array_equal(dense_ids, sorted_ids, err_msg=f"trial {trial}")
        for a, b, r in zip(dense_local, sorted_local, rest, strict=True):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(dense_ids[a], r)


def test_block_sizes_aliases_edge_index_and_pyg():
    frontier = SampledSubgraph([5, 6, 7, 5], [1, 1, 2, 2], [10, 11, 12, 13], num_nodes=8)
    block = to_block(frontier, [2, 1])
    assert block.number_of_src_nodes() == block.num_src_nodes() == 5
    assert block.number_of_dst_nodes() == block.num_dst_nodes() == 2
    assert block.number_of_edges() == 4
    np.testing.assert_array_equal(block.srcdata[NID].numpy(), [2, 1, 5, 6, 7])
    np.testing.assert_array_equal(block.edge_index.numpy(), [[2, 3, 4, 2], [1, 1, 0, 0]])
    np.testing.assert_array_equal(block.in_degrees().numpy(), [2, 2])
    edge_index, e_id, size = block.to_pyg()
    assert size == (5, 2)
    np.testing.assert_array_equal(edge_index.numpy(), block.edge_index.numpy())
    np.testing.assert_array_equal(e_id.numpy(), [10, 11, 12, 13])
    u, v, local_eid = block.edges(form="all")
    np.testing.assert_array_equal(local_eid.numpy(), np.arange(4))


def test_to_block_default_dst_and_empty_frontier():
    frontier = SampledSubgraph([3, 4], [9, 1], [0, 1], num_nodes=10)
    block = to_block(frontier)
    np.testing.assert_array_equal(block.dstdata[NID].numpy(), [1, 9])
    empty = SampledSubgraph([], [], [], num_nodes=10)
    block = to_block(empty, [4, 2])
    assert block.num_edges() == 0 and block.num_src_nodes() == 2
    np.testing.assert_array_equal(block.srcdata[NID].numpy(), [4, 2])


def test_to_block_rejects_duplicates_foreign_dst_and_bad_ids():
    frontier = SampledSubgraph([3, 4], [1, 2], [0, 1], num_nodes=10)
    with pytest.raises(ValueError, match="unique"):
        to_block(frontier, [1, 2, 1])
    with pytest.raises(ValueError, match="node 2"):
        to_block(frontier, [1])
    with pytest.raises(IndexError, match="11"):
        to_block(frontier, [1, 2, 11])
    with pytest.raises(IndexError, match="-1"):
        SampledSubgraph([3, -1], [1, 2], [0, 1], num_nodes=10)
    with pytest.raises(ValueError, match="lengths"):
        SampledSubgraph([3], [1, 2], [0, 1], num_nodes=10)
    with pytest.raises(TypeError, match="float"):
        to_block(frontier, torch.tensor([1.0, 2.0]))


def test_block_to_device_copies_everything():
    frontier = SampledSubgraph([3, 4], [1, 2], [0, 1], num_nodes=10)
    block = to_block(frontier, [1, 2])
    block.srcdata["feat"] = torch.randn(block.num_src_nodes(), 3)
    moved = block.to("cpu")
    assert moved is not block and moved.device.type == "cpu"
    assert torch.equal(moved.srcdata["feat"], block.srcdata["feat"])
    assert torch.equal(moved.edata[EID], block.edata[EID])


def test_compact_ids_keeps_head_order():
    unique_ids, (local,) = compact_ids(np.array([9, 2, 5]), [np.array([5, 7, 2, 0, 7])], 10)
    np.testing.assert_array_equal(unique_ids, [9, 2, 5, 0, 7])
    np.testing.assert_array_equal(local, [2, 4, 1, 3, 4])
