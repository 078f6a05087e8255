"""One partition as the graph DGL's ``load_partition`` returns: a homogeneous in-memory graph of the
partition's own ("inner") nodes and edges plus the halo nodes its in-edges come from.

Layout (DGL's):

- local nodes: the inner nodes first, in global ID order (local ``i`` is global ``node_start + i``),
  then the halo nodes (sources of in-edges owned elsewhere), in global ID order, then with
  ``num_hops`` > 1 each further hop's new halo nodes;
- local edges: the partition's edges (every in-edge of its nodes), in global edge ID order (local ``j``
  is global ``edge_start + j``), all inner; with ``num_hops`` > 1 then the in-edges of the halo nodes
  (not inner), read from the partitions that own them;
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
from graphstore.partition import PartitionData, load_partition
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


def _edges_by_id(data: PartitionData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(src, dst, eid)`` of a partition's edges in edge ID order (global homogeneous IDs)."""
    positions = np.arange(data.num_local_edges, dtype=np.int64)
    order = np.argsort(data.edge_ids_at(positions), kind="stable")
    src = np.asarray(data.in_src, dtype=np.int64)[order]
    eid = np.arange(data.edge_start, data.edge_end, dtype=np.int64)
    return src, _edge_destinations(data)[order], eid


def _halo_edges(data: PartitionData, frontier: np.ndarray, loaded: dict) -> tuple[np.ndarray, ...]:
    """The in-edges of the nodes ``frontier`` (owned by other partitions), read from their partitions'
    files (loaded once, memory-mapped): ``(src, dst, eid)`` sorted by edge ID."""
    owners = np.asarray(data.book.nid2partid(frontier))
    pieces = []
    for part_id in np.unique(owners):
        if part_id not in loaded:
            loaded[part_id] = _edges_by_id(load_partition(data.config_path, int(part_id)))
        src, dst, eid = loaded[part_id]
        mine = np.isin(dst, frontier[owners == part_id])
        pieces.append((src[mine], dst[mine], eid[mine]))
    src, dst, eid = (np.concatenate(column) for column in zip(*pieces, strict=True))
    order = np.argsort(eid, kind="stable")
    return src[order], dst[order], eid[order]


def _positions(nodes: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The position in ``nodes`` (distinct IDs) of each of ``ids``."""
    order = np.argsort(nodes, kind="stable")
    return order[np.searchsorted(nodes[order], ids)]


def partition_graph_of(data: PartitionData, num_hops: int = 1) -> LocalGraph:
    """The partition as DGL's local graph (see the module docstring).

    Args:
        data: a loaded partition.
        num_hops: the halo's depth: with ``k`` > 1 the graph also holds the in-edges of the halo nodes
            up to ``k - 1`` hops out (read from the other partitions' files; not inner edges), as DGL
            builds a ``num_hops=k`` partition.

    Returns:
        A homogeneous :class:`LocalGraph` with the reserved node and edge data.
    """
    src, dst, eid = _edges_by_id(data)
    inner = np.arange(data.node_start, data.node_end, dtype=np.int64)
    halo = np.unique(src[(src < data.node_start) | (src >= data.node_end)])
    nodes, frontier, loaded = np.concatenate([inner, halo]), halo, {}
    num_inner_edges = src.size
    for _ in range(int(num_hops) - 1):
        if frontier.size == 0:
            break
        more_src, more_dst, more_eid = _halo_edges(data, frontier, loaded)
        src, dst, eid = (
            np.concatenate([src, more_src]),
            np.concatenate([dst, more_dst]),
            np.concatenate([eid, more_eid]),
        )
        frontier = np.setdiff1d(more_src, nodes)
        nodes = np.concatenate([nodes, frontier])
    g = LocalGraph(
        {
            DEFAULT_CANONICAL_ETYPE: (
                torch.from_numpy(_positions(nodes, src)),
                torch.from_numpy(_positions(nodes, dst)),
            )
        },
        {DEFAULT_NTYPE: int(nodes.size)},
    )
    book = data.book
    g.ndata[NID] = torch.from_numpy(nodes)
    g.ndata["inner_node"] = torch.from_numpy((np.arange(nodes.size) < inner.size).astype(np.uint8))
    g.ndata["part_id"] = torch.as_tensor(np.asarray(book.nid2partid(nodes)), dtype=torch.int64)
    g.edata[EID] = torch.from_numpy(eid)
    g.edata["inner_edge"] = torch.from_numpy((np.arange(eid.size) < num_inner_edges).astype(np.uint8))
    if not data.schema.is_homogeneous or book.num_partitions() == 1:
        ntype_ids, _ = book.map_to_per_ntype(nodes)
        g.ndata[TYPE_KEY] = torch.as_tensor(np.asarray(ntype_ids)).to(RESERVED_FIELD_DTYPE[TYPE_KEY])
        etype_ids, _ = book.map_to_per_etype(eid)
        g.edata[TYPE_KEY] = torch.as_tensor(np.asarray(etype_ids)).to(RESERVED_FIELD_DTYPE[TYPE_KEY])
    return g


__all__ = ["RESERVED_FIELD_DTYPE", "TYPE_KEY", "partition_graph_of"]
