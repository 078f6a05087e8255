"""Named, reusable barriers with a participant count and a timeout.

A barrier releases when ``count`` participants have arrived, then starts a new *generation* so the
same name can be used again (once per epoch, say). A participant that names itself is counted once
per generation, so a client that retries its call after a dropped connection does not arrive twice.
A participant that times out leaves the barrier again and gets a
:class:`graphstore.errors.BarrierTimeoutError` (a ``TimeoutError``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from graphstore.errors import BarrierTimeoutError

# Longest wait one call may ask for (a day): bounds every wait, catches unit mistakes (ms as s).
MAX_TIMEOUT_S = 86400.0


@dataclass
class _BarrierState:
    count: int
    generation: int = 0
    arrived: dict[str, int] = field(default_factory=dict)  # participant -> its calls waiting now
    anonymous: int = 0

    @property
    def present(self) -> int:
        return len(self.arrived) + self.anonymous


class BarrierRegistry:
    """All barriers of one server, by name."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._barriers: dict[str, _BarrierState] = {}
        self._closed = False

    def close(self) -> None:
        """Release every waiting participant with ConnectionAbortedError and refuse new ones (shutdown:
        the missing participants can no longer reach this server)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _check_open(self, name: str) -> None:
        if self._closed:
            raise ConnectionAbortedError(f"barrier {name!r}: the server is shutting down")

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
        if not name:
            raise ValueError("name: a barrier needs a non-empty name")
        if count < 1:
            raise ValueError(f"count: a barrier needs at least 1 participant, got {count}")
        if not 0 < timeout_s <= MAX_TIMEOUT_S:
            raise ValueError(f"timeout_s must be in (0, {MAX_TIMEOUT_S}], got {timeout_s}")
        with self._cond:
            self._check_open(name)
            state = self._barriers.get(name)
            if state is None or state.present == 0:
                generation = state.generation if state is not None else 0
                state = _BarrierState(count=count, generation=generation)
                self._barriers[name] = state
            elif state.count != count:
                raise ValueError(
                    f"count: barrier {name!r} is waiting for {state.count} participants, "
                    f"this call says {count}"
                )
            generation = state.generation
            if participant:
                # A retried call of the same participant waits too but is counted once.
                state.arrived[participant] = state.arrived.get(participant, 0) + 1
            else:
                state.anonymous += 1
            if state.present >= state.count:
                state.generation += 1
                state.arrived = {}
                state.anonymous = 0
                self._cond.notify_all()
                return generation
            self._cond.wait_for(lambda: state.generation != generation or self._closed, timeout=timeout_s)
            if state.generation != generation:
                return generation
            present = state.present
            # Leave the barrier so that a later attempt starts from a correct count.
            if participant:
                state.arrived[participant] -= 1
                if not state.arrived[participant]:
                    del state.arrived[participant]
            else:
                state.anonymous -= 1
            self._check_open(name)
            raise BarrierTimeoutError(
                f"barrier {name!r}: only {present} of {count} participants arrived within "
                f"timeout_s={timeout_s}"
            )
