"""New node and edge IDs for a partitioned graph: each partition owns one contiguous range of each,
and inside it, one contiguous range per type.

Nodes are relabeled so partition ``k`` owns one contiguous ID range, stable within the partition
(original order). The input's homogeneous IDs are type-major (type 0's nodes first), so inside a
partition the node types come out one after the other in type-ID order. Each edge goes to its
destination's partition; inside a partition edges are sorted by (edge type, new destination), so the
edges of one type form an in-edge CSR over the destination type's nodes (the position is the edge ID).
The out-edges of every partition's own nodes are ordered by (edge type, new source) the same way.
A homogeneous graph (one type of each) gets exactly the order "sorted by destination".

With ``keep_edge_ids`` the edge IDs are not the CSR positions: inside each partition, per edge type,
they follow the input's order. With one partition that keeps every input edge ID (DGL keeps node and
edge IDs when it does not shuffle); the positions then map to IDs through ``position_eid``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphstore.partition.key_sort import CHUNK, gather, id_dtype, stable_key_order


@dataclass
class Relabeling:
    """New IDs of a partitioned graph.

    Node-sized arrays are int64; edge-sized ones use the narrowest dtype that holds their values
    (int32 node and edge IDs below 2**31, int8 edge types below 128 types), which halves the memory of
    a large graph's relabeling.

    Attributes:
        node_bounds, edge_bounds: ``num_parts + 1`` homogeneous range boundaries.
        ntype_counts: int64 ``[num_parts, num_ntypes]`` nodes of each type per partition.
        etype_counts: int64 ``[num_parts, num_etypes]`` (in-)edges of each type per partition.
        orig_nid: int64 [N], original (homogeneous input) ID of each new node ID.
        orig_eid: [E], original input position of each new edge ID.
        new_src, new_dst: [E], new endpoint IDs of the edge at each CSR position (sorted by partition,
            type, new destination).
        edge_type: [E], type of the edge at each CSR position (also of each new edge ID: both orders
            group a partition's edges by type with the same counts).
        out_eid: [E], CSR positions ordered by (partition of the source, edge type, new source).
        out_bounds: ``num_parts + 1`` boundaries of ``out_eid``: the out-edges of partition ``k``'s nodes.
        position_eid: [E], the new edge ID of each CSR position, or None when they are the positions.
    """

    node_bounds: np.ndarray
    edge_bounds: np.ndarray
    ntype_counts: np.ndarray
    etype_counts: np.ndarray
    orig_nid: np.ndarray
    orig_eid: np.ndarray
    new_src: np.ndarray
    new_dst: np.ndarray
    edge_type: np.ndarray
    out_eid: np.ndarray
    out_bounds: np.ndarray
    position_eid: np.ndarray | None = None

    def edge_ids_at(self, positions: np.ndarray) -> np.ndarray:
        """The new edge IDs of CSR positions."""
        return positions if self.position_eid is None else self.position_eid[positions]


def type_dtype(num_types: int) -> np.dtype:
    """The narrowest signed integer dtype for type IDs ``0 .. num_types - 1``."""
    for dtype in (np.int8, np.int16, np.int32):
        if num_types <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def _node_key_tables(node_bounds: np.ndarray, num_etypes: int) -> tuple[np.ndarray, np.ndarray]:
    """Per new node ID ``v`` in partition ``k`` (``n_k`` nodes from ``node_bounds[k]``): its key base
    ``num_etypes * node_bounds[k] + (v - node_bounds[k])`` and its partition's size ``n_k``.

    An edge of type ``t`` at ``v`` then sorts by ``base[v] + t * size[v]``: partition ``k``'s keys fill
    ``[num_etypes * node_bounds[k], num_etypes * node_bounds[k+1])`` ordered by (type, ``v``), so one sort
    orders every edge by (partition, type, ``v``). Two table lookups per edge replace a search.
    """
    sizes = np.diff(node_bounds)
    size = np.repeat(sizes, sizes)
    base = np.arange(int(node_bounds[-1]), dtype=np.int64) + np.repeat(
        (num_etypes - 1) * node_bounds[:-1], sizes
    )
    return base, size


def _edge_order(ids, types, node_bounds: np.ndarray, num_etypes: int) -> np.ndarray:
    """Positions of the edges sorted by (partition of ``ids``, type, ``ids``), ties by position."""
    num_nodes = int(node_bounds[-1])
    if types is None or num_etypes == 1:
        return stable_key_order(int(ids.shape[0]), num_nodes, lambda s, e: ids[s:e])[1]
    base, size = _node_key_tables(node_bounds, num_etypes)

    def key_of(start: int, end: int) -> np.ndarray:
        piece = ids[start:end]
        key = size[piece]
        key *= types[start:end]
        key += base[piece]
        return key

    return stable_key_order(int(ids.shape[0]), max(num_nodes * num_etypes, 1), key_of)[1]


def _part_counts(ids: np.ndarray, bounds: np.ndarray, num_parts: int, types=None, num_types: int = 1):
    """int64 [num_parts, num_types]: how many ``ids`` fall in each range of ``bounds``, per type."""
    counts = np.zeros(num_parts * num_types, dtype=np.int64)
    for start in range(0, ids.shape[0], CHUNK):
        part = np.searchsorted(bounds, ids[start : start + CHUNK], side="right") - 1
        if types is not None:
            part = part * num_types + types[start : start + CHUNK]
        counts += np.bincount(part, minlength=num_parts * num_types)
    return counts.reshape(num_parts, num_types)


def relabel(
    part: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    num_parts: int,
    *,
    node_type: np.ndarray | None = None,
    num_ntypes: int = 1,
    edge_type: np.ndarray | None = None,
    num_etypes: int = 1,
    keep_edge_ids: bool = False,
) -> Relabeling:
    """Relabel nodes and edges so that each partition owns contiguous ranges, per type inside.

    Memory: the edge endpoints are read a chunk at a time (memory-mapped input stays out of the
    resident set); at ``E`` edges below 2**31 the peak is about ``24 E`` bytes (four int32 edge arrays
    and one packed int64 sort key).

    Args:
        part: int [N] partition per node.
        src, dst: input edge endpoints (homogeneous input IDs, type-major).
        num_parts: number of partitions.
        node_type: int [N] type per input node, non-decreasing (None: one type).
        num_ntypes: number of node types.
        edge_type: int [E] type per input edge (None: one type).
        num_etypes: number of edge types.
        keep_edge_ids: number each partition's edges of a type in input order (not CSR order); with
            one partition the new edge IDs are the input's.

    Returns:
        The :class:`Relabeling`.
    """
    num_nodes = int(part.shape[0])
    num_edges = int(src.shape[0])
    part = np.asarray(part)
    node_type = np.zeros(num_nodes, dtype=np.int64) if node_type is None else np.asarray(node_type)
    typed = num_etypes > 1 and edge_type is not None
    node_ids = id_dtype(num_nodes)
    _, orig_nid = stable_key_order(num_nodes, num_parts, lambda s, e: part[s:e])
    orig_nid = orig_nid.astype(np.int64)
    node_bounds = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(np.bincount(part, minlength=num_parts), out=node_bounds[1:])
    ntype_counts = np.bincount(part * num_ntypes + node_type, minlength=num_parts * num_ntypes).reshape(
        num_parts, num_ntypes
    )
    new_of_orig = np.empty(num_nodes, dtype=node_ids)
    new_of_orig[orig_nid] = np.arange(num_nodes, dtype=node_ids)

    # In-edges: sorted by (partition, type, new destination), then input position.
    mapped = gather(new_of_orig, dst)
    orig_eid = _edge_order(mapped, edge_type if typed else None, node_bounds, num_etypes)
    new_dst = gather(mapped, orig_eid)
    del mapped
    new_src = gather(gather(new_of_orig, src), orig_eid)
    del new_of_orig
    if typed:
        new_type = gather(np.asarray(edge_type), orig_eid, dtype=type_dtype(num_etypes))
    else:
        new_type = np.zeros(num_edges, dtype=type_dtype(max(num_etypes, 1)))  # untouched zero pages
    etype_counts = _part_counts(new_dst, node_bounds, num_parts, new_type if typed else None, num_etypes)
    edge_bounds = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(etype_counts.sum(axis=1), out=edge_bounds[1:])

    # Out-edges of each partition's nodes: sorted by (partition of the source, type, new source).
    out_eid = _edge_order(new_src, new_type if typed else None, node_bounds, num_etypes)
    out_bounds = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(_part_counts(new_src, node_bounds, num_parts)[:, 0], out=out_bounds[1:])
    position_eid = None
    if keep_edge_ids:
        position_eid = input_order_ids(orig_eid, edge_bounds)
        if np.array_equal(position_eid, np.arange(num_edges)):
            position_eid = None
        else:
            by_id = np.empty_like(orig_eid)
            by_id[position_eid] = orig_eid
            orig_eid = by_id
    return Relabeling(
        node_bounds=node_bounds,
        edge_bounds=edge_bounds,
        ntype_counts=ntype_counts.astype(np.int64),
        etype_counts=etype_counts.astype(np.int64),
        orig_nid=orig_nid,
        orig_eid=orig_eid,
        position_eid=position_eid,
        new_src=new_src,
        new_dst=new_dst,
        edge_type=new_type,
        out_eid=out_eid,
        out_bounds=out_bounds,
    )


def input_order_ids(orig_position: np.ndarray, edge_bounds: np.ndarray) -> np.ndarray:
    """New edge IDs that number each partition's edges in input order.

    Args:
        orig_position: [E] the input position of the edge at each CSR position.
        edge_bounds: ``num_parts + 1`` boundaries of the partitions' CSR positions.

    Returns:
        int64 [E]: the new ID of each CSR position: ``edge_bounds[k]`` plus the edge's rank by input
        position among partition ``k``'s edges. The input is type-major, so inside a partition the
        types stay in type order with the same counts.
    """
    ids = np.empty(orig_position.shape[0], dtype=np.int64)
    if len(edge_bounds) == 2:  # one partition: the ranks are the input positions themselves
        ids[:] = orig_position
        return ids
    for start, end in zip(edge_bounds[:-1], edge_bounds[1:], strict=True):
        order = np.argsort(orig_position[start:end], kind="stable")
        ids[start + order] = np.arange(start, end, dtype=np.int64)
    return ids


def csr_pieces(
    rows: np.ndarray,
    types: np.ndarray,
    type_row_start: np.ndarray,
    type_row_count: np.ndarray,
    num_types: int,
) -> list[np.ndarray]:
    """Row pointers of one partition's edges, one CSR per edge type.

    Args:
        rows: the endpoint (local node index in the partition) of each edge, grouped by type and sorted
            by endpoint inside a type.
        types: the type of each edge (non-decreasing).
        type_row_start: per edge type, the local index of its endpoint type's first node.
        type_row_count: per edge type, its endpoint type's node count in the partition.
        num_types: number of edge types.

    Returns:
        Per edge type, an int64 ``indptr`` of ``type_row_count[e] + 1`` entries: absolute positions into
        the partition's edge array.
    """
    types = np.asarray(types)
    starts = np.searchsorted(types, np.arange(num_types + 1, dtype=types.dtype), side="left")
    pieces = []
    for e in range(num_types):
        segment = rows[starts[e] : starts[e + 1]] - type_row_start[e]
        indptr = np.empty(int(type_row_count[e]) + 1, dtype=np.int64)
        indptr[0] = starts[e]
        np.cumsum(np.bincount(segment, minlength=int(type_row_count[e])), out=indptr[1:])
        indptr[1:] += starts[e]
        pieces.append(indptr)
    return pieces


def map_back_nodes(orig_nid: np.ndarray, new_ids: np.ndarray | Sequence[int]) -> np.ndarray:
    """Original node IDs of new node IDs (``orig_nid[new_ids]``)."""
    return np.asarray(orig_nid)[np.asarray(new_ids, dtype=np.int64)]
