"""partition_graph + load_partition: the files hold exactly the input graph, relabeled into ranges."""

import json
import os

import numpy as np
import pytest
import torch

from graphstore.dtypes import to_torch
from graphstore.partition import GraphData, load_partition, partition_graph, read_config
from graphstore.partition.assignment import edge_cut_fraction
from graphstore.partition.generate import GeneratorConfig, generate_graph
from tests.utils.graphs import load_cora, make_partitioned_graph, partition_cora, relabeled


def gather_partitions(config_path):
    """Everything stored, concatenated over partitions, in new IDs."""
    config = read_config(config_path)
    parts = [load_partition(config_path, k) for k in range(config["num_parts"])]
    return config, parts


def new_to_orig_nid(parts):
    return np.concatenate([np.asarray(p.orig_nid) for p in parts])


@pytest.mark.parametrize("method,num_parts", [("random", 3), ("metis", 4)])
def test_every_edge_once_with_its_data_and_node_arrays_round_trip(tmp_path, method, num_parts):
    config_path, graph = make_partitioned_graph(
        tmp_path, num_nodes=800, num_parts=num_parts, method=method, with_edge_weight=True, seed=5
    )
    config, parts = gather_partitions(config_path)
    num_nodes, num_edges = 800, graph["src"].shape[0]
    assert config["num_nodes"] == num_nodes and config["num_edges"] == num_edges
    orig_nid = new_to_orig_nid(parts)
    np.testing.assert_array_equal(np.sort(orig_nid), np.arange(num_nodes))  # a permutation
    seen_eids = []
    for p in parts:
        local_dst = np.repeat(np.arange(p.num_local_nodes), np.diff(np.asarray(p.in_indptr)))
        new_dst = p.node_start + local_dst
        orig_eid = np.asarray(p.orig_eid)
        seen_eids.append(orig_eid)
        # the endpoints, mapped back, are the original edge's endpoints
        np.testing.assert_array_equal(orig_nid[new_dst], graph["dst"][orig_eid])
        np.testing.assert_array_equal(orig_nid[np.asarray(p.in_src)], graph["src"][orig_eid])
        # edge and node data travel with their edges and nodes
        np.testing.assert_array_equal(p.edge_feats["_N:_E:_N"]["weight"], graph["weight"][orig_eid])
        np.testing.assert_array_equal(p.node_feats["_N"]["feat"], graph["feat"][np.asarray(p.orig_nid)])
        np.testing.assert_array_equal(p.node_feats["_N"]["label"], graph["label"][np.asarray(p.orig_nid)])
        np.testing.assert_array_equal(
            p.node_feats["_N"]["train_mask"], graph["train_mask"][np.asarray(p.orig_nid)]
        )
        # within a partition, in-edges are sorted by destination: positions are the edge IDs
        assert np.all(np.diff(new_dst) >= 0)
    all_eids = np.concatenate(seen_eids)
    np.testing.assert_array_equal(np.sort(all_eids), np.arange(num_edges))  # every edge exactly once
    # the result's maps agree with the files
    np.testing.assert_array_equal(graph["orig_nid"], orig_nid)
    np.testing.assert_array_equal(graph["orig_eid"], all_eids)


def test_ranges_cover_all_ids_without_overlap(tmp_path):
    config_path, _ = make_partitioned_graph(tmp_path, num_nodes=500, num_parts=4, method="metis")
    config, parts = gather_partitions(config_path)
    node_ranges = config["node_map"]["_N"]
    edge_ranges = config["edge_map"]["_N:_E:_N"]
    for ranges, total in ((node_ranges, config["num_nodes"]), (edge_ranges, config["num_edges"])):
        assert ranges[0][0] == 0 and ranges[-1][1] == total
        for (_, end), (start, _) in zip(ranges[:-1], ranges[1:], strict=True):
            assert end == start
    for k, p in enumerate(parts):
        assert [p.node_start, p.node_end] == node_ranges[k]
        assert [p.edge_start, p.edge_end] == edge_ranges[k]
        assert p.in_indptr[-1] == p.num_local_edges


def test_out_edges_are_the_out_edges_of_owned_nodes(tmp_path):
    config_path, graph = make_partitioned_graph(tmp_path, num_nodes=700, num_parts=3, method="metis", seed=2)
    _, parts = gather_partitions(config_path)
    new = relabeled(graph)
    for p in parts:
        local_src = np.repeat(np.arange(p.num_local_nodes), np.diff(np.asarray(p.out_indptr)))
        out_eid = np.asarray(p.out_eid)
        # each stored out-edge is the global edge it names
        np.testing.assert_array_equal(new["src"][out_eid], p.node_start + local_src)
        np.testing.assert_array_equal(new["dst"][out_eid], np.asarray(p.out_dst))
        # and all edges leaving the owned nodes are there
        owned = (new["src"] >= p.node_start) & (new["src"] < p.node_end)
        np.testing.assert_array_equal(np.sort(out_eid), np.flatnonzero(owned))
        np.testing.assert_array_equal(
            np.diff(np.asarray(p.out_indptr)),
            np.bincount(new["src"][owned] - p.node_start, minlength=p.num_local_nodes),
        )


def test_files_are_memory_mapped_read_only(tmp_path):
    config_path, _ = make_partitioned_graph(tmp_path, num_nodes=300, num_parts=2)
    p = load_partition(config_path, 0)
    for arr in (p.in_src, p.in_indptr, p.node_feats["_N"]["feat"]):
        assert isinstance(arr, np.memmap)
        assert not arr.flags.writeable


def test_config_records_format_and_schemes(tmp_path):
    config_path, _ = make_partitioned_graph(
        tmp_path, num_nodes=300, num_parts=2, feat_dim=7, with_edge_weight=True
    )
    with open(config_path) as fh:
        config = json.load(fh)
    assert config["format_version"] == 2
    assert config["graph_name"] == "testgraph"
    assert config["num_parts"] == 2 and config["part_method"] == "random"
    assert config["node_feats"]["_N"]["feat"] == {"dtype": "float32", "shape": [7]}
    assert config["node_feats"]["_N"]["label"] == {"dtype": "int64", "shape": []}
    assert config["edge_feats"]["_N:_E:_N"]["weight"] == {"dtype": "float32", "shape": []}
    assert [p["path"] for p in config["parts"]] == ["part0", "part1"]
    assert os.path.isdir(os.path.join(os.path.dirname(config_path), "part1"))


@pytest.mark.parametrize("num_parts", [2, 4])
def test_metis_cut_on_cora_is_far_below_random(tmp_path, num_parts):
    graph = load_cora()
    metis = partition_graph(graph, "cora", num_parts, str(tmp_path / "m"), part_method="metis")
    rand = partition_graph(graph, "cora", num_parts, str(tmp_path / "r"), part_method="random")
    # measured: 2 parts 4.1% vs 50%, 4 parts 5.9% vs 75%
    assert rand.edge_cut > 0.45
    assert metis.edge_cut < 0.15 * rand.edge_cut
    assert metis.edge_cut == pytest.approx(
        edge_cut_fraction(graph["src"], graph["dst"], _part_of(metis, 2708))
    )


def _part_of(result, num_nodes):
    """Partition per original node, from the result's ranges and maps."""
    part = np.empty(num_nodes, dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum(result.part_nodes)])
    for k in range(result.num_parts):
        part[result.orig_nid[bounds[k] : bounds[k + 1]]] = k
    return part


@pytest.fixture(scope="module")
def graph100k():
    return generate_graph(
        GeneratorConfig(num_nodes=100_000, avg_degree=10, feat_dim=4, num_classes=10, seed=1)
    )


def test_metis_cut_on_generated_100k_graph_is_far_below_random(tmp_path, graph100k):
    metis = partition_graph(graph100k, "g", 4, str(tmp_path / "m"), part_method="metis")
    rand = partition_graph(graph100k, "g", 4, str(tmp_path / "r"), part_method="random")
    # measured: METIS 15.2% (20% of edges join random nodes: about 15% is the floor), random 75.0%
    assert rand.edge_cut > 0.7
    assert metis.edge_cut < 0.25 * rand.edge_cut


def _assert_even(counts, tolerance=0.05):
    counts = np.asarray(counts)
    even = counts.sum() / counts.size
    assert np.all(np.abs(counts - even) <= tolerance * even), counts


@pytest.mark.parametrize("num_parts", [2, 4])
def test_balance_ntypes_evens_out_training_nodes_on_cora(tmp_path, num_parts):
    config_path, graph = partition_cora(tmp_path, num_parts, balance_ntypes="train_mask")
    _, parts = gather_partitions(config_path)
    counts = [int(np.asarray(p.node_feats["_N"]["train_mask"]).sum()) for p in parts]
    assert sum(counts) == int(graph["train_mask"].sum()) == 140
    _assert_even(counts)


def test_balance_ntypes_and_edges_on_generated_graph(tmp_path, graph100k):
    result = partition_graph(
        graph100k, "g", 4, str(tmp_path / "b"), balance_ntypes=["train_mask", "val_mask"], balance_edges=True
    )
    _assert_even(result.part_train_nodes)
    _assert_even(result.part_nodes)
    _assert_even(result.part_edges, tolerance=0.1)
    # measured 15.2%: balance costs next to no cut here
    assert result.edge_cut < 0.2


def test_balance_ntypes_accepts_an_array(tmp_path):
    graph = load_cora()
    categories = np.asarray(graph["label"])  # 7 classes, spread each evenly
    result = partition_graph(graph, "cora", 2, str(tmp_path / "o"), balance_ntypes=categories)
    _, parts = gather_partitions(result.config_path)
    for label in range(7):
        counts = [int((np.asarray(p.node_feats["_N"]["label"]) == label).sum()) for p in parts]
        _assert_even(counts, tolerance=0.06)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_features_round_trip_bit_exactly(tmp_path, dtype):
    config_path, graph = make_partitioned_graph(tmp_path, num_nodes=400, num_parts=2, feat_dtype=dtype)
    config = read_config(config_path)
    assert config["node_feats"]["_N"]["feat"]["dtype"] == dtype
    assert config["node_feats"]["_N"]["label"]["dtype"] == "int64"  # only float features change
    torch_dtype = getattr(torch, dtype)
    for k in range(2):
        p = load_partition(config_path, k)
        stored = p.node_feats["_N"]["feat"]
        assert stored.dtype == (np.uint16 if dtype == "bfloat16" else np.float16)
        expected = torch.from_numpy(graph["feat"][np.asarray(p.orig_nid)]).to(torch_dtype)
        got = to_torch(np.asarray(stored), dtype)
        assert got.dtype == torch_dtype
        assert torch.equal(got.view(torch.int16), expected.view(torch.int16))


def test_a_part_per_node_and_partitions_without_edges(tmp_path):
    # 5 nodes, 5 parts: some partitions own no in-edges at all
    graph = {"src": np.array([0, 1, 2]), "dst": np.array([1, 2, 0]), "x": np.arange(5.0)}
    result = partition_graph(graph, "tiny", 5, str(tmp_path / "t"), part_method="random", num_hops=1)
    assert result.part_nodes == [1, 1, 1, 1, 1]
    total = 0
    for k in range(5):
        p = load_partition(result.config_path, k)
        total += p.num_local_edges
        assert p.node_feats["_N"]["x"][0] == float(p.orig_nid[0])
    assert total == 3


def test_graphdata_and_file_inputs_match(tmp_path):
    graph = generate_graph(GeneratorConfig(num_nodes=300, avg_degree=5, feat_dim=3, seed=4))
    path = tmp_path / "g.npz"
    np.savez(path, **graph)
    from_file = partition_graph(str(path), "g", 2, str(tmp_path / "a"), part_method="metis")
    from_data = partition_graph(
        GraphData.homogeneous(
            300,
            graph["src"],
            graph["dst"],
            node_data={k: v for k, v in graph.items() if k not in ("src", "dst")},
        ),
        "g",
        2,
        str(tmp_path / "b"),
        part_method="metis",
    )
    np.testing.assert_array_equal(from_file.orig_nid, from_data.orig_nid)
    np.testing.assert_array_equal(from_file.orig_eid, from_data.orig_eid)


def test_edgeless_graph_with_balance(tmp_path):
    graph = {
        "src": np.zeros(0, np.int64),
        "dst": np.zeros(0, np.int64),
        "num_nodes": 10,
        "train_mask": np.arange(10) % 3 == 0,
    }
    result = partition_graph(
        graph, "e", 2, str(tmp_path / "o"), balance_ntypes="train_mask", balance_edges=True
    )
    assert result.part_nodes == [5, 5] and result.part_train_nodes == [2, 2] and result.edge_cut == 0.0
    assert load_partition(result.config_path, 1).num_local_edges == 0
