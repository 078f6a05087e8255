"""Calls a partition's gRPC service has accepted and not yet answered, for a graceful shutdown.

The servicer's generic handler counts a call when grpc routes it and the call leaves when its answer
has been sent; on shutdown the server waits until the count is zero and no call arrived for a moment,
so long-lived streams (health Watch) need not hold the process for the rest of the grace period.
"""

from __future__ import annotations

import threading
import time

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


class CountingHandler(grpc.GenericRpcHandler):
    """Routes this service's methods and counts each accepted call as in flight (the handler leaves)."""

    def __init__(self, handlers: dict[str, grpc.RpcMethodHandler], in_flight: InFlightCalls) -> None:
        self._handlers = handlers
        self._in_flight = in_flight

    def service(self, handler_call_details):
        """The handler of the called method (None for another service's), counted as in flight."""
        handler = self._handlers.get(handler_call_details.method)
        if handler is not None:
            self._in_flight.enter()
        return handler
