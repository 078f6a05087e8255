"""Connecting a client to the servers of a cluster: readiness, metadata cross-checks, the partition
book, and the co-located partition read in-process.

A trainer on the host of a server whose partition files are readable here (``local_read``) reads that
partition's read-only data from the mapped files; :func:`open_local_partition` chooses it (the
trainer's home partition when several are co-located) and checks that the files are the ones the
server serves.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from graphstore.client.context.trainer_rank import trainer_rank_and_world
from graphstore.client.rank_split import rank_partitions
from graphstore.client.transport import RemotePartition, open_in_process
from graphstore.client.transport.replicated import OWNER, READ_REPLICA, ReplicatedPartition
from graphstore.config import ClusterConfig
from graphstore.errors import ConfigError
from graphstore.partition import RangePartitionBook, load_partition
from graphstore.partition.types import PartitionData
from graphstore.types import PartitionAPI, PartitionMetadata

logger = logging.getLogger(__name__)


@dataclass
class ClusterConnection:
    """What :func:`connect_servers` opened.

    Attributes:
        partitions: one per partition, in partition order: a RemotePartition, or a ReplicatedPartition
            when the config lists read replicas of the partition.
        metadata: partition 0's metadata (graph name, ID ranges, tensor schemes).
        book: the partition book, used from this trainer's home partition.
        local_part_id: the co-located partition read in-process, or None.
        local_readers: ``{local_part_id: in-process reader}``, or empty.
        local_partition_data: the co-located partition's memory-mapped data, or None.
        part_config: the partition config path on this host, when known.
    """

    partitions: list[PartitionAPI]
    metadata: PartitionMetadata
    book: RangePartitionBook
    local_part_id: int | None
    local_readers: dict[int, PartitionAPI]
    local_partition_data: PartitionData | None
    part_config: str | None


def connect_servers(config: ClusterConfig, client_id: str | None = None) -> ClusterConnection:
    """Connect to every server of ``config``: wait (bounded) until each is SERVING, fetch and
    cross-check metadata, build the partition book, and open the co-located partition's files.

    Args:
        config: the cluster.
        client_id: the client ID of this process's request IDs (None: a new one per server).

    Raises:
        graphstore.errors.ServerUnavailableError: a server that does not become ready in
            ``config.rpc.connect_timeout_s`` (the message names its address).
        graphstore.errors.ConfigError: servers that disagree with the config or each other.
    """
    security = config.channel_security()
    remotes: list[PartitionAPI] = []
    replica_readers: list[list[RemotePartition]] = []
    pool = ThreadPoolExecutor(
        max_workers=max(1, len(config.all_servers)), thread_name_prefix="graphstore-connect"
    )
    try:
        # Reads spread over replicas move on at once when one fails: their channels do not retry.
        fail_fast = dataclasses.replace(config.rpc, max_retries=0)
        for server in config.servers:
            remotes.append(
                RemotePartition(server.address, server.part_id, config.rpc, security, client_id=client_id)
            )
            replicas = config.replicas_of(server.part_id)
            replica_readers.append(
                [
                    RemotePartition(r.address, r.part_id, fail_fast, security, client_id=client_id)
                    for r in replicas
                ]
                if len(replicas) > 1
                else []
            )

        def ready_and_metadata(remote) -> PartitionMetadata:
            remote.wait_ready(config.rpc.connect_timeout_s)
            return remote.metadata()  # wait_ready checked the partition id; this returns the metadata

        futures = [pool.submit(ready_and_metadata, remote) for remote in remotes]
        # A partition's first reader is its owner's address, checked once above through the owner.
        reader_futures = [[pool.submit(ready_and_metadata, r) for r in part[1:]] for part in replica_readers]
        metas = [future.result() for future in futures]
        reader_metas = [
            [metas[part_id]] + [future.result() for future in part] if replica_readers[part_id] else []
            for part_id, part in enumerate(reader_futures)
        ]
        _check_metadata(config, metas)
        for part_id, part_metas in enumerate(reader_metas):
            if part_metas:
                _check_replicas(config, part_id, metas[part_id], part_metas)
                replicas = config.replicas_of(part_id)
                remotes[part_id] = ReplicatedPartition(
                    remotes[part_id],
                    replica_readers[part_id],
                    [READ_REPLICA if r.is_read_replica else OWNER for r in replicas],
                    _replica_tensors(metas[part_id], part_metas),
                )
        first = metas[0]
        rank, world = trainer_rank_and_world()
        local_part_id, readers, local_data, part_config = _open_local_partition(config, metas, rank, world)
        home = (
            local_part_id if local_part_id is not None else rank_partitions(rank, world, first.num_parts)[0]
        )
        book = RangePartitionBook.from_metadata(first, home)
    except BaseException:
        for remote in remotes:
            close_quietly(remote)
        for part in replica_readers:
            for remote in part:
                close_quietly(remote)
        raise
    finally:
        pool.shutdown(wait=False)
    return ClusterConnection(
        partitions=remotes,
        metadata=first,
        book=book,
        local_part_id=local_part_id,
        local_readers=readers,
        local_partition_data=local_data,
        part_config=part_config,
    )


def close_quietly(obj) -> None:
    """Close ``obj`` (when it has ``close``), logging instead of raising: cleanup must not mask an error."""
    close = getattr(obj, "close", None)
    if close is None:
        return
    try:
        close()
    except Exception as exc:  # noqa: BLE001 - cleanup must not mask the original error
        logger.debug("ignoring error while closing %r: %s", obj, exc)


def _check_metadata(config: ClusterConfig, metas: list[PartitionMetadata]) -> None:
    """Cross-check what the servers report against the config and each other.

    Raises:
        graphstore.errors.ConfigError: a mismatch (the message names the server and both values).
    """
    first = metas[0]
    for server, meta in zip(config.servers, metas, strict=True):
        where = f"server {server.address}"
        if meta.part_id != server.part_id:
            raise ConfigError(
                f"{where} serves partition {meta.part_id}, but the config lists it for "
                f"partition {server.part_id}"
            )
        if meta.num_parts != len(config.servers):
            raise ConfigError(
                f"{where} belongs to a graph of {meta.num_parts} partitions, but the config lists "
                f"{len(config.servers)} servers"
            )
        if meta.graph_name != first.graph_name or tuple(meta.node_bounds) != tuple(first.node_bounds):
            raise ConfigError(
                f"{where} serves graph {meta.graph_name!r} with node bounds {list(meta.node_bounds)}, "
                f"which differs from {config.servers[0].address} "
                f"({first.graph_name!r}, {list(first.node_bounds)})"
            )
    if config.graph_name is not None and config.graph_name != first.graph_name:
        raise ConfigError(
            f"graph_name: the config says {config.graph_name!r} but the servers serve {first.graph_name!r}"
        )


def _check_replicas(
    config: ClusterConfig, part_id: int, owner: PartitionMetadata, metas: list[PartitionMetadata]
) -> None:
    """Check that every server of a replicated partition serves the owner's partition in its role.

    Raises:
        graphstore.errors.ConfigError: a replica of another graph or ranges, an owner that runs as a
            read replica, or a replica that does not (the message names the server).
    """
    for spec, meta in zip(config.replicas_of(part_id), metas, strict=True):
        where = f"server {spec.address} (partition {part_id}, replica {spec.replica})"
        if meta.graph_name != owner.graph_name or tuple(meta.node_bounds) != tuple(owner.node_bounds):
            raise ConfigError(
                f"{where} serves graph {meta.graph_name!r} with node bounds {list(meta.node_bounds)}, "
                f"unlike its owner ({owner.graph_name!r}, {list(owner.node_bounds)})"
            )
        if meta.read_replica != spec.is_read_replica:
            wanted = (
                "a read replica (graphstore server --read-replica)" if spec.is_read_replica else "the owner"
            )
            raise ConfigError(f"{where} should run as {wanted}, but reports read_replica={meta.read_replica}")


def _replica_tensors(owner: PartitionMetadata, metas: list[PartitionMetadata]) -> set[str]:
    """The tensors every server of a partition holds read-only: the pulls any of them may answer."""
    names = {s.name for s in owner.tensors if s.from_partition and not s.writable}
    for meta in metas:
        names &= {s.name for s in meta.tensors if not s.writable}
    return names


def _local_host_names() -> set[str]:
    """The names under which a server on this host may appear in a cluster config."""
    names = {"localhost", "127.0.0.1", "::1", socket.gethostname()}
    try:
        names.add(socket.getfqdn())
    except OSError:  # pragma: no cover
        pass
    return names


def _open_local_partition(config: ClusterConfig, metas: list[PartitionMetadata], rank: int, world: int):
    """Choose and open the co-located partition: ``(local_part_id, {part: reader}, data, part_config)``.

    Raises:
        graphstore.errors.ConfigError: ``local_read: on`` and the chosen partition is not readable here.
    """
    part_config = config.part_config
    if config.local_read == "off":
        return None, {}, None, part_config
    num_parts = len(metas)
    here = _local_host_names()
    if config.local_read == "on":
        candidates = list(range(num_parts))
    else:
        this_host = socket.gethostname()
        candidates = [
            p
            for p, (server, meta) in enumerate(zip(config.servers, metas, strict=True))
            if meta.hostname == this_host or (not meta.hostname and server.host in here)
        ]
    if not candidates:
        return None, {}, None, part_config
    if config.local_part_id is not None:
        if config.local_part_id not in candidates:
            logger.info(
                "local_part_id %d is not co-located with this client; reading it over RPC",
                config.local_part_id,
            )
            return None, {}, None, part_config
        chosen = config.local_part_id
    else:
        home = rank_partitions(rank, world, num_parts)
        chosen = next((p for p in home if p in candidates), candidates[0])
    path = part_config or metas[chosen].part_config
    try:
        reader, data = _open_reader(path, chosen, metas[chosen])
    except (OSError, ValueError, KeyError) as exc:
        if config.local_read == "on":
            raise ConfigError(
                f"local_read: on, but partition {chosen} cannot be read here from {path!r}: {exc}"
            ) from exc
        logger.info("co-located partition %d not readable here (%s); reading it over RPC", chosen, exc)
        return None, {}, None, part_config
    return chosen, {chosen: reader}, data, path


def _open_reader(path: str | None, part_id: int, meta: PartitionMetadata):
    """Load partition ``part_id`` memory-mapped and check it is the one the server serves."""
    if not path:
        raise FileNotFoundError("no partition config path known (set part_config in the cluster config)")
    data = load_partition(path, part_id)
    if (
        data.graph_name != meta.graph_name
        or data.node_start != meta.node_bounds[part_id]
        or data.node_end != meta.node_bounds[part_id + 1]
        or data.edge_start != meta.edge_bounds[part_id]
        or data.edge_end != meta.edge_bounds[part_id + 1]
    ):
        raise ValueError(
            f"partition {part_id} in {path!r} is not the one the server serves (graph or ranges differ)"
        )
    return open_in_process(data, read_only=True), data
