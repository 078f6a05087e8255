"""The cluster config as dataclasses: what every reader of the cluster YAML gets.

``graphstore launch`` / ``status`` / ``stop``, the demo and the trainers' ``initialize()`` all hold a
:class:`ClusterConfig` built by :func:`graphstore.config.parse_cluster_config`; the dataclasses carry
validated values only (absolute paths, hosts without brackets, ports in range).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from graphstore.errors import ConfigError
from graphstore.limits import RequestLimits
from graphstore.priority import DEFAULT_BACKGROUND_NICE
from graphstore.rpc import RpcPolicy, TlsSettings

DEFAULT_REMOTE_EXEC = "ssh -o BatchMode=yes {host} {command}"
DEFAULT_TRAINER_HOST = "127.0.0.1"
DEFAULT_MAX_RESTARTS = 3
DEFAULT_CHECKPOINT_KEEP = 3
DURABILITY_MODES = ("checkpoint", "wal")
LOCAL_READ_MODES = ("auto", "on", "off")
RESTART_POLICIES = ("no", "on-failure")


def format_address(host: str, port: int) -> str:
    """``host:port`` as gRPC dials it, with an IPv6 host in brackets (``[::1]:50051``).

    Args:
        host: a host name or IP address, an IPv6 one with or without brackets.
        port: the TCP port.
    """
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"


def split_address(address: str) -> tuple[str, int]:
    """``(host, port)`` of a ``host:port`` address; the inverse of :func:`format_address`.

    Args:
        address: e.g. ``10.0.0.1:50051`` or ``[::1]:50051``.

    Returns:
        The host (an IPv6 one without brackets) and the port.

    Raises:
        ConfigError: no ``:port`` after the host, or a port that is not a number.
    """
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"address {address!r} is not HOST:PORT (an IPv6 host in brackets: [::1]:50051)")
    return host.strip("[]"), int(port)


@dataclass(frozen=True)
class ServerSpec:
    """One partition server of the cluster.

    Attributes:
        host: the address clients (trainers, ``graphstore status``) connect to; an IPv6 address is
            kept without brackets (``::1``).
        port: its TCP port.
        part_id: the partition it serves.
        exec_host: where ``graphstore launch`` starts it: the ``{host}`` of the remote-exec
            template (an ssh host name, a network namespace...). Defaults to ``host``.
        bind_host: the address the server binds (``graphstore server --host``). Defaults to
            ``host``; ``0.0.0.0`` serves on every interface.
        replica: its place among the servers of ``part_id``, in the order of the YAML: 0 is the
            partition's owner (it holds the writable tensors and answers every write); 1, 2, ... are
            read replicas (``graphstore server --read-replica``), which serve the partition files'
            read-only data and structure.
    """

    host: str
    port: int
    part_id: int
    exec_host: str = ""
    bind_host: str = ""
    replica: int = 0

    def __post_init__(self) -> None:
        if not self.exec_host:
            object.__setattr__(self, "exec_host", self.host)
        if not self.bind_host:
            object.__setattr__(self, "bind_host", self.host)

    @property
    def address(self) -> str:
        """``host:port`` as clients dial it (IPv6 literals bracketed)."""
        return format_address(self.host, self.port)

    @property
    def is_read_replica(self) -> bool:
        """Whether this is a read replica (not the partition's owner)."""
        return self.replica > 0

    @property
    def name(self) -> str:
        """``server-K`` for the owner of partition K, ``server-K.rN`` for its read replica N."""
        return f"server-{self.part_id}" + (f".r{self.replica}" if self.replica else "")


@dataclass(frozen=True)
class CheckpointSettings:
    """Periodic server-side checkpoints (``docs/reliability.md``); all optional.

    Attributes:
        path: the folder (server ``k`` writes ``path/part-k/ckpt-N``), on each server's host.
        every_s: checkpoint when this many seconds passed and something changed.
        every_updates: checkpoint after this many updates.
        keep: complete checkpoints kept per server.
        durability: ``checkpoint`` (a crash loses at most ``every_updates`` updates or ``every_s``
            seconds of them) or ``wal`` (every write is appended to a write-ahead log under ``path``
            before it is answered; a crash loses none).
        fsync: with ``wal``, sync the log before answering (survives a power loss, not only a crash).
        root: the folder named checkpoints (``graphstore.client.checkpoint.save(NAME)``) live under on
            each server's host (``--checkpoint-root``); None: ``checkpoints/`` beside the partition
            config.
    """

    path: str | None = None
    every_s: float | None = None
    every_updates: int | None = None
    keep: int = DEFAULT_CHECKPOINT_KEEP
    durability: str = "checkpoint"
    fsync: bool = False
    root: str | None = None


@dataclass(frozen=True, kw_only=True)
class ClusterConfig:
    """A validated cluster config. Paths are absolute, with ``~`` expanded.

    Attributes:
        servers: the owner of each partition (the first entry of its ``part_id`` in the YAML), sorted
            by ``part_id`` (0 .. num_parts - 1).
        read_replicas: the further entries of a ``part_id`` (read replicas), sorted by
            ``(part_id, replica)``; empty without replicas.
        path: the YAML file this came from (what ``graphstore launch`` puts in ``GRAPHSTORE_CONFIG``),
            or the name a parsed mapping was given (``<dict>``); empty when built in code.
        graph_name: the graph's name, checked against the partition config and the servers; None
            (trainers, ``status``, ``stop``): take the servers'.
        part_config: the partition config ``NAME.json``; required by ``graphstore launch``, optional
            for trainers (the servers report theirs).
        trainer_hosts: hosts the trainers run on (``graphstore launch`` starts
            ``trainers_per_host`` on each; the first one hosts rank 0 and ``MASTER_ADDR``).
        trainers_per_host: trainer processes per trainer host.
        master_port: ``MASTER_PORT`` for the trainers; None picks a free port.
        remote_exec: the command template starting a process on another host.
        remote_python: the Python interpreter on remote hosts; None: the same path as here.
        server_args: extra arguments appended to every ``graphstore server`` command.
        rpc: deadlines, retries and chunking of calls.
        local_read: ``auto`` (trainers read the co-located partition's read-only data from its files
            when its server runs on their host and the files are readable), ``on`` (whenever the files
            are readable, whatever the host; an error when they are not) or ``off``.
        local_part_id: pins the partition trainers read locally (default: the client decides).
        background_nice: how much lower the trainers schedule their background threads (RPC pool,
            loader workers) than the training thread, 0..19 (see :mod:`graphstore.priority`).
        restart: ``no`` or ``on-failure``: a server that exits with an error is restarted (from its
            latest periodic checkpoint when ``checkpoint.path`` is set).
        max_restarts: restarts allowed per server over the launch (then the launch fails).
        checkpoint: periodic server checkpoints.
        tls: TLS settings, or None.
        token: the shared token (read from ``token_file`` when that is given), or None.
        token_file: the file the token came from (servers on other hosts read the same path).
        allow_short_token: accept a token shorter than 16 characters.
        metrics_port: Prometheus metrics: server ``k`` serves them on ``metrics_port + k``; None: off.
        metrics_host: the interface the metrics endpoint binds (None: loopback).
        limits: the bounds every request to the servers is held to (``docs/server.md``).
    """

    servers: tuple[ServerSpec, ...]
    read_replicas: tuple[ServerSpec, ...] = ()
    path: str = ""
    graph_name: str | None = None
    part_config: str | None = None
    trainer_hosts: tuple[str, ...] = (DEFAULT_TRAINER_HOST,)
    trainers_per_host: int = 1
    master_port: int | None = None
    remote_exec: str = DEFAULT_REMOTE_EXEC
    remote_python: str | None = None
    server_args: tuple[str, ...] = ()
    rpc: RpcPolicy = field(default_factory=RpcPolicy)
    local_read: str = "auto"
    local_part_id: int | None = None
    background_nice: int = DEFAULT_BACKGROUND_NICE
    restart: str = "no"
    max_restarts: int = DEFAULT_MAX_RESTARTS
    checkpoint: CheckpointSettings = field(default_factory=CheckpointSettings)
    tls: TlsSettings | None = None
    token: str | None = field(default=None, repr=False)
    token_file: str | None = None
    allow_short_token: bool = False
    metrics_port: int | None = None
    metrics_host: str | None = None
    limits: RequestLimits = field(default_factory=RequestLimits)

    @property
    def num_parts(self) -> int:
        """The number of partitions (one server each)."""
        return len(self.servers)

    @property
    def num_trainers(self) -> int:
        """Total trainer processes (the trainers' ``WORLD_SIZE``)."""
        return self.trainers_per_host * len(self.trainer_hosts)

    @property
    def addresses(self) -> list[str]:
        """``host:port`` of each server, indexed by partition."""
        return [server.address for server in self.servers]

    @property
    def all_servers(self) -> tuple[ServerSpec, ...]:
        """Every server process of the cluster: the owners, then the read replicas."""
        return self.servers + self.read_replicas

    def replicas_of(self, part_id: int) -> tuple[ServerSpec, ...]:
        """The servers of partition ``part_id``: its owner first, then its read replicas in order."""
        return (self.servers[part_id],) + tuple(s for s in self.read_replicas if s.part_id == part_id)

    def metrics_port_of(self, part_id: int, replica: int = 0) -> int | None:
        """The metrics port of a server, or None when off: ``metrics_port + part_id`` for an owner; the
        read replicas follow the owners (``metrics_port + num_parts + i`` for the ``i``-th replica of
        :attr:`read_replicas`).

        Raises:
            KeyError: no read replica ``replica`` of ``part_id`` in the config.
        """
        if self.metrics_port is None:
            return None
        if replica == 0:
            return self.metrics_port + part_id
        for index, spec in enumerate(self.read_replicas):
            if (spec.part_id, spec.replica) == (part_id, replica):
                return self.metrics_port + self.num_parts + index
        raise KeyError(f"replica: partition {part_id} has no read replica {replica}")

    def channel_security(self):
        """How callers (trainers, launch, status, stop) reach the servers: TLS and the token.

        The token is the config's, else the ``GRAPHSTORE_TOKEN`` environment variable when set (the
        variable local servers read too). A client certificate is presented only with
        ``tls.client_auth``.

        Returns:
            A :class:`graphstore.auth.ChannelSecurity`.

        Raises:
            ConfigError: an invalid ``GRAPHSTORE_TOKEN``.
        """
        from graphstore.auth import TOKEN_ENV, ChannelSecurity, validate_token

        token = self.token
        if token is None and os.environ.get(TOKEN_ENV):
            try:
                token = validate_token(os.environ[TOKEN_ENV], f"environment variable {TOKEN_ENV}", True)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        tls = self.tls
        if tls is None:
            return ChannelSecurity(token=token)
        return ChannelSecurity(
            ca=tls.ca,
            cert=tls.cert if tls.client_auth else None,
            key=tls.key if tls.client_auth else None,
            server_name=tls.server_name,
            token=token,
            use_tls=True,
        )
