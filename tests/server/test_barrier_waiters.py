"""Barriers over a real server: waiting participants hold no worker thread, so Pull and the health check
keep answering with 200 of them waiting, and a participant whose call was cancelled is not counted."""

from __future__ import annotations

import threading

import grpc
import numpy as np

from graphstore.client.transport import RemotePartition
from graphstore.launcher.local_servers import start_servers
from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos.service import SERVICE_NAME
from graphstore.rpc import RpcPolicy

WAITERS = 200


def test_200_waiters_leave_pull_and_health_answering(graph_files, tmp_path):
    feat = graph_files[2]["feat"]
    # Four worker threads: before, four waiting participants took every one.
    with start_servers(graph_files[0], 1, ("--num-threads", "4"), log_dir=tmp_path) as group:
        address = group.addresses[0]
        clients = [RemotePartition(address, 0, RpcPolicy(deadline_s=10)) for _ in range(4)]
        generations: dict[int, int] = {}
        errors: list[BaseException] = []

        def wait(k: int) -> None:
            try:
                generations[k] = clients[k % 4].barrier("crowd", WAITERS + 1, 120.0, f"p{k}")
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=wait, args=(k,)) for k in range(WAITERS)]
        for t in threads:
            t.start()
        probe = RemotePartition(address, 0, RpcPolicy(deadline_s=5, max_retries=0))
        ids = np.arange(0, 200, dtype=np.int64)
        for _ in range(20):  # every call answered within its 5 s deadline while the crowd waits
            np.testing.assert_array_equal(probe.pull("feat", ids), feat[ids])
            assert probe.health(timeout=2.0) == "SERVING"
        assert not generations and not errors  # nobody was released early
        assert probe.barrier("crowd", WAITERS + 1, 60.0, "last") == 0
        for t in threads:
            t.join(60)
        assert not errors and generations == dict.fromkeys(range(WAITERS), 0)
        for client in [*clients, probe]:
            client.close()


def test_a_cancelled_participant_is_not_counted(graph_files, tmp_path):
    with start_servers(graph_files[0], 1, log_dir=tmp_path) as group:
        channel = grpc.insecure_channel(group.addresses[0])
        barrier = channel.unary_unary(
            f"/{SERVICE_NAME}/Barrier",
            request_serializer=pb.BarrierRequest.SerializeToString,
            response_deserializer=pb.BarrierResponse.FromString,
        )
        first = barrier.future(
            pb.BarrierRequest(name="c", count=2, timeout_s=30, participant="a"), timeout=20
        )
        # The server holds the call a moment (waiting for the release); the client gives up on it.
        first.cancel()
        second = barrier(pb.BarrierRequest(name="c", count=2, timeout_s=30, participant="b"), timeout=20)
        assert second.released is False  # "a" was withdrawn with its call
        third = barrier(pb.BarrierRequest(name="c", count=2, timeout_s=30, participant="c"), timeout=20)
        assert third.released is True and third.generation == 0
        channel.close()
