"""Shared fixtures of the server tests: one partitioned graph, its in-process partitions and server processes.

``partitions`` is parametrized over the two transports of ``PartitionAPI``: ``"local"`` (a
``PartitionServer`` per partition, in-process) and ``"remote"`` (a ``RemotePartition`` per
partition, talking to real server processes). Tests that take it run once per transport.
"""

from __future__ import annotations

import numpy as np
import pytest

from graphstore.client.transport import RemotePartition
from graphstore.launcher.local_servers import start_servers
from graphstore.partition import load_partition
from graphstore.rpc import RpcPolicy
from graphstore.server.partition_server import PartitionServer
from tests.utils.graphs import make_partitioned_graph, relabeled

NUM_PARTS = 2
NUM_NODES = 600


@pytest.fixture(scope="session")
def graph_files(tmp_path_factory):
    """``(config_path, original arrays, arrays in partitioned IDs)`` of a small weighted graph."""
    folder = tmp_path_factory.mktemp("server-graph")
    config, graph = make_partitioned_graph(
        folder, num_nodes=NUM_NODES, num_parts=NUM_PARTS, avg_degree=8, feat_dim=12, with_edge_weight=True
    )
    return config, graph, relabeled(graph)


@pytest.fixture(scope="session")
def server_group(graph_files, tmp_path_factory):
    """One server process per partition (``--writable-features`` off), stopped at the end of the session."""
    group = start_servers(graph_files[0], NUM_PARTS, log_dir=tmp_path_factory.mktemp("server-logs"))
    yield group
    group.stop()


@pytest.fixture(params=["local", "remote"])
def partitions(request, graph_files):
    """A ``PartitionAPI`` per partition: in-process ``PartitionServer`` or ``RemotePartition``."""
    config = graph_files[0]
    if request.param == "local":
        yield [PartitionServer(load_partition(config, k)) for k in range(NUM_PARTS)]
        return
    group = request.getfixturevalue("server_group")
    clients = [RemotePartition(addr, k, RpcPolicy(deadline_s=20)) for k, addr in enumerate(group.addresses)]
    yield clients
    for client in clients:
        # Run-time tensors live on in the shared servers: drop the ones this test made.
        for scheme in client.list_tensors():
            if not scheme.from_partition:
                client.delete_tensor(scheme.name)
        client.close()


def owned_nodes(partitions, k: int) -> np.ndarray:
    """Global node IDs owned by partition ``k``."""
    meta = partitions[k].metadata()
    return np.arange(meta.node_bounds[k], meta.node_bounds[k + 1], dtype=np.int64)


def owned_edges(partitions, k: int) -> np.ndarray:
    """Global edge IDs owned by partition ``k``."""
    meta = partitions[k].metadata()
    return np.arange(meta.edge_bounds[k], meta.edge_bounds[k + 1], dtype=np.int64)
