"""A client's call streams to one server: calls from many threads, a bounded wait on a server that stopped
answering, and a server that has no call stream (the calls go as unary calls)."""

from __future__ import annotations

import os
import signal
import time
from concurrent import futures

import grpc
import numpy as np
import pytest

from graphstore.client.transport import RemotePartition
from graphstore.errors import ServerUnavailableError
from graphstore.launcher.local_servers import start_servers
from graphstore.partition import load_partition
from graphstore.protos.service import SERVICE_NAME
from graphstore.rpc import RpcPolicy
from graphstore.server.partition_server import PartitionServer
from graphstore.server.servicer import PartitionServicer
from tests.utils.graphs import make_partitioned_graph, relabeled
from tests.utils.threads import run_in_threads
from tests.utils.wait import wait_until


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lanes-graph")
    config, arrays = make_partitioned_graph(folder, num_nodes=400, num_parts=1, avg_degree=6, feat_dim=8)
    return config, relabeled(arrays)["feat"]


def test_threads_share_the_lanes_and_calls_beyond_them_go_as_unary_calls(graph, tmp_path):
    config, feat = graph
    with start_servers(config, 1, log_dir=tmp_path) as group:
        client = RemotePartition(group.addresses[0], 0, RpcPolicy(deadline_s=20, call_streams=2))
        try:

            def puller(seed: int) -> None:
                rng = np.random.default_rng(seed)
                for _ in range(40):
                    ids = rng.integers(0, feat.shape[0], int(rng.integers(1, 300)))
                    np.testing.assert_array_equal(client.pull("feat", ids), feat[ids])

            run_in_threads(puller, [(seed,) for seed in range(6)])
            assert 1 <= client._channel._lanes.open_lanes <= 2
        finally:
            client.close()


def test_a_call_to_a_server_that_stopped_answering_ends_within_its_deadline(graph, tmp_path):
    config, feat = graph
    with start_servers(config, 1, log_dir=tmp_path) as group:
        policy = RpcPolicy(deadline_s=1.0, max_retries=1, backoff_initial_s=0.05)
        client = RemotePartition(group.addresses[0], 0, policy)
        pid = group.procs[0].pid
        try:
            np.testing.assert_array_equal(client.pull("feat", np.arange(5)), feat[:5])  # a lane is open
            os.kill(pid, signal.SIGSTOP)
            wait_until(lambda: _state(pid) == "T", 10, "the server to stop")
            started = time.monotonic()
            with pytest.raises(ServerUnavailableError):
                client.pull("feat", np.arange(5))
            assert time.monotonic() - started < client.max_call_time_s + 1.0
        finally:
            os.kill(pid, signal.SIGCONT)
        np.testing.assert_array_equal(client.pull("feat", np.arange(7)), feat[:7])  # a new lane
        client.close()


def _state(pid: int) -> str:
    """A process's state letter (``T``: stopped)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_a_server_without_the_call_stream_gets_unary_calls(graph):
    config, feat = graph
    servicer = PartitionServicer(PartitionServer(load_partition(config, 0)))
    handlers = servicer.generic_handler()
    unary_only = grpc.method_handlers_generic_handler(
        SERVICE_NAME,
        {
            path.rsplit("/", 1)[1]: handler
            for path, handler in handlers._handlers.items()
            if not path.endswith("/Call")
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(4))
    server.add_generic_rpc_handlers((unary_only,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    client = RemotePartition(f"127.0.0.1:{port}", 0, RpcPolicy(deadline_s=10))
    try:
        for count in (3, 9):
            np.testing.assert_array_equal(client.pull("feat", np.arange(count)), feat[:count])
        assert client._channel._lanes.open_lanes == 0
    finally:
        client.close()
        server.stop(0)
