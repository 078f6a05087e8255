"""One partition as the graph DGL's ``load_partition`` returns: a homogeneous in-memory graph of the
partition's own ("inner") nodes and edges plus the halo nodes its in-edges come from.

Layout (DGL's, for ``num_hops=1``):

- local nodes: the inner nodes first, in global ID order (local ``i`` is global ``node_start + i``),
  then the halo nodes (sources of in-edges owned elsewhere), in global ID order;
- local edges: the partition's edges (every in-edge of its nodes), in global edge ID order (local ``j``
  is global ``edge_start + j``), all inner;
- ``ndata``: ``dgl.NID`` (global homogeneous IDs, int64), ``inner_node`` (uint8), ``part_id`` (int64,
  each node's owner), and ``dgl.NTYPE`` (type IDs) on a typed graph or a single partition (DGL
  keeps the type IDs of its homogeneous view when it does not split the graph);
- ``edata``: ``dgl.EID`` (global IDs, int64), ``inner_edge`` (uint8), and ``dgl.ETYPE`` likewise.

The dtypes are :data:`RESERVED_FIELD_DTYPE`. Built from the memory-mapped
:class:`~graphstore.partition.PartitionData` (a copy of the structure, not of the features).
"""

from __future__ import annotations

import numpy as np
import torch

from graphstore.client.constants import EID, NID
from graphstore.compat.dgl.local_graph import LocalGraph
from graphstore.partition import PartitionData
from graphstore.types import DEFAULT_CANONICAL_ETYPE, DEFAULT_NTYPE

# DGL's key of the node / edge type IDs in a partition's graph (dgl.NTYPE and dgl.ETYPE are both it,
# as dgl.NID and dgl.EID are both "_ID").
TYPE_KEY = "_TYPE"
# The dtype of each reserved field of a partition's graph (DGL's RESERVED_FIELD_DTYPE).
RESERVED_FIELD_DTYPE = {
    "inner_node": torch.uint8,
    "inner_edge": torch.uint8,
    NID: torch.int64,
    TYPE_KEY: torch.int32,
}


def _edge_destinations(data: PartitionData) -> np.ndarray:
    """Global homogeneous destination of each in-edge position."""
    dst = np.empty(data.num_local_edges, dtype=np.int64)
    for e, canonical in enumerate(data.schema.canonical_etypes):
        indptr = np.asarray(data.in_indptr_of(e), dtype=np.int64)
        rows = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
        first = data.node_start + int(data.ntype_offsets[data.schema.ntype_id(canonical[2])])
        dst[int(indptr[0]) : int(indptr[-1])] = rows + first
    return dst


def partition_graph_of(data: PartitionData) -> LocalGraph:
    """The partition as DGL's local graph (see the module docstring).

    Args:
        data: a loaded partition.

    Returns:
        A homogeneous :class:`LocalGraph` with the reserved node and edge data.
    """
    positions = np.arange(data.num_local_edges, dtype=np.int64)
    order = np.argsort(data.edge_ids_at(positions), kind="stable")  # positions in edge ID order
    src = np.asarray(data.in_src, dtype=np.int64)[order]
    dst = _edge_destinations(data)[order]
    inner = np.arange(data.node_start, data.node_end, dtype=np.int64)
    outside = (src < data.node_start) | (src >= data.node_end)
    halo = np.unique(src[outside])
    nodes = np.concatenate([inner, halo])
    local_src = np.where(outside, inner.size + np.searchsorted(halo, src), src - data.node_start)
    local_dst = dst - data.node_start
    g = LocalGraph(
        {DEFAULT_CANONICAL_ETYPE: (torch.from_numpy(local_src), torch.from_numpy(local_dst))},
        {DEFAULT_NTYPE: int(nodes.size)},
    )
    book = data.book
    g.ndata[NID] = torch.from_numpy(nodes)
    g.ndata["inner_node"] = torch.from_numpy((np.arange(nodes.size) < inner.size).astype(np.uint8))
    g.ndata["part_id"] = torch.as_tensor(np.asarray(book.nid2partid(nodes)), dtype=torch.int64)
    g.edata[EID] = torch.arange(data.edge_start, data.edge_end, dtype=torch.int64)
    g.edata["inner_edge"] = torch.ones(data.num_local_edges, dtype=torch.uint8)
    if not data.schema.is_homogeneous or book.num_partitions() == 1:
        ntype_ids, _ = book.map_to_per_ntype(nodes)
        g.ndata[TYPE_KEY] = torch.as_tensor(np.asarray(ntype_ids)).to(RESERVED_FIELD_DTYPE[TYPE_KEY])
        counts = np.diff(np.asarray(data.etype_offsets))
        etype_ids = np.repeat(np.arange(counts.size), counts)
        g.edata[TYPE_KEY] = torch.from_numpy(etype_ids).to(RESERVED_FIELD_DTYPE[TYPE_KEY])
    return g


__all__ = ["RESERVED_FIELD_DTYPE", "TYPE_KEY", "partition_graph_of"]
