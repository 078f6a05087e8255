"""Connecting a trainer to the cluster: ``initialize``, ``exit_client``, ``shutdown``, ``get_num_clients``.

Follows ``dgl.distributed.initialize`` / ``exit_client``. ``initialize()`` reads the cluster config (a
YAML path, a dict, a DGL ``ip_config.txt``, or the path in ``GRAPHSTORE_CONFIG`` that ``graphstore
launch`` sets; see :mod:`graphstore.client.config`), opens one channel per server, waits (bounded)
until each reports SERVING, fetches metadata and the partition book, and installs the process's
:class:`~graphstore.client.context.ClientContext`.
"""

from __future__ import annotations

import atexit
import logging
import os
from pathlib import Path

from graphstore.client.config import find_cluster_config
from graphstore.client.context import (
    ClientContext,
    context_lock,
    current_context,
    get_context,
    set_context,
    trainer_rank_and_world,
)
from graphstore.client.device import bind_device, unbind_device
from graphstore.client.transport.call_counts import MethodCounts
from graphstore.config import ClusterConfig, config_to_mapping, parse_cluster_config

logger = logging.getLogger(__name__)


def initialize(
    ip_config=None,
    *,
    local_read: str | None = None,
    part_config: str | None = None,
    device=None,
    **dgl_options,
) -> ClientContext:
    """Connect this process to the partition servers.

    Idempotent: a second call with the same config returns the existing connection. A standalone
    context opened before is closed and replaced.

    Args:
        ip_config: a cluster YAML path, a dict, a DGL-style ``ip_config.txt`` path or a
            :class:`~graphstore.config.ClusterConfig`; default: the ``GRAPHSTORE_CONFIG``
            environment variable.
        local_read: override the config's ``auto`` / ``on`` / ``off``.
        part_config: override the config's partition config path (used for co-located reads).
        device: bind this trainer to a device now: ``"cpu"``, ``"cuda"`` (``cuda:LOCAL_RANK`` among the
            visible GPUs), ``"cuda:N"`` or ``"auto"`` (see :mod:`graphstore.client.device`). None: a
            CPU trainer needs none, and the first GPU use (e.g. an NCCL group's optimizer step) binds
            ``cuda:LOCAL_RANK``.
        dgl_options: DGL's ``max_queue_size``, ``net_type``, ``num_worker_threads`` (accepted so ported
            scripts run; they tune DGL's own RPC layer, which graphstore does not have, so a value given
            is logged as having no effect) and ``use_graphbolt`` (False only).

    Returns:
        The process's client context.

    Raises:
        ValueError: no config given and ``GRAPHSTORE_CONFIG`` unset; unknown keyword arguments.
        NotImplementedError: ``use_graphbolt=True``.
        FileNotFoundError: a config path that does not exist.
        graphstore.errors.ConfigError: an invalid config, or servers that disagree with it.
        graphstore.errors.ServerUnavailableError: a server that is not SERVING within
            ``rpc.connect_timeout_s`` (the message names it).
        RuntimeError: already connected with a different config (call ``exit_client()`` first); a
            ``device`` that is not available (``LOCAL_RANK`` at or above the visible GPUs, no CUDA) or
            differs from the device already bound.
    """
    _check_dgl_options(dgl_options)
    config = find_cluster_config(ip_config)
    overrides = {}
    if local_read is not None:
        overrides["local_read"] = local_read
    if part_config is not None:
        overrides["part_config"] = os.fspath(part_config)
    if overrides:
        config = _with_overrides(config, overrides)
    if device is not None:
        bind_device(device)
    with context_lock():
        ctx = current_context()
        if ctx is not None and not ctx.standalone:
            if ctx.config == config:
                return ctx
            raise RuntimeError(
                f"already connected to {ctx.config.path or 'a cluster'}; call exit_client() before "
                f"initialize() with another config ({config.path or 'a ClusterConfig'})"
            )
        new_ctx = ClientContext.connect(config)
        previous = set_context(new_ctx)
        if previous is not None:
            previous.close()
    atexit.unregister(exit_client)
    atexit.register(exit_client)
    return new_ctx


# DGL options of its own RPC layer: accepted, with no counterpart in graphstore.
DGL_TRANSPORT_OPTIONS = ("max_queue_size", "net_type", "num_worker_threads")


def _check_dgl_options(dgl_options: dict) -> None:
    """Accept DGL's ``initialize`` options: log the transport ones, refuse ``use_graphbolt=True``.

    Raises:
        NotImplementedError: ``use_graphbolt=True``.
        ValueError: an option DGL does not have either.
    """
    unknown = set(dgl_options) - {*DGL_TRANSPORT_OPTIONS, "use_graphbolt"}
    if unknown:
        raise ValueError(f"initialize() got unknown keyword arguments {sorted(unknown)}")
    if dgl_options.get("use_graphbolt"):
        raise NotImplementedError(
            "initialize(use_graphbolt=True) is not supported: graphstore samples with its own server-side "
            "structures; pass use_graphbolt=False (DGL's default)"
        )
    for name in DGL_TRANSPORT_OPTIONS:
        if dgl_options.get(name) is not None:
            logger.info(
                "initialize(%s=%r): DGL's RPC option has no effect in graphstore (gRPC, sampling in trainer "
                "threads)",
                name,
                dgl_options[name],
            )


def _with_overrides(config: ClusterConfig, overrides: dict) -> ClusterConfig:
    """``config`` with some fields replaced, validated again (relative paths: the working directory)."""
    return parse_cluster_config(
        {**config_to_mapping(config), **overrides}, Path.cwd(), config.path or "<dict>", check_files=False
    )


def is_initialized() -> bool:
    """Whether this process has a client context (distributed or standalone)."""
    return current_context() is not None


def exit_client() -> None:
    """Delete the non-persistent tensors this client created, close every connection and release the
    trainer's device binding. Idempotent."""
    with context_lock():
        ctx = set_context(None)
    unbind_device()
    if ctx is not None:
        ctx.close()


def shutdown(stop_servers: bool = False) -> None:
    """Close the client like :func:`exit_client`; with ``stop_servers`` first ask every server to stop.

    Args:
        stop_servers: send the Shutdown call to every partition server (distributed mode only).
    """
    ctx = current_context()
    if stop_servers and ctx is not None and not ctx.standalone:
        ctx.release_owned()
        for part_id in range(ctx.num_parts):
            try:
                ctx.partition(part_id).shutdown()
            except Exception as exc:  # noqa: BLE001 - a server already gone is what we wanted
                logger.warning("shutdown of partition %d's server failed: %s", part_id, exc)
    exit_client()


def get_num_clients() -> int:
    """Number of trainers in this job's trainer group (torch.distributed, else WORLD_SIZE, else 1)."""
    return trainer_rank_and_world()[1]


def get_rank() -> int:
    """This trainer's rank in its group (torch.distributed, else RANK, else 0)."""
    return trainer_rank_and_world()[0]


def call_counts() -> dict[str, MethodCounts]:
    """Calls (round trips), request bytes and answer bytes per method that this process has sent to the
    servers since it connected, every server summed (empty in standalone mode). Two snapshots' difference
    divided by the batches between them is a loader's cost per mini-batch.

    Raises:
        RuntimeError: no client context.
    """
    return get_context().call_counts()
