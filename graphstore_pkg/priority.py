"""Scheduling priority of a trainer's background threads (the client applies it; the launcher's
cluster config validates the ``background_nice`` setting against the same bounds).

A trainer's loader threads and its RPC pool produce the next batches while the model trains on the
current one. When the machine's cores are all busy (servers, other trainers, the loader itself), the
kernel shares them fairly between every runnable thread, and the training step, the one thread the
whole epoch waits for, gets only its share. Running the background threads at a higher nice value
gives the training thread the CPU first and the loader whatever is left; on a machine with idle
cores it changes nothing.

Measured with ``bench/loader.py``'s overlap setting (2 cores, 2 servers, a GraphSAGE step on one
torch thread): nice 10 on the client's RPC pool and loader threads raised the share of the loader's
time hidden behind the model from 0.42 to 0.56 (median of 10 paired epochs).

Linux only (each thread has its own nice value there); elsewhere :func:`lower_thread_priority` does
nothing, since ``setpriority`` would change the whole process.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

logger = logging.getLogger(__name__)

# Nice increment of the client's background threads unless the cluster config says otherwise.
DEFAULT_BACKGROUND_NICE = 10
MAX_NICE = 19


def check_nice(value, arg: str = "background_nice") -> int:
    """``value`` as a nice increment in ``0..19``.

    Raises:
        ValueError: not an integer in ``0..19``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_NICE:
        raise ValueError(f"{arg} must be an integer in 0..{MAX_NICE}, got {value!r}")
    return value


def lower_thread_priority(increment: int) -> bool:
    """Raise the calling thread's nice value by ``increment`` (capped at 19).

    Use it as a ``ThreadPoolExecutor`` initializer (``functools.partial(lower_thread_priority, n)``)
    so that every worker of the pool runs at the lower priority.

    Args:
        increment: how much lower (0: leave it).

    Returns:
        True when the thread's priority was changed.

    Raises:
        ValueError: ``increment`` outside ``0..19``.
    """
    check_nice(increment, "increment")
    if increment == 0 or not sys.platform.startswith("linux"):
        return False
    thread_id = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, thread_id)
        target = min(current + increment, MAX_NICE)
        if target == current:
            return False
        os.setpriority(os.PRIO_PROCESS, thread_id, target)
    except OSError as exc:  # e.g. a seccomp profile forbidding setpriority
        logger.debug("could not lower the priority of thread %d: %s", thread_id, exc)
        return False
    return True
