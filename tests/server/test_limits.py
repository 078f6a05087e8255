"""Request limits: every oversized request is answered with a status naming the limit and the value, the
client splits its own large calls below the limits, and the server keeps serving."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from graphstore.client.transport import RemotePartition
from graphstore.errors import LimitExceededError, MemoryBudgetError
from graphstore.launcher.local_servers import start_servers
from graphstore.limits import RequestLimits, limits_to_flags
from graphstore.partition import load_partition
from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos.service import SERVICE_NAME
from graphstore.rpc import RpcPolicy
from graphstore.server.limits import RequestGuard, planned_edges
from graphstore.server.memory_budget import MemoryBudget, MemoryFigures
from graphstore.server.partition_server import PartitionServer
from tests.server.conftest import NUM_NODES

# Small limits, so that the tests reach them with a small graph.
MiB = 1024 * 1024
SMALL = RequestLimits(max_sampled_edges=500, max_request_rows=1000, max_request_bytes=8192)


def test_planned_edges_bound_what_a_sample_can_return():
    degrees = np.array([0, 3, 10])
    assert planned_edges(degrees, -1, False) == 13
    assert planned_edges(degrees, 5, False) == 0 + 3 + 5
    assert planned_edges(degrees, 5, True) == 2 * 5  # a seed without edges gets none
    assert planned_edges(degrees, 2**31 - 1, True) == 2 * (2**31 - 1)


def test_limits_validate_and_become_server_flags():
    RequestLimits().validate()
    with pytest.raises(ValueError, match="max_tensor_dims"):
        RequestLimits(max_tensor_dims=9).validate()
    with pytest.raises(ValueError, match="max_barrier_timeout_s"):
        RequestLimits(max_barrier_timeout_s=1e300).validate()
    with pytest.raises(ValueError, match="max_sampled_edges"):
        RequestLimits(max_sampled_edges=0).validate()
    assert limits_to_flags(RequestLimits()) == []
    assert limits_to_flags(SMALL) == [
        "--max-sampled-edges",
        "500",
        "--max-request-rows",
        "1000",
        "--max-request-bytes",
        "8192",
    ]


def test_guard_refuses_with_the_limit_and_the_value(graph_files):
    server = PartitionServer(load_partition(graph_files[0], 0))
    guard = RequestGuard(SMALL, server)
    seeds = np.arange(0, 10, dtype=np.int64)
    with pytest.raises(LimitExceededError, match=r"can return \d+ edges.*max_sampled_edges=500") as exc:
        guard.sample(seeds[:1], 2**31 - 1, "in", True)
    assert exc.value.limit == "max_sampled_edges"
    guard.sample(seeds, 10, "in", False)  # fits
    with pytest.raises(LimitExceededError, match="exclude_eids: 1001 IDs exceeds the limit max_request_rows"):
        guard.sample(seeds, 10, "in", False, np.arange(1001, dtype=np.int64))
    guard.sample(seeds, 10, "in", False, np.arange(1000, dtype=np.int64))  # fits
    with pytest.raises(LimitExceededError, match="1001 IDs exceeds the limit max_request_rows=1000"):
        guard.rows(1001, "ids")
    with pytest.raises(ValueError, match="13 dimensions .* max_tensor_dims=4"):
        guard.shape([NUM_NODES] + [1] * 12)
    with pytest.raises(ValueError, match="elements"):
        guard.shape([NUM_NODES, 2**40, 2**30])
    for bad in (1e300, 0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="timeout_s must be in"):
            guard.barrier_timeout(bad)
    guard.barrier_timeout(86400.0)


@pytest.fixture(scope="module")
def limited_server(graph_files, tmp_path_factory):
    """One server of partition 0 with :data:`SMALL` limits."""
    group = start_servers(
        graph_files[0], 1, limits_to_flags(SMALL), log_dir=tmp_path_factory.mktemp("limited-logs")
    )
    yield group
    group.stop()


def test_oversized_requests_get_resource_exhausted_and_the_server_keeps_serving(limited_server, graph_files):
    address = limited_server.addresses[0]
    feat = graph_files[2]["feat"]
    owned = np.arange(0, 250, dtype=np.int64)
    # One chunk per call: the client does not split below the server's limits.
    unsplit = RpcPolicy(deadline_s=20, chunk_bytes=64 * 1024 * 1024)
    with RemotePartition(address, 0, unsplit) as raw:
        with pytest.raises(LimitExceededError, match="max_request_bytes=8192"):
            raw.pull("feat", owned)  # 250 rows x 12 float32 = 12000 bytes
        # One seed, fanout 2^31-1 with replacement: ~30 bytes that asked for 2^31 edges.
        with pytest.raises(LimitExceededError, match="2147483647 .*max_sampled_edges=500"):
            raw.sample_neighbors(owned[:1], 2**31 - 1, replace=True)
        with pytest.raises(ValueError, match="max_tensor_dims=4"):
            raw.init_tensor("deep", (NUM_NODES, 1, 1, 1, 1), "float32", "node")
        with pytest.raises(ValueError, match="timeout_s must be in"):
            raw.barrier("b", 2, 1e300)
        np.testing.assert_array_equal(raw.pull("feat", owned[:10]), feat[owned[:10]])
    # The client splits pulls and samples below the limits: the user never meets them.
    with RemotePartition(address, 0, RpcPolicy(deadline_s=20, chunk_bytes=4096)) as client:
        np.testing.assert_array_equal(client.pull("feat", owned), feat[owned])
        src, dst, _ = client.sample_neighbors(owned, -1)  # all in-edges of 250 nodes: more than 500
        assert len(src) == client.degrees(owned).sum() > SMALL.max_sampled_edges
        assert np.isin(dst, owned).all()


def test_the_wire_status_names_the_limit(limited_server):
    channel = grpc.insecure_channel(limited_server.addresses[0])
    sample = channel.unary_unary(f"/{SERVICE_NAME}/SampleNeighbors")
    request = pb.SampleRequest(fanout=2**31 - 1, replace=True)
    request.seeds.dtype, request.seeds.data = pb.INT64, np.array([0], np.int64).tobytes()
    request.seeds.shape[:] = [1]
    with pytest.raises(grpc.RpcError) as exc:
        sample(request.SerializeToString(), timeout=10)
    assert exc.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert (
        exc.value.details().startswith("SampleNeighbors: ") and "max_sampled_edges=500" in exc.value.details()
    )
    init = channel.unary_unary(f"/{SERVICE_NAME}/Init")
    deep = pb.InitRequest(name="deep", dtype=pb.FLOAT32, policy=pb.NODE)
    deep.shape[:] = [NUM_NODES] + [1] * 12
    with pytest.raises(grpc.RpcError) as exc:
        init(deep.SerializeToString(), timeout=10)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "max_tensor_dims" in exc.value.details()
    channel.close()


def test_large_requests_reserve_their_working_memory(graph_files):
    server = PartitionServer(load_partition(graph_files[0], 0))
    server.store.memory = MemoryBudget(
        0, lambda: MemoryFigures(host_available=20 * MiB, cgroup_free=None, cgroup_limit=None)
    )
    guard = RequestGuard(RequestLimits(), server)
    owned = np.arange(0, 200, dtype=np.int64)
    first, second = owned[server.degrees(owned, "in") > 0][:2]  # seeds with in-edges
    with guard.sample(np.array([first]), 10, "in", True):  # small: no reservation needed
        pass
    with pytest.raises(MemoryBudgetError, match="an answer of up to 200000 edges needs 32000000 bytes"):
        with guard.sample(np.array([first]), 200_000, "in", True):
            pass
    with guard.sample(np.array([first]), 110_000, "in", True):  # 17.6 MB: fits the 20 MiB budget
        with pytest.raises(MemoryBudgetError, match="reserved by requests in progress 17600000"):
            with guard.sample(np.array([second]), 110_000, "in", True):
                pass
