"""RangePartitionBook and PartitionPolicy: vectorized routing, same-kind results, clear errors."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphstore.partition import PartitionPolicy, RangePartitionBook, load_partition, load_partition_book
from graphstore.partition.typed_ranges import route_ids
from tests.utils.graphs import make_partitioned_graph

NODE_BOUNDS = [0, 10, 10, 25, 40]
EDGE_BOUNDS = [0, 100, 150, 150, 300]


@pytest.fixture
def book():
    return RangePartitionBook(NODE_BOUNDS, EDGE_BOUNDS, part_id=2, graph_name="g")


def test_shape_and_metadata(book):
    assert book.num_partitions() == 4
    assert book.partid == 2
    assert book.num_nodes() == 40 and book.num_edges() == 300
    assert book.metadata() == [
        {"machine_id": 0, "num_nodes": 10, "num_edges": 100},
        {"machine_id": 1, "num_nodes": 0, "num_edges": 50},
        {"machine_id": 2, "num_nodes": 15, "num_edges": 0},
        {"machine_id": 3, "num_nodes": 15, "num_edges": 150},
    ]
    assert book.ntypes == ["_N"] and book.etypes == ["_E"]
    types, ids = book.map_to_per_ntype(torch.tensor([3, 4]))
    assert torch.equal(types, torch.zeros(2, dtype=torch.int64)) and torch.equal(ids, torch.tensor([3, 4]))


def test_nid2partid_numpy_and_torch(book):
    ids = np.array([0, 9, 10, 24, 25, 39])
    expected = np.array([0, 0, 2, 2, 3, 3])
    out = book.nid2partid(ids)
    assert isinstance(out, np.ndarray) and out.dtype == np.int64
    np.testing.assert_array_equal(out, expected)
    out_t = book.nid2partid(torch.from_numpy(ids))
    assert isinstance(out_t, torch.Tensor) and out_t.dtype == torch.int64
    np.testing.assert_array_equal(out_t.numpy(), expected)
    # int32 tensors and lists work too
    np.testing.assert_array_equal(book.nid2partid(torch.tensor([10, 39], dtype=torch.int32)).numpy(), [2, 3])
    np.testing.assert_array_equal(book.nid2partid([0, 25]), [0, 3])


def test_eid_lookups_skip_empty_partitions(book):
    # partition 2 owns no edges: edge 150 belongs to partition 3
    np.testing.assert_array_equal(book.eid2partid(np.array([0, 99, 100, 149, 150, 299])), [0, 0, 1, 1, 3, 3])
    np.testing.assert_array_equal(book.eid2localeid(np.array([150, 299]), 3), [0, 149])


def test_partid2ids_and_local(book):
    np.testing.assert_array_equal(book.partid2nids(2), np.arange(10, 25))
    assert book.partid2nids(1).size == 0
    np.testing.assert_array_equal(book.partid2eids(3), np.arange(150, 300))
    local = book.nid2localnid(torch.tensor([10, 24]), 2)
    assert isinstance(local, torch.Tensor)
    np.testing.assert_array_equal(local.numpy(), [0, 14])


@pytest.mark.parametrize("bad", [-1, 40, 1000])
def test_out_of_range_ids_name_the_id(book, bad):
    with pytest.raises(IndexError, match=str(bad)):
        book.nid2partid(np.array([0, bad]))


def test_not_owned_local_lookup_names_the_id(book):
    with pytest.raises(IndexError, match="ID 9 is not owned by partition 2"):
        book.nid2localnid(np.array([10, 9]), 2)
    with pytest.raises(IndexError, match="partid=7"):
        book.partid2nids(7)


def test_bad_bounds_and_types():
    with pytest.raises(ValueError, match="non-decreasing"):
        RangePartitionBook([0, 5, 3], [0, 1, 2])
    with pytest.raises(ValueError, match="partitions"):
        RangePartitionBook([0, 5, 10], [0, 10])
    with pytest.raises(ValueError, match="part_id=2"):
        RangePartitionBook([0, 5, 10], [0, 1, 2], part_id=2)
    book = RangePartitionBook([0, 5, 10], [0, 1, 2])
    with pytest.raises(TypeError, match="integers"):
        book.nid2partid(np.array([1.5]))
    with pytest.raises(KeyError, match="paper"):
        book.nid2partid(np.array([1]), ntype="paper")


@settings(max_examples=50, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 20), min_size=1, max_size=8),
    data=st.data(),
)
def test_route_ids_matches_a_linear_scan(sizes, data):
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    if bounds[-1] == 0:
        return
    ids = np.array(data.draw(st.lists(st.integers(0, int(bounds[-1]) - 1), max_size=50)), dtype=np.int64)
    expected = np.array([max(k for k in range(len(sizes)) if bounds[k] <= i) for i in ids], dtype=np.int64)
    np.testing.assert_array_equal(route_ids(ids, bounds), expected)


def test_policy(book):
    node = PartitionPolicy("node:_N", book)
    assert node.policy_str == "node:_N" and node.type_name == "_N" and node.part_id == 2
    assert node.partition_book is book
    assert node.is_node and not node.is_edge
    assert node.get_part_size() == 15 and node.get_size() == 40
    np.testing.assert_array_equal(node.to_local(np.array([10, 20])), [0, 10])
    np.testing.assert_array_equal(node.to_partid(torch.tensor([0, 39])).numpy(), [0, 3])
    edge = PartitionPolicy("edge", book)
    assert edge.policy_str == "edge:_E"
    assert edge.get_part_size() == 0 and edge.get_size() == 300
    np.testing.assert_array_equal(edge.to_partid(np.array([149, 150])), [1, 3])
    with pytest.raises(IndexError):
        edge.to_local(np.array([0]))
    with pytest.raises(ValueError, match="policy_str='graph'"):
        PartitionPolicy("graph", book)
    with pytest.raises(KeyError, match="unknown node type 'paper'; the graph has \\['_N'\\]"):
        PartitionPolicy("node:paper", book)


def test_book_agrees_with_partition_files(tmp_path):
    config, graph = make_partitioned_graph(tmp_path, num_nodes=600, num_parts=3, method="metis", seed=3)
    book = load_partition_book(config)
    assert book.num_partitions() == 3 and book.num_nodes() == 600
    for k in range(3):
        part = load_partition(config, k)
        assert part.book == book and part.book.partid == k
        owned = np.arange(part.node_start, part.node_end)
        np.testing.assert_array_equal(book.nid2partid(owned), np.full(owned.size, k))
        edges = np.arange(part.edge_start, part.edge_end)
        np.testing.assert_array_equal(book.eid2partid(edges), np.full(edges.size, k))
        # the edges a partition stores as out-edges are owned by the partition of their destination
        np.testing.assert_array_equal(
            book.eid2partid(np.asarray(part.out_eid)), book.nid2partid(np.asarray(part.out_dst))
        )
        policy = PartitionPolicy("node:_N", part.book)
        assert policy.get_part_size() == part.num_local_nodes
