"""How a trainer finds its cluster config: the argument of ``initialize()``, else ``GRAPHSTORE_CONFIG``.

The config itself is the one cluster-config schema, :class:`graphstore.config.ClusterConfig`, read by
its one parser. :func:`find_cluster_config` takes any of the forms ``initialize()`` accepts:

- a cluster YAML path (the file ``graphstore launch`` puts in ``GRAPHSTORE_CONFIG``); the servers'
  files are not checked here (a trainer may run where they are not);
- the same content as a mapping (relative paths against the working directory);
- a DGL-style ``ip_config.txt``: one ``host [port]`` line per partition, in partition order
  (port defaults to DGL's 30050);
- an already-built :class:`~graphstore.config.ClusterConfig`;
- nothing: the path in ``GRAPHSTORE_CONFIG`` (set by ``graphstore launch``; set by hand, or by the job's
  manifest, where torchrun, Slurm or Kubernetes start the trainers against ``graphstore servers``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from graphstore.client.constants import CONFIG_ENV, DEFAULT_IP_CONFIG_PORT
from graphstore.config import ClusterConfig, load_cluster_config, parse_cluster_config
from graphstore.errors import ConfigError

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
        if path.suffix.lower() not in IP_CONFIG_SUFFIXES and path.is_file():
            text = path.read_text()
            if _looks_like_ip_config(text):
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
