"""Phase ``load`` of the parallel partitioner: each rank reads its share of the edge chunks, and the rows
of an edge array for its edges.

Rank ``r`` of ``K`` reads the edge chunks ``j`` with ``j % K == r`` (counting the chunks of every edge
type in order); node rows are read by :meth:`~graphstore.partition.parallel.job.RankScope.node_rows`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphstore.partition.chunked import ChunkedGraph, storage_of
from graphstore.partition.parallel.collective import Collective, id_dtype


@dataclass
class LocalEdges:
    """The edges one rank read.

    Attributes:
        src, dst: homogeneous input IDs of the endpoints.
        etype: edge type ID of each edge.
        eid: per-type input edge ID of each edge.
        chunks: the ``(edge type, chunk index)`` pairs read, in order.
    """

    src: np.ndarray | None
    dst: np.ndarray | None
    etype: np.ndarray
    eid: np.ndarray
    chunks: list[tuple[int, int]]


def load_edges(col: Collective, graph: ChunkedGraph) -> LocalEdges:
    """Read this rank's edge chunks, checking every ID against its node type's count (collective).

    Raises:
        ValueError: an endpoint ID out of range (the chunk file, the ID and the type named), on every rank.
    """
    offsets = graph.node_offsets
    counts = graph.nodes_per_type
    src_t, dst_t = graph.endpoint_types()
    work = [(e, i) for e in range(len(graph.etypes)) for i in range(len(graph.edges_per_chunk[e]))]
    mine = [w for j, w in enumerate(work) if j % col.size == col.rank]
    srcs, dsts, types, eids = [], [], [], []
    idt, edt = id_dtype(int(offsets[-1])), id_dtype(max(graph.edges_per_type, default=0))
    error = None
    for e, i in mine:
        path = graph.edge_files[e][i]
        pair = np.load(path, allow_pickle=False).astype(np.int64, copy=False)
        first = int(sum(graph.edges_per_chunk[e][:i]))
        for column, t, what in ((0, src_t[e], "source"), (1, dst_t[e], "destination")):
            ids = pair[:, column]
            if ids.size and (ids.min() < 0 or ids.max() >= counts[t]):
                bad = int(ids[(ids < 0) | (ids >= counts[t])][0])
                error = error or ValueError(
                    f"chunk file {path!r}: {what} ID {bad} out of range [0, {counts[t]}) of node type "
                    f"{graph.ntypes[t]!r}"
                )
        srcs.append((pair[:, 0] + offsets[src_t[e]]).astype(idt))
        dsts.append((pair[:, 1] + offsets[dst_t[e]]).astype(idt))
        types.append(np.full(pair.shape[0], e, dtype=np.int16))
        eids.append(np.arange(first, first + pair.shape[0], dtype=edt))
        del pair
    errors = col.comm.allgather(error)
    first_error = next((x for x in errors if x is not None), None)
    if first_error is not None:
        raise first_error

    def cat(pieces: list[np.ndarray], dtype) -> np.ndarray:
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=dtype)

    return LocalEdges(cat(srcs, idt), cat(dsts, idt), cat(types, np.int16), cat(eids, edt), mine)


def edge_rows(graph: ChunkedGraph, e: int, name: str, edges: LocalEdges) -> np.ndarray:
    """The rows of edge array ``name`` of type ``e`` for this rank's edges of that type (its chunks,
    in the order they were read)."""
    spec = graph.edge_data[graph.etypes[e]][name]
    pieces = [np.load(spec["files"][i], allow_pickle=False) for t, i in edges.chunks if t == e]
    if not pieces:
        return empty_rows(spec)
    return np.concatenate(pieces)


def empty_rows(spec: dict) -> np.ndarray:
    """No rows of an array described by a chunk spec (``{"dtype", "shape"}``)."""
    return np.zeros((0, *spec["shape"]), dtype=storage_of(spec["dtype"]))
