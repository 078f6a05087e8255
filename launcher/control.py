"""Small control-plane calls to partition servers: health probe, stats, metrics and shutdown.

Used by ``graphstore launch``, ``status`` and ``stop``. The calls go through the client's transport,
one attempt each within the timeout: the health check and Shutdown through its channel
(:class:`~graphstore.client.transport.channel.ServerChannel`, grpc only: no torch, no numpy, so a
container health check that runs ``graphstore status --probe`` every few seconds starts in a fraction
of a second), Stats through :class:`~graphstore.client.transport.remote.RemotePartition`.

Every call takes an optional :class:`graphstore.auth.ChannelSecurity` (TLS and the shared
token, from the cluster config); the health check is answered without the token, Stats and Shutdown
need it when the servers have one.
"""

from __future__ import annotations

import dataclasses
import http.client
import math
import socket
import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from graphstore.auth import NO_SECURITY, ChannelSecurity
from graphstore.client.transport.channel import ServerChannel
from graphstore.config import split_address
from graphstore.errors import ServerError, ServerUnavailableError
from graphstore.launcher.hosts import port_accepts_connections
from graphstore.protos import graphstore_pb2
from graphstore.rpc import RpcPolicy

if TYPE_CHECKING:  # graphstore.types imports numpy, which the probe does not load
    from graphstore.types import TensorScheme

# The status a probe reports for a server that did not answer at all.
UNREACHABLE = "UNREACHABLE"
SERVING = "SERVING"


def _one_attempt(timeout_s: float) -> RpcPolicy:
    """The control plane's call policy: one attempt, answered within ``timeout_s``."""
    return RpcPolicy(deadline_s=timeout_s, max_retries=0)


def probe_health(address: str, timeout_s: float = 2.0, security: ChannelSecurity | None = None) -> str:
    """Ask a server's ``grpc.health.v1`` service for its status (:meth:`ServerChannel.health`).

    Args:
        address: ``host:port``.
        timeout_s: deadline of the check (the connection attempt included).
        security: TLS settings (and token) to use; default a plain channel.

    Returns:
        ``"SERVING"``, ``"NOT_SERVING"``, ``"SERVICE_UNKNOWN"``, ``"UNKNOWN"``, or
        :data:`UNREACHABLE` when nothing answered before the deadline (a TLS mismatch included).
    """
    channel = ServerChannel(address, _one_attempt(timeout_s), security or NO_SECURITY)
    try:
        return channel.health(timeout_s)
    except ServerUnavailableError as exc:
        return "SERVICE_UNKNOWN" if exc.code == "NOT_FOUND" else UNREACHABLE
    finally:
        channel.close()


# The fields of graphstore.types.ServerStats a ServerReport carries.
_STATS_FIELDS = ("part_id", "uptime_s", "rss_bytes", "rss_anon_bytes", "tensors", "counters", "read_replica")


@dataclass(frozen=True)
class ServerReport:
    """Health and figures of one server (``graphstore status``).

    Attributes:
        address: ``host:port`` that was asked.
        health: the probe result (see :func:`probe_health`).
        part_id: the partition it reports serving (None when unreachable).
        uptime_s, rss_bytes, rss_anon_bytes: from its Stats RPC.
        tensors: its named tensors (from its Stats answer).
        counters: its request counters (``calls_METHOD``: the calls of each method it answered).
        read_replica: whether it serves as a read replica (None when unreachable).
        error: why Stats failed, if it did.
        metrics: the summary of its Prometheus metrics (:func:`summarize_metrics`) when its metrics
            port was asked, else None.
        metrics_error: why the metrics could not be read, if they could not.
    """

    address: str
    health: str
    part_id: int | None = None
    uptime_s: float | None = None
    rss_bytes: int | None = None
    rss_anon_bytes: int | None = None
    tensors: tuple[TensorScheme, ...] = ()
    counters: dict[str, int] = field(default_factory=dict)
    read_replica: bool | None = None
    error: str | None = None
    metrics: dict | None = None
    metrics_error: str | None = None


def fetch_report(
    address: str,
    timeout_s: float = 5.0,
    security: ChannelSecurity | None = None,
    metrics_port: int | None = None,
) -> ServerReport:
    """Probe a server's health and, when it answers, its Stats RPC (and its metrics endpoint).

    Args:
        address: ``host:port``.
        timeout_s: deadline of each call.
        security: TLS settings and token; default a plain channel without a token.
        metrics_port: the server's Prometheus port on the same host, or None to skip the metrics.

    Returns:
        A :class:`ServerReport`; unreachable servers get ``health == "UNREACHABLE"``.
    """
    from graphstore.client.transport.remote import RemotePartition  # numpy: not for the probe

    security = security or NO_SECURITY
    health = probe_health(address, timeout_s, security=security)
    if health == UNREACHABLE:
        return ServerReport(address=address, health=health)
    metrics = metrics_error = None
    if metrics_port is not None:
        host, _ = split_address(address)
        try:
            metrics = summarize_metrics(fetch_metrics_text(host, metrics_port, timeout_s, security))
        except (OSError, ValueError, http.client.HTTPException) as exc:
            metrics_error = f"metrics at port {metrics_port}: {exc}"
    report = ServerReport(address=address, health=health, metrics=metrics, metrics_error=metrics_error)
    try:
        with RemotePartition(address, policy=_one_attempt(timeout_s), security=security) as remote:
            stats = remote.stats()
    except ServerError as exc:
        return dataclasses.replace(report, error=f"{exc.code}: {exc.details}")
    # The report's figures are the Stats answer's fields of the same names.
    return dataclasses.replace(report, **{name: getattr(stats, name) for name in _STATS_FIELDS})


class _HTTPSConnection(http.client.HTTPSConnection):
    """HTTPS that checks the certificate against ``server_name`` instead of the host dialled."""

    def __init__(self, host: str, port: int, timeout: float, context: ssl.SSLContext, server_name: str):
        super().__init__(host, port, timeout=timeout, context=context)
        self._tls_context = context
        self._server_name = server_name

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._tls_context.wrap_socket(sock, server_hostname=self._server_name)


def fetch_metrics_text(
    host: str, port: int, timeout_s: float = 5.0, security: ChannelSecurity | None = None
) -> str:
    """GET ``/metrics`` from a server's metrics port (HTTPS when ``security`` uses TLS; with its token).

    Raises:
        OSError: nothing answers (or TLS fails).
        ValueError: an answer other than 200.
    """
    security = security or NO_SECURITY
    if security.tls:
        context = ssl.create_default_context(cafile=security.ca)
        conn: http.client.HTTPConnection = _HTTPSConnection(
            host, port, timeout_s, context, security.server_name or host
        )
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request("GET", "/metrics", headers=dict(security.metadata))  # the token, when there is one
        response = conn.getresponse()
        body = response.read().decode("utf-8", "replace")
    finally:
        conn.close()
    if response.status != 200:
        raise ValueError(f"GET /metrics answered {response.status} {response.reason}")
    return body


def histogram_quantile(quantile: float, buckets: list[tuple[float, float]]) -> float | None:
    """Estimate a quantile from cumulative histogram buckets ``[(upper bound, count), ...]``.

    Interpolates linearly inside the bucket holding the quantile, as Prometheus'
    ``histogram_quantile`` does; the open last bucket reports the last finite bound.

    Returns:
        The estimate, or None for an empty histogram.
    """
    buckets = sorted(buckets)
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = quantile * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = bound, count
    return lower_bound


def summarize_metrics(text: str) -> dict:
    """The figures ``graphstore status`` shows, from a server's Prometheus exposition text.

    Returns:
        ``{"rpc": {method: {"count", "errors", "p50_ms", "p99_ms"}}, "tensor_bytes": {tensor: {op:
        bytes}}, "auth_denied": {code: count}, "checkpoints": {outcome: count}}``.

    Raises:
        ValueError: text that is not the exposition format.
    """
    from prometheus_client.parser import text_string_to_metric_families

    rpc: dict[str, dict] = {}
    buckets: dict[str, list[tuple[float, float]]] = {}
    tensor_bytes: dict[str, dict[str, int]] = {}
    auth_denied: dict[str, int] = {}
    checkpoints: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name, labels, value = sample.name, sample.labels, sample.value
            if name == "graphstore_rpc_requests_total":
                entry = rpc.setdefault(labels["method"], {"count": 0, "errors": 0})
                entry["count"] += int(value)
                if labels.get("code") != "OK":
                    entry["errors"] += int(value)
            elif name == "graphstore_rpc_latency_seconds_bucket":
                buckets.setdefault(labels["method"], []).append((float(labels["le"]), value))
            elif name == "graphstore_tensor_bytes_total":
                tensor_bytes.setdefault(labels["tensor"], {})[labels["op"]] = int(value)
            elif name == "graphstore_auth_denied_total":
                auth_denied[labels["code"]] = int(value)
            elif name == "graphstore_checkpoints_total":
                checkpoints[labels["outcome"]] = int(value)
    for method, method_buckets in buckets.items():
        entry = rpc.setdefault(method, {"count": 0, "errors": 0})
        for key, q in (("p50_ms", 0.5), ("p99_ms", 0.99)):
            estimate = histogram_quantile(q, method_buckets)
            entry[key] = None if estimate is None else round(estimate * 1000, 3)
    return {"rpc": rpc, "tensor_bytes": tensor_bytes, "auth_denied": auth_denied, "checkpoints": checkpoints}


def request_shutdown(address: str, timeout_s: float = 5.0, security: ChannelSecurity | None = None) -> str:
    """Ask a server to shut down through its Shutdown RPC (the channel of :meth:`RemotePartition.shutdown`).

    Args:
        address: ``host:port``.
        timeout_s: deadline of the call.
        security: TLS settings and token (a server with a token refuses a Shutdown without it).

    Returns:
        ``"stopping"`` when the server acknowledged, ``"not running"`` when nothing answers there.

    Raises:
        RuntimeError: the server answered with an error (the message names the address and status).
    """
    channel = ServerChannel(address, _one_attempt(timeout_s), security or NO_SECURITY)
    try:
        channel.call("Shutdown", graphstore_pb2.ShutdownRequest())
    except ServerError as exc:
        if exc.code == "UNAVAILABLE":
            if port_accepts_connections(*split_address(address)):
                raise RuntimeError(
                    f"server {address}: Shutdown failed: UNAVAILABLE: {exc.details} (something "
                    "accepts connections there: a TLS setting that does not match the server's?)"
                ) from None
            return "not running"
        raise RuntimeError(f"server {address}: Shutdown failed: {exc.code}: {exc.details}") from None
    except Exception as exc:  # noqa: BLE001 - a graphstore error kind the server named (e.g. PermissionError)
        raise RuntimeError(f"server {address}: Shutdown failed: {exc}") from None
    finally:
        channel.close()
    return "stopping"
