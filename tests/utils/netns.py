"""Network namespaces for the tests that put servers and clients on "other machines": ``ip`` calls,
namespaces joined by veth pairs, and their clean removal. Needs Linux, iproute2 and root; a test asks
:func:`require_netns` first and is skipped cleanly where that is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable

import pytest

from tests.launcher.helpers import kill_pids


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``ip ARGS`` (iproute2); raises CalledProcessError on failure when ``check``."""
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


def namespace_pids(name: str) -> list[int]:
    """PIDs of the processes in namespace ``name`` (none when it does not exist)."""
    result = ip("netns", "pids", name, check=False)
    return [int(pid) for pid in result.stdout.split()] if result.returncode == 0 else []


def netns_exec(name: str) -> list[str]:
    """The prefix that runs a command inside namespace ``name``."""
    return ["ip", "netns", "exec", name]


def require_netns() -> None:
    """Skip the test unless this is Linux with iproute2's ``ip`` and we are root."""
    if sys.platform != "linux" or shutil.which("ip") is None:
        pytest.skip("needs Linux and iproute2's `ip`")
    if os.geteuid() != 0:
        pytest.skip("`ip netns add` needs root")


def add_namespace(name: str, created: list[str]) -> None:
    """Create namespace ``name`` with its loopback up; its name goes into ``created`` as soon as it
    exists, so that a failure after that still leaves it to :func:`delete_namespaces`."""
    ip("netns", "add", name)
    created.append(name)
    ip("-n", name, "link", "set", "lo", "up")


def add_veth(first: tuple[str, str, str], second: tuple[str, str, str]) -> None:
    """A veth pair between two namespaces, each end ``(namespace, device, address/prefix)``, both up."""
    (ns_a, dev_a, _), (ns_b, dev_b, _) = first, second
    ip("link", "add", dev_a, "netns", ns_a, "type", "veth", "peer", "name", dev_b, "netns", ns_b)
    for namespace, device, address in (first, second):
        ip("-n", namespace, "addr", "add", address, "dev", device)
        ip("-n", namespace, "link", "set", device, "up")


def delete_namespaces(names: Iterable[str]) -> None:
    """End the processes in each namespace (only ones a test started live there), then remove them."""
    names = list(names)
    for name in names:
        kill_pids(namespace_pids(name))
    for name in names:
        ip("netns", "del", name, check=False)
