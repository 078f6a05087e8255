"""Which hosts are this machine, and free ports on it: what decides whether launch starts a process
locally or through the remote-exec template, and where the demo and launch find unused ports."""

from __future__ import annotations

import ipaddress
import socket


def is_local_host(host: str) -> bool:
    """Whether ``host`` names this machine: ``localhost``, this host name, or one of its IP addresses.

    Other names are not resolved (no DNS lookups): they count as remote.

    Args:
        host: a host name or IP address (an IPv6 one with or without brackets).
    """
    name = host.strip("[]")
    if (
        name.lower() == "localhost"
        or name == socket.gethostname()
        or name == socket.gethostname().split(".")[0]
    ):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if address.is_loopback or address.is_unspecified:
        return True
    try:
        with socket.socket(_family(name), socket.SOCK_STREAM) as probe:
            probe.bind((name, 0))
        return True
    except OSError:
        return False


def free_port(host: str = "") -> int:
    """A TCP port nothing listens on right now at ``host`` (default: every IPv4 interface).

    Args:
        host: the address to bind, an IPv6 one without brackets.
    """
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_accepts_connections(host: str, port: int, timeout_s: float = 0.3) -> bool:
    """Whether something accepts TCP connections at ``host:port`` (a port-in-use check).

    Args:
        host: a host name or IP address (an IPv6 one without brackets).
        port: the TCP port.
        timeout_s: how long a connection attempt may take.
    """
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _family(host: str) -> socket.AddressFamily:
    """IPv6 for an IPv6 literal, else IPv4."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET
