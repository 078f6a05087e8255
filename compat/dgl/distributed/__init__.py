"""``dgl.distributed`` on graphstore: DGL 2.4's names, call signatures and return types, backed by
:mod:`graphstore.client` (servers started by ``graphstore launch`` instead of DGL's launch script).

``initialize(ip_config)`` takes DGL's ``ip_config.txt``, a graphstore cluster YAML, or nothing under
``graphstore launch`` (which sets ``GRAPHSTORE_CONFIG``); where the cluster is given that way, a DGL
``ip_config.txt`` is only checked against it. As in DGL it is called before
``torch.distributed.init_process_group``. Arguments graphstore does not implement accept DGL's
default and raise ``NotImplementedError`` naming the argument for any other value (docs/compat.md
lists every name).
"""

from __future__ import annotations

import os

from graphstore.client import api as _api
from graphstore.client import split as _split
from graphstore.client.dist_embedding import DistEmbedding
from graphstore.compat.dgl.dataloading import DistDataLoader, DistEdgeDataLoader, DistNodeDataLoader
from graphstore.compat.dgl.distributed import optim
from graphstore.compat.dgl.distributed.dist_graph import DistGraph
from graphstore.compat.dgl.distributed.dist_tensor import DistTensor
from graphstore.compat.dgl.distributed.graph_services import (
    find_edges,
    in_subgraph,
    sample_etype_neighbors,
    sample_neighbors,
)
from graphstore.compat.dgl.distributed.graphbolt_partition import DGL2GB_EID, GB_DST_ID
from graphstore.compat.dgl.distributed.optim import SparseAdagrad, SparseAdam
from graphstore.compat.dgl.distributed.partition import (
    dgl_partition_to_graphbolt,
    load_partition,
    load_partition_book,
    load_partition_feats,
    partition_graph,
)
from graphstore.compat.dgl.distributed.partition_book import (
    EdgePartitionPolicy,
    GraphPartitionBook,
    NodePartitionPolicy,
    RangePartitionBook,
)
from graphstore.partition import PartitionPolicy

# DGL's default queue size of its RPC layer (20 GB); graphstore has no such queue.
MAX_QUEUE_SIZE = 20 * 1024 * 1024 * 1024


def initialize(
    ip_config: str | None = None,
    max_queue_size: int = MAX_QUEUE_SIZE,
    net_type: str | None = None,
    num_worker_threads: int = 1,
    use_graphbolt: bool = False,
    **kwargs,
):
    """Connect this trainer to the partition servers (``dgl.distributed.initialize``).

    Args:
        ip_config: a DGL ``ip_config.txt`` path (one ``host [port]`` line per partition server, in
            partition order), a graphstore cluster YAML, or None for ``GRAPHSTORE_CONFIG``. Under
            ``graphstore launch`` (or with ``GRAPHSTORE_CONFIG`` set) an ``ip_config.txt`` is checked
            against the launched cluster, which is used.
        max_queue_size, net_type, num_worker_threads: DGL's RPC options; graphstore's transport is gRPC,
            so they have no effect (a value other than DGL's default is logged).
        use_graphbolt: False (True raises NotImplementedError).
        kwargs: graphstore options of :func:`graphstore.client.api.initialize` (``local_read``,
            ``part_config``).

    Returns:
        The client context; None in DGL's standalone mode (``DGL_DIST_MODE=standalone``, as DGL: the
        DistGraph then opens its one partition in-process from ``part_config``).

    Raises:
        NotImplementedError: ``use_graphbolt=True``.
        ValueError: no config and no ``GRAPHSTORE_CONFIG``; unknown keyword arguments.
        FileNotFoundError: a missing ``ip_config`` without a launched cluster.
        graphstore.errors.ServerUnavailableError: a server that does not answer in time.
    """
    if os.environ.get("DGL_DIST_MODE") == "standalone" and not os.environ.get("GRAPHSTORE_CONFIG"):
        _api._check_dgl_options({"use_graphbolt": use_graphbolt})
        return None
    return _api.initialize(
        ip_config,
        max_queue_size=None if max_queue_size == MAX_QUEUE_SIZE else max_queue_size,
        net_type=net_type,
        num_worker_threads=None if num_worker_threads == 1 else num_worker_threads,
        use_graphbolt=use_graphbolt,
        **kwargs,
    )


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
        ntype: the node type.
        rank: this trainer's rank (default: the trainer group's).
        force_even: every trainer gets the same number of nodes, plus or minus one.
        node_trainer_ids: each node's trainer (``g.ndata['trainer_id']`` of a graph partitioned with
            ``num_trainers_per_machine``): with ``force_even``, a partition's trainers split its nodes
            by them, as DGL does; ignored without ``force_even``, as in DGL.

    Returns:
        An int64 tensor of node IDs.

    Raises:
        ValueError, IndexError, TypeError: as :func:`graphstore.client.split.node_split`.
    """
    return _split.node_split(nodes, partition_book, ntype, rank, force_even, trainer_ids=node_trainer_ids)


def edge_split(
    edges,
    partition_book=None,
    etype: str = "_E",
    rank: int | None = None,
    force_even: bool = True,
    edge_trainer_ids=None,
):
    """The training edges of this trainer (``dgl.distributed.edge_split``); see :func:`node_split`
    (``edge_trainer_ids``: each edge's trainer)."""
    return _split.edge_split(edges, partition_book, etype, rank, force_even, trainer_ids=edge_trainer_ids)


__all__ = [
    "DGL2GB_EID",
    "GB_DST_ID",
    "MAX_QUEUE_SIZE",
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
    "dgl_partition_to_graphbolt",
    "edge_split",
    "exit_client",
    "find_edges",
    "in_subgraph",
    "initialize",
    "load_partition",
    "load_partition_book",
    "load_partition_feats",
    "node_split",
    "optim",
    "partition_graph",
    "sample_etype_neighbors",
    "sample_neighbors",
]
