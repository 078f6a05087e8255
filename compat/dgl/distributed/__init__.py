"""``dgl.distributed`` on graphstore: the same names and call signatures, backed by
:mod:`graphstore.client` (servers started by ``graphstore launch`` instead of DGL's launch script).

``initialize(ip_config)`` takes DGL's ``ip_config.txt`` (one ``host [port]`` line per partition
server, in partition order), a graphstore cluster YAML, or nothing under ``graphstore launch``
(which sets ``GRAPHSTORE_CONFIG``). As in DGL it is called before
``torch.distributed.init_process_group``. DGL's sampler-process options (``num_servers``,
``num_samplers``, ``net_type``, ...) are accepted and ignored: graphstore samples in background
threads of the trainer.
"""

from __future__ import annotations

import os

from graphstore.client import api as _api
from graphstore.client import sampling as _sampling
from graphstore.client import split as _split
from graphstore.client.dist_embedding import DistEmbedding
from graphstore.client.dist_graph import DistGraph
from graphstore.client.dist_tensor import DistTensor
from graphstore.client.optim import SparseAdagrad, SparseAdam
from graphstore.compat.dgl.dataloading import DistDataLoader, DistEdgeDataLoader, DistNodeDataLoader
from graphstore.compat.dgl.distributed import optim
from graphstore.partition import PartitionPolicy, RangePartitionBook, load_partition, load_partition_book

# DGL's names of the partition book class.
GraphPartitionBook = RangePartitionBook

# DGL options that configure its sampler processes and RPC layer; graphstore has neither.
_IGNORED_INITIALIZE_OPTIONS = (
    "max_queue_size",
    "net_type",
    "num_worker_threads",
    "num_servers",
    "num_samplers",
)


def initialize(
    ip_config: str | None = None, max_queue_size=None, net_type=None, num_worker_threads=None, **kwargs
):
    """Connect this trainer to the partition servers (``dgl.distributed.initialize``).

    Args:
        ip_config: a DGL ``ip_config.txt`` path (one ``host [port]`` line per partition server, in
            partition order), a graphstore cluster YAML, or None for the ``GRAPHSTORE_CONFIG`` variable
            that ``graphstore launch`` sets.
        max_queue_size, net_type, num_worker_threads: DGL options, ignored.
        kwargs: graphstore options of :func:`graphstore.client.api.initialize` (``local_read``,
            ``part_config``); DGL's ``num_servers`` / ``num_samplers`` are ignored.

    Returns:
        The client context.

    Raises:
        ValueError: no config and no ``GRAPHSTORE_CONFIG``; unknown keyword arguments.
        FileNotFoundError: a missing ``ip_config``.
        graphstore.errors.ServerUnavailableError: a server that does not answer in time.
    """
    for name in _IGNORED_INITIALIZE_OPTIONS:
        kwargs.pop(name, None)
    if isinstance(ip_config, (str, os.PathLike)) and not os.path.exists(ip_config):
        raise FileNotFoundError(f"ip_config {ip_config!r} does not exist")
    return _api.initialize(ip_config, **kwargs)


exit_client = _api.exit_client


def node_split(
    nodes,
    partition_book=None,
    ntype: str = "_N",
    rank: int | None = None,
    force_even: bool = True,
    node_trainer_ids=None,
):
    """The training nodes of this trainer (``dgl.distributed.node_split``).

    Args:
        nodes: a boolean mask over all nodes (e.g. ``g.ndata['train_mask']``) or node IDs.
        partition_book: the graph's partition book (default: the connected graph's).
        ntype: ``'_N'``.
        rank: this trainer's rank (default: the trainer group's).
        force_even: every trainer gets the same number of nodes, plus or minus one.
        node_trainer_ids: DGL's explicit node -> trainer map; not supported (must be None).

    Returns:
        An int64 tensor of node IDs.

    Raises:
        NotImplementedError: for ``node_trainer_ids``.
        ValueError, IndexError, TypeError: as :func:`graphstore.client.split.node_split`.
    """
    if node_trainer_ids is not None:
        raise NotImplementedError(
            "node_split(node_trainer_ids=...) is not supported; graphstore assigns "
            "nodes to trainers by partition"
        )
    return _split.node_split(nodes, partition_book, ntype, rank, force_even)


def edge_split(
    edges,
    partition_book=None,
    etype: str = "_E",
    rank: int | None = None,
    force_even: bool = True,
    edge_trainer_ids=None,
):
    """The training edges of this trainer (``dgl.distributed.edge_split``); see :func:`node_split`.

    Raises:
        NotImplementedError: for ``edge_trainer_ids``.
    """
    if edge_trainer_ids is not None:
        raise NotImplementedError("edge_split(edge_trainer_ids=...) is not supported")
    return _split.edge_split(edges, partition_book, etype, rank, force_even)


def sample_neighbors(
    g,
    nodes,
    fanout: int,
    edge_dir: str = "in",
    prob=None,
    exclude_edges=None,
    replace: bool = False,
    etype_sorted: bool = True,
    output_device=None,
):
    """Sample up to ``fanout`` in- (or out-) edges of each node (``dgl.distributed.sample_neighbors``).

    Returns:
        A :class:`graphstore.client.block.SampledSubgraph` with global IDs (``edata[EID]``); pass it to
        ``to_block``. ``etype_sorted`` and ``output_device`` are accepted for compatibility.
    """
    return _sampling.sample_neighbors(
        g, nodes, fanout, edge_dir=edge_dir, prob=prob, exclude_edges=exclude_edges, replace=replace
    )


find_edges = _sampling.find_edges
in_subgraph = _sampling.in_subgraph


def NodePartitionPolicy(partition_book, ntype: str = "_N") -> PartitionPolicy:  # noqa: N802 - DGL's name
    """The partition policy of node data."""
    return PartitionPolicy(f"node:{ntype}", partition_book)


def EdgePartitionPolicy(partition_book, etype="_E") -> PartitionPolicy:  # noqa: N802 - DGL's name
    """The partition policy of edge data."""
    if isinstance(etype, tuple):
        etype = etype[1]
    return PartitionPolicy(f"edge:{etype}", partition_book)


__all__ = [
    "DistDataLoader",
    "DistEdgeDataLoader",
    "DistEmbedding",
    "DistGraph",
    "DistNodeDataLoader",
    "DistTensor",
    "EdgePartitionPolicy",
    "GraphPartitionBook",
    "NodePartitionPolicy",
    "PartitionPolicy",
    "RangePartitionBook",
    "SparseAdagrad",
    "SparseAdam",
    "edge_split",
    "exit_client",
    "find_edges",
    "in_subgraph",
    "initialize",
    "load_partition",
    "load_partition_book",
    "node_split",
    "optim",
    "sample_neighbors",
]
