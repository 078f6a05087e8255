"""Small control-plane calls to partition servers: health probe, stats and shutdown.

Used by ``graphstore launch``, ``status`` and ``stop``. Deliberately light: it imports grpc and
the generated stubs only (no torch, no numpy), so a container health check that runs
``graphstore status --probe`` every few seconds starts in a fraction of a second.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

# The status a probe reports for a server that did not answer at all.
UNREACHABLE = "UNREACHABLE"
SERVING = "SERVING"


def probe_health(address: str, timeout_s: float = 2.0, service: str = "") -> str:
    """Ask a server's ``grpc.health.v1`` service for its status.

    Args:
        address: ``host:port``.
        timeout_s: deadline of the check (the connection attempt included).
        service: the health service name; ``""`` is the server as a whole.

    Returns:
        ``"SERVING"``, ``"NOT_SERVING"``, ``"SERVICE_UNKNOWN"``, ``"UNKNOWN"``, or
        :data:`UNREACHABLE` when nothing answered before the deadline.
    """
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            response = stub.Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout_s, wait_for_ready=False
            )
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return "SERVICE_UNKNOWN"
            return UNREACHABLE
    return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)


@dataclass(frozen=True)
class TensorInfo:
    """One named tensor as ``graphstore status`` shows it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    policy: str
    writable: bool
    persistent: bool
    from_partition: bool


@dataclass(frozen=True)
class ServerReport:
    """Health and figures of one server (``graphstore status``).

    Attributes:
        address: ``host:port`` that was asked.
        health: the probe result (see :func:`probe_health`).
        part_id: the partition it reports serving (None when unreachable).
        uptime_s, rss_bytes, rss_anon_bytes: from its Stats RPC.
        tensors: its named tensors.
        counters: its request counters.
        error: why Stats failed, if it did.
    """

    address: str
    health: str
    part_id: int | None = None
    uptime_s: float | None = None
    rss_bytes: int | None = None
    rss_anon_bytes: int | None = None
    tensors: tuple[TensorInfo, ...] = ()
    counters: dict[str, int] = field(default_factory=dict)
    error: str | None = None


def fetch_report(address: str, timeout_s: float = 5.0) -> ServerReport:
    """Probe a server's health and, when it answers, its Stats RPC.

    Args:
        address: ``host:port``.
        timeout_s: deadline of each of the two calls.

    Returns:
        A :class:`ServerReport`; unreachable servers get ``health == "UNREACHABLE"``.
    """
    from graphstore.protos import graphstore_pb2, graphstore_pb2_grpc

    health = probe_health(address, timeout_s)
    if health == UNREACHABLE:
        return ServerReport(address=address, health=health)
    with grpc.insecure_channel(address) as channel:
        stub = graphstore_pb2_grpc.PartitionServiceStub(channel)
        try:
            stats = stub.Stats(graphstore_pb2.StatsRequest(), timeout=timeout_s)
        except grpc.RpcError as exc:
            return ServerReport(address=address, health=health, error=f"{exc.code().name}: {exc.details()}")
    tensors = tuple(
        TensorInfo(
            name=t.name,
            dtype=graphstore_pb2.DType.Name(t.dtype).lower(),
            shape=tuple(t.shape),
            policy=graphstore_pb2.Policy.Name(t.policy).lower(),
            writable=t.writable,
            persistent=t.persistent,
            from_partition=t.from_partition,
        )
        for t in stats.tensors
    )
    return ServerReport(
        address=address,
        health=health,
        part_id=stats.part_id,
        uptime_s=stats.uptime_s,
        rss_bytes=stats.rss_bytes,
        rss_anon_bytes=stats.rss_anon_bytes,
        tensors=tensors,
        counters=dict(stats.counters),
    )


def request_shutdown(address: str, timeout_s: float = 5.0) -> str:
    """Ask a server to shut down through its Shutdown RPC.

    Args:
        address: ``host:port``.
        timeout_s: deadline of the call.

    Returns:
        ``"stopping"`` when the server acknowledged, ``"not running"`` when nothing answers there.

    Raises:
        RuntimeError: the server answered with an error (the message names the address and status).
    """
    from graphstore.protos import graphstore_pb2, graphstore_pb2_grpc

    with grpc.insecure_channel(address) as channel:
        stub = graphstore_pb2_grpc.PartitionServiceStub(channel)
        try:
            stub.Shutdown(graphstore_pb2.ShutdownRequest(), timeout=timeout_s)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNAVAILABLE:
                return "not running"
            raise RuntimeError(
                f"server {address}: Shutdown failed: {exc.code().name}: {exc.details()}"
            ) from None
    return "stopping"


def port_accepts_connections(host: str, port: int, timeout_s: float = 0.3) -> bool:
    """Whether something accepts TCP connections at ``host:port`` (a port-in-use check)."""
    import socket

    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False
