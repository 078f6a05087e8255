"""The cluster YAML: which servers serve which partition, how trainers run, and call policy.

``graphstore launch``, ``graphstore status`` and ``graphstore stop`` read it through
:func:`load_cluster_config`; trainers read the same file through ``GRAPHSTORE_CONFIG``.
Every problem in the file is reported as one :class:`~graphstore.errors.ConfigError` whose
message names the file and the field (``servers[1].port``, ``rpc.deadline_s``, ...).

A minimal file::

    graph_name: cora
    part_config: ../data/cora/cora.json     # relative paths are relative to this file's folder
    servers:
      - {host: 127.0.0.1, port: 50051, part_id: 0}
      - {host: 127.0.0.1, port: 50052, part_id: 1}
    trainers_per_host: 2

Every field is described in ``docs/launcher.md``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import shlex
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from graphstore.errors import ConfigError
from graphstore.priority import DEFAULT_BACKGROUND_NICE, MAX_NICE
from graphstore.rpc import RpcPolicy, TlsSettings

DEFAULT_REMOTE_EXEC = "ssh -o BatchMode=yes {host} {command}"
LOCAL_READ_MODES = ("auto", "on", "off")
RESTART_POLICIES = ("no", "on-failure")
REMOTE_EXEC_FIELDS = ("host", "command")
DEFAULT_TRAINER_HOST = "127.0.0.1"

_TOP_LEVEL_FIELDS = (
    "graph_name",
    "part_config",
    "servers",
    "trainers_per_host",
    "num_trainers",
    "trainer_hosts",
    "master_port",
    "remote_exec",
    "remote_python",
    "server_args",
    "rpc",
    "local_read",
    "local_part_id",
    "background_nice",
    "restart",
    "max_restarts",
    "checkpoint",
    "tls",
    "token",
    "token_file",
    "metrics_port",
)
DEFAULT_MAX_RESTARTS = 3
DEFAULT_CHECKPOINT_KEEP = 3
_SERVER_FIELDS = ("host", "port", "part_id", "exec_host", "bind_host")


@dataclass(frozen=True)
class ServerSpec:
    """One partition server of the cluster.

    Attributes:
        host: the address clients (trainers, ``graphstore status``) connect to.
        port: its TCP port.
        part_id: the partition it serves.
        exec_host: where ``graphstore launch`` starts it: the ``{host}`` of the remote-exec
            template (an ssh host name, a network namespace...). Defaults to ``host``.
        bind_host: the address the server binds (``graphstore server --host``). Defaults to
            ``host``; ``0.0.0.0`` serves on every interface.
    """

    host: str
    port: int
    part_id: int
    exec_host: str
    bind_host: str

    @property
    def address(self) -> str:
        """``host:port`` as clients dial it (IPv6 literals bracketed)."""
        return format_address(self.host, self.port)


@dataclass(frozen=True)
class CheckpointSettings:
    """Periodic server-side checkpoints (``docs/reliability.md``); all optional.

    Attributes:
        path: the folder (server ``k`` writes ``path/part-k/ckpt-N``), on each server's host.
        every_s: checkpoint when this many seconds passed and something changed.
        every_updates: checkpoint after this many updates.
        keep: complete checkpoints kept per server.
    """

    path: str | None = None
    every_s: float | None = None
    every_updates: int | None = None
    keep: int = DEFAULT_CHECKPOINT_KEEP


@dataclass(frozen=True)
class ClusterConfig:
    """A validated cluster YAML. Paths are absolute.

    Attributes:
        path: the YAML file this came from.
        graph_name: the graph's name (must match the partition config's ``graph_name``).
        part_config: the partition config ``NAME.json``.
        servers: one per partition, sorted by ``part_id``.
        trainer_hosts: hosts the trainers run on (``graphstore launch`` starts
            ``trainers_per_host`` on each; the first one hosts rank 0 and ``MASTER_ADDR``).
        trainers_per_host: trainer processes per trainer host.
        master_port: ``MASTER_PORT`` for the trainers; None picks a free port.
        remote_exec: the command template starting a process on another host.
        remote_python: the Python interpreter on remote hosts; None: the same path as here.
        server_args: extra arguments appended to every ``graphstore server`` command.
        rpc: deadlines and retry policy.
        local_read: ``auto``, ``on`` or ``off``: trainers read their co-located partition from its files.
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
        metrics_port: Prometheus metrics: server ``k`` serves them on ``metrics_port + k``; None: off.
    """

    path: str
    graph_name: str
    part_config: str
    servers: tuple[ServerSpec, ...]
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
    metrics_port: int | None = None

    @property
    def num_parts(self) -> int:
        return len(self.servers)

    def metrics_port_of(self, part_id: int) -> int | None:
        """The metrics port of server ``part_id`` (``metrics_port + part_id``), or None when off."""
        return None if self.metrics_port is None else self.metrics_port + part_id

    def channel_security(self):
        """How launch, status and stop reach the servers (TLS and token), as a
        :class:`graphstore.auth.ChannelSecurity`."""
        from graphstore.auth import ChannelSecurity

        tls = self.tls
        if tls is None:
            return ChannelSecurity(token=self.token)
        return ChannelSecurity(
            ca=tls.ca,
            cert=tls.cert if tls.client_auth else None,
            key=tls.key if tls.client_auth else None,
            server_name=tls.server_name,
            token=self.token,
            use_tls=True,
        )

    @property
    def num_trainers(self) -> int:
        """Total trainer processes (the trainers' ``WORLD_SIZE``)."""
        return self.trainers_per_host * len(self.trainer_hosts)

    @property
    def addresses(self) -> list[str]:
        """``host:port`` of each server, indexed by partition."""
        return [server.address for server in self.servers]


def format_address(host: str, port: int) -> str:
    """``host:port``, with IPv6 literals in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def validate_remote_exec(template: str, field_name: str = "remote_exec", source: str | None = None) -> str:
    """Check a remote-exec template: shell-like words, placeholders only ``{host}`` and ``{command}``.

    Args:
        template: e.g. ``ssh -o BatchMode=yes {host} {command}``.
        field_name: the name used in error messages.
        source: the config file, named in error messages when given.

    Returns:
        The template unchanged.

    Raises:
        ConfigError: unbalanced quotes, an unknown placeholder, or no ``{command}``.
    """
    where = f"cluster config {source!r}: field {field_name!r}" if source else f"field {field_name!r}"
    if not isinstance(template, str) or not template.strip():
        raise ConfigError(f"{where} must be a non-empty command template, got {template!r}")
    try:
        shlex.split(template)
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise ConfigError(f"{where} = {template!r} is not a valid template: {exc}") from None
    unknown = sorted(fields - set(REMOTE_EXEC_FIELDS))
    if unknown:
        raise ConfigError(
            f"{where} = {template!r} uses unknown placeholder {{{unknown[0]}}}; "
            f"allowed: {{host}}, {{command}}"
        )
    if "command" not in fields:
        raise ConfigError(f"{where} = {template!r} has no {{command}} placeholder")
    return template


def load_cluster_config(path: str | os.PathLike, check_files: bool = True) -> ClusterConfig:
    """Read and validate a cluster YAML.

    Args:
        path: the YAML file.
        check_files: also check the files it names on this machine: the partition config exists,
            its ``num_parts`` equals the number of servers and its ``graph_name`` matches (and the
            TLS files exist). ``graphstore status`` / ``stop`` pass False: they only need addresses.

    Returns:
        The validated :class:`ClusterConfig`.

    Raises:
        ConfigError: the file is missing or unreadable, is not valid YAML, or a field is missing,
            has the wrong type or an out-of-range value; the message names the field.
    """
    source = Path(path)
    try:
        text = source.read_text()
    except FileNotFoundError:
        raise ConfigError(f"cluster config {str(source)!r}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"cluster config {str(source)!r}: cannot read: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"cluster config {str(source)!r}: YAML syntax error{where}: {problem}") from None
    return parse_cluster_config(data, source.resolve().parent, str(source.resolve()), check_files=check_files)


def parse_cluster_config(
    data: Any, base_dir: str | os.PathLike, source: str = "<dict>", check_files: bool = True
) -> ClusterConfig:
    """Validate an already-parsed cluster YAML document (see :func:`load_cluster_config`).

    Args:
        data: the document (a mapping).
        base_dir: the folder relative paths are resolved against.
        source: the name used in error messages (the file path).
        check_files: check the partition config (and TLS files) on this machine.

    Returns:
        The validated :class:`ClusterConfig`.

    Raises:
        ConfigError: naming the first invalid field.
    """
    reader = _FieldReader(source, Path(base_dir))
    if data is None:
        raise ConfigError(f"cluster config {source!r} is empty")
    if not isinstance(data, Mapping):
        raise ConfigError(f"cluster config {source!r} must be a mapping of fields, got {type(data).__name__}")
    reader.reject_unknown(data, _TOP_LEVEL_FIELDS, prefix="")

    graph_name = reader.string(data, "graph_name")
    part_config = reader.path(data, "part_config")
    servers = _read_servers(reader, data)

    trainer_hosts = tuple(reader.string_list(data, "trainer_hosts", default=[DEFAULT_TRAINER_HOST]))
    if not trainer_hosts:
        raise reader.error("trainer_hosts", "must list at least one host")
    per_host = reader.integer(data, "trainers_per_host", default=None, minimum=1)
    total = reader.integer(data, "num_trainers", default=None, minimum=1)
    if per_host is None and total is None:
        per_host = 1
    elif per_host is None:
        if total % len(trainer_hosts):
            raise reader.error(
                "num_trainers", f"= {total} is not a multiple of the {len(trainer_hosts)} trainer_hosts"
            )
        per_host = total // len(trainer_hosts)
    elif total is not None and total != per_host * len(trainer_hosts):
        raise reader.error(
            "num_trainers",
            f"= {total} disagrees with trainers_per_host {per_host} x {len(trainer_hosts)} trainer_hosts",
        )

    rpc = _read_rpc(reader, data)
    local_read = reader.choice(data, "local_read", LOCAL_READ_MODES, default="auto")
    local_part_id = reader.integer(data, "local_part_id", default=None, minimum=0)
    if local_part_id is not None and local_part_id >= len(servers):
        raise reader.error("local_part_id", f"= {local_part_id} is not a partition (0..{len(servers) - 1})")
    background_nice = reader.integer(data, "background_nice", default=DEFAULT_BACKGROUND_NICE, minimum=0)
    if background_nice > MAX_NICE:
        raise reader.error("background_nice", f"= {background_nice} must be <= {MAX_NICE}")
    restart = reader.choice(data, "restart", RESTART_POLICIES, default="no")
    max_restarts = reader.integer(data, "max_restarts", default=DEFAULT_MAX_RESTARTS, minimum=0)
    checkpoint = _read_checkpoint(reader, data)
    tls = _read_tls(reader, data, check_files)
    token, token_file = _read_token(reader, data)
    metrics_port = reader.port(data, "metrics_port", default=None)
    if metrics_port is not None and metrics_port + len(servers) - 1 > 65535:
        raise reader.error(
            "metrics_port",
            f"= {metrics_port}: server k uses metrics_port + k, and {len(servers)} servers go past 65535",
        )
    master_port = reader.port(data, "master_port", default=None)
    remote_exec = validate_remote_exec(
        reader.string(data, "remote_exec", default=DEFAULT_REMOTE_EXEC), "remote_exec", source
    )
    remote_python = reader.string(data, "remote_python", default=None)
    server_args = tuple(reader.string_list(data, "server_args", default=[]))

    config = ClusterConfig(
        path=source,
        graph_name=graph_name,
        part_config=part_config,
        servers=servers,
        trainer_hosts=trainer_hosts,
        trainers_per_host=per_host,
        master_port=master_port,
        remote_exec=remote_exec,
        remote_python=remote_python,
        server_args=server_args,
        rpc=rpc,
        local_read=local_read,
        local_part_id=local_part_id,
        background_nice=background_nice,
        restart=restart,
        max_restarts=max_restarts,
        checkpoint=checkpoint,
        tls=tls,
        token=token,
        token_file=token_file,
        metrics_port=metrics_port,
    )
    if check_files:
        check_partition_config(config)
    return config


def check_partition_config(config: ClusterConfig) -> None:
    """Check the partition config on disk against the cluster config.

    Raises:
        ConfigError: the file is missing or unreadable, or its ``num_parts`` / ``graph_name``
            disagree with the cluster config.
    """
    where = f"cluster config {config.path!r}: field 'part_config'"
    try:
        with open(config.part_config) as handle:
            meta = json.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{where}: file not found: {config.part_config}") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{where}: cannot read {config.part_config}: {exc}") from None
    num_parts = meta.get("num_parts") if isinstance(meta, dict) else None
    if not isinstance(num_parts, int):
        raise ConfigError(f"{where}: {config.part_config} has no integer 'num_parts'")
    if num_parts != len(config.servers):
        raise ConfigError(
            f"cluster config {config.path!r}: field 'servers' lists {len(config.servers)} servers "
            f"but part_config {config.part_config} has num_parts {num_parts}"
        )
    disk_name = meta.get("graph_name")
    if disk_name is not None and disk_name != config.graph_name:
        raise ConfigError(
            f"cluster config {config.path!r}: field 'graph_name' = {config.graph_name!r} "
            f"but part_config {config.part_config} has graph_name {disk_name!r}"
        )


def _normalized_host(host: str) -> str:
    """A key under which two spellings of the same loopback address compare equal."""
    if host.lower() == "localhost":
        return "127.0.0.1"
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return host.lower()


def _read_servers(reader: _FieldReader, data: Mapping) -> tuple[ServerSpec, ...]:
    entries = reader.require(data, "servers")
    if not isinstance(entries, list) or not entries:
        raise reader.error("servers", f"must be a non-empty list of {{host, port, part_id}}, got {entries!r}")
    servers: list[ServerSpec] = []
    seen_address: dict[tuple[str, int], int] = {}
    seen_part: dict[int, int] = {}
    for index, entry in enumerate(entries):
        prefix = f"servers[{index}]."
        if not isinstance(entry, Mapping):
            raise reader.error(
                f"servers[{index}]", f"must be a mapping with host, port, part_id, got {entry!r}"
            )
        reader.reject_unknown(entry, _SERVER_FIELDS, prefix=prefix)
        host = reader.string(entry, "host", prefix=prefix)
        port = reader.port(entry, "port", prefix=prefix)
        part_id = reader.integer(entry, "part_id", prefix=prefix, minimum=0)
        exec_host = reader.string(entry, "exec_host", prefix=prefix, default=host)
        bind_host = reader.string(entry, "bind_host", prefix=prefix, default=host)
        key = (_normalized_host(host), port)
        if key in seen_address:
            raise reader.error(
                f"servers[{index}]",
                f"duplicates address {format_address(host, port)} of servers[{seen_address[key]}]",
            )
        if part_id in seen_part:
            raise reader.error(
                f"{prefix}part_id", f"= {part_id} is already served by servers[{seen_part[part_id]}]"
            )
        seen_address[key] = index
        seen_part[part_id] = index
        servers.append(ServerSpec(host, port, part_id, exec_host, bind_host))
    expected = set(range(len(servers)))
    if set(seen_part) != expected:
        missing = min(expected - set(seen_part))
        raise reader.error(
            "servers", f"has no server for part_id {missing} (part ids must be 0..{len(servers) - 1})"
        )
    return tuple(sorted(servers, key=lambda server: server.part_id))


def _read_rpc(reader: _FieldReader, data: Mapping) -> RpcPolicy:
    section = reader.section(data, "rpc")
    defaults = RpcPolicy()
    if section is None:
        return defaults
    reader.reject_unknown(section, tuple(f.name for f in dataclasses.fields(RpcPolicy)), "rpc.")
    rpc = RpcPolicy(
        deadline_s=reader.positive(section, "deadline_s", defaults.deadline_s, prefix="rpc."),
        connect_timeout_s=reader.positive(
            section, "connect_timeout_s", defaults.connect_timeout_s, prefix="rpc."
        ),
        max_retries=reader.integer(
            section, "max_retries", prefix="rpc.", default=defaults.max_retries, minimum=0
        ),
        backoff_initial_s=reader.positive(
            section, "backoff_initial_s", defaults.backoff_initial_s, prefix="rpc."
        ),
        backoff_max_s=reader.positive(section, "backoff_max_s", defaults.backoff_max_s, prefix="rpc."),
        backoff_multiplier=reader.positive(
            section, "backoff_multiplier", defaults.backoff_multiplier, prefix="rpc."
        ),
        max_message_bytes=reader.integer(
            section, "max_message_bytes", prefix="rpc.", default=defaults.max_message_bytes, minimum=1
        ),
        chunk_bytes=reader.integer(
            section, "chunk_bytes", prefix="rpc.", default=defaults.chunk_bytes, minimum=1
        ),
    )
    if rpc.backoff_max_s < rpc.backoff_initial_s:
        raise reader.error(
            "rpc.backoff_max_s",
            f"= {rpc.backoff_max_s} is below rpc.backoff_initial_s {rpc.backoff_initial_s}",
        )
    return rpc


def _read_checkpoint(reader: _FieldReader, data: Mapping) -> CheckpointSettings:
    section = reader.section(data, "checkpoint")
    if section is None:
        return CheckpointSettings()
    reader.reject_unknown(section, ("path", "every_s", "every_updates", "keep"), "checkpoint.")
    settings = CheckpointSettings(
        path=reader.path(section, "path", prefix="checkpoint.", default=None),
        every_s=reader.positive(section, "every_s", None, prefix="checkpoint."),
        every_updates=reader.integer(section, "every_updates", prefix="checkpoint.", default=None, minimum=1),
        keep=reader.integer(
            section, "keep", prefix="checkpoint.", default=DEFAULT_CHECKPOINT_KEEP, minimum=1
        ),
    )
    if settings.every_s is not None and settings.every_s > 604800:
        raise reader.error("checkpoint.every_s", f"= {settings.every_s} must be at most 604800 (a week)")
    if settings.path is None and (settings.every_s is not None or settings.every_updates is not None):
        raise reader.error("checkpoint.path", "is missing (every_s / every_updates need a folder)")
    return settings


def _read_tls(reader: _FieldReader, data: Mapping, check_files: bool) -> TlsSettings | None:
    section = reader.section(data, "tls")
    if section is None:
        return None
    reader.reject_unknown(section, ("cert", "key", "ca", "client_auth", "server_name"), "tls.")
    client_auth = section.get("client_auth", False)
    if not isinstance(client_auth, bool):
        raise reader.error("tls.client_auth", f"must be true or false, got {client_auth!r}")
    tls = TlsSettings(
        cert=reader.path(section, "cert", prefix="tls.", default=None),
        key=reader.path(section, "key", prefix="tls.", default=None),
        ca=reader.path(section, "ca", prefix="tls.", default=None),
        client_auth=client_auth,
        server_name=reader.string(section, "server_name", prefix="tls.", default=None),
    )
    if (tls.cert is None) != (tls.key is None):
        missing = "tls.key" if tls.key is None else "tls.cert"
        raise reader.error(missing, "is missing (tls.cert and tls.key go together)")
    if tls.cert is None and tls.ca is None:
        raise reader.error("tls", "names no files (give cert + key, and/or ca)")
    if tls.client_auth and (tls.ca is None or tls.cert is None):
        raise reader.error("tls.client_auth", "needs tls.ca (to verify clients) and tls.cert + tls.key")
    if check_files:
        for name in ("cert", "key", "ca"):
            value = getattr(tls, name)
            if value is not None and not os.path.isfile(value):
                raise reader.error(f"tls.{name}", f"file not found: {value}")
    return tls


def _read_token(reader: _FieldReader, data: Mapping) -> tuple[str | None, str | None]:
    """``(token, token_file)``: the token from the YAML or read from its file (needed by launch,
    status and stop alike: the Shutdown and Stats calls carry it)."""
    from graphstore.auth import read_token_file, validate_token

    if data.get("token") is not None and data.get("token_file") is not None:
        raise reader.error("token", "and token_file exclude each other (give one)")
    token_file = reader.path(data, "token_file", default=None)
    if token_file is not None:
        try:
            return read_token_file(token_file, "token_file"), token_file
        except (FileNotFoundError, ValueError) as exc:
            raise reader.error("token_file", f"is not usable: {exc}") from None
    token = data.get("token")
    if token is None:
        return None, None
    if not isinstance(token, str):
        raise reader.error("token", f"must be a string, got a {type(token).__name__}")
    try:
        return validate_token(token, "token"), None
    except ValueError as exc:
        raise reader.error("token", f"is not valid: {exc}") from None


_MISSING = object()


class _FieldReader:
    """Typed field access that turns every problem into a ConfigError naming the field."""

    def __init__(self, source: str, base_dir: Path):
        self.source = source
        self.base_dir = base_dir

    def error(self, name: str, problem: str) -> ConfigError:
        return ConfigError(f"cluster config {self.source!r}: field {name!r} {problem}")

    def reject_unknown(self, mapping: Mapping, allowed: tuple[str, ...], prefix: str) -> None:
        for key in mapping:
            if key not in allowed:
                raise self.error(f"{prefix}{key}", f"is not a known field (known: {', '.join(allowed)})")

    def require(self, mapping: Mapping, name: str, prefix: str = "") -> Any:
        if name not in mapping or mapping[name] is None:
            raise self.error(f"{prefix}{name}", "is missing")
        return mapping[name]

    def _get(self, mapping: Mapping, name: str, prefix: str, default: Any) -> tuple[Any, bool]:
        """``(value, given)``: the field's value, or the default with ``given=False`` when absent."""
        if default is _MISSING:
            return self.require(mapping, name, prefix), True
        value = mapping.get(name)
        return (default, False) if value is None else (value, True)

    def string(self, mapping: Mapping, name: str, prefix: str = "", default: Any = _MISSING) -> Any:
        value, given = self._get(mapping, name, prefix, default)
        if not given:
            return value
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or str(value) == "":
            raise self.error(f"{prefix}{name}", f"must be a non-empty string, got {value!r}")
        return str(value)

    def string_list(self, mapping: Mapping, name: str, default: list[str], prefix: str = "") -> list[str]:
        value, _ = self._get(mapping, name, prefix, default)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or any(isinstance(v, (bool, list, dict)) or v is None for v in value):
            raise self.error(f"{prefix}{name}", f"must be a list of strings, got {value!r}")
        return [str(v) for v in value]

    def integer(
        self,
        mapping: Mapping,
        name: str,
        prefix: str = "",
        default: Any = _MISSING,
        minimum: int | None = None,
    ) -> Any:
        value, given = self._get(mapping, name, prefix, default)
        if not given:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"{prefix}{name}", f"must be an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(f"{prefix}{name}", f"= {value} must be >= {minimum}")
        return value

    def port(self, mapping: Mapping, name: str, prefix: str = "", default: Any = _MISSING) -> Any:
        value, given = self._get(mapping, name, prefix, default)
        if not given:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"{prefix}{name}", f"must be an integer port, got {value!r}")
        if not 1 <= value <= 65535:
            raise self.error(f"{prefix}{name}", f"= {value} is out of range 1..65535")
        return value

    def positive(self, mapping: Mapping, name: str, default: Any, prefix: str = "") -> Any:
        value = mapping.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"{prefix}{name}", f"must be a number, got {value!r}")
        if not value > 0:
            raise self.error(f"{prefix}{name}", f"= {value} must be > 0")
        return float(value)

    def choice(self, mapping: Mapping, name: str, choices: tuple[str, ...], default: str) -> str:
        value = mapping.get(name, default)
        # YAML 1.1 reads the bare words on / off / no / yes as booleans.
        if value is True:
            value = "on"
        elif value is False:
            value = "off" if "off" in choices else "no"
        if value not in choices:
            raise self.error(name, f"= {value!r} must be one of {', '.join(choices)}")
        return value

    def section(self, mapping: Mapping, name: str) -> Mapping | None:
        value = mapping.get(name)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self.error(name, f"must be a mapping, got {value!r}")
        return value

    def path(self, mapping: Mapping, name: str, prefix: str = "", default: Any = _MISSING) -> Any:
        value = self.string(mapping, name, prefix=prefix, default=default)
        if value is None:
            return None
        if "\x00" in value:
            raise self.error(f"{prefix}{name}", f"= {value!r} is not a valid path (it holds a NUL character)")
        return str((self.base_dir / os.path.expanduser(value)).resolve())
