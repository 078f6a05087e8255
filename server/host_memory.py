"""Memory figures read from ``/proc`` and the cgroup file system: what the host still has available,
what this process's cgroup still allows, what this process holds.

The figures are None (or 0) where the files are missing (not Linux, no memory controller), so callers
skip their checks rather than fail.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# cgroup v1 reports "no limit" as a huge page-aligned number; anything above this is no limit.
_UNLIMITED = 1 << 60


def available_memory_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """The host's ``MemAvailable`` in bytes (from /proc/meminfo); None where unavailable."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass(frozen=True)
class CgroupMemory:
    """The tightest memory limit of this process's cgroup and its ancestors.

    Attributes:
        limit_bytes: the limit (``memory.max`` in v2, ``memory.limit_in_bytes`` in v1).
        usage_bytes: what the cgroup with that limit uses now.
        path: the folder the limit was read from.
    """

    limit_bytes: int
    usage_bytes: int
    path: str

    @property
    def free_bytes(self) -> int:
        """``limit - usage`` (never negative)."""
        return max(self.limit_bytes - self.usage_bytes, 0)


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    if text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value < _UNLIMITED else None


def _cgroup_folders(proc_cgroup: str, sys_root: str) -> list[tuple[str, str, str]]:
    """``(folder, limit file, usage file)`` of this process's memory cgroup and each ancestor, innermost
    first, for v2 (the ``0::`` line) and v1 (the line of the ``memory`` controller)."""
    try:
        with open(proc_cgroup) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    found: list[tuple[str, str, str]] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            base, limit, usage = sys_root, "memory.max", "memory.current"
        elif "memory" in controllers.split(","):
            base, limit, usage = (
                os.path.join(sys_root, "memory"),
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )
        else:
            continue
        relative = path.strip("/")
        while True:
            folder = os.path.join(base, relative) if relative else base
            found.append((folder, os.path.join(folder, limit), os.path.join(folder, usage)))
            if not relative:
                break
            relative = os.path.dirname(relative)
    return found


def cgroup_memory(
    proc_cgroup: str = "/proc/self/cgroup", sys_root: str = "/sys/fs/cgroup"
) -> CgroupMemory | None:
    """The cgroup limit that leaves this process the least room (v1 and v2), or None without one.

    A container sees its own cgroup as the root of ``/sys/fs/cgroup``; every folder on the way up is
    looked at, so both a host's view and a container's view find the limit.

    Args:
        proc_cgroup: the process's cgroup list (tests pass a fake one).
        sys_root: where the cgroup file systems are mounted.
    """
    best: CgroupMemory | None = None
    for folder, limit_file, usage_file in _cgroup_folders(proc_cgroup, sys_root):
        limit = _read_int(limit_file)
        if limit is None:
            continue
        usage = _read_int(usage_file) or 0
        candidate = CgroupMemory(limit, usage, folder)
        if best is None or candidate.free_bytes < best.free_bytes:
            best = candidate
    return best


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
