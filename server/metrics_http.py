"""The HTTP(S) endpoint of a server's Prometheus metrics, optionally behind the shared token.

``GET /metrics`` answers the registry's text format. With a token, a request must carry
``Authorization: Bearer <token>`` (compared in constant time) or gets 401; with a certificate the
endpoint speaks HTTPS. It binds to loopback unless configured otherwise (``metrics_host``).
"""

from __future__ import annotations

import hmac
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from graphstore.auth import TOKEN_SCHEME


class _MetricsServer(ThreadingHTTPServer):
    daemon_threads = True
    registry: CollectorRegistry
    expected: bytes | None


class _MetricsHandler(BaseHTTPRequestHandler):
    server: _MetricsServer

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        expected = self.server.expected
        if expected is not None:
            presented = (self.headers.get("Authorization") or "").encode("utf-8", "replace")
            if not hmac.compare_digest(presented, expected):
                self._answer(401, b"this endpoint requires the cluster's token (Authorization: Bearer)\n")
                return
        if self.path.split("?", 1)[0] not in ("/", "/metrics"):
            self._answer(404, b"not found; the metrics are at /metrics\n")
            return
        self._answer(200, generate_latest(self.server.registry), CONTENT_TYPE_LATEST)

    def _answer(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
        pass  # scrapes every few seconds would flood the server's log


def serve_metrics(
    registry: CollectorRegistry,
    port: int,
    host: str = "127.0.0.1",
    token: str | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
) -> ThreadingHTTPServer:
    """Serve ``registry`` on ``host:port`` in a daemon thread.

    Args:
        registry: the metrics.
        port: the TCP port (0: a free one; see ``server_address``).
        host: the interface to bind.
        token: required as ``Authorization: Bearer <token>`` when given.
        certfile, keyfile: serve HTTPS with this certificate.

    Returns:
        The running server (``shutdown()`` and ``server_close()`` stop it).

    Raises:
        OSError: the port cannot be bound.
    """
    server = _MetricsServer((host, port), _MetricsHandler)
    server.registry = registry
    server.expected = (TOKEN_SCHEME + token).encode("ascii") if token else None
    if certfile:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certfile, keyfile)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, name="graphstore-metrics", daemon=True).start()
    return server
