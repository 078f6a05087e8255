"""The options of a parallel partitioning run, their check (phase ``check``, on rank 0), and what every
phase of one rank works on (:class:`RankScope`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphstore.partition.chunked import ChunkedGraph, check_chunk_files, read_metadata, read_rows
from graphstore.partition.parallel.collective import Collective
from graphstore.partition.writer import check_output_folder

PARALLEL_METHODS = ("metis", "random", "range")


@dataclass
class ParallelJob:
    """Options of :func:`~graphstore.partition.parallel.partition_chunks` (``graphstore partition --chunks``).

    Attributes:
        chunks: folder of the chunked graph (``metadata.json``).
        graph_name: name of the output (``out_path/graph_name.json``).
        num_parts: number of partitions.
        out_path: output folder; absent or empty unless ``overwrite``.
        part_method: ``metis`` (ParMETIS API), ``random`` or ``range``.
        balance_ntypes: boolean node arrays (e.g. ``["train_mask"]``) whose members each partition gets
            an even share of, per node type.
        balance_edges: also balance in-edges per partition.
        seed: seed of the random assignment and of the partitioner.
        overwrite: replace an existing output folder.
        round_rows: rows each rank sends per all-to-all round (bounds the send buffers).
    """

    chunks: str
    graph_name: str
    num_parts: int
    out_path: str
    part_method: str = "metis"
    balance_ntypes: list[str] | None = None
    balance_edges: bool = False
    seed: int = 0
    overwrite: bool = False
    round_rows: int = 1 << 22


def check_job(job: ParallelJob) -> ChunkedGraph:
    """Check the options, the chunked graph's metadata and every chunk header.

    Returns:
        The chunked graph's metadata.

    Raises:
        ValueError: a bad option or a malformed chunk (named).
        FileNotFoundError: the metadata or a chunk file is missing (named).
        FileExistsError: the output folder is not empty, without ``overwrite``.
    """
    if job.part_method not in PARALLEL_METHODS:
        raise ValueError(f"part_method must be one of {list(PARALLEL_METHODS)}, got {job.part_method!r}")
    if (
        not isinstance(job.graph_name, str)
        or not job.graph_name
        or not all(c.isalnum() or c in "-_." for c in job.graph_name)
    ):
        raise ValueError(f"graph_name must be letters, digits, '-', '_', '.', got {job.graph_name!r}")
    graph = read_metadata(job.chunks)
    check_chunk_files(graph)
    total = sum(graph.nodes_per_type)
    if (
        isinstance(job.num_parts, bool)
        or not isinstance(job.num_parts, int)
        or not 1 <= job.num_parts <= total
    ):
        raise ValueError(f"num_parts must be an int in [1, {total}], got {job.num_parts!r}")
    for name in job.balance_ntypes or []:
        if not any(name in arrays for arrays in graph.node_data.values()):
            raise ValueError(f"balance_ntypes names {name!r}, which no node type has")
    check_output_folder(job.out_path, job.overwrite)
    return graph


@dataclass
class RankScope:
    """What every phase of one rank works on: the ranks, the options, the graph and this rank's nodes.

    Attributes:
        col: the ranks.
        job: the options.
        graph: the chunked graph's metadata.
        vtxdist: int64 ``[size + 1]``: rank ``r`` holds the homogeneous node IDs
            ``[vtxdist[r], vtxdist[r + 1])`` (an even split of the type-major ID space).
        ntype: node type ID of each node of this rank's range.
    """

    col: Collective
    job: ParallelJob
    graph: ChunkedGraph
    vtxdist: np.ndarray
    ntype: np.ndarray

    @classmethod
    def split(cls, col: Collective, job: ParallelJob, graph: ChunkedGraph) -> RankScope:
        """This rank's share of an even split of the graph's nodes over the ranks."""
        offsets = graph.node_offsets
        num_nodes = int(offsets[-1])
        vtxdist = np.array([num_nodes * r // col.size for r in range(col.size + 1)], dtype=np.int64)
        lo, hi = int(vtxdist[col.rank]), int(vtxdist[col.rank + 1])
        ntype = (np.searchsorted(offsets, np.arange(lo, hi), side="right") - 1).astype(np.int64)
        return cls(col, job, graph, vtxdist, ntype)

    @property
    def lo(self) -> int:
        """This rank's first node ID."""
        return int(self.vtxdist[self.col.rank])

    @property
    def hi(self) -> int:
        """One past this rank's last node ID."""
        return int(self.vtxdist[self.col.rank + 1])

    def node_rows(self, t: int, name: str) -> np.ndarray | None:
        """Rows of node array ``name`` of type ``t`` for this rank's nodes of that type (in ID order);
        None where the rank holds no node of the type."""
        off = self.graph.node_offsets
        a, b = max(self.lo, off[t]) - off[t], min(self.hi, off[t + 1]) - off[t]
        spec = self.graph.node_data[self.graph.ntypes[t]][name]
        return read_rows(spec["files"], self.graph.nodes_per_chunk[t], int(a), int(b)) if b > a else None
