"""Calls a partition's gRPC service has accepted and not yet answered, for a graceful shutdown.

The servicer's generic handler counts a call when grpc routes it; the call leaves when its answer has
been sent, or, for a call grpc never hands to the handler (its deadline expired or it was cancelled
while it waited in the queue for a worker), when grpc drops it. On shutdown the server waits until the
count is zero and no call arrived for a moment, so long-lived streams (health Watch) need not hold the
process for the rest of the grace period.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import grpc


class InFlightCalls:
    """A count of calls accepted and not yet answered, and when the last one was accepted."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._count = 0
        self._last_enter = 0.0

    def enter(self) -> None:
        """Count one accepted call."""
        with self._cond:
            self._count += 1
            self._last_enter = time.monotonic()

    def leave(self) -> None:
        """Count one answered call (wakes :meth:`wait_quiet` when none is left)."""
        with self._cond:
            self._count -= 1
            if self._count == 0:
                self._cond.notify_all()

    def wait_quiet(self, timeout: float, settle: float) -> bool:
        """Wait until nothing is in flight and nothing was accepted for ``settle`` seconds.

        Args:
            timeout: the most seconds to wait.
            settle: how long no call may have been accepted.

        Returns:
            True if that happened within ``timeout``.
        """
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                now = time.monotonic()
                quiet_for = now - self._last_enter
                if self._count == 0 and quiet_for >= settle:
                    return True
                if now >= end:
                    return False
                wait = settle - quiet_for if self._count == 0 else end - now
                self._cond.wait(max(min(wait, end - now), 0.001))


class CallTicket:
    """One accepted call's place in the count: it leaves once, when answered or when dropped unrun.

    grpc holds the per-call handler (and so this ticket) until the call is over; a call that never ran
    (expired or cancelled in the queue) is dropped without a termination callback, and the ticket
    leaves when it is garbage-collected (at once in CPython: nothing else refers to it).
    """

    __slots__ = ("__weakref__", "_in_flight", "_left")

    def __init__(self, in_flight: InFlightCalls) -> None:
        self._in_flight = in_flight
        self._left = False
        in_flight.enter()

    def leave(self) -> None:
        """Count the call as answered (only the first call counts)."""
        if not self._left:
            self._left = True
            self._in_flight.leave()

    def __del__(self) -> None:
        self.leave()


def _counted(behavior: Callable[[Any, grpc.ServicerContext], Any], ticket: CallTicket):
    def run(request: Any, context: grpc.ServicerContext) -> Any:
        # The call stays in flight until its answer has been sent, not just computed.
        if not context.add_callback(ticket.leave):
            ticket.leave()  # already terminated (cancelled by the client)
        return behavior(request, context)

    return run


class CountingHandler(grpc.GenericRpcHandler):
    """Routes this service's methods and counts each accepted unary call as in flight until it is
    answered or dropped (see :class:`CallTicket`)."""

    def __init__(self, handlers: dict[str, grpc.RpcMethodHandler], in_flight: InFlightCalls) -> None:
        self._handlers = handlers
        self._in_flight = in_flight

    def service(self, handler_call_details):
        """A handler of the called method for this one call (None for another service's method)."""
        handler = self._handlers.get(handler_call_details.method)
        if handler is None or handler.unary_unary is None:
            return handler  # a stream counts its messages itself (server/call_stream.py)
        return handler._replace(unary_unary=_counted(handler.unary_unary, CallTicket(self._in_flight)))
