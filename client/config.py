"""What a trainer needs to know about the cluster: server addresses per partition, call policy,
local-read mode, graph name and partition config.

:func:`load_client_config` reads any of the forms ``initialize()`` accepts:

- a cluster YAML path (the file ``graphstore launch`` writes into ``GRAPHSTORE_CONFIG``; the full schema
  is ``graphstore.launcher.config``). Only these keys are read, everything else is ignored:
  ``graph_name``, ``part_config`` (relative to the YAML's folder), ``servers: [{host, port, part_id}]``,
  ``rpc: {deadline_s, connect_timeout_s, max_retries, backoff_initial_s, backoff_max_s,
  backoff_multiplier, max_message_bytes, chunk_bytes}``, ``local_read: auto|on|off``,
  ``local_part_id`` (pin the co-located partition), ``background_nice`` (0..19, default 10),
  ``tls: {cert, key, ca, client_auth, server_name}``,
  ``token`` / ``token_file`` (relative to the YAML's folder);
- the same content as a dict (relative paths against the working directory);
- a DGL-style ``ip_config.txt``: one ``host [port]`` line per partition, in partition order
  (port defaults to DGL's 30050);
- an already-built :class:`ClientConfig`, or any dataclass with the same field names (the launcher's).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphstore.client.constants import DEFAULT_IP_CONFIG_PORT
from graphstore.errors import ConfigError
from graphstore.priority import DEFAULT_BACKGROUND_NICE, check_nice
from graphstore.rpc import RpcPolicy, TlsSettings

LOCAL_READ_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class ServerAddress:
    """Where the server of one partition listens."""

    host: str
    port: int
    part_id: int

    @property
    def address(self) -> str:
        """``host:port`` (IPv6 hosts in brackets), as gRPC takes it."""
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True)
class ClientConfig:
    """The client's view of a cluster.

    Attributes:
        servers: one address per partition, sorted by ``part_id`` (0 .. num_parts - 1).
        graph_name: expected graph name (checked against the servers), or None to take theirs.
        part_config: path of the partition config (NAME.json) on this host, if known; the servers
            report theirs too, which co-located reads use when this is None.
        rpc: deadlines, retries and chunking of calls.
        local_read: ``auto`` (read the co-located partition's read-only data from its files when the
            server runs on this host and the files are readable), ``on`` (whenever the files are
            readable here, whatever the host name; an error when they are not) or ``off``.
        local_part_id: the co-located partition to read locally; default: this rank's home partition
            if co-located, else the first co-located one.
        tls: client TLS settings, or None.
        token: shared token sent with every call, or None (``token_file`` is read into it; without
            either, the ``GRAPHSTORE_TOKEN`` environment variable is used when set).
        background_nice: how much lower than the training thread the client's background threads
            (RPC pool, loader workers) are scheduled, 0..19 (see :mod:`graphstore.priority`).
        source: where the config came from (for messages).
    """

    servers: tuple[ServerAddress, ...]
    graph_name: str | None = None
    part_config: str | None = None
    rpc: RpcPolicy = field(default_factory=RpcPolicy)
    local_read: str = "auto"
    local_part_id: int | None = None
    tls: TlsSettings | None = None
    token: str | None = field(default=None, repr=False)
    background_nice: int = DEFAULT_BACKGROUND_NICE
    source: str = ""

    @property
    def num_parts(self) -> int:
        return len(self.servers)

    def channel_security(self):
        """The :class:`graphstore.auth.ChannelSecurity` every connection to the servers uses.

        Raises:
            graphstore.errors.ConfigError: an invalid ``GRAPHSTORE_TOKEN``.
        """
        from graphstore.auth import TOKEN_ENV, ChannelSecurity, validate_token

        token = self.token
        if token is None and os.environ.get(TOKEN_ENV):
            try:
                token = validate_token(os.environ[TOKEN_ENV], f"environment variable {TOKEN_ENV}")
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        tls = self.tls
        if tls is None:
            return ChannelSecurity(token=token)
        with_cert = tls.client_auth
        return ChannelSecurity(
            ca=tls.ca,
            cert=tls.cert if with_cert else None,
            key=tls.key if with_cert else None,
            server_name=tls.server_name,
            token=token,
            use_tls=True,
        )


def load_client_config(source) -> ClientConfig:
    """Read a cluster config from a YAML / ip_config.txt path, a dict, or a config object.

    Args:
        source: see the module docstring.

    Returns:
        The validated :class:`ClientConfig`.

    Raises:
        FileNotFoundError: a path that does not exist.
        graphstore.errors.ConfigError: invalid content; the message names the field.
        TypeError: an unsupported ``source`` type.
    """
    if isinstance(source, ClientConfig):
        return source
    if isinstance(source, dict):
        return _from_mapping(source, base_dir=Path.cwd(), origin="config dict")
    if isinstance(source, (str, os.PathLike)):
        return _from_path(Path(source))
    if dataclasses.is_dataclass(source) and not isinstance(source, type):
        return _from_mapping(dataclasses.asdict(source), base_dir=Path.cwd(), origin=type(source).__name__)
    raise TypeError(
        "cluster config must be a YAML or ip_config.txt path, a dict or a ClientConfig, "
        f"got {type(source).__name__}"
    )


def _from_path(path: Path) -> ClientConfig:
    if not path.is_file():
        raise FileNotFoundError(f"cluster config {str(path)!r} does not exist")
    text = path.read_text()
    if path.suffix.lower() not in (".yaml", ".yml", ".json") and _looks_like_ip_config(text):
        return _from_ip_config(text, origin=str(path))
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with a 'servers' list, got {type(data).__name__}")
    return _from_mapping(data, base_dir=path.resolve().parent, origin=str(path))


def _looks_like_ip_config(text: str) -> bool:
    lines = _content_lines(text)
    if not lines:
        return False
    for line in lines:
        tokens = line.split()
        if len(tokens) > 2 or tokens[0].endswith(":") or (len(tokens) == 2 and not tokens[1].isdigit()):
            return False
    return True


def _content_lines(text: str) -> list[str]:
    lines = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            lines.append(line)
    return lines


def _from_ip_config(text: str, origin: str) -> ClientConfig:
    servers = []
    for part_id, line in enumerate(_content_lines(text)):
        tokens = line.split()
        port = int(tokens[1]) if len(tokens) == 2 else DEFAULT_IP_CONFIG_PORT
        servers.append(
            ServerAddress(host=tokens[0], port=_check_port(port, f"line {part_id + 1} port"), part_id=part_id)
        )
    if not servers:
        raise ConfigError(f"{origin}: no server lines")
    return ClientConfig(servers=tuple(servers), source=origin)


def _from_mapping(data: dict[str, Any], base_dir: Path, origin: str) -> ClientConfig:
    servers = _parse_servers(data.get("servers"), origin)
    graph_name = data.get("graph_name")
    if graph_name is not None and not isinstance(graph_name, str):
        raise ConfigError(f"{origin}: graph_name must be a string, got {graph_name!r}")
    part_config = data.get("part_config")
    if part_config is not None:
        if not isinstance(part_config, (str, os.PathLike)):
            raise ConfigError(f"{origin}: part_config must be a path, got {part_config!r}")
        part_path = Path(part_config)
        part_config = str(part_path if part_path.is_absolute() else (base_dir / part_path))
    local_read = data.get("local_read", "auto")
    if local_read is True:  # YAML 1.1 reads an unquoted `on` / `off` as a boolean
        local_read = "on"
    elif local_read is False:
        local_read = "off"
    if local_read not in LOCAL_READ_MODES:
        raise ConfigError(f"{origin}: local_read must be one of {LOCAL_READ_MODES}, got {local_read!r}")
    local_part_id = data.get("local_part_id")
    if local_part_id is not None and (
        not isinstance(local_part_id, int)
        or isinstance(local_part_id, bool)
        or not 0 <= local_part_id < len(servers)
    ):
        raise ConfigError(
            f"{origin}: local_part_id must be a partition index below {len(servers)}, got {local_part_id!r}"
        )
    token = _parse_token(data, base_dir, origin)
    try:
        background_nice = check_nice(data.get("background_nice", DEFAULT_BACKGROUND_NICE))
    except ValueError as exc:
        raise ConfigError(f"{origin}: {exc}") from None
    return ClientConfig(
        servers=servers,
        graph_name=graph_name,
        part_config=part_config,
        rpc=_parse_rpc(data.get("rpc"), origin),
        local_read=local_read,
        local_part_id=local_part_id,
        tls=_parse_tls(data.get("tls"), base_dir, origin),
        token=token,
        background_nice=background_nice,
        source=origin,
    )


def _parse_token(data: dict[str, Any], base_dir: Path, origin: str) -> str | None:
    from graphstore.auth import read_token_file, validate_token

    token, token_file = data.get("token"), data.get("token_file")
    if token is not None and token_file is not None:
        raise ConfigError(f"{origin}: give token or token_file, not both")
    try:
        if token is not None:
            if not isinstance(token, str):
                raise ConfigError(f"{origin}: token must be a string, got a {type(token).__name__}")
            return validate_token(token, f"{origin}: token")
        if token_file is not None:
            if not isinstance(token_file, (str, os.PathLike)):
                raise ConfigError(f"{origin}: token_file must be a path, got {token_file!r}")
            path = Path(token_file)
            return read_token_file(path if path.is_absolute() else base_dir / path, f"{origin}: token_file")
    except (ValueError, FileNotFoundError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(str(exc)) from None
    return None


def _parse_servers(entries, origin: str) -> tuple[ServerAddress, ...]:
    if not isinstance(entries, (list, tuple)) or not entries:
        raise ConfigError(
            f"{origin}: servers must be a non-empty list of {{host, port, part_id}}, got {entries!r}"
        )
    servers = []
    for index, entry in enumerate(entries):
        where = f"{origin}: servers[{index}]"
        if dataclasses.is_dataclass(entry) and not isinstance(entry, type):
            entry = dataclasses.asdict(entry)
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} must be a mapping with host and port, got {entry!r}")
        host, port = entry.get("host"), entry.get("port")
        if host is None and isinstance(entry.get("address"), str):
            host, _, port_text = entry["address"].rpartition(":")
            port = int(port_text) if port_text.isdigit() else port_text
        if not isinstance(host, str) or not host:
            raise ConfigError(f"{where}.host must be a non-empty string, got {host!r}")
        part_id = entry.get("part_id", index)
        if not isinstance(part_id, int) or isinstance(part_id, bool):
            raise ConfigError(f"{where}.part_id must be an integer, got {part_id!r}")
        servers.append(
            ServerAddress(host=host.strip("[]"), port=_check_port(port, f"{where}.port"), part_id=part_id)
        )
    servers.sort(key=lambda s: s.part_id)
    part_ids = [s.part_id for s in servers]
    if part_ids != list(range(len(servers))):
        raise ConfigError(
            f"{origin}: servers' part_id values must be 0..{len(servers) - 1} once each, got {part_ids}"
        )
    return tuple(servers)


def _check_port(port, where: str) -> int:
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise ConfigError(f"{where} must be an integer in 1..65535, got {port!r}")
    return port


def _parse_rpc(section, origin: str) -> RpcPolicy:
    if section is None:
        return RpcPolicy()
    if isinstance(section, RpcPolicy):
        return section
    if dataclasses.is_dataclass(section) and not isinstance(section, type):
        section = dataclasses.asdict(section)
    if not isinstance(section, dict):
        raise ConfigError(f"{origin}: rpc must be a mapping, got {section!r}")
    known = {f.name: f for f in dataclasses.fields(RpcPolicy)}
    values = {}
    for key, value in section.items():
        if key not in known:
            continue  # keys of newer / other components (the launcher's schema) are not ours
        default = known[key].default
        where = f"{origin}: rpc.{key}"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where} must be a number, got {value!r}")
        if isinstance(default, int):
            if int(value) != value:
                raise ConfigError(f"{where} must be an integer, got {value!r}")
            value = int(value)
        minimum = 0 if key == "max_retries" else None
        if (minimum is not None and value < minimum) or (minimum is None and value <= 0):
            raise ConfigError(f"{where} must be {'>= 0' if minimum is not None else '> 0'}, got {value!r}")
        values[key] = value
    return RpcPolicy(**values)


def _parse_tls(section, base_dir: Path, origin: str) -> TlsSettings | None:
    if section is None:
        return None
    if isinstance(section, TlsSettings):
        return section
    if dataclasses.is_dataclass(section) and not isinstance(section, type):
        section = dataclasses.asdict(section)
    if not isinstance(section, dict):
        raise ConfigError(f"{origin}: tls must be a mapping with cert, key, ca, got {section!r}")
    paths = {}
    for key in ("cert", "key", "ca"):
        value = section.get(key)
        if value is None:
            paths[key] = None
            continue
        if not isinstance(value, (str, os.PathLike)) or "\x00" in os.fspath(value):
            raise ConfigError(f"{origin}: tls.{key} must be a path, got {value!r}")
        path = Path(value)
        paths[key] = str(path if path.is_absolute() else base_dir / path)
    client_auth = section.get("client_auth", False)
    if not isinstance(client_auth, bool):
        raise ConfigError(f"{origin}: tls.client_auth must be true or false, got {client_auth!r}")
    if client_auth and (paths["cert"] is None or paths["key"] is None):
        raise ConfigError(f"{origin}: tls.client_auth needs tls.cert and tls.key (the client certificate)")
    server_name = section.get("server_name")
    if server_name is not None and (not isinstance(server_name, str) or not server_name):
        raise ConfigError(f"{origin}: tls.server_name must be a non-empty string, got {server_name!r}")
    if all(v is None for v in paths.values()):
        return None
    return TlsSettings(**paths, client_auth=client_auth, server_name=server_name)
