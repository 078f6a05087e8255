"""Phase ``shuffle`` of the parallel partitioner: edges, nodes and their arrays to the ranks writing
their partitions.

Partition ``k`` is written by rank ``k % K``. In-edges go to the writer of their destination's
partition, out-edges to the writer of their source's, nodes and node arrays to the writer of theirs, in
rounds of at most ``round_rows`` rows per rank (MPI all-to-all), so send buffers stay bounded. Rows are
ordered as the serial partitioner orders them (:mod:`~graphstore.partition.relabel`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphstore.partition.parallel.collective import id_dtype
from graphstore.partition.parallel.job import RankScope
from graphstore.partition.parallel.load import LocalEdges, edge_rows, empty_rows
from graphstore.partition.parallel.relabel import ParallelLabels


def writer_of(parts: np.ndarray, size: int) -> np.ndarray:
    """The rank writing each of the partitions ``parts`` (partition ``k`` by rank ``k % size``)."""
    return parts % size


@dataclass
class RankShare:
    """What one rank received to write: the edges, nodes and arrays of its partitions.

    Attributes:
        in_edges: ``[n, 4]`` (new source, new destination, edge type, per-type input edge ID), in the
            serial order (partition, edge type, new destination, input edge ID).
        new_eid: the new edge ID of each row of ``in_edges``.
        out_edges: ``[m, 4]`` (new source, new destination, new edge ID, edge type) of the edges whose
            source lies in this rank's partitions, by (partition, edge type, source, edge ID).
        nodes: ``[v, 2]`` (new ID, per-type input ID) of this rank's partitions' nodes, by new ID.
        edge_arrays: ``{(edge type key, name): rows}``, one row per ``in_edges`` row of that type, in
            that order.
        node_arrays: ``{(node type, name): (new IDs, rows)}``, by new ID.
    """

    in_edges: np.ndarray
    new_eid: np.ndarray
    out_edges: np.ndarray
    nodes: np.ndarray
    edge_arrays: dict[tuple[str, str], np.ndarray]
    node_arrays: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]


def shuffle(scope: RankScope, edges: LocalEdges, labels: ParallelLabels) -> RankShare:
    """Send edges, nodes and arrays to the ranks writing their partitions (collective).

    ``labels.new_src``, ``new_dst`` and ``edge_part`` are released on the way (set to None).

    Returns:
        This rank's share.
    """
    col, job, graph, ntype = scope.col, scope.job, scope.graph, scope.ntype
    dest = writer_of(labels.edge_part, col.size)
    labels.edge_part = None
    in_edges, new_eid = _in_edges(col, job, edges, labels, dest)
    edge_arrays = _edge_arrays(scope, edges, dest, in_edges)
    # Out-edges: (new_src, new_dst, new_eid, etype) to the writer of the source's partition.
    out_rec = np.stack([in_edges[:, 0], in_edges[:, 1], new_eid, in_edges[:, 2]], axis=1)
    back = col.shuffle(out_rec, writer_of(labels.part_of_node(out_rec[:, 0]), col.size), job.round_rows)
    del out_rec
    out_edges = back[np.lexsort((back[:, 2], back[:, 0], back[:, 3], labels.part_of_node(back[:, 0])))]
    del back
    # Nodes: (new ID, per-type input ID), then each node array.
    node_dest = writer_of(labels.part_of_node(labels.new_id), col.size)
    local = np.arange(scope.lo, scope.hi, dtype=np.int64) - graph.node_offsets[ntype]
    nodes = col.shuffle(np.stack([labels.new_id, local], axis=1), node_dest, job.round_rows)
    nodes = nodes[np.argsort(nodes[:, 0])]
    node_arrays = _node_arrays(scope, labels, node_dest)
    return RankShare(in_edges, new_eid, out_edges, nodes, edge_arrays, node_arrays)


def _in_edges(col, job, edges, labels, dest) -> tuple[np.ndarray, np.ndarray]:
    """In-edges (new_src, new_dst, etype, per-type input edge ID) to the writer of the destination's
    partition, in the serial order, and their new edge IDs."""
    rdt = np.result_type(labels.new_src.dtype, edges.eid.dtype, id_dtype(int(labels.edge_bounds[-1])))
    rec = np.stack([labels.new_src, labels.new_dst, edges.etype.astype(rdt), edges.eid.astype(rdt)], axis=1)
    labels.new_src = labels.new_dst = None
    got = col.shuffle(rec, dest, job.round_rows)
    del rec
    # Serial order: (partition, edge type, new destination), ties by input edge ID.
    in_edges = got[np.lexsort((got[:, 3], got[:, 1], got[:, 2], labels.part_of_node(got[:, 1])))]
    del got
    part_of = labels.part_of_node(in_edges[:, 1])
    new_eid = labels.edge_bounds[part_of] + (np.arange(in_edges.shape[0]) - np.searchsorted(part_of, part_of))
    return in_edges, new_eid.astype(rdt)


def _edge_arrays(scope, edges, dest, in_edges) -> dict[tuple[str, str], np.ndarray]:
    """Each edge array's rows to the writer of its edge, placed at the edge's row among that rank's
    in-edges of its type. The edges' IDs travel and are placed once per edge type, not once per array."""
    col, job, graph = scope.col, scope.job, scope.graph
    out = {}
    for e, key in enumerate(graph.etypes):
        names = list(graph.edge_data.get(key, {}))
        if not names:
            continue
        sel = np.flatnonzero(edges.etype == e)
        dest_e = dest[sel]
        got_eid = col.shuffle(edges.eid[sel], dest_e, job.round_rows)
        mine = in_edges[in_edges[:, 2] == e, 3]
        sorter = np.argsort(mine)
        placement = sorter[np.searchsorted(mine, got_eid, sorter=sorter)]
        del got_eid, mine, sorter
        for name in names:
            got_rows = col.shuffle(edge_rows(graph, e, name, edges), dest_e, job.round_rows)
            placed = np.empty_like(got_rows)
            placed[placement] = got_rows
            out[(key, name)] = placed
    return out


def _node_arrays(scope, labels, node_dest) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """Each node array's rows to the writer of its node, with the nodes' new IDs, sorted by new ID.
    The IDs travel and are sorted once per node type, not once per array."""
    col, job, graph, ntype = scope.col, scope.job, scope.graph, scope.ntype
    out = {}
    for t, ntype_name in enumerate(graph.ntypes):
        names = list(graph.node_data.get(ntype_name, {}))
        if not names:
            continue
        sel = np.flatnonzero(ntype == t)
        dest_t = node_dest[sel]
        ids = col.shuffle(labels.new_id[sel], dest_t, job.round_rows)
        order = np.argsort(ids)
        ids = ids[order]
        for name in names:
            rows = scope.node_rows(t, name)
            if rows is None:
                rows = empty_rows(graph.node_data[ntype_name][name])
            got_rows = col.shuffle(rows, dest_t, job.round_rows)
            out[(ntype_name, name)] = (ids, got_rows[order])
    return out
