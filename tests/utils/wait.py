"""Wait for a condition in a test: poll with a deadline instead of sleeping a guessed time.

::

    from tests.utils.wait import wait_until

    wait_until(lambda: path.exists(), 30, "the trainer's result file", alive=proc)

The deadline is a liveness bound (how long before the test gives up and says what it waited for),
never a performance claim: make it generous.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    timeout_s: float,
    what: str,
    *,
    alive: subprocess.Popen | Iterable[subprocess.Popen] | None = None,
    interval_s: float = 0.02,
) -> T:
    """Call ``predicate`` until it returns something truthy, and return that.

    Args:
        predicate: the condition; called at least once.
        timeout_s: give up after this many seconds.
        what: what the test waits for, for the failure message ("the checkpoint of partition 1").
        alive: processes that must keep running meanwhile: one that exits fails the wait at once.
        interval_s: the pause between two calls.

    Returns:
        The first truthy value of ``predicate``.

    Raises:
        AssertionError: the deadline passed, or a process of ``alive`` exited (with its exit code).
    """
    procs = [alive] if isinstance(alive, subprocess.Popen) else list(alive or ())
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        for proc in procs:
            code = proc.poll()
            assert code is None, f"process {proc.pid} exited with {code} while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(interval_s)


def stays_false(
    predicate: Callable[[], object], window_s: float, what: str, *, interval_s: float = 0.02
) -> None:
    """Check that something does not happen within a window: poll ``predicate`` for ``window_s`` seconds.

    For a negative claim about a background thread ("no checkpoint after 2 of 3 updates"): correct code
    passes whatever the scheduler does; a wrong one fails as soon as the predicate turns true within the
    window (it can only be missed when it would turn true later than that).

    Raises:
        AssertionError: ``predicate`` returned something truthy (naming ``what``).
    """
    deadline = time.monotonic() + window_s
    while True:
        value = predicate()
        assert not value, f"{what} happened: {value!r}"
        if time.monotonic() >= deadline:
            return
        time.sleep(interval_s)
