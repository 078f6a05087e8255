"""DistGraph against 2 real servers (RPC only / co-located) and standalone: sizes, data views, structure
queries against the original graph, partition policies, a barrier between two trainer processes,
node_split over a DistTensor mask."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from graphstore.client import api
from graphstore.client.dist_graph import DistGraph
from graphstore.client.dist_tensor import DistTensor
from graphstore.client.split import node_split
from graphstore.client.transport import RemotePartition
from graphstore.partition import PartitionPolicy, RangePartitionBook
from tests.client import test_dist_tensor as shared
from tests.client.test_dist_tensor import (
    GRAPH_NAME,
    NUM_NODES,
    cluster_config,
    connected,
    end_processes,
    trainer_group_env,
    unique_name,
)
from tests.utils.barriers import barrier_has_waiters, dist_graph_barrier_name
from tests.utils.graphs import make_partitioned_graph
from tests.utils.wait import wait_until

BARRIER_TRAINER = str(Path(__file__).with_name("barrier_trainer.py"))

# The shared fixtures: a 2-partition graph, its 2 servers, and a client in each mode.
graph_files = shared.graph_files
cluster = shared.cluster
dist = shared.dist


def test_sizes_types_and_book(dist):
    g = dist.graph
    num_edges = dist.ref["src"].shape[0]
    assert g.num_nodes() == g.number_of_nodes() == g.num_nodes("_N") == NUM_NODES
    assert g.num_edges() == g.number_of_edges() == g.num_edges(("_N", "_E", "_N")) == num_edges
    assert g.ntypes == ["_N"] and g.etypes == ["_E"] and g.canonical_etypes == [("_N", "_E", "_N")]
    assert g.idtype == torch.int64 and g.device == torch.device("cpu") and g.is_homogeneous
    assert g.rank() == 0
    book = g.get_partition_book()
    assert isinstance(book, RangePartitionBook) and book.num_partitions() == 2
    assert book.num_nodes() == NUM_NODES
    policy = g.get_node_partition_policy()
    assert isinstance(policy, PartitionPolicy) and policy.policy_str == "node:_N"
    assert g.get_edge_partition_policy().policy_str == "edge:_E"
    with pytest.raises(KeyError, match="user"):
        g.num_nodes("user")


def test_local_partition(dist):
    local = dist.graph.local_partition
    if dist.mode == "remote":
        assert local is None
    else:
        assert local.part_id == 0 and local.node_start == 0


def test_graph_name_and_book_must_match(dist):
    with pytest.raises(ValueError, match="'other'"):
        DistGraph("other", part_config=dist.config_path)
    wrong = RangePartitionBook([0, 1, NUM_NODES], [0, 1, dist.graph.num_edges()])
    with pytest.raises(ValueError, match="gpb"):
        DistGraph(GRAPH_NAME, gpb=wrong, part_config=dist.config_path)
    assert DistGraph(GRAPH_NAME, gpb=dist.graph.get_partition_book()).num_nodes() == NUM_NODES


def test_a_part_config_given_once_connected_must_be_the_open_graphs(dist, tmp_path):
    """The context is opened once per process; a later DistGraph naming a missing or another partition
    config is an error, not a silent reuse of the open graph."""
    with pytest.raises(FileNotFoundError, match="missing.json"):
        DistGraph(GRAPH_NAME, part_config=str(tmp_path / "missing.json"))
    other_config, _ = make_partitioned_graph(tmp_path, num_nodes=NUM_NODES + 40, graph_name=GRAPH_NAME)
    expected = "standalone graph from" if dist.mode == "standalone" else "describes graph .*but the servers"
    with pytest.raises(ValueError, match=expected):
        DistGraph(GRAPH_NAME, part_config=other_config)
    assert DistGraph(GRAPH_NAME, part_config=dist.config_path).num_nodes() == NUM_NODES


def test_ndata_edata_views(dist):
    g = dist.graph
    expected_node = {"feat", "label", "train_mask", "val_mask", "test_mask", "nd_int32", "nd_half"}
    assert expected_node <= set(g.ndata)
    assert "feat" in g.ndata and "nope" not in g.ndata and len(g.ndata) == len(list(g.ndata))
    schemes = g.node_attr_schemes()
    assert schemes["feat"].shape == (8,) and schemes["feat"].dtype == torch.float32
    assert schemes["label"].shape == ()
    # assigning a DistTensor registers it under the key
    weights = DistTensor((g.num_edges(), 1), torch.float32, name=unique_name("w"))
    g.edata["w"] = weights
    assert g.edata["w"] is weights and "w" in g.edata and g.edge_attr_schemes()["w"].shape == (1,)
    with pytest.raises(ValueError, match="edata"):
        g.edata["bad"] = DistTensor((NUM_NODES, 1), torch.float32)
    # assigning a full tensor creates the tensor with those rows
    key = unique_name("h")
    values = torch.arange(NUM_NODES * 2, dtype=torch.float32).reshape(NUM_NODES, 2)
    g.ndata[key] = values
    assert key in set(g.ndata)
    assert torch.equal(g.ndata[key][[5, 599, 5]], values[[5, 599, 5]])
    assert torch.equal(DistGraph(GRAPH_NAME).ndata[key][0:NUM_NODES], values), "other handles see it"
    with pytest.raises(ValueError, match="rows"):
        g.ndata["short"] = torch.zeros(3)
    with pytest.raises(TypeError, match="list"):
        g.ndata["x"] = [1, 2]
    del g.ndata[key]
    with pytest.raises(KeyError, match="nope"):
        del g.ndata["nope"]


def test_find_edges_and_degrees_match_the_graph(dist):
    g, ref = dist.graph, dist.ref
    rng = np.random.default_rng(4)
    eids = rng.integers(0, g.num_edges(), 300)
    eids[:10] = eids[10:20]
    src, dst = g.find_edges(torch.from_numpy(eids))
    np.testing.assert_array_equal(src.numpy(), ref["src"][eids])
    np.testing.assert_array_equal(dst.numpy(), ref["dst"][eids])
    in_deg = np.bincount(ref["dst"], minlength=NUM_NODES)
    out_deg = np.bincount(ref["src"], minlength=NUM_NODES)
    nids = rng.integers(0, NUM_NODES, 100)
    np.testing.assert_array_equal(g.in_degrees(nids).numpy(), in_deg[nids])
    np.testing.assert_array_equal(g.out_degrees(torch.from_numpy(nids)).numpy(), out_deg[nids])
    np.testing.assert_array_equal(g.in_degrees().numpy(), in_deg)
    assert g.out_degrees(7) == int(out_deg[7])
    with pytest.raises(IndexError, match=str(g.num_edges())):
        g.find_edges([g.num_edges()])
    with pytest.raises(TypeError):
        g.in_degrees(torch.tensor([0.5]))


def test_barrier_holds_a_reader_until_the_writer_arrived(graph_files, cluster):
    """Two trainer processes: the reader waits at the barrier before the writer has even written (the
    writer starts writing only once the reader is inside the barrier, or has already finished), so the
    reader sees the write if and only if the barrier held it until the writer arrived."""
    config = cluster_config(cluster, graph_files[0], "auto")
    tensor_name = unique_name("barrier")
    env = trainer_group_env()
    barrier_name = dist_graph_barrier_name(GRAPH_NAME, env["MASTER_ADDR"], env["MASTER_PORT"])

    def trainer(role: str, rank: int) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, BARRIER_TRAINER, role, json.dumps(config), tensor_name, str(NUM_NODES)],
            env={**env, "RANK": str(rank)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    reader, writer = trainer("reader", 1), trainer("writer", 0)
    probe = RemotePartition(cluster.addresses[0], 0)
    try:
        wait_until(
            lambda: reader.poll() is not None or barrier_has_waiters(probe.barrier, barrier_name),
            120,
            "the reader to wait at the barrier",
        )
        writer.stdin.write("go\n")
        writer.stdin.flush()
        read, reader_err = reader.communicate(timeout=120)
        _, writer_err = writer.communicate(timeout=120)
        assert reader.returncode == 0, f"reader exited {reader.returncode}: {reader_err[-2000:]}"
        assert writer.returncode == 0, f"writer exited {writer.returncode}: {writer_err[-2000:]}"
        assert json.loads(read.splitlines()[-1]) == [[42.0]], "the reader passed the barrier before the write"
    finally:
        probe.close()
        end_processes([reader, writer])
    with connected(config):
        assert DistTensor.attach(tensor_name).delete()


def test_node_split_of_a_dist_tensor_mask(dist):
    g = dist.graph
    mask = dist.ref["train_mask"]
    parts = [
        node_split(g.ndata["train_mask"], g.get_partition_book(), rank=r, world_size=2) for r in range(2)
    ]
    np.testing.assert_array_equal(np.sort(torch.cat(parts).numpy()), np.flatnonzero(mask))
    assert abs(parts[0].numel() - parts[1].numel()) <= 1
    assert torch.equal(node_split(g.ndata["train_mask"]), torch.from_numpy(np.flatnonzero(mask)))
    assert g.ndata["train_mask"].count_nonzero() == int(mask.sum())


def test_standalone_needs_part_config_or_initialize(monkeypatch):
    api.exit_client()
    monkeypatch.delenv("GRAPHSTORE_CONFIG", raising=False)
    with pytest.raises(RuntimeError, match="initialize"):
        DistGraph(GRAPH_NAME)
    with pytest.raises(FileNotFoundError):
        DistGraph(GRAPH_NAME, part_config="/nonexistent/graph.json")


def test_local_read_modes_when_files_are_not_readable(graph_files, cluster, tmp_path):
    from graphstore.errors import ConfigError

    api.exit_client()
    missing = str(tmp_path / "elsewhere" / "testgraph.json")
    config = {**cluster_config(cluster, graph_files[0], "on"), "part_config": missing}
    with pytest.raises(ConfigError, match="local_read"):
        api.initialize(config)
    ctx = api.initialize({**config, "local_read": "auto"})
    try:
        assert ctx.local_part_id is None and ctx.local_reader(0) is None, "auto falls back to RPC"
        assert DistGraph(GRAPH_NAME).ndata["feat"][[0]].shape == (1, 8)
    finally:
        api.exit_client()
