"""The server process: startup line, health, SIGTERM and Shutdown, clients that cannot reach it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from graphstore.client.transport import RemotePartition
from graphstore.errors import ServerUnavailableError
from graphstore.launcher.local_servers import start_servers
from graphstore.protos.service import SERVICE_NAME
from graphstore.rpc import RpcPolicy
from tests.launcher.helpers import server_command
from tests.server.conftest import NUM_NODES
from tests.utils.barriers import barrier_has_waiters
from tests.utils.threads import run_in_threads
from tests.utils.wait import wait_until


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sigterm_health_not_serving_and_in_flight_calls_finish(graph_files, tmp_path):
    group = start_servers(graph_files[0], 1, ("--checkpoint-root", str(tmp_path)), log_dir=tmp_path)
    feat = graph_files[2]["feat"]
    try:
        address = group.addresses[0]
        channel = grpc.insecure_channel(address)
        watch = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=30
        )
        statuses = []
        watcher = threading.Thread(target=lambda: statuses.extend(r.status for r in _until_error(watch)))
        watcher.start()
        policy = RpcPolicy(max_retries=0)
        clients = [RemotePartition(address, 0, policy) for _ in range(3)]
        results, errors = [], []

        def puller(client: RemotePartition, seed: int) -> None:  # a stream of calls across the SIGTERM
            rng = np.random.default_rng(seed)
            while True:
                ids = rng.integers(0, 300, 2000)
                try:
                    results.append(np.array_equal(client.pull("feat", ids), feat[ids]))
                except Exception as exc:  # noqa: BLE001 - checked below
                    errors.append(exc)
                    return

        # A slow call (a 120 MB checkpoint) that is in flight when SIGTERM arrives.
        writer = RemotePartition(address, 0, policy)
        writer.init_tensor("big", (NUM_NODES, 100_000), "float32", "node")
        folder = tmp_path / "ckpt"
        checkpointed = []
        slow = threading.Thread(target=lambda: checkpointed.append(writer.checkpoint("ckpt")))
        threads = [threading.Thread(target=puller, args=(c, i)) for i, c in enumerate(clients)]
        for t in threads:
            t.start()
        wait_until(lambda: len(results) >= 3, 60, "three pulls answered before SIGTERM")
        slow.start()
        threads.append(slow)
        wait_until(
            lambda: (folder / "big").exists() or checkpointed, 60, "the checkpoint to start", interval_s=0.002
        )
        in_flight = not checkpointed
        os.kill(group.procs[0].pid, signal.SIGTERM)
        assert group.procs[0].wait(60) == 0
        for t in threads + [watcher]:
            t.join(10)
        # The call in flight got its whole answer, and wrote every file.
        assert in_flight
        files, rows = checkpointed[0]
        shard = np.load(folder / "big" / "shard-0-of-2.rows.npy", mmap_mode="r")
        assert rows == 300 and shard.shape == (300, 100_000)
        # Every pull the server accepted returned correct rows; the later ones found it unavailable.
        assert results and all(results)
        assert len(errors) == 3 and all(isinstance(e, ServerUnavailableError) for e in errors), errors
        assert statuses[0] == health_pb2.HealthCheckResponse.SERVING
        assert health_pb2.HealthCheckResponse.NOT_SERVING in statuses
        channel.close()
        for client in [*clients, writer]:
            client.close()
    finally:
        group.stop()


def _until_error(stream):
    try:
        yield from stream
    except grpc.RpcError:
        return


def test_shutdown_call_stops_the_server_cleanly(graph_files, tmp_path):
    group = start_servers(graph_files[0], 1, log_dir=tmp_path)
    try:
        with RemotePartition(group.addresses[0], 0) as client:
            assert client.health() == "SERVING"
            client.shutdown()
        assert group.procs[0].wait(10) == 0
        assert "stopped" in group.stderr(0)
    finally:
        group.stop()


def test_startup_line_and_port_zero(graph_files, tmp_path):
    group = start_servers(graph_files[0], 1, log_dir=tmp_path)
    try:
        line = group.log_paths[0][0].read_text().strip()
        assert line.startswith("graphstore server: serving partition 0 of testgraph at 127.0.0.1:")
        assert "loaded in" in line and len(line.splitlines()) == 1
        port = int(group.addresses[0].rsplit(":", 1)[1])
        assert port > 0
    finally:
        group.stop()


def test_bad_arguments_exit_with_one_line(graph_files, tmp_path):
    for args, pattern in (
        (["--part-config", str(tmp_path / "missing.json"), "--part-id", "0"], "missing.json"),
        (["--part-config", graph_files[0], "--part-id", "7"], "7"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "graphstore.launcher.cli", "server", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2, result.stderr
        assert pattern in result.stderr and "Traceback" not in result.stderr


def test_busy_port_is_reported(graph_files, tmp_path):
    group = start_servers(graph_files[0], 1, log_dir=tmp_path)
    try:
        port = group.addresses[0].rsplit(":", 1)[1]
        result = subprocess.run(
            server_command(graph_files[0], 0, port),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode != 0 and f"127.0.0.1:{port}" in result.stderr
    finally:
        group.stop()


def test_unreachable_server_raises_server_unavailable_after_bounded_retries():
    address = f"127.0.0.1:{_free_port()}"
    policy = RpcPolicy(deadline_s=2, max_retries=3, backoff_initial_s=0.05, backoff_max_s=0.2)
    client = RemotePartition(address, 0, policy)

    def pull_fails() -> None:
        with pytest.raises(ServerUnavailableError, match=address):
            client.pull("feat", np.array([0]))

    run_in_threads(pull_fails, [()], timeout=60)  # it gives up (a liveness bound, not a speed claim)
    with pytest.raises(ServerUnavailableError, match="not SERVING within 0.5 s"):
        client.wait_ready(0.5)
    client.close()


def test_client_retries_until_a_late_server_comes_up(graph_files, tmp_path):
    # The port first belongs to a plain socket that hangs up on the client: the server comes up only
    # after the client's first attempt has reached the port and failed.
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(60)
    port = listener.getsockname()[1]
    policy = RpcPolicy(deadline_s=10, max_retries=40, backoff_initial_s=0.1, backoff_max_s=0.3)
    client = RemotePartition(f"127.0.0.1:{port}", 0, policy)
    result = []
    caller = threading.Thread(target=lambda: result.append(client.degrees(np.array([0]))))
    caller.start()
    with listener:
        connection, _ = listener.accept()
        connection.close()
    err = open(tmp_path / "late.err", "w")
    proc = subprocess.Popen(
        server_command(graph_files[0], 0, port),
        stdout=subprocess.DEVNULL,
        stderr=err,
    )
    try:
        caller.join(30)
        assert len(result) == 1 and result[0].shape == (1,)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        err.close()
        client.close()


def test_sigterm_releases_a_waiting_barrier_and_exits_promptly(graph_files, tmp_path):
    group = start_servers(graph_files[0], 1, log_dir=tmp_path)
    try:
        # No retries: the error is the server's own answer to the waiting call.
        client = RemotePartition(group.addresses[0], 0, RpcPolicy(max_retries=0))
        probe = RemotePartition(group.addresses[0], 0)
        outcome = []

        def waiter() -> None:  # a participant that would wait two minutes for a partner
            try:
                client.barrier("epoch", 2, 120.0, participant="rank0")
            except Exception as exc:  # noqa: BLE001 - checked below
                outcome.append(exc)

        thread = threading.Thread(target=waiter)
        thread.start()
        wait_until(lambda: barrier_has_waiters(probe.barrier, "epoch"), 60, "the participant at the barrier")
        os.kill(group.procs[0].pid, signal.SIGTERM)
        assert group.procs[0].wait(60) == 0
        thread.join(60)
        # Released by the shutdown itself, not cut off when the grace period ran out.
        assert len(outcome) == 1 and isinstance(outcome[0], ServerUnavailableError), outcome
        assert "the server is shutting down" in str(outcome[0])
        client.close()
        probe.close()
    finally:
        group.stop()
