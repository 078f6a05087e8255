"""The cluster config: one schema and one parser for every reader of the cluster YAML.

``graphstore launch``, ``status`` and ``stop`` read the file with :func:`load_cluster_config`; the
trainers read the same file through ``GRAPHSTORE_CONFIG`` (``graphstore.client.initialize()``), and
the demo writes its own from a template. All of them get the same :class:`ClusterConfig`.

A minimal file::

    graph_name: cora
    part_config: ../data/cora/cora.json     # relative paths are relative to this file's folder
    servers:
      - {host: 127.0.0.1, port: 50051, part_id: 0}
      - {host: 127.0.0.1, port: 50052, part_id: 1}
    trainers_per_host: 2

Every field is described in ``docs/launcher.md``. Only the standard library, PyYAML and root modules
are imported (``graphstore status --probe`` and the trainers load it without torch).
"""

from graphstore.config.document import config_to_mapping
from graphstore.config.local_files import check_partition_config, check_tls_files
from graphstore.config.parser import load_cluster_config, parse_cluster_config
from graphstore.config.reader import ConfigFileNotFoundError
from graphstore.config.remote_exec import validate_remote_exec
from graphstore.config.schema import (
    DEFAULT_REMOTE_EXEC,
    CheckpointSettings,
    ClusterConfig,
    ServerSpec,
    format_address,
    split_address,
)

__all__ = [
    "DEFAULT_REMOTE_EXEC",
    "CheckpointSettings",
    "ClusterConfig",
    "ConfigFileNotFoundError",
    "ServerSpec",
    "check_partition_config",
    "check_tls_files",
    "config_to_mapping",
    "format_address",
    "load_cluster_config",
    "parse_cluster_config",
    "split_address",
    "validate_remote_exec",
]
