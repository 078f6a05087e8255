"""Checkpoint / restore: keyed by original IDs, into new processes and another partition count."""

from __future__ import annotations

import numpy as np
import pytest

from graphstore.client.transport import RemotePartition
from graphstore.launcher.local_servers import start_servers
from graphstore.partition import load_partition
from graphstore.server.partition_server import PartitionServer
from graphstore.types import InitSpec, OptimizerConfig
from tests.server.conftest import NUM_NODES
from tests.utils.graphs import make_partitioned_graph

ADAGRAD = OptimizerConfig("adagrad", lr=0.05)


def _servers(config: str, num_parts: int) -> list[PartitionServer]:
    return [PartitionServer(load_partition(config, k)) for k in range(num_parts)]


def _by_original_id(servers, name: str, orig_nid: np.ndarray) -> np.ndarray:
    """Rows of ``name`` for every node, in ORIGINAL node ID order."""
    rows = []
    for server in servers:
        meta = server.metadata()
        ids = np.arange(meta.node_bounds[server.part_id], meta.node_bounds[server.part_id + 1])
        rows.append(server.pull(name, ids))
    new_order = np.concatenate(rows)
    out = np.empty_like(new_order)
    out[orig_nid] = new_order
    return out


def _step(servers, orig_nid: np.ndarray, orig_ids: np.ndarray, grads: np.ndarray) -> None:
    """One adagrad step on the rows of the given ORIGINAL node IDs, routed to their owners."""
    new_of_orig = np.empty_like(orig_nid)
    new_of_orig[orig_nid] = np.arange(len(orig_nid))
    new_ids = new_of_orig[orig_ids]
    for server in servers:
        meta = server.metadata()
        lo, hi = meta.node_bounds[server.part_id], meta.node_bounds[server.part_id + 1]
        mine = (new_ids >= lo) & (new_ids < hi)
        server.push_grad("emb", new_ids[mine], grads[mine], ADAGRAD)


def test_restore_into_another_partition_count_continues_identically(tmp_path):
    config2, graph2 = make_partitioned_graph(tmp_path / "a", num_nodes=NUM_NODES, num_parts=2, method="metis")
    config3, graph3 = make_partitioned_graph(tmp_path / "b", num_nodes=NUM_NODES, num_parts=3, method="metis")
    two = _servers(config2, 2)
    for server in two:
        server.init_tensor("emb", (NUM_NODES, 6), "float32", "node", init=InitSpec("uniform", -1, 1, 4))
        server.init_tensor("count", (NUM_NODES,), "int64", "node", persistent=True)
    rng = np.random.default_rng(0)
    for _ in range(3):
        ids = rng.choice(NUM_NODES, 80, replace=False)
        _step(two, graph2["orig_nid"], ids, rng.standard_normal((80, 6)).astype(np.float32))
    for server in two:
        lo = server.metadata().node_bounds[server.part_id]
        server.push("count", np.array([lo]), np.array([server.part_id + 7]))
    path = str(tmp_path / "ckpt")
    files = [server.checkpoint(path) for server in two]
    assert sum(rows for _, rows in files) == 2 * NUM_NODES

    three = _servers(config3, 3)
    for server in three:
        names, rows = server.restore(path)
        assert sorted(names) == ["count", "emb"] and rows == 2 * server.partition.num_local_nodes
    np.testing.assert_array_equal(
        _by_original_id(three, "emb", graph3["orig_nid"]), _by_original_id(two, "emb", graph2["orig_nid"])
    )
    np.testing.assert_array_equal(
        _by_original_id(three, "count", graph3["orig_nid"]), _by_original_id(two, "count", graph2["orig_nid"])
    )
    assert all(s.persistent for srv in three for s in srv.list_tensors() if s.name == "count")
    # The optimizer state came along: one more identical step gives identical rows.
    ids = rng.choice(NUM_NODES, 100, replace=False)
    grads = rng.standard_normal((100, 6)).astype(np.float32)
    _step(two, graph2["orig_nid"], ids, grads)
    _step(three, graph3["orig_nid"], ids, grads)
    np.testing.assert_allclose(
        _by_original_id(three, "emb", graph3["orig_nid"]),
        _by_original_id(two, "emb", graph2["orig_nid"]),
        rtol=1e-6,
    )


def test_restore_errors(tmp_path):
    config, _ = make_partitioned_graph(tmp_path / "a", num_nodes=200, num_parts=1)
    other, _ = make_partitioned_graph(tmp_path / "b", num_nodes=200, num_parts=1, graph_name="othergraph")
    server = _servers(config, 1)[0]
    with pytest.raises(FileNotFoundError, match="does not exist"):
        server.restore(str(tmp_path / "missing"))
    server.init_tensor("emb", (200, 2), "float32", "node")
    with pytest.raises(KeyError, match="nope"):
        server.checkpoint(str(tmp_path / "c"), ["nope"])
    server.checkpoint(str(tmp_path / "c"))
    foreign = _servers(other, 1)[0]
    with pytest.raises(
        ValueError, match="written for graph 'testgraph', this server holds graph 'othergraph'"
    ):
        foreign.restore(str(tmp_path / "c"))
    with pytest.raises(FileNotFoundError, match="no tensor 'absent'"):
        server.restore(str(tmp_path / "c"), ["absent"])
    server.delete_tensor("emb")
    server.init_tensor("emb", (200, 3), "float32", "node")
    with pytest.raises(ValueError, match="float32 \\[200, 3\\].*float32 \\[200, 2\\]"):
        server.restore(str(tmp_path / "c"))


def test_checkpoint_then_new_server_processes_restore_identical(tmp_path):
    config, _ = make_partitioned_graph(tmp_path / "g", num_nodes=NUM_NODES, num_parts=2)
    root = tmp_path / "root"
    with_root = ("--checkpoint-root", str(root))
    path = "ckpt"  # a name under the servers' checkpoint root
    expected = {}
    with start_servers(config, 2, with_root, log_dir=tmp_path / "logs1") as group:
        clients = [RemotePartition(a, k) for k, a in enumerate(group.addresses)]
        for k, client in enumerate(clients):
            client.init_tensor("emb", (NUM_NODES, 5), "bfloat16", "node", init=InitSpec("normal", 0, 1, 1))
            meta = client.metadata()
            ids = np.arange(meta.node_bounds[k], meta.node_bounds[k + 1])
            expected[k] = (ids, client.pull("emb", ids).copy())
            client.checkpoint(path)
            client.close()
    assert (root / "ckpt" / "emb").is_dir()
    with start_servers(config, 2, with_root, log_dir=tmp_path / "logs2") as group:
        for k, address in enumerate(group.addresses):
            with RemotePartition(address, k) as client:
                with pytest.raises(KeyError):
                    client.pull("emb", expected[k][0][:1])
                assert client.restore(path) == (["emb"], len(expected[k][0]))
                np.testing.assert_array_equal(client.pull("emb", expected[k][0]), expected[k][1])
                with pytest.raises(FileNotFoundError):
                    client.restore("nowhere")
    # The operator's --restore-from is a folder of the server's host, not a name under the root.
    restore_from = ("--restore-from", str(root / "ckpt"))
    with start_servers(config, 2, restore_from, log_dir=tmp_path / "logs3") as group:
        for k, address in enumerate(group.addresses):
            with RemotePartition(address, k) as client:
                np.testing.assert_array_equal(client.pull("emb", expected[k][0]), expected[k][1])
