"""SIGINT / SIGTERM as a stop request that the supervising loops of ``launch`` and ``servers`` poll.

A signal handler runs in the main thread between two bytecodes, possibly while that thread holds a
``threading.Event``'s lock inside ``Event.wait()``: calling ``Event.set()`` there can deadlock.
:class:`StopRequest` has the part of the Event interface the loops use (``is_set``, ``wait``) but
the handler only stores the signal number, and ``wait`` sleeps in short steps that see it.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_STEP_S = 0.02


class StopRequest:
    """Set by a signal handler (or any thread); polled by the loops that supervise processes.

    Attributes:
        signum: the signal that asked to stop, or None.
    """

    def __init__(self) -> None:
        self.signum: int | None = None

    def set(self, signum: int = signal.SIGTERM) -> None:
        """Ask to stop (safe in a signal handler: one attribute store)."""
        self.signum = int(signum)

    def is_set(self) -> bool:
        """Whether a stop was asked."""
        return self.signum is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep until a stop is asked or ``timeout`` seconds passed; returns :meth:`is_set`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            remaining = _STEP_S if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                break
            time.sleep(min(_STEP_S, remaining))
        return self.is_set()


@contextmanager
def stop_on_signals(stop: StopRequest) -> Iterator[StopRequest]:
    """Within the block, SIGINT and SIGTERM set ``stop``; the previous handlers come back after."""
    previous = {sig: signal.signal(sig, lambda signum, _frame: stop.set(signum)) for sig in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
