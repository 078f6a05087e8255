"""The call stream against a real server process: calls answered in order on one stream as their unary
calls are, a refused call answered with its error while the stream stays open, the limit of open streams,
and the calls counted once in the server's Stats."""

from __future__ import annotations

import queue

import grpc
import numpy as np
import pytest

from graphstore.client.transport import RemotePartition
from graphstore.launcher.local_servers import start_servers
from graphstore.protos import call_wire, codec, pull_wire
from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos.service import SERVICE_NAME
from graphstore.rpc import RpcPolicy
from tests.server.conftest import owned_nodes


class _RawStream:
    """One ``Call`` stream, spoken to message by message."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        self.answers = self.channel.stream_stream(f"/{SERVICE_NAME}/Call")(
            iter(self.requests.get, None), timeout=60
        )

    def call(self, method: str, request: bytes, timeout_s: float | None = 10.0):
        self.requests.put(call_wire.call_request(method, request, timeout_s))
        return call_wire.read_call_answer(next(self.answers))

    def close(self) -> None:
        self.requests.put(None)
        self.answers.cancel()
        self.channel.close()


def _error(payload) -> pb.CallError:
    return pb.CallError.FromString(payload)


def test_calls_on_one_stream_are_answered_in_order_and_a_refusal_keeps_it_open(server_group, graph_files):
    feat = graph_files[2]["feat"]
    client = RemotePartition(server_group.addresses[0], 0, RpcPolicy(call_streams=0))
    ids = owned_nodes([client], 0)[::7]
    stream = _RawStream(server_group.addresses[0])
    try:
        field, payload = stream.call("Pull", pull_wire.pull_request("feat", ids))
        assert field == call_wire.CALL_FIELDS["Pull"]
        np.testing.assert_array_equal(pull_wire.decode_pull_response(payload)[0], feat[ids])

        field, payload = stream.call("Pull", pull_wire.pull_request("no_such_tensor", ids))
        assert field == call_wire.ERROR_FIELD
        assert _error(payload).kind == "KeyError"
        assert _error(payload).code == grpc.StatusCode.NOT_FOUND.value[0]

        outside = np.array([feat.shape[0] + 5])
        field, payload = stream.call("Pull", pull_wire.pull_request("feat", outside))
        assert (field, _error(payload).kind) == (call_wire.ERROR_FIELD, "ValueError")
        assert "not owned by partition 0" in _error(payload).message

        field, payload = stream.call("Degrees", b"\x0a\x03\xff\xff\xff")  # a truncated DegreesRequest
        assert (field, _error(payload).kind) == (call_wire.ERROR_FIELD, "ValueError")

        request = pb.DegreesRequest()
        codec.write_ids(request.nids, ids)
        field, payload = stream.call("Degrees", request.SerializeToString(), timeout_s=None)
        assert field == call_wire.CALL_FIELDS["Degrees"]
        degrees = codec.read_ids(pb.DegreesResponse.FromString(payload).degrees, "degrees")
        np.testing.assert_array_equal(degrees, client.degrees(ids))
    finally:
        stream.close()
        client.close()


def test_the_stream_and_the_unary_call_give_the_same_answers_and_errors(server_group):
    lanes = RemotePartition(server_group.addresses[1], 1, RpcPolicy(deadline_s=20))
    unary = RemotePartition(server_group.addresses[1], 1, RpcPolicy(deadline_s=20, call_streams=0))
    try:
        ids = owned_nodes([lanes, lanes], 1)[::3]
        np.testing.assert_array_equal(lanes.pull("feat", ids), unary.pull("feat", ids))
        np.testing.assert_array_equal(lanes.in_subgraph(ids[:20])[0], unary.in_subgraph(ids[:20])[0])
        np.testing.assert_array_equal(
            lanes.sample_neighbors(ids, 3, random_seed=7)[0], unary.sample_neighbors(ids, 3, random_seed=7)[0]
        )
        for client in (lanes, unary):
            with pytest.raises(KeyError, match="no_such"):
                client.pull("no_such", ids)
            with pytest.raises(ValueError, match="not owned by partition 1"):
                client.pull("feat", np.array([0]))
        assert lanes._channel._lanes.open_lanes == 1
    finally:
        lanes.close()
        unary.close()


def test_streams_over_the_servers_limit_are_refused_and_clients_send_unary_calls(graph_files, tmp_path):
    # 4 worker threads: at most one open stream.
    with start_servers(graph_files[0], 1, ("--num-threads", "4"), log_dir=tmp_path) as group:
        address = group.addresses[0]
        held = _RawStream(address)
        client = RemotePartition(address, 0, RpcPolicy(deadline_s=20))
        other = None
        try:
            ids = owned_nodes([client], 0)[:10]
            assert held.call("Pull", pull_wire.pull_request("feat", ids))[0] == 1  # holds the only slot
            other = _RawStream(address)
            with pytest.raises(grpc.RpcError) as refused:
                other.call("Pull", pull_wire.pull_request("feat", ids))
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            before = client.stats().counters.get("calls_Pull", 0)
            for _ in range(3):
                assert client.pull("feat", ids).shape[0] == 10
            assert client._channel._lanes.open_lanes == 0  # refused once, then unary calls
            assert client.stats().counters["calls_Pull"] == before + 3  # each call counted once
        finally:
            for stream in (held, other):
                if stream is not None:
                    stream.close()
            client.close()
