"""What the side-by-side results are recorded with: the machine, its load and the source revision."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (the platform's processor string elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def total_memory_bytes() -> int | None:
    """``MemTotal`` of ``/proc/meminfo`` in bytes (None where there is no such file)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def machine() -> dict:
    """Host name, CPU model, logical cores, RAM and OS of this machine."""
    return {
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "ram_bytes": total_memory_bytes(),
        "os": platform.platform(),
    }


def load() -> dict:
    """The 1, 5 and 15-minute load averages now."""
    one, five, fifteen = os.getloadavg()
    return {"loadavg_1m": one, "loadavg_5m": five, "loadavg_15m": fifteen}


def git_commit(repo: Path) -> str:
    """``HEAD``'s commit of ``repo``, with ``+dirty`` when tracked files differ from it."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")
