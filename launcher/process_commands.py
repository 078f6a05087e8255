"""What launch runs: the command line and environment of each server and trainer process.

A server is ``python -m graphstore.launcher.cli server`` with the cluster's partition, address, TLS,
metrics and checkpoint settings as flags; its token travels in the environment, never on the command
line. A trainer is the user's command with torchrun's variables and ``GRAPHSTORE_CONFIG``.
"""

from __future__ import annotations

from graphstore.auth import TOKEN_ENV
from graphstore.config import ClusterConfig, ServerSpec
from graphstore.limits import limits_to_flags


def server_command(
    config: ClusterConfig,
    server: ServerSpec,
    python: str,
    *,
    restore_latest: bool = False,
    token_file: bool = False,
) -> list[str]:
    """The ``graphstore server`` command line of one server.

    The cluster's TLS files, metrics port (:meth:`ClusterConfig.metrics_port_of`) and host, checkpoint
    settings and request limits become flags. A read replica gets ``--read-replica`` and no
    checkpoint or log settings (it holds no writable state). The token never becomes a flag: it
    travels in the ``GRAPHSTORE_TOKEN`` environment variable (:func:`server_environment`), or as
    ``--token-file`` (the config's ``token_file`` path, which must exist on the server's host too)
    when ``token_file`` is True.

    Args:
        config: the cluster config.
        server: the server.
        python: its interpreter.
        restore_latest: add ``--restore-latest`` (a restart).
        token_file: pass the config's token file by path.
    """
    argv = [
        python,
        "-u",
        "-m",
        "graphstore.launcher.cli",
        "server",
        "--part-config",
        config.part_config,
        "--part-id",
        str(server.part_id),
        "--host",
        server.bind_host,
        "--port",
        str(server.port),
    ]
    if token_file and config.token_file:
        argv += ["--token-file", config.token_file]
    if config.tls is not None and config.tls.cert is not None:
        argv += ["--tls-cert", config.tls.cert, "--tls-key", config.tls.key]
        if config.tls.client_auth:
            argv += ["--tls-ca", config.tls.ca]
    if config.allow_short_token:
        argv.append("--allow-short-token")
    if config.metrics_port is not None:
        argv += ["--metrics-port", str(config.metrics_port_of(server.part_id, server.replica))]
        if config.metrics_host is not None:
            argv += ["--metrics-host", config.metrics_host]
    ckpt = config.checkpoint
    if server.is_read_replica:
        argv.append("--read-replica")
        return [*argv, *limits_to_flags(config.limits), *config.server_args]
    if ckpt.root is not None:
        argv += ["--checkpoint-root", ckpt.root]
    argv += limits_to_flags(config.limits)
    if ckpt.path is not None:
        argv += ["--checkpoint-dir", ckpt.path, "--checkpoint-keep", str(ckpt.keep)]
        if ckpt.every_s is not None:
            argv += ["--checkpoint-every-s", f"{ckpt.every_s:g}"]
        if ckpt.every_updates is not None:
            argv += ["--checkpoint-every-updates", str(ckpt.every_updates)]
        if ckpt.durability != "checkpoint":
            argv += ["--durability", ckpt.durability]
        if ckpt.fsync:
            argv.append("--fsync")
        if restore_latest:
            argv.append("--restore-latest")
    return [*argv, *config.server_args]


def server_environment(config: ClusterConfig) -> dict[str, str]:
    """Variables a local server gets on top of launch's environment (the token, when there is one)."""
    env = {"PYTHONUNBUFFERED": "1"}
    if config.token:
        env[TOKEN_ENV] = config.token
    return env


def trainer_environment(
    *,
    rank: int,
    local_rank: int,
    world_size: int,
    local_world_size: int,
    group_rank: int,
    master_addr: str,
    master_port: int,
    config_path: str,
) -> dict[str, str]:
    """The variables a trainer gets on top of launch's environment (torchrun's names)."""
    return {
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
        "RANK": str(rank),
        "LOCAL_RANK": str(local_rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(local_world_size),
        "GROUP_RANK": str(group_rank),
        "GRAPHSTORE_CONFIG": config_path,
        "PYTHONUNBUFFERED": "1",
    }
