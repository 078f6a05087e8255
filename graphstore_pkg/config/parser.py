"""Reading a cluster config: the YAML file or an already-parsed mapping into a :class:`ClusterConfig`.

The one parser of the cluster YAML: ``graphstore launch`` / ``status`` / ``stop``, the demo and the
trainers' ``initialize()`` all call it, so one file means the same everywhere. Unknown fields are
errors (typos are caught); every problem is one :class:`~graphstore.errors.ConfigError` naming the
file, the field and the value. Every field is described in ``docs/launcher.md``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from graphstore.config.local_files import check_partition_config, check_tls_files
from graphstore.config.reader import REQUIRED, ConfigFileNotFoundError, FieldReader
from graphstore.config.remote_exec import validate_remote_exec
from graphstore.config.schema import (
    DEFAULT_CHECKPOINT_KEEP,
    DEFAULT_MAX_RESTARTS,
    DEFAULT_REMOTE_EXEC,
    DEFAULT_TRAINER_HOST,
    DURABILITY_MODES,
    LOCAL_READ_MODES,
    RESTART_POLICIES,
    CheckpointSettings,
    ClusterConfig,
    ServerSpec,
    format_address,
)
from graphstore.errors import ConfigError
from graphstore.limits import RequestLimits, limit_kind, limit_names
from graphstore.priority import DEFAULT_BACKGROUND_NICE, MAX_NICE
from graphstore.rpc import RpcPolicy, TlsSettings

TOP_LEVEL_FIELDS = (
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
    "allow_short_token",
    "metrics_port",
    "metrics_host",
    "limits",
)
SERVER_FIELDS = ("host", "port", "part_id", "exec_host", "bind_host")
CHECKPOINT_FIELDS = ("path", "every_s", "every_updates", "keep", "durability", "fsync", "root")
TLS_FIELDS = ("cert", "key", "ca", "client_auth", "server_name")
# The smallest value of each integer rpc field (the float ones must be > 0).
RPC_INTEGER_MINIMUM = {"max_retries": 0, "max_message_bytes": 1, "chunk_bytes": 1}
MAX_CHECKPOINT_EVERY_S = 7 * 24 * 3600


def load_cluster_config(path: str | os.PathLike, check_files: bool = True) -> ClusterConfig:
    """Read and validate a cluster YAML file.

    Args:
        path: the YAML file. Relative paths in it are relative to its folder.
        check_files: what ``graphstore launch`` needs: ``graph_name`` and ``part_config`` are
            required, the partition config exists on this machine with as many partitions as there
            are servers and the same graph name, and the TLS files exist. ``status``, ``stop`` and
            the trainers pass False: they need the servers only.

    Returns:
        The validated :class:`ClusterConfig`.

    Raises:
        ConfigFileNotFoundError: the file does not exist (a ConfigError and a FileNotFoundError).
        ConfigError: the file is unreadable, is not valid YAML, or a field is missing, has the wrong
            type or an out-of-range value; the message names the field and the value.
    """
    source = Path(path)
    try:
        text = source.read_text()
    except FileNotFoundError:
        raise ConfigFileNotFoundError(f"cluster config {str(source)!r}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
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
    """Validate an already-parsed cluster config document (see :func:`load_cluster_config`).

    Args:
        data: the document (a mapping).
        base_dir: the folder relative paths are resolved against.
        source: the name used in error messages (the file path); becomes ``ClusterConfig.path``.
        check_files: the checks ``graphstore launch`` needs (see :func:`load_cluster_config`).

    Returns:
        The validated :class:`ClusterConfig`.

    Raises:
        ConfigError: naming the first invalid field.
    """
    reader = FieldReader(source, Path(base_dir))
    if data is None:
        raise ConfigError(f"cluster config {source!r} is empty")
    if not isinstance(data, Mapping):
        raise ConfigError(f"cluster config {source!r} must be a mapping of fields, got {type(data).__name__}")
    reader.reject_unknown(data, TOP_LEVEL_FIELDS)
    required_for_launch = REQUIRED if check_files else None
    servers, read_replicas = _read_servers(reader, data)
    trainer_hosts, trainers_per_host = _read_trainers(reader, data)
    allow_short_token = reader.boolean(data, "allow_short_token", False)
    token, token_file = _read_token(reader, data, allow_short_token)
    rpc = _read_rpc(reader, data)
    limits = _read_limits(reader, data, rpc)
    config = ClusterConfig(
        path=source,
        graph_name=reader.string(data, "graph_name", default=required_for_launch),
        part_config=reader.path(data, "part_config", default=required_for_launch),
        servers=servers,
        read_replicas=read_replicas,
        trainer_hosts=trainer_hosts,
        trainers_per_host=trainers_per_host,
        master_port=reader.port(data, "master_port", default=None),
        remote_exec=validate_remote_exec(
            reader.string(data, "remote_exec", default=DEFAULT_REMOTE_EXEC), "remote_exec", source
        ),
        remote_python=reader.command(data, "remote_python"),
        server_args=tuple(reader.words(data, "server_args")),
        rpc=rpc,
        local_read=reader.choice(data, "local_read", LOCAL_READ_MODES, default="auto"),
        local_part_id=_read_local_part_id(reader, data, len(servers)),
        background_nice=reader.integer(
            data, "background_nice", default=DEFAULT_BACKGROUND_NICE, minimum=0, maximum=MAX_NICE
        ),
        restart=reader.choice(data, "restart", RESTART_POLICIES, default="no"),
        max_restarts=reader.integer(data, "max_restarts", default=DEFAULT_MAX_RESTARTS, minimum=0),
        checkpoint=_read_checkpoint(reader, data),
        tls=_read_tls(reader, data),
        token=token,
        token_file=token_file,
        allow_short_token=allow_short_token,
        metrics_port=_read_metrics_port(reader, data, len(servers) + len(read_replicas)),
        metrics_host=reader.host(data, "metrics_host", default=None),
        limits=limits,
    )
    if check_files:
        check_tls_files(config)
        check_partition_config(config)
    return config


def _normalized_host(host: str) -> str:
    """A key under which two spellings of the same loopback address compare equal."""
    if host.lower() == "localhost":
        return "127.0.0.1"
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host.lower()


def _read_servers(
    reader: FieldReader, data: Mapping
) -> tuple[tuple[ServerSpec, ...], tuple[ServerSpec, ...]]:
    """``(owners, read_replicas)``: the first entry of each ``part_id`` owns the partition, the
    further ones are its read replicas; both sorted by partition (an entry without ``part_id`` serves
    the partition of its index)."""
    entries = reader.require(data, "servers")
    if not isinstance(entries, list) or not entries:
        raise reader.error("servers", f"must be a non-empty list of {{host, port, part_id}}, got {entries!r}")
    servers: list[ServerSpec] = []
    seen_address: dict[tuple[str, int], int] = {}
    replicas_of: dict[int, int] = {}
    for index, entry in enumerate(entries):
        prefix = f"servers[{index}]."
        if not isinstance(entry, Mapping):
            raise reader.error(
                f"servers[{index}]", f"must be a mapping with host, port, part_id, got {entry!r}"
            )
        reader.reject_unknown(entry, SERVER_FIELDS, prefix=prefix)
        host = reader.host(entry, "host", prefix=prefix)
        port = reader.port(entry, "port", prefix=prefix)
        part_id = reader.integer(entry, "part_id", prefix=prefix, default=index, minimum=0)
        exec_host = reader.host(entry, "exec_host", prefix=prefix, default=host)
        bind_host = reader.host(entry, "bind_host", prefix=prefix, default=host)
        key = (_normalized_host(host), port)
        if key in seen_address:
            raise reader.error(
                f"servers[{index}]",
                f"duplicates address {format_address(host, port)} of servers[{seen_address[key]}]",
            )
        seen_address[key] = index
        replica = replicas_of.get(part_id, 0)
        replicas_of[part_id] = replica + 1
        servers.append(ServerSpec(host, port, part_id, exec_host, bind_host, replica))
    num_parts = len(replicas_of)
    expected = set(range(num_parts))
    if set(replicas_of) != expected:
        missing = min(expected - set(replicas_of))
        raise reader.error(
            "servers",
            f"has no server for part_id {missing} (part ids must be 0..{num_parts - 1}; "
            f"several entries with one part_id are that partition's replicas)",
        )
    ordered = sorted(servers, key=lambda server: (server.part_id, server.replica))
    owners = tuple(server for server in ordered if server.replica == 0)
    return owners, tuple(server for server in ordered if server.replica > 0)


def _read_trainers(reader: FieldReader, data: Mapping) -> tuple[tuple[str, ...], int]:
    """``(trainer_hosts, trainers_per_host)``; ``num_trainers`` is the alternative to the latter."""
    hosts = tuple(reader.hosts(data, "trainer_hosts", default=[DEFAULT_TRAINER_HOST]))
    per_host = reader.integer(data, "trainers_per_host", default=None, minimum=1)
    total = reader.integer(data, "num_trainers", default=None, minimum=1)
    if per_host is None and total is None:
        return hosts, 1
    if per_host is None:
        if total % len(hosts):
            raise reader.error(
                "num_trainers", f"= {total} is not a multiple of the {len(hosts)} trainer_hosts"
            )
        return hosts, total // len(hosts)
    if total is not None and total != per_host * len(hosts):
        raise reader.error(
            "num_trainers",
            f"= {total} disagrees with trainers_per_host {per_host} x {len(hosts)} trainer_hosts",
        )
    return hosts, per_host


def _read_local_part_id(reader: FieldReader, data: Mapping, num_parts: int) -> int | None:
    local_part_id = reader.integer(data, "local_part_id", default=None, minimum=0)
    if local_part_id is not None and local_part_id >= num_parts:
        raise reader.error("local_part_id", f"= {local_part_id} is not a partition (0..{num_parts - 1})")
    return local_part_id


def _read_metrics_port(reader: FieldReader, data: Mapping, num_servers: int) -> int | None:
    metrics_port = reader.port(data, "metrics_port", default=None)
    if metrics_port is not None and metrics_port + num_servers - 1 > 65535:
        raise reader.error(
            "metrics_port",
            f"= {metrics_port}: server k uses metrics_port + k, and {num_servers} servers go past 65535",
        )
    return metrics_port


def _read_rpc(reader: FieldReader, data: Mapping) -> RpcPolicy:
    """The ``rpc`` section: integer fields within their minimum, the others numbers > 0."""
    fields = dataclasses.fields(RpcPolicy)
    section = reader.section(data, "rpc", tuple(spec.name for spec in fields))
    if section is None:
        return RpcPolicy()
    values = {}
    for spec in fields:
        minimum = RPC_INTEGER_MINIMUM.get(spec.name)
        if minimum is not None:
            values[spec.name] = reader.integer(
                section, spec.name, prefix="rpc.", default=spec.default, minimum=minimum
            )
        else:
            values[spec.name] = reader.positive(section, spec.name, spec.default, prefix="rpc.")
    rpc = RpcPolicy(**values)
    if rpc.backoff_max_s < rpc.backoff_initial_s:
        raise reader.error(
            "rpc.backoff_max_s",
            f"= {rpc.backoff_max_s} is below rpc.backoff_initial_s {rpc.backoff_initial_s}",
        )
    return rpc


def _read_checkpoint(reader: FieldReader, data: Mapping) -> CheckpointSettings:
    section = reader.section(data, "checkpoint", CHECKPOINT_FIELDS)
    if section is None:
        return CheckpointSettings()
    settings = CheckpointSettings(
        path=reader.path(section, "path", prefix="checkpoint.", default=None),
        every_s=reader.positive(section, "every_s", None, prefix="checkpoint."),
        every_updates=reader.integer(section, "every_updates", prefix="checkpoint.", default=None, minimum=1),
        keep=reader.integer(
            section, "keep", prefix="checkpoint.", default=DEFAULT_CHECKPOINT_KEEP, minimum=1
        ),
        durability=reader.choice(
            section, "durability", DURABILITY_MODES, default="checkpoint", prefix="checkpoint."
        ),
        fsync=reader.boolean(section, "fsync", False, prefix="checkpoint."),
        root=reader.path(section, "root", prefix="checkpoint.", default=None),
    )
    if settings.every_s is not None and settings.every_s > MAX_CHECKPOINT_EVERY_S:
        raise reader.error(
            "checkpoint.every_s", f"= {settings.every_s} must be at most {MAX_CHECKPOINT_EVERY_S} (a week)"
        )
    if settings.path is None and (settings.every_s is not None or settings.every_updates is not None):
        raise reader.error("checkpoint.path", "is missing (every_s / every_updates need a folder)")
    if settings.path is None and settings.durability == "wal":
        raise reader.error("checkpoint.path", "is missing (durability: wal keeps its log there)")
    if settings.fsync and settings.durability != "wal":
        raise reader.error("checkpoint.fsync", "applies to durability: wal only")
    return settings


def _read_tls(reader: FieldReader, data: Mapping) -> TlsSettings | None:
    section = reader.section(data, "tls", TLS_FIELDS)
    if section is None:
        return None
    tls = TlsSettings(
        cert=reader.path(section, "cert", prefix="tls.", default=None),
        key=reader.path(section, "key", prefix="tls.", default=None),
        ca=reader.path(section, "ca", prefix="tls.", default=None),
        client_auth=reader.boolean(section, "client_auth", False, prefix="tls."),
        server_name=reader.string(section, "server_name", prefix="tls.", default=None),
    )
    if (tls.cert is None) != (tls.key is None):
        missing = "tls.key" if tls.key is None else "tls.cert"
        raise reader.error(missing, "is missing (tls.cert and tls.key go together)")
    if tls.cert is None and tls.ca is None:
        raise reader.error("tls", "names no files (give cert + key, and/or ca)")
    if tls.client_auth and (tls.ca is None or tls.cert is None):
        raise reader.error("tls.client_auth", "needs tls.ca (to verify clients) and tls.cert + tls.key")
    return tls


def _read_limits(reader: FieldReader, data: Mapping, rpc: RpcPolicy) -> RequestLimits:
    """The ``limits`` section: each a number within its range; the client's chunks must fit them."""
    section = reader.section(data, "limits", limit_names())
    if section is None:
        limits = RequestLimits()
    else:
        default = RequestLimits()
        values = {}
        for name in limit_names():
            if limit_kind(name) is int:
                minimum = 0 if name == "memory_margin_mb" else 1
                values[name] = reader.integer(
                    section, name, prefix="limits.", default=getattr(default, name), minimum=minimum
                )
            else:
                values[name] = reader.positive(section, name, getattr(default, name), prefix="limits.")
        limits = RequestLimits(**values)
        try:
            limits.validate()
        except ValueError as exc:
            raise reader.error("limits", f"is not valid: {exc}") from None
    if rpc.chunk_bytes > limits.max_request_bytes or rpc.chunk_bytes // 8 > limits.max_request_rows:
        raise reader.error(
            "rpc.chunk_bytes",
            f"= {rpc.chunk_bytes} must fit the servers' limits (at most limits.max_request_bytes "
            f"{limits.max_request_bytes}, and 8 x limits.max_request_rows {8 * limits.max_request_rows})",
        )
    return limits


def _read_token(reader: FieldReader, data: Mapping, allow_short: bool) -> tuple[str | None, str | None]:
    """``(token, token_file)``: the token from the config or read from its file (launch, status, stop
    and the trainers all need it: every call but the health check carries it)."""
    from graphstore.auth import read_token_file, validate_token

    if data.get("token") is not None and data.get("token_file") is not None:
        raise reader.error("token", "and token_file exclude each other (give one)")
    token_file = reader.path(data, "token_file", default=None)
    if token_file is not None:
        try:
            return read_token_file(token_file, "token_file", allow_short), token_file
        except (FileNotFoundError, ValueError) as exc:
            raise reader.error("token_file", f"= {token_file!r} is not usable: {exc}") from None
    token = data.get("token")
    if token is None:
        return None, None
    if not isinstance(token, str):
        raise reader.error("token", f"must be a string, got a {type(token).__name__}")
    try:
        return validate_token(token, "token", allow_short), None
    except ValueError as exc:
        raise reader.error("token", f"is not valid: {exc}") from None
