"""Thousands of malformed requests against a running server: each gets a clean status, and the server
keeps answering correct requests with the right rows afterwards.

The examples are drawn from a fixed seed (``derandomize``), so a run in CI is repeatable;
``bench/fuzz.py`` runs a longer randomized campaign. The raw channel takes answers as large as the
server may send (the client's own channel options), so a large valid answer is not mistaken for a
failure of the server."""

from __future__ import annotations

import math

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphstore.client.transport.channel import channel_options
from graphstore.launcher.local_servers import start_servers
from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos.service import SERVICE_NAME
from graphstore.rpc import RpcPolicy
from tests.server.conftest import NUM_NODES

NUM_EXAMPLES = 2100
# Everything except Shutdown (it would stop the server).
METHODS = [
    "Metadata",
    "Pull",
    "Push",
    "Init",
    "Delete",
    "List",
    "SampleNeighbors",
    "FindEdges",
    "InSubgraph",
    "Degrees",
    "PushGrad",
    "Barrier",
    "Checkpoint",
    "Restore",
    "Stats",
]
# The methods whose requests carry fields to get wrong.
STRUCTURED_METHODS = [m for m in METHODS if m not in ("Metadata", "List", "Stats")]
ALLOWED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}

names = st.sampled_from(["feat", "label", "weight", "emb", "", "missing", "x" * 300])
dims = st.one_of(st.integers(-3, 8), st.sampled_from([NUM_NODES, 2**31, 2**62, -(2**62), 10**13]))
shapes = st.lists(dims, max_size=4)
wire_dtypes = st.integers(-1, 12)
floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -1.0, 1e-3, 0.1]))


@st.composite
def tensors(draw) -> pb.Tensor:
    """A Tensor message whose dtype, shape and byte count may disagree."""
    msg = pb.Tensor(dtype=draw(wire_dtypes) % 2**31 if draw(st.booleans()) else draw(st.integers(0, 10)))
    shape = draw(shapes)
    msg.shape[:] = shape
    if draw(st.booleans()) and len(shape) == 1 and 0 <= shape[0] <= 64:
        ids = draw(
            st.lists(
                st.integers(-(2**63), 2**63 - 1) | st.integers(-5, NUM_NODES + 5),
                min_size=shape[0],
                max_size=shape[0],
            )
        )
        msg.dtype = pb.INT64
        msg.data = np.array(ids, dtype=np.int64).tobytes()
    else:
        msg.data = draw(st.binary(max_size=96))
    return msg


@st.composite
def structured_requests(draw) -> tuple[str, bytes]:
    method = draw(st.sampled_from(STRUCTURED_METHODS))
    if method == "Pull":
        msg = pb.PullRequest(name=draw(names))
        msg.ids.CopyFrom(draw(tensors()))
    elif method == "Push":
        msg = pb.PushRequest(name=draw(names), op=draw(st.integers(0, 5)))
        msg.ids.CopyFrom(draw(tensors()))
        msg.rows.CopyFrom(draw(tensors()))
    elif method == "Init":
        msg = pb.InitRequest(name=draw(names), dtype=draw(st.integers(0, 12)), policy=draw(st.integers(0, 4)))
        msg.shape[:] = draw(st.lists(st.sampled_from([NUM_NODES, 4000, 1, 3, 0, -1, 10**13]), max_size=3))
        msg.init.kind = draw(st.integers(0, 7))
        msg.init.a, msg.init.b = draw(floats), draw(floats)
    elif method == "SampleNeighbors":
        msg = pb.SampleRequest(
            fanout=draw(st.integers(-(2**31), 2**31 - 1) | st.integers(-3, 20)),
            edge_dir=draw(st.integers(0, 3)),
            replace=draw(st.booleans()),
            prob=draw(names),
            has_random_seed=draw(st.booleans()),
            random_seed=draw(st.integers(-(2**63), 2**63 - 1)),
        )
        msg.seeds.CopyFrom(draw(tensors()))
    elif method == "FindEdges":
        msg = pb.FindEdgesRequest()
        msg.eids.CopyFrom(draw(tensors()))
    elif method == "InSubgraph":
        msg = pb.InSubgraphRequest()
        msg.nodes.CopyFrom(draw(tensors()))
    elif method == "Degrees":
        msg = pb.DegreesRequest(edge_dir=draw(st.integers(0, 5)))
        msg.nids.CopyFrom(draw(tensors()))
    elif method == "PushGrad":
        msg = pb.PushGradRequest(name=draw(names))
        msg.ids.CopyFrom(draw(tensors()))
        msg.grads.CopyFrom(draw(tensors()))
        msg.optimizer.kind = draw(st.sampled_from(["adagrad", "adam", "rowwise_adagrad", "sgd", ""]))
        msg.optimizer.lr, msg.optimizer.eps = draw(floats), draw(floats)
        msg.optimizer.beta1, msg.optimizer.beta2 = draw(floats), draw(floats)
    elif method == "Barrier":
        msg = pb.BarrierRequest(
            name=draw(names),
            count=draw(st.integers(-(2**31), 2**31 - 1) | st.integers(1, 3)),
            timeout_s=draw(st.sampled_from([-1.0, 0.0, math.nan, math.inf, 1e-3, 1e300, 0.5])),
            participant=draw(st.sampled_from(["", "a", "b"])),
            has_ticket=draw(st.booleans()),
            ticket=draw(st.integers(-(2**63), 2**63 - 1) | st.integers(0, 2)),
            leave=draw(st.booleans()),
        )
    elif method == "Delete":
        msg = pb.DeleteRequest(name=draw(names))
    else:
        paths = st.sampled_from(["", "/nonexistent/x", ".", "\x00bad", "../up", "ck", "a/b", "x" * 300])
        request_type = pb.RestoreRequest if method == "Restore" else pb.CheckpointRequest
        msg = request_type(path=draw(paths))
        msg.names[:] = draw(st.lists(names, max_size=2))
    return method, msg.SerializeToString()


garbage_requests = st.tuples(st.sampled_from(METHODS), st.binary(max_size=128))


@pytest.fixture(scope="module")
def fuzz_server(graph_files, tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-checkpoints")
    group = start_servers(
        graph_files[0], 1, ("--checkpoint-root", str(root)), log_dir=tmp_path_factory.mktemp("fuzz-logs")
    )
    channel = grpc.insecure_channel(group.addresses[0], options=channel_options(RpcPolicy()))
    calls = {m: channel.unary_unary(f"/{SERVICE_NAME}/{m}") for m in METHODS}  # raw bytes both ways
    yield group, calls
    channel.close()
    group.stop()


def test_malformed_requests_get_clean_statuses_and_the_server_keeps_serving(fuzz_server, graph_files):
    group, calls = fuzz_server
    seen: dict[grpc.StatusCode, int] = {}

    @settings(
        max_examples=NUM_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(request=st.one_of(garbage_requests, structured_requests()))
    def throw(request):
        method, payload = request
        try:
            calls[method](payload, timeout=2.0)
            code, details = grpc.StatusCode.OK, ""
        except grpc.RpcError as err:
            code, details = err.code(), err.details()
        seen[code] = seen.get(code, 0) + 1
        assert code in ALLOWED, f"{method}: {code} {details}"
        if code not in (grpc.StatusCode.OK, grpc.StatusCode.DEADLINE_EXCEEDED):
            assert details.startswith(f"{method}: ") and len(details) > len(method) + 4

    throw()
    assert sum(seen.values()) >= 2000
    assert seen.get(grpc.StatusCode.INVALID_ARGUMENT, 0) > 500  # most of them really were malformed
    assert group.procs[0].poll() is None

    ids = np.array([5, 0, 17, 5], dtype=np.int64)
    request = pb.PullRequest(name="feat")
    request.ids.dtype, request.ids.data = pb.INT64, ids.tobytes()
    request.ids.shape[:] = [4]
    reply = pb.PullResponse.FromString(calls["Pull"](request.SerializeToString(), timeout=5))
    rows = np.frombuffer(reply.rows.data, np.float32).reshape(tuple(reply.rows.shape))
    np.testing.assert_array_equal(rows, graph_files[2]["feat"][ids])
