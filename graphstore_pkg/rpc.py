"""Call settings shared by the client, the launcher and the command-line tools: deadlines, retries,
chunking (:class:`RpcPolicy`) and TLS (:class:`TlsSettings`).

It lives in the root package so the launcher and ``graphstore status --probe`` use it without
importing the client (and torch).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RpcPolicy:
    """Deadlines and retries for calls to partition servers.

    Attributes:
        deadline_s: per-call deadline.
        connect_timeout_s: bound on waiting for a server to report SERVING.
        max_retries: retries of a call that failed with UNAVAILABLE.
        backoff_initial_s, backoff_max_s, backoff_multiplier: exponential backoff between retries.
        max_message_bytes: gRPC message limit set on both sides.
        chunk_bytes: requests and expected responses above this are split into chunks.
        call_streams: long-lived ``Call`` streams per server carrying single calls (pulls, sampling,
            edge queries, degrees, pushes: ``graphstore.protos.call_wire.CALL_FIELDS``), one call at a
            time each; 0 sends every call as a unary call. A call that finds every stream busy goes as a
            unary call (it never waits), and so do the chunks of a split request.
        stream_lifetime_s: a stream's own deadline; it is replaced by a new one before a call could
            outlive it.
    """

    deadline_s: float = 30.0
    connect_timeout_s: float = 60.0
    max_retries: int = 5
    backoff_initial_s: float = 0.1
    backoff_max_s: float = 5.0
    backoff_multiplier: float = 2.0
    max_message_bytes: int = 256 * 1024 * 1024
    # Every chunk costs a call's fixed CPU on both sides (gRPC's, ~0.3 ms each): a loader batch's 14 MB
    # remote pull took 9-10 ms of client and of server CPU as one 16 MiB chunk against 11-14 in 4 MiB
    # chunks (four in flight), for the same or a shorter wall time.
    chunk_bytes: int = 16 * 1024 * 1024
    # A message on an open stream skips a unary call's new HTTP/2 stream, headers and server thread
    # handoff: a 1,000-row pull took 0.47-0.50 ms against 0.66-0.76 ms as a unary call here (server CPU
    # 230-250 against 390-495 us per call); at 4 MB answers the difference is within the noise.
    call_streams: int = 4
    stream_lifetime_s: float = 300.0


@dataclass(frozen=True)
class TlsSettings:
    """TLS files (absolute paths) and options of a cluster (``docs/security.md``).

    Attributes:
        cert, key: the servers' certificate and key; clients present them only with ``client_auth``.
        ca: the CA bundle clients verify the servers with (None: gRPC's default roots).
        client_auth: servers require client certificates signed by ``ca`` (mutual TLS).
        server_name: the name clients check the certificate against when the address they dial is not
            in it.
    """

    cert: str | None = None
    key: str | None = None
    ca: str | None = None
    client_auth: bool = False
    server_name: str | None = None
