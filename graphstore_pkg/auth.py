"""Shared-token authentication and TLS for the partition servers and everything that calls them.

Both halves of the protocol live here so that they cannot drift apart:

- server side: :class:`TokenAuthInterceptor` checks the ``authorization: Bearer <token>`` metadata of
  every call (UNAUTHENTICATED without it, PERMISSION_DENIED with a wrong one, compared with
  :func:`hmac.compare_digest`; a peer that failed too often is refused RESOURCE_EXHAUSTED for a
  cool-down, :mod:`graphstore.auth_limiter`), and :func:`server_credentials` builds the TLS credentials;
- client side: :class:`ChannelSecurity` opens a channel (plain or TLS, optionally with a client
  certificate) and supplies the metadata every call carries.

The ``grpc.health.v1.Health`` service is exempt from the token: it tells only whether the server is
serving, and container / load-balancer health checks must be able to ask without holding the secret.
TLS, when on, covers it like every other call (one port, one set of credentials).

Only grpc and the standard library are imported: ``graphstore status --probe`` uses this module.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from graphstore.auth_limiter import AuthFailureLimiter

logger = logging.getLogger(__name__)

AUTH_METADATA_KEY = "authorization"
TOKEN_SCHEME = "Bearer "
TOKEN_ENV = "GRAPHSTORE_TOKEN"
# Methods callable without the token (health checks of containers and load balancers).
TOKEN_EXEMPT_PREFIXES = ("/grpc.health.v1.Health/",)
# Printable ASCII without spaces: what gRPC metadata values may carry, and no quoting surprises in YAML.
_TOKEN_CHARS = frozenset(chr(c) for c in range(0x21, 0x7F))
# 16 random characters resist guessing over the network; shorter tokens need ``allow_short``
# (``allow_short_token: true`` in the cluster config, ``--allow-short-token``).
MIN_TOKEN_LENGTH = 16
MAX_TOKEN_LENGTH = 4096


def validate_token(token: str, where: str = "token", allow_short: bool = False) -> str:
    """Check a shared token's characters and length.

    Args:
        token: the token.
        where: the name used in error messages (``--token``, ``token_file``...).
        allow_short: accept a token shorter than :data:`MIN_TOKEN_LENGTH` (at least one character);
            clients pass True (the servers decide what they accept).

    Returns:
        The token unchanged.

    Raises:
        ValueError: a token that is too short or long, or has characters outside printable ASCII
            (spaces included); the message names ``where`` but never echoes the token.
    """
    if not isinstance(token, str):
        raise ValueError(f"{where} must be a string, got {type(token).__name__}")
    bad = sorted({c for c in token if c not in _TOKEN_CHARS})
    if bad:
        raise ValueError(
            f"{where} may hold printable ASCII characters without spaces only; it has {len(bad)} other "
            f"character(s) (e.g. code point {ord(bad[0])})"
        )
    minimum = 1 if allow_short else MIN_TOKEN_LENGTH
    if not minimum <= len(token) <= MAX_TOKEN_LENGTH:
        hint = "" if allow_short else " (a shorter one needs allow_short_token / --allow-short-token)"
        raise ValueError(
            f"{where} must be {minimum} to {MAX_TOKEN_LENGTH} characters long, got {len(token)}{hint}"
        )
    return token


def read_token_file(path: str | os.PathLike, where: str = "token_file", allow_short: bool = False) -> str:
    """Read a token from a file (surrounding whitespace, such as a final newline, is dropped).

    ``allow_short`` is :func:`validate_token`'s.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file cannot be read or holds an invalid token.
    """
    try:
        with open(path, encoding="ascii", errors="strict") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"{where}: token file {os.fspath(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{where}: cannot read token file {os.fspath(path)!r}: {exc}") from None
    return validate_token(text.strip(), f"{where} {os.fspath(path)!r}", allow_short)


def auth_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """The metadata a call carries: ``(("authorization", "Bearer <token>"),)``, or ``()`` without a token."""
    return ((AUTH_METADATA_KEY, TOKEN_SCHEME + token),) if token else ()


class _RateLimitedLog:
    """At most one warning per ``interval_s`` per key, with a count of what was suppressed."""

    def __init__(self, interval_s: float = 5.0) -> None:
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warning(self, key: str, message: str) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(key, -1e9) < self._interval_s:
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                return
            self._last[key] = now
            suppressed = self._suppressed.pop(key, 0)
        more = f" suppressed={suppressed}" if suppressed else ""
        logger.warning("%s%s", message, more)


def _cooldown_message(seconds: float) -> str:
    return (
        f"too many calls with a missing or wrong token from this peer: refused for {seconds:.0f} more s "
        "(limit auth_failure_burst / auth_cooldown_s)"
    )


class TokenAuthInterceptor(grpc.ServerInterceptor):
    """Refuses every call that does not carry the shared token (except the health service).

    Args:
        token: the shared token (see :func:`validate_token`).
        on_denied: called with ``("UNAUTHENTICATED" | "PERMISSION_DENIED" | "RESOURCE_EXHAUSTED",
            method)`` for each refusal (the metrics counter).
        limiter: limits failed attempts per peer (default: 20 per 30 s, then 30 s refused).
        allow_short: accept a token shorter than :data:`MIN_TOKEN_LENGTH` (logged as a warning).

    Raises:
        ValueError: an invalid token.
    """

    def __init__(
        self,
        token: str,
        on_denied: Callable[[str, str], None] | None = None,
        limiter: AuthFailureLimiter | None = None,
        allow_short: bool = False,
    ) -> None:
        self._expected = (TOKEN_SCHEME + validate_token(token, allow_short=allow_short)).encode("ascii")
        if len(token) < MIN_TOKEN_LENGTH:
            logger.warning(
                "event=weak_token length=%d recommended=%d hint=use e.g. `openssl rand -hex 24`",
                len(token),
                MIN_TOKEN_LENGTH,
            )
        self._on_denied = on_denied
        self._limiter = limiter if limiter is not None else AuthFailureLimiter(20, 30.0)
        self._log = _RateLimitedLog()

    def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
        if method.startswith(TOKEN_EXEMPT_PREFIXES):
            return continuation(handler_call_details)
        presented = None
        for key, value in handler_call_details.invocation_metadata or ():
            if key == AUTH_METADATA_KEY:
                presented = value
                break
        if presented is None:
            return self._refuse(
                grpc.StatusCode.UNAUTHENTICATED,
                method,
                f"this server requires a token (metadata '{AUTH_METADATA_KEY}: Bearer <token>'); "
                "set `token` / `token_file` in the cluster config",
            )
        raw = presented.encode("utf-8", "replace") if isinstance(presented, str) else bytes(presented)
        # compare_digest's time does not depend on where the strings differ (no timing oracle).
        if not hmac.compare_digest(raw, self._expected):
            return self._refuse(
                grpc.StatusCode.PERMISSION_DENIED, method, "the token presented is not valid for this server"
            )
        # The continuation is only reached for authorized calls, which still wait out a cool-down.
        handler = continuation(handler_call_details)
        if handler is None:
            return handler
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=self._unless_blocked(handler.unary_unary, method))
        if handler.stream_stream is not None:
            return handler._replace(stream_stream=self._stream_unless_blocked(handler.stream_stream, method))
        return handler

    def _wait_out_cooldown(self, context: grpc.ServicerContext, method: str) -> None:
        blocked = self._limiter.blocked_for(context.peer())
        if blocked > 0:
            self._count(grpc.StatusCode.RESOURCE_EXHAUSTED, method)
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, _cooldown_message(blocked))

    def _unless_blocked(self, behavior, method: str):
        def run(request, context: grpc.ServicerContext):
            self._wait_out_cooldown(context, method)
            return behavior(request, context)

        return run

    def _stream_unless_blocked(self, behavior, method: str):
        """A stream's behavior refused while its peer waits out a cool-down: when it opens, and at each
        message (a stream opened before the cool-down does not outlive it)."""

        def run(requests, context: grpc.ServicerContext):
            self._wait_out_cooldown(context, method)

            def checked():
                for request in requests:
                    self._wait_out_cooldown(context, method)
                    yield request

            yield from behavior(checked(), context)

        return run

    def _count(self, code: grpc.StatusCode, method: str) -> None:
        if self._on_denied is not None:
            self._on_denied(code.name, method)
        self._log.warning(code.name, f"event=auth_denied code={code.name} method={method}")

    def _refuse(self, code: grpc.StatusCode, method: str, message: str) -> grpc.RpcMethodHandler:
        def abort(request, context: grpc.ServicerContext):
            blocked = self._limiter.failed(context.peer())
            if blocked > 0:
                self._count(grpc.StatusCode.RESOURCE_EXHAUSTED, method)
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, _cooldown_message(blocked))
            self._count(code, method)
            context.abort(code, message)

        return grpc.unary_unary_rpc_method_handler(abort)


def _read_bytes(path: str | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"{what}: file {path!r} does not exist") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise ValueError(f"{what}: cannot read {path!r}: {exc}") from None


def server_credentials(cert: str, key: str, client_ca: str | None = None) -> grpc.ServerCredentials:
    """TLS credentials of a server.

    Args:
        cert: PEM certificate (chain) of the server.
        key: PEM private key of the server.
        client_ca: PEM CA bundle; when given, clients must present a certificate signed by it
            (mutual TLS).

    Raises:
        FileNotFoundError: a missing file.
        ValueError: an unreadable file.
    """
    key_pem = _read_bytes(key, "tls key")
    cert_pem = _read_bytes(cert, "tls cert")
    ca_pem = _read_bytes(client_ca, "tls ca")
    return grpc.ssl_server_credentials(
        [(key_pem, cert_pem)], root_certificates=ca_pem, require_client_auth=ca_pem is not None
    )


@dataclass(frozen=True)
class ChannelSecurity:
    """How a caller reaches the servers: TLS material and the shared token (all optional).

    Attributes:
        ca: PEM CA bundle that verifies the servers' certificates; TLS is on when this, or
            ``use_tls``, is set (without ``ca``, gRPC's default roots verify the server).
        cert, key: a client certificate and key, presented to servers that require one (mutual TLS).
        server_name: the name to check the server certificate against, when the address dialled is
            not in it (e.g. dialling an IP address of a certificate issued for a host name).
        token: the shared token sent with every call.
        use_tls: TLS without a custom CA.
    """

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    server_name: str | None = None
    token: str | None = field(default=None, repr=False)
    use_tls: bool = False

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise ValueError("tls: a client certificate needs both cert and key")
        if self.token is not None:
            validate_token(self.token, allow_short=True)  # the servers decide what they accept

    @property
    def tls(self) -> bool:
        """Whether channels use TLS."""
        return self.use_tls or self.ca is not None or self.cert is not None

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Metadata every call carries (the token)."""
        return auth_metadata(self.token)

    def channel(self, address: str, options: list[tuple[str, object]] | None = None) -> grpc.Channel:
        """Open a channel to ``address`` (plain or TLS).

        Raises:
            FileNotFoundError, ValueError: TLS files that cannot be read.
        """
        options = list(options or [])
        if not self.tls:
            return grpc.insecure_channel(address, options=options)
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read_bytes(self.ca, "tls ca"),
            private_key=_read_bytes(self.key, "tls key"),
            certificate_chain=_read_bytes(self.cert, "tls cert"),
        )
        if self.server_name:
            options.append(("grpc.ssl_target_name_override", self.server_name))
        return grpc.secure_channel(address, credentials, options=options)


NO_SECURITY = ChannelSecurity()
