"""The settings of one partition server process (``graphstore server``'s flags, or a cluster config's
entry for this server) and their validation."""

from __future__ import annotations

from dataclasses import dataclass, field

from graphstore.auth import validate_token
from graphstore.config.schema import DEFAULT_CHECKPOINT_KEEP, DURABILITY_MODES
from graphstore.limits import RequestLimits
from graphstore.server.durability.periodic_checkpoint import CheckpointPolicy


@dataclass
class ServerConfig:
    """Settings of one partition server process.

    Attributes:
        part_config: path of the partition config ``NAME.json``.
        part_id: the partition this server holds.
        host: interface to bind (``0.0.0.0`` for every interface).
        port: TCP port; 0 picks a free one (printed in the startup line).
        writable_features: load the partition's features into memory and allow writes to them.
        read_replica: serve as a read replica of the partition: its files' read-only data and
            structure only (every write, run-time tensor and checkpoint call is refused with
            PermissionError; they go to the partition's owner), no periodic checkpoints or log.
        max_message_bytes: gRPC send/receive limit (clients split requests below it).
        num_threads: worker threads answering calls (a waiting barrier participant holds none); at most a
            quarter of them hold clients' open call streams (``server/call_stream.py``).
        grace_s: on shutdown, how long calls in flight may take to finish.
        token: the shared token every call but health checks must carry (None: no check).
        allow_short_token: accept a token shorter than 16 characters.
        tls_cert, tls_key: the server's TLS certificate and key (PEM); TLS is on when given.
        tls_ca: a CA bundle; when given, clients must present a certificate it signed (mutual TLS).
        metrics_port: serve Prometheus metrics on this port (None: off; 0: a free port).
        metrics_host: the interface the metrics endpoint binds (loopback unless configured).
        restore_from: a checkpoint folder to restore after loading, before serving.
        checkpoint_on_exit: a folder to checkpoint every run-time tensor to on a clean shutdown.
        checkpoint_dir: the periodic checkpoints' folder (this server writes ``DIR/part-K``).
        checkpoint_every_s, checkpoint_every_updates: when to write them (either or both).
        checkpoint_keep: how many complete periodic checkpoints to keep.
        restore_latest: restore the newest periodic checkpoint under ``checkpoint_dir`` before serving.
        durability: ``checkpoint`` (answers wait for the periodic checkpoints' loss bound) or ``wal``
            (every write is appended to a write-ahead log under ``checkpoint_dir`` before it is
            answered; a restart replays the log on top of the newest checkpoint).
        fsync: with ``wal``, sync the log before answering (survives a power loss, not only a crash).
        checkpoint_root: the folder the names of Checkpoint / Restore calls are confined to (None:
            ``checkpoints/`` beside the partition config).
        limits: the bounds every request is held to (:class:`~graphstore.limits.RequestLimits`).
    """

    part_config: str
    part_id: int
    host: str = "127.0.0.1"
    port: int = 0
    writable_features: bool = False
    read_replica: bool = False
    max_message_bytes: int = 256 * 1024 * 1024
    num_threads: int = 32
    grace_s: float = 8.0
    token: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    metrics_port: int | None = None
    restore_from: str | None = None
    checkpoint_on_exit: str | None = None
    checkpoint_dir: str | None = None
    checkpoint_every_s: float | None = None
    checkpoint_every_updates: int | None = None
    checkpoint_keep: int = DEFAULT_CHECKPOINT_KEEP
    restore_latest: bool = False
    durability: str = "checkpoint"
    fsync: bool = False
    allow_short_token: bool = False
    metrics_host: str = "127.0.0.1"
    checkpoint_root: str | None = None
    limits: RequestLimits = field(default_factory=RequestLimits)

    def validate(self) -> None:
        """Check value ranges.

        Raises:
            ValueError: naming the field and its value.
        """
        if self.part_id < 0:
            raise ValueError(f"part_id must be >= 0, got {self.part_id}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in [0, 65535], got {self.port}")
        if self.num_threads < 2:
            raise ValueError(f"num_threads must be >= 2, got {self.num_threads}")
        if self.max_message_bytes < 1024 * 1024:
            raise ValueError(f"max_message_bytes must be >= 1 MiB, got {self.max_message_bytes}")
        if not 0 <= self.grace_s <= 60:
            raise ValueError(f"grace_s must be in [0, 60], got {self.grace_s}")
        if self.token is not None:
            validate_token(self.token, allow_short=self.allow_short_token)
        self.limits.validate()
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together: give both or neither")
        if self.tls_ca is not None and self.tls_cert is None:
            raise ValueError("tls_ca (client certificates) needs tls_cert and tls_key")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ValueError(f"metrics_port must be in [0, 65535], got {self.metrics_port}")
        if self.checkpoint_policy() is not None:
            self.checkpoint_policy().validate()
        elif self.checkpoint_every_s is not None or self.checkpoint_every_updates is not None:
            raise ValueError("checkpoint_every_s / checkpoint_every_updates need checkpoint_dir")
        if self.restore_latest and not self.checkpoint_dir:
            raise ValueError("restore_latest needs checkpoint_dir")
        if self.restore_latest and self.restore_from:
            raise ValueError("restore_latest and restore_from exclude each other")
        if self.durability not in DURABILITY_MODES:
            raise ValueError(f"durability must be one of {list(DURABILITY_MODES)}, got {self.durability!r}")
        if self.durability == "wal" and not self.checkpoint_dir:
            raise ValueError("durability 'wal' needs checkpoint_dir (the log lives beside the checkpoints)")
        if self.fsync and self.durability != "wal":
            raise ValueError("fsync applies to durability 'wal' only")
        if self.read_replica:
            given = [
                name
                for name, value in (
                    ("writable_features", self.writable_features),
                    ("checkpoint_dir", self.checkpoint_dir),
                    ("restore_from", self.restore_from),
                    ("checkpoint_on_exit", self.checkpoint_on_exit),
                )
                if value
            ]
            if given:
                raise ValueError(f"read_replica holds no writable state: {', '.join(given)} not allowed")

    def checkpoint_policy(self) -> CheckpointPolicy | None:
        """The periodic checkpoint policy, or None without ``checkpoint_dir``."""
        if not self.checkpoint_dir:
            return None
        return CheckpointPolicy(
            root=self.checkpoint_dir,
            every_s=self.checkpoint_every_s,
            every_updates=self.checkpoint_every_updates,
            keep=self.checkpoint_keep,
        )
