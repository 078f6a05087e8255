"""Named, reusable barriers with a participant count and a timeout, that never hold a server thread.

A barrier releases when ``count`` participants have arrived, then starts a new *generation* so the
same name can be used again (once per epoch, say). A participant names itself and is counted once
per generation, so a client that retries its call after a dropped connection does not arrive twice.

Two ways to wait:

- :meth:`BarrierRegistry.arrive` answers at once (the gRPC servicer's way): released or not. A
  participant that is not released calls again with the generation it got (its *ticket*) until it is,
  so no server worker thread waits for the others (a few calls may be held for a short while, up to
  ``max_holders`` at once, so small barriers release without a polling delay). An arrival stays
  counted for ``lease_s`` after the participant's last call: a client that went away stops calling
  and is no longer counted once its lease runs out; one that gives up calls :meth:`leave`.
- :meth:`BarrierRegistry.wait` blocks the calling thread (in-process callers, standalone mode).

A participant whose ``timeout_s`` ran out leaves the barrier and gets a
:class:`graphstore.errors.BarrierTimeoutError` (a ``TimeoutError``).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from graphstore.errors import BarrierTimeoutError, LimitExceededError
from graphstore.limits import MAX_BARRIER_TIMEOUT_S

# Kept for callers that imported the bound from here.
MAX_TIMEOUT_S = MAX_BARRIER_TIMEOUT_S
# A polled arrival stays counted this long after the participant's last call (clients poll at least
# every 0.5 s while they wait).
DEFAULT_LEASE_S = 3.0


@dataclass
class _Arrival:
    deadline: float  # when the participant's timeout_s runs out
    lease_until: float  # counted until then without another call
    blocking: int = 0  # blocking wait() calls of this participant in progress (they hold the lease)


@dataclass
class _BarrierState:
    count: int
    generation: int = 0
    arrivals: dict[str, _Arrival] = field(default_factory=dict)


class BarrierRegistry:
    """All barriers of one server, by name.

    Args:
        max_timeout_s: the longest ``timeout_s`` a call may give.
        max_waiters: participants waiting at all barriers together (more are refused).
        max_holders: calls of :meth:`arrive` that may be held at once (``hold_s``).
        lease_s: how long a polled arrival stays counted after its last call.
        clock: the monotonic clock (tests pass a fake one).
    """

    def __init__(
        self,
        max_timeout_s: float = MAX_BARRIER_TIMEOUT_S,
        max_waiters: int = 4096,
        max_holders: int = 4,
        lease_s: float = DEFAULT_LEASE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cond = threading.Condition()
        self._barriers: dict[str, _BarrierState] = {}
        self._closed = False
        self._max_timeout_s = max_timeout_s
        self._max_waiters = max_waiters
        self._holders = threading.BoundedSemaphore(max(max_holders, 1))
        self._lease_s = lease_s
        self._clock = clock
        self._waiting = 0

    def close(self) -> None:
        """Release every waiting participant with ConnectionAbortedError and refuse new ones (shutdown:
        the missing participants can no longer reach this server)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def waiting(self) -> int:
        """Participants counted at all barriers now."""
        with self._cond:
            return self._waiting

    def _check_open(self, name: str) -> None:
        if self._closed:
            raise ConnectionAbortedError(f"barrier {name!r}: the server is shutting down")

    def _check_arguments(self, name: str, count: int, timeout_s: float, participant: str) -> None:
        if not name:
            raise ValueError("name: a barrier needs a non-empty name")
        if count < 1:
            raise ValueError(f"count: a barrier needs at least 1 participant, got {count}")
        if not 0 < timeout_s <= self._max_timeout_s:
            raise ValueError(f"timeout_s must be in (0, {self._max_timeout_s:g}], got {timeout_s}")
        if not participant:
            raise ValueError("participant: a waiting barrier call must name its participant")

    def _drop(self, state: _BarrierState, participant: str) -> None:
        if state.arrivals.pop(participant, None) is not None:
            self._waiting -= 1

    def _expire_leases(self, state: _BarrierState, now: float) -> None:
        for participant, arrival in list(state.arrivals.items()):
            if not arrival.blocking and arrival.lease_until < now:
                self._drop(state, participant)

    def _timeout_error(self, name: str, present: int, count: int, timeout_s: float) -> BarrierTimeoutError:
        return BarrierTimeoutError(
            f"barrier {name!r}: only {present} of {count} participants arrived within timeout_s={timeout_s}"
        )

    def _arrive_locked(
        self, name: str, count: int, timeout_s: float, participant: str, ticket: int | None, blocking: bool
    ) -> tuple[bool, int]:
        """One arrival under the lock: ``(released, generation)``."""
        self._check_open(name)
        now = self._clock()
        state = self._barriers.get(name)
        if state is not None and ticket is not None and state.generation > ticket:
            return True, ticket  # released since this participant's last call
        if state is not None:
            self._expire_leases(state, now)
        if state is None or not state.arrivals:
            state = _BarrierState(count=count, generation=state.generation if state is not None else 0)
            self._barriers[name] = state
        elif state.count != count:
            raise ValueError(
                f"count: barrier {name!r} is waiting for {state.count} participants, this call says {count}"
            )
        arrival = state.arrivals.get(participant)
        if arrival is None:
            if self._waiting >= self._max_waiters:
                raise LimitExceededError(
                    f"barrier {name!r}: {self._waiting} participants are waiting at this server's barriers, "
                    f"the limit max_barrier_waiters={self._max_waiters}",
                    "max_barrier_waiters",
                )
            arrival = _Arrival(deadline=now + timeout_s, lease_until=now + self._lease_s)
            state.arrivals[participant] = arrival
            self._waiting += 1
        elif not blocking and now > arrival.deadline and not arrival.blocking:
            present = len(state.arrivals)
            self._drop(state, participant)
            raise self._timeout_error(name, present, count, timeout_s)
        arrival.lease_until = max(arrival.lease_until, now + self._lease_s)
        if blocking:
            arrival.blocking += 1
        if len(state.arrivals) >= state.count:
            generation = state.generation
            state.generation += 1
            self._waiting -= len(state.arrivals)
            state.arrivals = {}
            self._cond.notify_all()
            return True, generation
        return False, state.generation

    def arrive(
        self,
        name: str,
        count: int,
        timeout_s: float,
        participant: str,
        ticket: int | None = None,
        hold_s: float = 0.0,
    ) -> tuple[bool, int]:
        """Arrive at (or poll) barrier ``name``; answers without waiting for the others.

        Args:
            name: the barrier's name.
            count: participants to wait for (>= 1); every participant of one generation must agree.
            timeout_s: the longest time the participant waits, from its first arrival (> 0).
            participant: the caller's id (non-empty); the same id arriving twice counts once.
            ticket: the generation an earlier call of this participant returned, when polling.
            hold_s: wait up to this long for the release when a holding slot is free (0: never wait).

        Returns:
            ``(released, generation)``: when released, the generation that was released; otherwise
            the ticket to poll with.

        Raises:
            ValueError: bad arguments, or a ``count`` that differs from the waiting participants'.
            BarrierTimeoutError: the participant's ``timeout_s`` ran out (it has left the barrier).
            LimitExceededError: too many participants wait at this server's barriers.
            ConnectionAbortedError: the registry was closed (server shutdown).
        """
        self._check_arguments(name, count, timeout_s, participant)
        with self._cond:
            released, generation = self._arrive_locked(name, count, timeout_s, participant, ticket, False)
        if released or hold_s <= 0 or not self._holders.acquire(blocking=False):
            return released, generation
        try:
            with self._cond:
                state = self._barriers[name]
                self._cond.wait_for(lambda: state.generation != generation or self._closed, timeout=hold_s)
                if state.generation != generation:
                    return True, generation
                self._check_open(name)
                arrival = state.arrivals.get(participant)
                if arrival is not None:
                    arrival.lease_until = max(arrival.lease_until, self._clock() + self._lease_s)
                return False, generation
        finally:
            self._holders.release()

    def leave(self, name: str, participant: str) -> None:
        """Withdraw ``participant``'s arrival (it gave up, or its call was cancelled)."""
        with self._cond:
            state = self._barriers.get(name)
            if state is not None:
                arrival = state.arrivals.get(participant)
                if arrival is not None and not arrival.blocking:
                    self._drop(state, participant)

    def wait(self, name: str, count: int, timeout_s: float, participant: str = "") -> int:
        """Arrive at barrier ``name`` and block until ``count`` participants are there.

        Args:
            name: the barrier's name.
            count: participants to wait for (>= 1); every participant of one generation must agree.
            timeout_s: the longest time to wait, in seconds (> 0).
            participant: an optional caller id; the same id arriving twice in one generation counts once.

        Returns:
            The generation that was released (0 for the first use of ``name``).

        Raises:
            ValueError: empty name, ``count < 1``, a non-positive or too long timeout, or a ``count``
                that differs from the one the waiting participants gave.
            BarrierTimeoutError: the other participants did not arrive within ``timeout_s``.
            ConnectionAbortedError: the registry was closed (server shutdown) before the release.
        """
        participant = participant or f"anonymous-{uuid.uuid4().hex}"
        self._check_arguments(name, count, timeout_s, participant)
        with self._cond:
            released, generation = self._arrive_locked(name, count, timeout_s, participant, None, True)
            if released:
                return generation
            state = self._barriers[name]
            self._cond.wait_for(lambda: state.generation != generation or self._closed, timeout=timeout_s)
            if state.generation != generation:
                return generation
            present = len(state.arrivals)
            arrival = state.arrivals[participant]
            arrival.blocking -= 1
            if not arrival.blocking:
                # Leave the barrier so that a later attempt starts from a correct count.
                self._drop(state, participant)
            self._check_open(name)
            raise self._timeout_error(name, present, count, timeout_s)
