"""Memory figures read from ``/proc``: what the host still has available, what this process holds.

The figures are None (or 0) where ``/proc`` is missing (not Linux), so callers skip their checks
rather than fail.
"""

from __future__ import annotations


def available_memory_bytes() -> int | None:
    """The host's ``MemAvailable`` in bytes (from /proc/meminfo); None where unavailable."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def read_rss_bytes() -> tuple[int, int]:
    """``(VmRSS, RssAnon)`` of this process in bytes from /proc/self/status (0, 0 where unavailable)."""
    values = {"VmRSS:": 0, "RssAnon:": 0}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key = line.split(":", 1)[0] + ":"
                if key in values:
                    values[key] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return values["VmRSS:"], values["RssAnon:"]
