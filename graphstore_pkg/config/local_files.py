"""The checks of a cluster config against the files it names on this machine.

``graphstore launch`` runs them (``load_cluster_config(path, check_files=True)``): it starts the
servers on the partition config and the TLS files, so a wrong path or a partition config of another
graph fails before any process starts. ``status``, ``stop`` and the trainers skip them.
"""

from __future__ import annotations

import json
import os

from graphstore.config.schema import ClusterConfig
from graphstore.errors import ConfigError


def check_partition_config(config: ClusterConfig) -> None:
    """Check the partition config on disk against the cluster config.

    Args:
        config: the cluster config.

    Raises:
        ConfigError: ``part_config`` is not set, the file is missing or unreadable, or its
            ``num_parts`` / ``graph_name`` disagree with the cluster config.
    """
    where = f"cluster config {config.path!r}: field 'part_config'"
    if config.part_config is None:
        raise ConfigError(f"{where} is missing")
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
            + (
                f" (its {len(config.read_replicas)} further entries of a part_id are read replicas)"
                if config.read_replicas
                else ""
            )
        )
    disk_name = meta.get("graph_name")
    if disk_name is not None and disk_name != config.graph_name:
        raise ConfigError(
            f"cluster config {config.path!r}: field 'graph_name' = {config.graph_name!r} "
            f"but part_config {config.part_config} has graph_name {disk_name!r}"
        )


def check_tls_files(config: ClusterConfig) -> None:
    """Check that the TLS files the config names exist here.

    Raises:
        ConfigError: naming the first missing file (``tls.cert``, ``tls.key``, ``tls.ca``).
    """
    if config.tls is None:
        return
    for name in ("cert", "key", "ca"):
        value = getattr(config.tls, name)
        if value is not None and not os.path.isfile(value):
            raise ConfigError(f"cluster config {config.path!r}: field 'tls.{name}' file not found: {value}")
