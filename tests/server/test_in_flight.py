"""The in-flight count of a server's calls: a call whose deadline expires while it waits in the queue for
a worker is not counted forever, so a later shutdown does not wait out its grace period."""

from __future__ import annotations

import gc
import threading

import grpc
import pytest

from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos.service import SERVICE_NAME
from graphstore.server.in_flight import CountingHandler, InFlightCalls
from graphstore.server.main import RunningServer
from graphstore.server.server_config import ServerConfig


def test_a_handler_dropped_without_running_leaves_the_count():
    in_flight = InFlightCalls()
    base = grpc.unary_unary_rpc_method_handler(lambda request, context: request)
    handler = CountingHandler({"/m": base}, in_flight).service(type("Details", (), {"method": "/m"})())
    assert not in_flight.wait_quiet(0.05, 0.0)  # counted while grpc holds it
    del handler
    gc.collect()
    assert in_flight.wait_quiet(1.0, 0.0)


def test_calls_that_expire_in_the_queue_do_not_hold_the_shutdown(graph_files):
    running = RunningServer(ServerConfig(graph_files[0], 0, num_threads=2, grace_s=20.0))
    entered = threading.Semaphore(0)
    release = threading.Event()
    stats = running.partition.stats

    def slow_stats():
        entered.release()
        release.wait(30)
        return stats()

    running.partition.stats = slow_stats
    channel = grpc.insecure_channel(running.address)
    call = channel.unary_unary(f"/{SERVICE_NAME}/Stats")
    try:
        busy = [call.future(pb.StatsRequest().SerializeToString(), timeout=30) for _ in range(2)]
        assert entered.acquire(timeout=10) and entered.acquire(timeout=10)  # both workers are busy
        queued = [call.future(pb.StatsRequest().SerializeToString(), timeout=0.3) for _ in range(3)]
        for future in queued:
            with pytest.raises(grpc.RpcError) as exc:
                future.result()
            assert exc.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        running.partition.stats = stats
        release.set()
        for future in busy:
            future.result(timeout=10)
        gc.collect()
        # Every call is over: the count is back at zero (before, the expired ones stayed counted).
        assert running._servicer.wait_idle(5.0)
    finally:
        release.set()
        channel.close()
        running.stop()
