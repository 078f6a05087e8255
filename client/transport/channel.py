"""The gRPC channel of a client to one server: options, deadlines, retries with backoff, health checks.

:class:`ServerChannel` makes the unary calls of the graphstore service and adds what a network needs:

- a deadline on every call (``RpcPolicy.deadline_s``) and retries with exponential backoff when the
  server is UNAVAILABLE (restarting, not yet listening), and for mutating requests that carry a
  request ID also after DEADLINE_EXCEEDED (the retry sends the same ID: the server applies it at
  most once and answers with the first answer); a server that stays unreachable raises
  :class:`graphstore.errors.ServerUnavailableError` naming its address. A call never takes longer
  than :attr:`ServerChannel.max_call_time_s` (the deadline plus the retry backoffs) in all;
- optional TLS and a shared token (:class:`graphstore.auth.ChannelSecurity`): the token rides in
  every call's metadata; a refused token raises :class:`graphstore.errors.ServerError` with code
  UNAUTHENTICATED or PERMISSION_DENIED;
- keepalive pings while calls are in flight, so a connection across a cut link is noticed and
  replaced (the call fails with ServerUnavailableError; later calls reconnect by themselves), and a
  reconnect backoff capped at ``RpcPolicy.backoff_max_s``, so a restarted server is found quickly;
- failed calls raise the exceptions the in-process server raises (:mod:`.rpc_errors`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from graphstore.auth import ChannelSecurity
from graphstore.client.transport.call_counts import CallCounts, size_of
from graphstore.client.transport.call_lanes import CallLanes, LaneBroken
from graphstore.client.transport.rpc_errors import translate_rpc_error
from graphstore.errors import ServerUnavailableError
from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos.call_wire import CALL_FIELDS
from graphstore.protos.service import MUTATING_METHODS, SERVICE_NAME
from graphstore.rpc import RpcPolicy

logger = logging.getLogger(__name__)

# The service's methods and the message each answers with.
_RESPONSES: dict[str, Any] = {
    "Metadata": pb.MetadataResponse,
    "Pull": None,  # raw bytes, decoded by pull_wire.decode_pull_response
    "Push": pb.PushResponse,
    "Init": pb.InitResponse,
    "Delete": pb.DeleteResponse,
    "List": pb.ListResponse,
    "SampleNeighbors": None,  # raw bytes, decoded by edges_wire.read_edges_answer
    "FindEdges": None,
    "InSubgraph": None,
    "Degrees": pb.DegreesResponse,
    "PushGrad": pb.PushGradResponse,
    "Barrier": pb.BarrierResponse,
    "Checkpoint": pb.CheckpointResponse,
    "Restore": pb.RestoreResponse,
    "Shutdown": pb.ShutdownResponse,
    "Stats": pb.StatsResponse,
}

# Keepalive while calls are in flight: a ping unanswered for this long closes the connection.
_KEEPALIVE_TIME_MS = 5_000
_KEEPALIVE_TIMEOUT_MS = 5_000


def wait_all(waits: list[Callable[[], Any]], failed: BaseException | None = None) -> list[Any]:
    """The answers of calls already sent (their ``start_call`` functions), in order. Every one is waited
    for, so no call stream stays held, even after one failed or after ``failed`` (an error of the work
    done meanwhile); then the first failure is raised.
    """
    answers, first = [], failed
    for wait in waits:
        try:
            answers.append(wait())
        except BaseException as exc:  # noqa: BLE001 - raised below, once every call is answered
            first = first or exc
            answers.append(None)
    if first is not None:
        raise first
    return answers


def serialized(request: Any) -> bytes:
    """A request's bytes: a message serialized, or bytes written by hand (``pull_wire.pull_request``)."""
    return request if isinstance(request, bytes) else request.SerializeToString()


def retryable(method: str, request: Any, code: grpc.StatusCode) -> bool:
    """Whether a call that failed with ``code`` may be sent again: UNAVAILABLE always (for a write, the
    request ID makes a second copy harmless), DEADLINE_EXCEEDED for a write with a request ID."""
    if code == grpc.StatusCode.UNAVAILABLE:
        return True
    return (
        code == grpc.StatusCode.DEADLINE_EXCEEDED
        and method in MUTATING_METHODS
        and bool(request.request_id.client)
    )


def retry_backoff_total(policy: RpcPolicy) -> float:
    """Seconds a call may spend sleeping between its retries (the sum of the backoff delays)."""
    total, delay = 0.0, policy.backoff_initial_s
    for _ in range(policy.max_retries):
        total += delay
        delay = min(delay * policy.backoff_multiplier, policy.backoff_max_s)
    return total


def channel_options(policy: RpcPolicy) -> list[tuple[str, int]]:
    """Channel arguments of a client: message limits, keepalive, reconnect backoff."""
    initial_ms = max(int(policy.backoff_initial_s * 1000), 20)
    return [
        ("grpc.max_send_message_length", policy.max_message_bytes),
        ("grpc.max_receive_message_length", policy.max_message_bytes),
        ("grpc.keepalive_time_ms", _KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", _KEEPALIVE_TIMEOUT_MS),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.initial_reconnect_backoff_ms", initial_ms),
        ("grpc.min_reconnect_backoff_ms", initial_ms),
        ("grpc.max_reconnect_backoff_ms", max(int(policy.backoff_max_s * 1000), initial_ms)),
    ]


class ServerChannel:
    """Calls to one graphstore server, with deadlines, UNAVAILABLE retries and translated errors.

    Args:
        address: ``host:port`` of the server.
        policy: deadlines, retries and message limit.
        security: TLS material and the shared token.

    Raises:
        ValueError: unreadable TLS files.
        FileNotFoundError: missing TLS files.
    """

    def __init__(self, address: str, policy: RpcPolicy, security: ChannelSecurity) -> None:
        self.address = address
        self.policy = policy
        self.max_call_time_s = policy.deadline_s + retry_backoff_total(policy)
        self._metadata = security.metadata
        self._channel = security.channel(address, channel_options(policy))
        self._calls = {
            method: self._channel.unary_unary(
                f"/{SERVICE_NAME}/{method}",
                request_serializer=serialized,
                response_deserializer=response.FromString if response is not None else None,
            )
            for method, response in _RESPONSES.items()
        }
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self._lanes = (
            CallLanes(self._channel, self._metadata, policy, address) if policy.call_streams > 0 else None
        )
        self.counts = CallCounts()

    def close(self) -> None:
        """Close the channel (calls after this fail)."""
        if self._lanes is not None:
            self._lanes.close()
        self._channel.close()

    def call(
        self, method: str, request: Any, timeout: float | None = None, started: float | None = None
    ) -> Any:
        """One call with deadline and retries (see :func:`retryable`); errors translated.

        A method the call stream carries goes over one of the server's lanes when one is free
        (:mod:`.call_lanes`; a Pull's answer is then a ``memoryview`` of the received bytes, else
        ``bytes``); otherwise, or when the lane breaks, as a unary call. The whole call, retries
        included, ends within ``timeout`` (default ``policy.deadline_s``) plus the backoff delays after
        ``started`` (default: now).

        Raises:
            Exception: what :func:`~graphstore.client.transport.rpc_errors.translate_rpc_error` gives.
        """
        deadline = timeout if timeout is not None else self.policy.deadline_s
        if started is None:
            started = time.monotonic()
            if self._lanes is not None and method in CALL_FIELDS:
                payload = serialized(request)
                try:
                    answer = self._lanes.call(method, payload, deadline)
                except LaneBroken:
                    answer = None  # sent again below as a unary call, within what is left of the deadline
                if answer is not None:
                    self.counts.add(method, len(payload), len(answer))
                    response = _RESPONSES[method]
                    return answer if response is None else response.FromString(answer)
        give_up_at = started + deadline + retry_backoff_total(self.policy)
        delay = self.policy.backoff_initial_s
        stub = self._calls[method]
        attempts = 0
        while True:
            attempts += 1
            remaining = give_up_at - time.monotonic()
            try:
                answer = stub(request, timeout=max(min(deadline, remaining), 0.001), metadata=self._metadata)
            except grpc.RpcError as err:
                retry = (
                    retryable(method, request, err.code())
                    and attempts <= self.policy.max_retries
                    and time.monotonic() + delay < give_up_at
                )
                if retry:
                    time.sleep(delay)
                    delay = min(delay * self.policy.backoff_multiplier, self.policy.backoff_max_s)
                    continue
                raise translate_rpc_error(
                    self.address, method, err, attempts, time.monotonic() - started
                ) from None
            self.counts.add(method, size_of(request), size_of(answer))
            return answer

    def call_future(self, method: str, request: Any) -> Callable[[], Any]:
        """Start a call; returns a function that waits for it (retrying synchronously, see :meth:`call`)."""
        started = time.monotonic()
        future = self._calls[method].future(request, timeout=self.policy.deadline_s, metadata=self._metadata)

        def result() -> Any:
            try:
                answer = future.result()
            except grpc.RpcError as err:
                if retryable(method, request, err.code()):
                    return self.call(method, request, started=started)
                raise translate_rpc_error(self.address, method, err, 1, time.monotonic() - started) from None
            self.counts.add(method, size_of(request), size_of(answer))
            return answer

        return result

    def start_call(self, method: str, request: Any) -> Callable[[], Any]:
        """Send a call now and return the function that waits for its answer (what :meth:`call` would
        return): over a lane when one is free (no thread involved), else as a unary call in flight. The
        caller does other work meanwhile (a co-located partition's read) and must call the function."""
        if self._lanes is not None and method in CALL_FIELDS:
            started = time.monotonic()
            payload = serialized(request)
            pending = self._lanes.start(method, payload, self.policy.deadline_s)
            if pending is not None:

                def result() -> Any:
                    try:
                        answer = self._lanes.finish(pending)
                    except LaneBroken:
                        return self.call(method, request, started=started)
                    self.counts.add(method, len(payload), len(answer))
                    response = _RESPONSES[method]
                    return answer if response is None else response.FromString(answer)

                return result
        return self.call_future(method, request)

    def health(self, timeout: float) -> str:
        """The server's health status name (``"SERVING"``, ``"NOT_SERVING"``, ...).

        Raises:
            ServerUnavailableError: no answer within ``timeout``.
        """
        try:
            response = self._health.Check(
                health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=timeout, metadata=self._metadata
            )
        except grpc.RpcError as err:
            raise ServerUnavailableError(self.address, err.code().name, err.details() or "") from None
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

    def wait_serving(self, timeout: float) -> None:
        """Block until the server reports SERVING; says once (a log warning) that it is waiting when
        the first check did not find it SERVING (a trainer started before its servers).

        Raises:
            ServerUnavailableError: not SERVING within ``timeout`` seconds.
        """
        end = time.monotonic() + timeout
        last = "no answer"
        checks = 0
        while True:
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise ServerUnavailableError(
                    self.address, "UNAVAILABLE", f"not SERVING within {timeout} s ({last})"
                )
            if checks == 1:
                logger.warning(
                    "graphstore: waiting for the server at %s to be SERVING (%s); giving up in %.0f s",
                    self.address,
                    last,
                    remaining,
                )
            checks += 1
            try:
                response = self._health.Check(
                    health_pb2.HealthCheckRequest(service=SERVICE_NAME),
                    timeout=min(remaining, 2.0),
                    wait_for_ready=True,
                    metadata=self._metadata,
                )
                if response.status == health_pb2.HealthCheckResponse.SERVING:
                    return
                last = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
            except grpc.RpcError as err:
                last = f"{err.code().name}: {err.details()}"
            time.sleep(min(0.05, max(end - time.monotonic(), 0)))
