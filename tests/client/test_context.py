"""Cluster config parsing, initialize / exit_client, the context contract, and unreachable servers."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from graphstore.client import api
from graphstore.client.config import find_cluster_config
from graphstore.client.context import ClientContext, current_context, get_context, trainer_rank_and_world
from graphstore.config import ClusterConfig, ServerSpec
from graphstore.errors import ConfigError, ServerUnavailableError
from graphstore.rpc import RpcPolicy
from tests.utils.graphs import make_partitioned_graph
from tests.utils.threads import run_in_threads

# ----- config parsing (no servers) ----------------------------------------------------------------


def test_yaml_config_reads_the_launchers_file_and_rejects_unknown_keys(tmp_path):
    text = """
graph_name: g
part_config: parts/g.json
num_trainers: 4              # the launcher's key: the one schema reads it too
servers:
  - {host: 10.0.0.2, port: 50052, part_id: 1, exec_host: ns1}
  - {host: 10.0.0.1, port: 50051, part_id: 0}
rpc: {deadline_s: 2.5, max_retries: 0}
local_read: off
tls: {ca: certs/ca.pem}
token: s3cret-of-16-chars
"""
    (tmp_path / "cluster.yaml").write_text(text)
    config = find_cluster_config(str(tmp_path / "cluster.yaml"))
    assert [s.address for s in config.servers] == ["10.0.0.1:50051", "10.0.0.2:50052"]
    assert config.graph_name == "g"
    assert config.part_config == str(tmp_path / "parts" / "g.json")
    assert config.rpc == RpcPolicy(deadline_s=2.5, max_retries=0)
    assert config.local_read == "off"  # YAML's bare `off` is a boolean; it still means "off"
    assert config.tls.ca == str(tmp_path / "certs" / "ca.pem")
    assert config.token == "s3cret-of-16-chars"
    # One schema for launch and trainers: a key neither knows is a typo, reported by both.
    (tmp_path / "cluster.yaml").write_text(text.replace("max_retries: 0", "max_retries: 0, future_knob: 1"))
    with pytest.raises(ConfigError, match="'rpc.future_knob' is not a known field"):
        find_cluster_config(str(tmp_path / "cluster.yaml"))


def test_ip_config_txt_lines_are_partitions_in_order(tmp_path):
    path = tmp_path / "ip_config.txt"
    path.write_text("# DGL style\n127.0.0.1 40001\n\n127.0.0.1\n")
    config = find_cluster_config(path)
    assert config.servers == (ServerSpec("127.0.0.1", 40001, 0), ServerSpec("127.0.0.1", 30050, 1))


def test_dict_and_config_objects():
    config = find_cluster_config({"servers": [{"host": "::1", "port": 7000}], "local_read": "on"})
    assert config.servers[0].address == "[::1]:7000"
    assert config.local_read == "on"
    assert find_cluster_config(config) is config


@pytest.mark.parametrize(
    "data, field",
    [
        ({}, "servers"),
        ({"servers": [{"host": "a", "port": 70000}]}, "servers[0].port"),
        ({"servers": [{"host": "a", "port": "x"}]}, "servers[0].port"),
        ({"servers": [{"port": 1}]}, "servers[0].host"),
        ({"servers": [{"host": "a", "port": 1, "part_id": 1}]}, "part_id"),
        ({"servers": [{"host": "a", "port": 1}], "local_read": "maybe"}, "local_read"),
        ({"servers": [{"host": "a", "port": 1}], "rpc": {"deadline_s": -1}}, "rpc.deadline_s"),
        ({"servers": [{"host": "a", "port": 1}], "rpc": {"max_retries": 1.5}}, "rpc.max_retries"),
        ({"servers": [{"host": "a", "port": 1}], "local_part_id": 3}, "local_part_id"),
        ({"servers": [{"host": "a", "port": 1}], "background_nice": 20}, "background_nice"),
        ({"servers": [{"host": "a", "port": 1}], "background_nice": "low"}, "background_nice"),
    ],
)
def test_bad_config_names_the_field(data, field):
    with pytest.raises(ConfigError, match=field.replace("[", r"\[").replace("]", r"\]")):
        find_cluster_config(data)


def test_bad_config_sources(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        find_cluster_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("servers: [unclosed\n")
    with pytest.raises(ConfigError, match="YAML syntax error at line 2"):
        find_cluster_config(bad)
    with pytest.raises(TypeError, match="int"):
        find_cluster_config(42)


def test_rank_and_world(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert trainer_rank_and_world() == (0, 1)
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert trainer_rank_and_world() == (2, 3)
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="WORLD_SIZE"):
        trainer_rank_and_world()


def test_initialize_without_config_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("GRAPHSTORE_CONFIG", raising=False)
    with pytest.raises(ValueError, match="GRAPHSTORE_CONFIG"):
        api.initialize()


def test_distributed_api_before_initialize():
    from graphstore.client.dist_graph import DistGraph
    from graphstore.client.dist_tensor import DistTensor

    api.exit_client()
    with pytest.raises(RuntimeError, match="initialize"):
        get_context()
    with pytest.raises(RuntimeError, match="initialize"):
        DistTensor((10, 2), "float32")
    with pytest.raises(RuntimeError, match="initialize"):
        DistGraph("g")


# ----- the context contract (standalone: no servers needed) -----------------------------------


@pytest.fixture()
def standalone(tmp_path):
    config_path, _ = make_partitioned_graph(tmp_path, num_nodes=300, num_parts=3, feat_dim=4)
    from graphstore.client.dist_graph import DistGraph

    graph = DistGraph("testgraph", part_config=config_path)
    yield graph
    api.exit_client()


def test_standalone_context_contract(standalone):
    ctx = get_context()
    assert ctx.standalone and ctx.num_parts == 3 and ctx.graph_name == "testgraph"
    assert ctx.rank == 0 and ctx.world_size == 1
    assert ctx.local_reader(1) is ctx.partition(1)
    assert ctx.tensor_scheme("feat").shape == (300, 4)
    assert ctx.tensor_scheme("nope") is None
    ids = np.array([299, 0, 150, 0, 101], dtype=np.int64)
    routes = ctx.route(ids, "node")
    assert sorted(int(p) for r in routes for p in r[1]) == list(range(5))
    for part_id, _positions, part_ids in routes:
        start, end = ctx.book.node_range(part_id)
        assert np.all((start <= part_ids) & (part_ids < end))
    with pytest.raises(IndexError, match="300"):
        ctx.route(np.array([300]), "node")
    with pytest.raises(IndexError, match="partition 3"):
        ctx.partition(3)
    with pytest.raises(ValueError, match="'both'"):
        ctx.route(ids, "both")


def test_run_parallel_runs_concurrently_in_order_and_reraises(standalone):
    ctx = get_context()
    barrier = threading.Barrier(3, timeout=10)

    def wait_then(value):
        barrier.wait()  # only passes when all three run at the same time
        return value

    assert ctx.run_parallel([lambda v=v: wait_then(v) for v in "abc"]) == ["a", "b", "c"]
    finished = []
    failed = threading.Event()

    def slow_ok():
        # Still running when the other call raises, then a little more work before it finishes.
        assert failed.wait(30), "the failing call never ran"
        time.sleep(0.2)
        finished.append(True)
        return 1

    def fail():
        failed.set()
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        ctx.run_parallel([fail, slow_ok])
    assert finished == [True], "the other calls finished before the error was raised"
    # nested use from inside a pool call does not deadlock
    assert ctx.run_parallel([lambda: ctx.run_parallel([lambda: 1, lambda: 2]), lambda: 3]) == [[1, 2], 3]


def test_exit_client_is_idempotent_and_closes(standalone):
    ctx = get_context()
    api.exit_client()
    api.exit_client()
    assert ctx.closed and current_context() is None
    with pytest.raises(RuntimeError, match="initialize"):
        ctx.partition(0)


# ----- unreachable servers ------------------------------------------------------------------------


def test_initialize_with_no_server_listening_fails_fast_naming_it():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = {
        "servers": [{"host": "127.0.0.1", "port": port}],
        "rpc": {"connect_timeout_s": 1.0, "deadline_s": 1.0, "max_retries": 1},
    }
    # The message names the configured connect timeout (1 s), not the default (60 s).
    with pytest.raises(ServerUnavailableError, match=rf"127.0.0.1:{port}: .*not SERVING within 1.0 s"):
        api.initialize(config)
    assert current_context() is None


def test_server_that_dies_gives_a_named_error_not_a_hang(tmp_path):
    from graphstore.launcher.local_servers import start_servers

    config_path, graph = make_partitioned_graph(tmp_path, num_nodes=200, num_parts=1, feat_dim=4)
    group = start_servers(config_path, 1)
    try:
        config = ClusterConfig(
            servers=(ServerSpec("127.0.0.1", int(group.addresses[0].rsplit(":", 1)[1]), 0),),
            rpc=RpcPolicy(deadline_s=2.0, connect_timeout_s=20.0, max_retries=1, backoff_initial_s=0.05),
            local_read="off",
        )
        ctx = api.initialize(config)
        assert isinstance(ctx, ClientContext) and not ctx.standalone
        assert api.initialize(config) is ctx, "initialize is idempotent"
        from graphstore.client.dist_graph import DistGraph

        g = DistGraph("testgraph")
        assert g.ndata["feat"][[0, 1]].shape == (2, 4)
        group.stop()

        def read_fails() -> None:
            with pytest.raises(ServerUnavailableError, match=group.addresses[0]):
                g.ndata["feat"][[0, 1]]

        run_in_threads(
            read_fails, [()], timeout=60
        )  # the read gives up: a liveness deadline, not a speed claim
    finally:
        group.stop()
        api.exit_client()


def test_a_dgl_ip_config_defers_to_the_cluster_in_graphstore_config(tmp_path, monkeypatch, caplog):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("servers:\n  - {host: 127.0.0.1, port: 41001}\n  - {host: 127.0.0.1, port: 41002}\n")
    ip_config = tmp_path / "ip_config.txt"
    ip_config.write_text("127.0.0.1\n")
    monkeypatch.delenv("GRAPHSTORE_CONFIG", raising=False)
    assert [s.port for s in find_cluster_config(str(ip_config)).servers] == [30050]
    with pytest.raises(FileNotFoundError, match="ip_config .*missing.txt"):
        find_cluster_config(str(tmp_path / "missing.txt"))
    monkeypatch.setenv("GRAPHSTORE_CONFIG", str(cluster))
    with caplog.at_level("WARNING", logger="graphstore.client.config"):
        assert [s.port for s in find_cluster_config(str(ip_config)).servers] == [41001, 41002]
        assert not caplog.records
        assert find_cluster_config(str(tmp_path / "missing.txt")).servers[0].port == 41001
    assert (
        "missing.txt" in caplog.records[0].getMessage() and "does not exist" in caplog.records[0].getMessage()
    )
    yaml_given = tmp_path / "other.yaml"
    yaml_given.write_text("servers:\n  - {host: 127.0.0.1, port: 42000}\n")
    assert find_cluster_config(str(yaml_given)).servers[0].port == 42000, "an explicit YAML is used as given"


def test_initialize_refuses_use_graphbolt_and_unknown_options():
    with pytest.raises(NotImplementedError, match="use_graphbolt=True"):
        api.initialize({"servers": [{"host": "127.0.0.1", "port": 1}]}, use_graphbolt=True)
    with pytest.raises(ValueError, match="num_samplers"):
        api.initialize({"servers": [{"host": "127.0.0.1", "port": 1}]}, num_samplers=2)
