"""Ports on this machine: whether one is in use, and a free one (the demo and launch use them)."""

from __future__ import annotations

import socket


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
