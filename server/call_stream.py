"""The server side of the call stream: small calls answered as the messages of a long-lived stream.

A client may open ``Call`` streams (``graphstore.proto``) and send one call per message; each message is
answered, in order, by the servicer's own path for the unary call of the same method (parsing, the write
path of mutating requests, limits, metrics, the same status for a refusal), so the two transports cannot
drift apart. A refused call is answered with a ``CallError`` and the stream stays open.

Each open stream holds one of the server's worker threads for its lifetime, so at most
``max_streams`` are open at once; a client asking for one more gets RESOURCE_EXHAUSTED and sends unary
calls instead. Clients bound their streams' lifetime (``RpcPolicy.stream_lifetime_s``), and a stream
whose client went away is cancelled by gRPC, so a slot is never held for good. An open stream is not a
call in flight; each message being answered is (:class:`~graphstore.server.in_flight.InFlightCalls`), so
a shutdown waits for the messages being answered, then cancels the idle streams.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from graphstore.protos import call_wire
from graphstore.server.in_flight import InFlightCalls


class StreamCall:
    """What a handler asks of its call's context, for a call answered on a stream.

    Attributes:
        answer_field: the field of ``CallResponse`` the answer goes in.
        framed: set by a handler whose answer is already that ``CallResponse`` (built in place around
            the field: pulls, edges); other answers are framed here.
    """

    __slots__ = ("_ends_at", "answer_field", "framed")

    def __init__(self, answer_field: int, timeout_s: float | None) -> None:
        self.answer_field = answer_field
        self.framed = False
        self._ends_at = None if timeout_s is None else time.monotonic() + timeout_s

    def time_remaining(self) -> float | None:
        """Seconds left before the call's deadline (None: no deadline)."""
        return None if self._ends_at is None else max(self._ends_at - time.monotonic(), 0.0)


class CallStreams:
    """Answers the messages of ``Call`` streams with a servicer's answering function.

    Args:
        answer: ``answer(method, raw_request, context) -> answer`` (a message or bytes, the bytes of a
            pull already framed for ``context.answer_field``); raises what the handlers raise.
        refusal: ``refusal(method, exc) -> (status code, message, error type name)`` of a failed call.
        in_flight: where each message being answered counts as a call in flight.
        max_streams: the most streams open at once (0: streams refused).

    Raises:
        ValueError: a negative ``max_streams``.
    """

    def __init__(
        self,
        answer: Callable[[str, Any, StreamCall], Any],
        refusal: Callable[[str, BaseException], tuple[grpc.StatusCode, str, str]],
        in_flight: InFlightCalls,
        max_streams: int,
    ) -> None:
        if max_streams < 0:
            raise ValueError(f"max_streams must be >= 0, got {max_streams}")
        self._answer = answer
        self._refusal = refusal
        self._in_flight = in_flight
        self.max_streams = max_streams
        self._open = 0
        self._lock = threading.Lock()

    @property
    def open_streams(self) -> int:
        """Streams open now."""
        return self._open

    def method_handler(self) -> grpc.RpcMethodHandler:
        """The ``Call`` method's handler (raw bytes in and out)."""
        return grpc.stream_stream_rpc_method_handler(self.serve)

    def serve(self, requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        """Answer every message of one stream, in order, until the client ends it."""
        with self._lock:
            admitted = self._open < self.max_streams
            if admitted:
                self._open += 1
        if not admitted:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, call_wire.STREAM_LIMIT_MESSAGE)
        try:
            for raw in requests:
                yield self.answer_one(raw)
        finally:
            with self._lock:
                self._open -= 1

    def answer_one(self, raw) -> bytes:
        """The ``CallResponse`` bytes for one ``CallRequest``: the answer, or the call's refusal."""
        self._in_flight.enter()
        try:
            try:
                method, request, timeout_s = call_wire.read_call_request(raw)
            except ValueError as exc:
                return call_wire.call_error(grpc.StatusCode.INVALID_ARGUMENT.value[0], "ValueError", str(exc))
            call = StreamCall(call_wire.CALL_FIELDS[method], timeout_s)
            try:
                answer = self._answer(method, request, call)
            except Exception as exc:  # noqa: BLE001 - refusals travel as CallError, the stream stays open
                code, message, kind = self._refusal(method, exc)
                return call_wire.call_error(code.value[0], kind, f"{method}: {message}")
            if call.framed:
                return answer  # built in place around its CallResponse field
            if not isinstance(answer, bytes):
                answer = answer.SerializeToString()
            return call_wire.call_answer(method, answer)
        finally:
            self._in_flight.leave()
