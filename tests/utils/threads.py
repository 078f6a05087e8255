"""Run a test's worker function on several threads and surface the first failure in the test."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable


def run_in_threads(worker: Callable[..., None], args: Iterable[tuple], timeout: float = 60.0) -> None:
    """Start one thread per argument tuple, join them all, then re-raise the first exception.

    Raises:
        AssertionError: a thread still running after ``timeout`` seconds.
        BaseException: whatever a worker raised first (an assertion inside a worker fails the test).
    """
    errors: list[BaseException] = []

    def guarded(*call_args) -> None:
        try:
            worker(*call_args)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=call_args) for call_args in args]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    stuck = [thread.name for thread in threads if thread.is_alive()]
    assert not stuck, f"threads still running after {timeout} s: {stuck}"
    if errors:
        raise errors[0]
