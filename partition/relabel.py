"""New node and edge IDs for a partitioned graph: each partition owns one contiguous range of each.

Nodes are relabeled so partition ``k`` owns one contiguous ID range (stable: within a partition,
original order); each edge goes to its destination's partition and edges are relabeled so that,
inside a partition, they are sorted by destination (the position in the in-edge CSR is the edge ID).
The out-edge CSR of every partition's own nodes is built from the same relabeling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphstore.partition.symmetric_csr import sort_pairs


@dataclass
class Relabeling:
    """New IDs of a partitioned graph.

    Attributes:
        node_bounds, edge_bounds: ``num_parts + 1`` range boundaries.
        orig_nid: int64 [N], original ID of each new node ID.
        orig_eid: int64 [E], original ID of each new edge ID.
        new_src, new_dst: int64 [E], new endpoint IDs indexed by new edge ID (``new_dst`` is sorted).
        in_indptr: int64 [N + 1], in-edge CSR over new node IDs (positions are new edge IDs).
        out_eid: int64 [E], new edge IDs sorted by (new source, new edge ID).
        out_indptr: int64 [N + 1], out-edge CSR over new node IDs (positions index ``out_eid``).
    """

    node_bounds: np.ndarray
    edge_bounds: np.ndarray
    orig_nid: np.ndarray
    orig_eid: np.ndarray
    new_src: np.ndarray
    new_dst: np.ndarray
    in_indptr: np.ndarray
    out_eid: np.ndarray
    out_indptr: np.ndarray


def _csr_indptr(sorted_rows: np.ndarray, num_rows: int) -> np.ndarray:
    indptr = np.zeros(num_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(sorted_rows, minlength=num_rows), out=indptr[1:])
    return indptr


def relabel(part: np.ndarray, src: np.ndarray, dst: np.ndarray, num_parts: int) -> Relabeling:
    """Relabel nodes and edges so that each partition owns contiguous ranges.

    Args:
        part: int64 [N] partition per node.
        src, dst: original edge endpoints.
        num_parts: number of partitions.

    Returns:
        The :class:`Relabeling`.
    """
    num_nodes = int(part.shape[0])
    num_edges = int(src.shape[0])
    _, orig_nid = sort_pairs(part, np.arange(num_nodes, dtype=np.int64), num_nodes)
    node_bounds = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(np.bincount(part, minlength=num_parts), out=node_bounds[1:])
    new_of_orig = np.empty(num_nodes, dtype=np.int64)
    new_of_orig[orig_nid] = np.arange(num_nodes, dtype=np.int64)

    # Edges sorted by new destination, then original edge ID: the position is the new edge ID.
    edge_ids = np.arange(num_edges, dtype=np.int64)
    new_dst, orig_eid = sort_pairs(new_of_orig[np.asarray(dst)], edge_ids, num_edges)
    new_src = new_of_orig[np.asarray(src)[orig_eid]]
    del new_of_orig
    in_indptr = _csr_indptr(new_dst, num_nodes)
    edge_bounds = in_indptr[node_bounds]

    sorted_src, out_eid = sort_pairs(new_src, edge_ids, num_edges)
    del edge_ids
    out_indptr = _csr_indptr(sorted_src, num_nodes)
    del sorted_src
    return Relabeling(
        node_bounds=node_bounds,
        edge_bounds=edge_bounds,
        orig_nid=orig_nid,
        orig_eid=orig_eid,
        new_src=new_src,
        new_dst=new_dst,
        in_indptr=in_indptr,
        out_eid=out_eid,
        out_indptr=out_indptr,
    )


def map_back_nodes(orig_nid: np.ndarray, new_ids: np.ndarray | Sequence[int]) -> np.ndarray:
    """Original node IDs of new node IDs (``orig_nid[new_ids]``)."""
    return np.asarray(orig_nid)[np.asarray(new_ids, dtype=np.int64)]
