"""How a trainer finds its cluster config: the argument of ``initialize()``, else ``GRAPHSTORE_CONFIG``.

The config itself is the one cluster-config schema, :class:`graphstore.config.ClusterConfig`, read by
its one parser. :func:`find_cluster_config` takes any of the forms ``initialize()`` accepts:

- a cluster YAML path (the file ``graphstore launch`` puts in ``GRAPHSTORE_CONFIG``); the servers'
  files are not checked here (a trainer may run where they are not);
- the same content as a mapping (relative paths against the working directory);
- a DGL-style ``ip_config.txt``: one ``host [port]`` line per partition, in partition order
  (port defaults to DGL's 30050). Where the cluster is already given (``graphstore launch``, or torchrun
  with ``GRAPHSTORE_CONFIG``), that cluster is used instead and the file's hosts are only checked
  against it (a warning when they differ), so a DGL script's own ``--ip_config`` keeps working;
- an already-built :class:`~graphstore.config.ClusterConfig`;
- nothing: the path in ``GRAPHSTORE_CONFIG`` (set by ``graphstore launch``; set by hand, or by the job's
  manifest, where torchrun, Slurm or Kubernetes start the trainers against ``graphstore servers``).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
from collections.abc import Mapping
from pathlib import Path

from graphstore.client.constants import CONFIG_ENV, DEFAULT_IP_CONFIG_PORT
from graphstore.config import ClusterConfig, load_cluster_config, parse_cluster_config
from graphstore.errors import ConfigError

logger = logging.getLogger(__name__)

IP_CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


def find_cluster_config(source=None) -> ClusterConfig:
    """The cluster config a trainer connects with.

    Args:
        source: see the module docstring; None reads the path in ``GRAPHSTORE_CONFIG``.

    Returns:
        The validated config.

    Raises:
        ValueError: ``source`` is None and ``GRAPHSTORE_CONFIG`` is unset.
        FileNotFoundError: a path that does not exist (a ConfigError too).
        graphstore.errors.ConfigError: invalid content; the message names the field and the value.
        TypeError: an unsupported ``source`` type.
    """
    if source is None:
        source = os.environ.get(CONFIG_ENV) or None
        if source is None:
            raise ValueError(
                f"initialize(): no cluster config; pass ip_config=PATH_OR_DICT or set {CONFIG_ENV} "
                "(graphstore launch sets it; under torchrun, Slurm or Kubernetes, set it to the cluster "
                "YAML the servers were started from)"
            )
    if isinstance(source, ClusterConfig):
        return source
    if isinstance(source, Mapping):
        return parse_cluster_config(source, base_dir=Path.cwd(), check_files=False)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.suffix.lower() not in IP_CONFIG_SUFFIXES:
            text = path.read_text() if path.is_file() else None
            if text is None or _looks_like_ip_config(text):
                provided = os.environ.get(CONFIG_ENV)
                if provided and os.path.abspath(provided) != os.path.abspath(path):
                    return _provided_cluster(path, text, provided)
                if text is None:
                    raise FileNotFoundError(f"ip_config {os.fspath(source)!r} does not exist")
                return parse_ip_config(text, source=str(path))
        return load_cluster_config(path, check_files=False)
    raise TypeError(
        "cluster config must be a YAML or ip_config.txt path, a mapping or a ClusterConfig, "
        f"got {type(source).__name__}"
    )


def parse_ip_config(text: str, source: str) -> ClusterConfig:
    """A DGL ``ip_config.txt``: partition ``k``'s server on line ``k`` as ``host [port]``.

    Args:
        text: the file's content (``#`` starts a comment; blank lines are skipped).
        source: the file's name in messages.

    Returns:
        The config (servers only; every other field has its default).

    Raises:
        graphstore.errors.ConfigError: no server lines, or an invalid host or port.
    """
    servers = []
    for line in _content_lines(text):
        host, *port = line.split()
        servers.append({"host": host, "port": int(port[0]) if port else DEFAULT_IP_CONFIG_PORT})
    if not servers:
        raise ConfigError(f"{source}: no server lines")
    return parse_cluster_config({"servers": servers}, Path(source).parent, source, check_files=False)


def _provided_cluster(ip_config: Path, text: str | None, provided: str) -> ClusterConfig:
    """The cluster in ``GRAPHSTORE_CONFIG``, with a warning when a DGL ``ip_config`` names other hosts."""
    config = load_cluster_config(provided, check_files=False)
    if text is None:
        logger.warning(
            "ip_config %r does not exist; using the cluster of %s=%s",
            os.fspath(ip_config),
            CONFIG_ENV,
            provided,
        )
        return config
    file_hosts = {_host_identity(line.split()[0]) for line in _content_lines(text)}
    cluster_hosts = {_host_identity(server.host) for server in config.servers}
    if file_hosts != cluster_hosts:
        logger.warning(
            "ip_config %r lists hosts %s but the cluster of %s=%s runs its servers on %s; using the cluster",
            os.fspath(ip_config),
            sorted(line.split()[0] for line in _content_lines(text)),
            CONFIG_ENV,
            provided,
            sorted({server.host for server in config.servers}),
        )
    return config


def _host_identity(host: str) -> str:
    """A host name or address, with the names of this machine (loopback, its host name and address)
    folded into one, so ``127.0.0.1`` and this machine's address compare equal."""
    host = host.strip("[]").lower()
    if host.startswith("127.") or host in _this_machine():
        return "<this machine>"
    return host


@functools.lru_cache(maxsize=1)
def _this_machine() -> frozenset[str]:
    names = {"localhost", "::1", "0.0.0.0", socket.gethostname().lower()}
    try:
        names.add(socket.gethostbyname(socket.gethostname()))
    except OSError:
        pass
    return frozenset(names)


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
