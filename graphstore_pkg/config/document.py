"""A :class:`ClusterConfig` back as a cluster YAML document (the inverse of the parser).

The demo writes its cluster YAML with it (a template with fresh ports and partitions), and
``initialize()`` re-validates a config with overridden fields through it. Parsing the document
again gives an equal config (paths are absolute, so the folder it is parsed against does not matter).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from graphstore.config.schema import ClusterConfig


def config_to_mapping(config: ClusterConfig) -> dict[str, Any]:
    """The cluster YAML document of ``config`` (plain dicts, lists and scalars; ``yaml.safe_dump`` takes it).

    A token read from ``token_file`` is written as the ``token_file`` path, never as the token.

    Args:
        config: the config.

    Returns:
        A mapping that :func:`graphstore.config.parse_cluster_config` reads back to an equal config.
    """
    document: dict[str, Any] = {
        "graph_name": config.graph_name,
        "part_config": config.part_config,
        "servers": [
            {key: value for key, value in dataclasses.asdict(server).items() if key != "replica"}
            for server in config.all_servers
        ],
        "trainer_hosts": list(config.trainer_hosts),
        "trainers_per_host": config.trainers_per_host,
        "master_port": config.master_port,
        "remote_exec": config.remote_exec,
        "remote_python": config.remote_python,
        "server_args": list(config.server_args),
        "rpc": dataclasses.asdict(config.rpc),
        "local_read": config.local_read,
        "local_part_id": config.local_part_id,
        "background_nice": config.background_nice,
        "restart": config.restart,
        "max_restarts": config.max_restarts,
        "checkpoint": _without_none(dataclasses.asdict(config.checkpoint)),
        "tls": None if config.tls is None else _without_none(dataclasses.asdict(config.tls)),
        "token": None if config.token_file is not None else config.token,
        "token_file": config.token_file,
        "allow_short_token": config.allow_short_token or None,
        "metrics_port": config.metrics_port,
        "metrics_host": config.metrics_host,
        "limits": dataclasses.asdict(config.limits),
    }
    return _without_none(document)


def _without_none(mapping: dict[str, Any]) -> dict[str, Any]:
    """``mapping`` without its unset (None) fields, which the parser reads as absent anyway."""
    return {key: value for key, value in mapping.items() if value is not None}
