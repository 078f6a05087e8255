"""Prometheus metrics of one partition server, and the structured ``key=value`` event log lines.

Off by default; ``graphstore server --metrics-port P`` (or ``metrics_port`` in the cluster YAML, where
server ``k`` uses ``metrics_port + k``) serves them over HTTP (HTTPS when the server has a TLS
certificate) on loopback unless ``--metrics-host`` / ``metrics_host`` says otherwise, behind the
server's token when it has one (:mod:`graphstore.server.metrics_http`):

- ``graphstore_rpc_requests_total{method, code}``: calls answered, by gRPC status;
- ``graphstore_rpc_latency_seconds{method}``: a histogram of the time spent answering;
- ``graphstore_tensor_bytes_total{tensor, op}``: row bytes moved per tensor (``op``: pull, push,
  push_grad);
- ``graphstore_auth_denied_total{code}``: calls refused by the token check;
- ``graphstore_checkpoints_total{outcome}`` and ``graphstore_checkpoint_seconds``: periodic checkpoints;
- ``graphstore_server_info{part_id, role}``: always 1; ``role`` is ``owner`` or ``read_replica``, so
  the calls a replica served are its ``graphstore_rpc_requests_total`` series.

Each server has its own :class:`prometheus_client.CollectorRegistry` (no process-global state).
Tensor label values are bounded: unnamed tensors (``_anon.*``) share one label, a deleted tensor's
series are removed, and past :data:`MAX_TENSOR_LABELS` names the rest share ``(other)``, so clients
that come and go cannot grow the server's memory through its metrics.
"""

from __future__ import annotations

import logging
import threading

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from graphstore.server.metrics_http import serve_metrics

ANONYMOUS_TENSOR_PREFIX = "_anon."  # graphstore.client.constants.ANONYMOUS_PREFIX
ANONYMOUS_LABEL = "(anonymous)"
OTHER_LABEL = "(other)"
MAX_TENSOR_LABELS = 256
TENSOR_OPS = ("pull", "push", "push_grad")
# Latency buckets (seconds): sub-millisecond pulls up to multi-second checkpoints and barriers.
LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


def format_event(event: str, **fields) -> str:
    """One structured log line: ``event=NAME key=value ...`` (values with spaces or quotes are quoted).

    Args:
        event: the event's name (``server_started``, ``checkpoint_written``...).
        fields: its attributes, in order.
    """
    parts = [f"event={event}"]
    for key, value in fields.items():
        text = f"{value:.3f}" if isinstance(value, float) else str(value)
        if not text or any(c in text for c in ' "=\n\t'):
            text = '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
        parts.append(f"{key}={text}")
    return " ".join(parts)


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields) -> None:
    """Log :func:`format_event`'s line at ``level``."""
    if logger.isEnabledFor(level):
        logger.log(level, "%s", format_event(event, **fields))


class ServerMetrics:
    """The metrics of one partition server (see the module docstring).

    Args:
        part_id: the partition (the scraper tells the servers apart by their address).
        read_replica: whether the server is a read replica of the partition (the ``role`` label).
    """

    def __init__(self, part_id: int, read_replica: bool = False) -> None:
        self.part_id = part_id
        self.registry = CollectorRegistry(auto_describe=True)
        Gauge(
            "graphstore_server_info",
            "Always 1: the partition this server serves and its role (owner or read_replica).",
            ["part_id", "role"],
            registry=self.registry,
        ).labels(str(part_id), "read_replica" if read_replica else "owner").set(1)
        self.requests = self._counter(
            "graphstore_rpc_requests", "Calls answered, by method and gRPC status code.", ["method", "code"]
        )
        self.latency = Histogram(
            "graphstore_rpc_latency_seconds",
            "Time spent answering a call, by method.",
            ["method"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.tensor_bytes = self._counter(
            "graphstore_tensor_bytes", "Row bytes read or written per tensor and operation.", ["tensor", "op"]
        )
        self.auth_denied = self._counter(
            "graphstore_auth_denied", "Calls refused by the token check, by gRPC status code.", ["code"]
        )
        self.checkpoints = self._counter(
            "graphstore_checkpoints", "Periodic checkpoints, by outcome (written, failed).", ["outcome"]
        )
        self.checkpoint_seconds = Histogram(
            "graphstore_checkpoint_seconds",
            "Time spent writing a periodic checkpoint.",
            buckets=(0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0),
            registry=self.registry,
        )
        self._labels_lock = threading.Lock()
        self._tensor_labels: set[str] = set()
        self._http = None

    def _counter(self, name: str, documentation: str, labels: list[str]) -> Counter:
        """A counter of this server's registry."""
        return Counter(name, documentation, labels, registry=self.registry)

    def rpc_done(self, method: str, code: str, seconds: float) -> None:
        """Count one answered call and observe its latency."""
        self.requests.labels(method, code).inc()
        self.latency.labels(method).observe(seconds)

    def _tensor_label(self, name: str) -> str:
        if name.startswith(ANONYMOUS_TENSOR_PREFIX):
            return ANONYMOUS_LABEL
        with self._labels_lock:
            if name in self._tensor_labels:
                return name
            if len(self._tensor_labels) >= MAX_TENSOR_LABELS:
                return OTHER_LABEL
            self._tensor_labels.add(name)
            return name

    def tensor_io(self, name: str, op: str, nbytes: int) -> None:
        """Count ``nbytes`` row bytes of tensor ``name`` moved by ``op`` (pull, push, push_grad)."""
        self.tensor_bytes.labels(self._tensor_label(name), op).inc(nbytes)

    def forget_tensor(self, name: str) -> None:
        """Drop a deleted tensor's series (its label may be reused by a new tensor of the same name)."""
        with self._labels_lock:
            if name not in self._tensor_labels:
                return
            self._tensor_labels.discard(name)
        for op in TENSOR_OPS:
            try:
                self.tensor_bytes.remove(name, op)
            except KeyError:
                pass

    def denied(self, code: str, method: str) -> None:
        """Count a call refused by the token check."""
        self.auth_denied.labels(code).inc()

    def serve(
        self,
        port: int,
        host: str = "127.0.0.1",
        certfile: str | None = None,
        keyfile: str | None = None,
        token: str | None = None,
    ) -> int:
        """Serve ``/metrics`` over HTTP (HTTPS with ``certfile`` / ``keyfile``) in a daemon thread.

        Args:
            port: the TCP port (0: a free one).
            host: the interface to bind (loopback by default).
            certfile, keyfile: serve HTTPS.
            token: require ``Authorization: Bearer <token>`` (the server's shared token).

        Returns:
            The port it listens on.

        Raises:
            OSError: the port cannot be bound.
        """
        self._http = serve_metrics(self.registry, port, host, token, certfile, keyfile)
        return int(self._http.server_address[1])

    def close(self) -> None:
        """Stop serving ``/metrics``."""
        server, self._http = self._http, None
        if server is not None:
            server.shutdown()
            server.server_close()
