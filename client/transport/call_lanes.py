"""Single calls to one server sent over a few long-lived ``Call`` streams ("lanes") instead of unary calls.

A unary gRPC call opens a new HTTP/2 stream, sends headers and metadata both ways and hands the call to
a server worker thread; on this project's machine that is most of a small call's cost (a 1,000-row pull:
0.66-0.76 ms as a unary call, 0.47-0.50 ms as a message on an open stream). A lane is one open stream
carrying one call at a time: the request goes out as a ``CallRequest`` message and the answer comes back
as the next ``CallResponse`` (``graphstore.protos.call_wire``).

What a unary call gives, a lane keeps:

- a bounded wait: a watchdog thread cancels a lane whose call outlived its deadline;
- the server's refusals raised as the same exceptions (the answer's ``CallError``);
- retries: a lane that breaks (server restarting, connection lost, deadline) raises :class:`LaneBroken`,
  and the caller sends the call again as a unary call, which retries with backoff as every call does;
  writes carry their request ID, so the server applies them once whichever copy arrives;
- concurrency: at most ``RpcPolicy.call_streams`` lanes per server; a call finding every lane busy is
  sent as a unary call rather than wait. A server at its own limit of open streams refuses a new one
  (RESOURCE_EXHAUSTED): no lane is opened to it for a while; a server without the ``Call`` method
  (UNIMPLEMENTED) gets unary calls from then on;
- refusals of the stream itself that a unary call would get too (a wrong token: PERMISSION_DENIED, or its
  cool-down) are raised at once, not sent again.
"""

from __future__ import annotations

import queue
import threading
import time

import grpc

from graphstore.client.transport.rpc_errors import error_for, status_code, translate_rpc_error
from graphstore.protos import call_wire
from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos.service import SERVICE_NAME
from graphstore.rpc import RpcPolicy

# After a server refused a new stream for being at its limit, no new lane is opened to it for this long.
_REFUSED_PAUSE_S = 5.0
# The watchdog looks at the lanes' deadlines this often.
_WATCH_INTERVAL_S = 0.1
_END = None  # ends a lane's request iterator


# A stream that ended with one of these is no answer about the call: it goes again as a unary call.
_SEND_AGAIN = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.UNIMPLEMENTED,
)


def _send_again(err: grpc.RpcError, lane: _Lane) -> bool:
    """Whether a call whose stream ended with ``err`` goes again as a unary call: the stream broke, timed
    out, is unknown to the server, or was refused for the server's stream limit."""
    code = err.code()
    if lane.timed_out or code in _SEND_AGAIN:
        return True
    return code == grpc.StatusCode.RESOURCE_EXHAUSTED and call_wire.STREAM_LIMIT_MESSAGE in (
        err.details() or ""
    )


class LaneBroken(Exception):
    """A lane's stream failed before the call was answered; send the call again as a unary call."""


class PendingCall:
    """A call sent on a lane whose answer is still to be read (:meth:`CallLanes.finish`)."""

    __slots__ = ("done", "lane", "method")

    def __init__(self, lane: _Lane, method: str) -> None:
        self.lane = lane
        self.method = method
        self.done = False


class _Lane:
    """One open ``Call`` stream: requests go into a queue that gRPC's sender drains, answers are read in
    order. ``deadline_at`` is the deadline of the call in flight (0: none in flight)."""

    __slots__ = ("answers", "deadline_at", "expires_at", "requests", "timed_out")

    def __init__(self, open_stream, metadata, lifetime_s: float) -> None:
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        self.answers = open_stream(iter(self.requests.get, _END), timeout=lifetime_s, metadata=metadata)
        self.expires_at = time.monotonic() + lifetime_s
        self.deadline_at = 0.0
        self.timed_out = False

    def exchange(self, payload: bytes):
        """Send one call's message and wait for its answer."""
        self.requests.put(payload)
        return next(self.answers)

    def close(self) -> None:
        """End the stream (its call, if any, fails)."""
        self.requests.put(_END)
        self.answers.cancel()


class CallLanes:
    """The lanes to one server.

    Args:
        channel: the server's gRPC channel.
        metadata: the calls' metadata (the token), sent when a stream opens.
        policy: ``call_streams`` (the most lanes) and ``stream_lifetime_s``.
        address: the server's ``host:port``, named in errors.
    """

    def __init__(self, channel: grpc.Channel, metadata, policy: RpcPolicy, address: str) -> None:
        self._open_stream = channel.stream_stream(f"/{SERVICE_NAME}/Call")
        self._metadata = metadata
        self._max_lanes = policy.call_streams
        self._lifetime_s = policy.stream_lifetime_s
        self._address = address
        self._idle: list[_Lane] = []
        self._busy: set[_Lane] = set()
        self._lock = threading.Lock()
        self._paused_until = 0.0
        self._unsupported = False
        self._closed = False
        self._watchdog: threading.Thread | None = None
        self._wake = threading.Event()

    def call(self, method: str, request: bytes, timeout_s: float):
        """Send one call of ``method`` (its serialized ``request``) over a lane and wait for its answer.

        Returns:
            A view of the answer's bytes (the method's response), or None when no lane could take the call
            (send it as a unary call).

        Raises:
            LaneBroken: the lane failed before the answer came (send the call again as a unary call).
            Exception: the server's refusal of the call, as :func:`~.rpc_errors.error_for` gives it.
        """
        pending = self.start(method, request, timeout_s)
        return None if pending is None else self.finish(pending)

    def start(self, method: str, request: bytes, timeout_s: float) -> PendingCall | None:
        """Send one call over a lane without waiting: its answer is read by :meth:`finish` (which must
        be called; a call never finished holds its lane until the watchdog ends it at the deadline).

        Returns:
            The call in flight, or None when no lane could take it.
        """
        lane = self._take(timeout_s)
        if lane is None:
            return None
        lane.deadline_at = time.monotonic() + timeout_s
        lane.requests.put(call_wire.call_request(method, request, timeout_s))
        return PendingCall(lane, method)

    def finish(self, pending: PendingCall):
        """The answer of a started call (see :meth:`call` for what it returns and raises).

        Raises:
            RuntimeError: the call's answer was read already (its lane may carry another call by now).
        """
        if pending.done:
            raise RuntimeError(f"{pending.method}: this call's answer was read already")
        pending.done = True
        lane, method = pending.lane, pending.method
        try:
            raw = next(lane.answers)
        except (grpc.RpcError, StopIteration) as err:
            self._drop(lane, err)
            if isinstance(err, grpc.RpcError) and not _send_again(err, lane):
                # A refusal the unary call would get too (a token refused, its cool-down): sending it
                # again would only count against the caller.
                raise translate_rpc_error(self._address, method, err) from None
            raise LaneBroken(f"{method}: the call stream to {self._address} ended") from None
        lane.deadline_at = 0.0
        self._give_back(lane)
        field, view = call_wire.read_call_answer(raw)
        if field == call_wire.ERROR_FIELD:
            error = pb.CallError.FromString(view)
            raise error_for(self._address, method, status_code(error.code), error.message, error.kind)
        if field != call_wire.CALL_FIELDS[method]:
            raise ValueError(f"{method}: the call stream answered field {field}")
        return view

    def close(self) -> None:
        """End every lane (those busy end when their call returns)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for lane in idle:
            lane.close()
        self._wake.set()

    @property
    def open_lanes(self) -> int:
        """Lanes open now, idle or busy."""
        with self._lock:
            return len(self._idle) + len(self._busy)

    def _take(self, timeout_s: float) -> _Lane | None:
        """An idle lane that outlives the call, a new one (opening a stream does not block), or None."""
        now = time.monotonic()
        retired, lane, opened = [], None, False
        with self._lock:
            while self._idle and lane is None:
                candidate = self._idle.pop()
                if candidate.expires_at > now + timeout_s:
                    lane = candidate
                else:
                    retired.append(candidate)  # the call could outlive the stream
            if lane is None and self._may_open(now):
                lane = _Lane(self._open_stream, self._metadata, self._lifetime_s)
                opened = True
            if lane is not None:
                self._busy.add(lane)
        self._retire(retired)
        if opened:
            self._start_watchdog()
        return lane

    def _may_open(self, now: float) -> bool:
        return (
            not self._closed
            and not self._unsupported
            and now >= self._paused_until
            and len(self._busy) < self._max_lanes
        )

    @staticmethod
    def _retire(lanes: list[_Lane]) -> None:
        for lane in lanes:
            lane.close()

    def _give_back(self, lane: _Lane) -> None:
        with self._lock:
            self._busy.discard(lane)
            if not self._closed:
                self._idle.append(lane)
                return
        lane.close()

    def _drop(self, lane: _Lane, err: BaseException) -> None:
        code = err.code() if isinstance(err, grpc.RpcError) else None
        with self._lock:
            self._busy.discard(lane)
            limit = call_wire.STREAM_LIMIT_MESSAGE in (err.details() or "") if code is not None else False
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED and limit and not lane.timed_out:
                self._paused_until = time.monotonic() + _REFUSED_PAUSE_S
            elif code == grpc.StatusCode.UNIMPLEMENTED:
                self._unsupported = True
        lane.close()

    def _start_watchdog(self) -> None:
        with self._lock:
            if self._watchdog is not None:
                return
            self._watchdog = threading.Thread(target=self._watch, name="graphstore-lanes", daemon=True)
        self._watchdog.start()

    def _watch(self) -> None:
        """Cancel every lane whose call outlived its deadline, until the lanes are closed."""
        while not self._closed:
            self._wake.wait(_WATCH_INTERVAL_S)
            now = time.monotonic()
            with self._lock:
                late = [lane for lane in self._busy if 0.0 < lane.deadline_at < now]
                self._busy.difference_update(late)  # a call never finished leaves no lane behind
            for lane in late:
                lane.timed_out = True
                lane.answers.cancel()
