"""Phase ``relabel`` of the parallel partitioner: new node and edge IDs, the same layout as the serial
partitioner (:mod:`~graphstore.partition.relabel`: partition ``k`` one contiguous range, types in order,
original order inside), from per-(rank, partition, type) counts; each rank then looks up the new IDs of
its edges' endpoints from the ranks owning them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphstore.partition.parallel.collective import id_dtype, lookup
from graphstore.partition.parallel.job import RankScope
from graphstore.partition.parallel.load import LocalEdges


@dataclass
class ParallelLabels:
    """The new IDs of one rank's nodes and edges, and the partition bounds every rank shares.

    Attributes:
        new_id: new ID of each node of this rank's range.
        node_bounds: int64 [P + 1], each partition's new node ID range.
        ntype_counts: int64 [P, T], nodes of each type per partition.
        new_src, new_dst: new IDs of the endpoints of each of this rank's edges (None once shuffled).
        edge_part: partition of each of this rank's edges (its destination's; None once shuffled).
        edge_bounds: int64 [P + 1], each partition's new edge ID range.
        etype_counts: int64 [P, E], edges of each type per partition.
        edge_cut: fraction of edges whose endpoints lie in different partitions.
        train_nodes: ``train_mask`` nodes per partition (empty without a ``train_mask`` array).
    """

    new_id: np.ndarray
    node_bounds: np.ndarray
    ntype_counts: np.ndarray
    new_src: np.ndarray | None
    new_dst: np.ndarray | None
    edge_part: np.ndarray | None
    edge_bounds: np.ndarray
    etype_counts: np.ndarray
    edge_cut: float
    train_nodes: list[int]

    def part_of_node(self, new_ids: np.ndarray) -> np.ndarray:
        """The partition owning each of ``new_ids`` (new node IDs)."""
        return np.searchsorted(self.node_bounds, new_ids, side="right") - 1


def relabel_parallel(scope: RankScope, edges: LocalEdges, part: np.ndarray) -> ParallelLabels:
    """New IDs for this rank's nodes and its edges' endpoints, and the partition bounds (collective).

    Args:
        scope: this rank's ranks, options (``num_parts``, ``round_rows``), graph and nodes.
        edges: this rank's edges.
        part: partition of each node of this rank's range.

    Returns:
        The labels (the same bounds, counts and edge cut on every rank).
    """
    col, job, graph, vtxdist, ntype = scope.col, scope.job, scope.graph, scope.vtxdist, scope.ntype
    num_parts, num_t = job.num_parts, len(graph.ntypes)
    group = part * num_t + ntype
    local_counts = np.bincount(group, minlength=num_parts * num_t).astype(np.int64)
    all_counts = np.array(col.comm.allgather(local_counts))  # [K, P*T]
    ntype_counts = all_counts.sum(axis=0).reshape(num_parts, num_t)
    node_bounds = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(ntype_counts.sum(axis=1), out=node_bounds[1:])
    type_start = node_bounds[:-1, None] + np.concatenate(
        (np.zeros((num_parts, 1), np.int64), np.cumsum(ntype_counts, axis=1)[:, :-1]), axis=1
    )
    base = type_start.reshape(-1) + all_counts[: col.rank].sum(axis=0)
    order = np.argsort(group, kind="stable")
    sorted_group = group[order]
    first = np.searchsorted(sorted_group, sorted_group, side="left")
    new_id = np.empty(group.shape[0], dtype=id_dtype(int(vtxdist[-1])))
    new_id[order] = base[sorted_group] + np.arange(group.shape[0]) - first
    del order, sorted_group, first
    new_src = lookup(col, edges.src, vtxdist, new_id, job.round_rows)
    new_dst = lookup(col, edges.dst, vtxdist, new_id, job.round_rows)
    src_part = (np.searchsorted(node_bounds, new_src, side="right") - 1).astype(np.int32)
    edge_part = (np.searchsorted(node_bounds, new_dst, side="right") - 1).astype(np.int32)
    cut = int(col.comm.allreduce(int(np.count_nonzero(src_part != edge_part))))
    del src_part
    num_edges = int(col.comm.allreduce(int(edges.src.shape[0])))
    num_e = len(graph.etypes)
    ec = np.bincount(edge_part * num_e + edges.etype, minlength=num_parts * num_e).astype(np.int64)
    etype_counts = col.comm.allreduce(ec).reshape(num_parts, num_e)
    edge_bounds = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(etype_counts.sum(axis=1), out=edge_bounds[1:])
    return ParallelLabels(
        new_id=new_id,
        node_bounds=node_bounds,
        ntype_counts=ntype_counts,
        new_src=new_src,
        new_dst=new_dst,
        edge_part=edge_part,
        edge_bounds=edge_bounds,
        etype_counts=etype_counts,
        edge_cut=cut / max(num_edges, 1),
        train_nodes=_train_nodes(scope, part),
    )


def _train_nodes(scope: RankScope, part: np.ndarray) -> list[int]:
    """``train_mask`` nodes per partition over all ranks; empty when no node type has the mask."""
    graph, num_parts = scope.graph, scope.job.num_parts
    train = np.zeros(num_parts, dtype=np.int64)
    has_train = False
    for t in range(len(graph.ntypes)):
        if "train_mask" in graph.node_data.get(graph.ntypes[t], {}):
            has_train = True
            rows = scope.node_rows(t, "train_mask")
            if rows is not None:
                sel = np.flatnonzero(scope.ntype == t)[np.asarray(rows).astype(bool)]
                train += np.bincount(part[sel], minlength=num_parts)
    train = scope.col.comm.allreduce(train)
    return train.tolist() if has_train else []
