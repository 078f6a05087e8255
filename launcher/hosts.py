"""Which hosts are this machine, and free ports on it: what decides whether launch starts a process
locally or through the remote-exec template, which servers ``graphstore servers`` starts, and where
the demo and launch find unused ports."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence

from graphstore.config import ServerSpec


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


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports nothing listens on right now at ``host`` (all bound together, so
    none is handed out twice, then released).

    Args:
        count: how many ports.
        host: the address to bind, an IPv6 one without brackets.
    """
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(_family(host), socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


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


def servers_of_host(
    servers: Sequence[ServerSpec],
    hostname: str | None = None,
    host_index: int | None = None,
    aliases: Sequence[str] = (),
) -> list[ServerSpec]:
    """The servers of a cluster config that one host runs (what ``graphstore servers`` starts).

    Args:
        servers: the config's servers.
        hostname: select the servers whose ``exec_host`` is this name, or whose ``exec_host``'s first
            DNS label is (``server-0`` selects ``server-0.server.default.svc``: a Kubernetes pod's
            host name); None: not by name.
        host_index: select the servers of the ``host_index``-th distinct ``exec_host``, in the order
            hosts first appear in ``servers`` (Slurm's ``SLURM_NODEID``); None: not by index.
        aliases: more names of this machine (Slurm's node name), used without the two above.

    Returns:
        The selected servers, in partition order; with neither argument, those whose ``exec_host``
        is this machine (:func:`is_local_host`) or one of ``aliases``.

    Raises:
        ValueError: both arguments given, an index out of range, or no server selected (the message
            lists the hosts the config names).
    """
    hosts = list(dict.fromkeys(server.exec_host for server in servers))
    if hostname is not None and host_index is not None:
        raise ValueError("give the host by name or by index, not both")
    if host_index is not None:
        if not 0 <= host_index < len(hosts):
            raise ValueError(f"host index {host_index} is out of range: the config names {len(hosts)} hosts")
        selected = [server for server in servers if server.exec_host == hosts[host_index]]
    elif hostname is not None:
        short = hostname.split(".")[0]
        selected = [
            server
            for server in servers
            if server.exec_host == hostname or server.exec_host.split(".")[0] == short
        ]
    else:
        selected = [
            server for server in servers if server.exec_host in aliases or is_local_host(server.exec_host)
        ]
    if not selected:
        which = f"host {hostname!r}" if hostname is not None else "this machine"
        raise ValueError(f"no server of the config runs on {which}; its hosts are {', '.join(hosts)}")
    return sorted(selected, key=lambda server: (server.part_id, server.replica))
