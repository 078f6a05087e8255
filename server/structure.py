"""The graph structure of one partition: in- and out-edge CSR per edge type, and the queries over it.

Inside partition ``k`` every node type is a contiguous range of local nodes and every edge type a
contiguous range of local edge positions (see :mod:`graphstore.partition.types`). Edge type ``e`` has
an in-edge CSR over its destination type's local nodes and an out-edge CSR over its source type's,
both holding absolute positions. A query on homogeneous node IDs runs, per edge type, on the seeds
of that type's destination (or source) node type, with the pure vectorized kernels of
:mod:`graphstore.server.sampler`. A homogeneous graph has one edge type: one CSR, as before types.

All IDs in and out are homogeneous global IDs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphstore.partition.types import PartitionData
from graphstore.sampling_rules import per_etype_fanouts
from graphstore.server import sampler

IN = "in"
OUT = "out"
EDGE_DIRS = (IN, OUT)


@dataclass
class SampledEdges:
    """Sampled or selected edges of a partition, grouped by edge type (in type-ID order).

    Attributes:
        src, dst, eid: homogeneous global IDs.
        counts: edges of each edge type, in order.
    """

    src: np.ndarray
    dst: np.ndarray
    eid: np.ndarray
    counts: np.ndarray


def check_edge_dir(edge_dir: str) -> None:
    """Raises ValueError for an ``edge_dir`` other than ``"in"`` / ``"out"``."""
    if edge_dir not in EDGE_DIRS:
        raise ValueError(f"edge_dir must be 'in' or 'out', got {edge_dir!r}")


class PartitionStructure:
    """Typed CSR queries over one loaded partition (plain ndarray views of the mapped arrays).

    Args:
        partition: the loaded partition.
    """

    def __init__(self, partition: PartitionData) -> None:
        p = partition
        self.schema = p.schema
        self.node_start = int(p.node_start)
        self.edge_start = int(p.edge_start)
        self.ntype_offsets = np.asarray(p.ntype_offsets, dtype=np.int64)
        self.num_etypes = len(p.schema.canonical_etypes)
        self.src_type = np.array([p.schema.ntype_id(c[0]) for c in p.schema.canonical_etypes], dtype=np.int64)
        self.dst_type = np.array([p.schema.ntype_id(c[2]) for c in p.schema.canonical_etypes], dtype=np.int64)
        # Plain ndarray views: np.memmap's __getitem__ adds Python overhead to every index operation.
        self.in_indptr = [np.asarray(p.in_indptr_of(e)) for e in range(self.num_etypes)]
        self.out_indptr = [np.asarray(p.out_indptr_of(e)) for e in range(self.num_etypes)]
        self.in_src = np.asarray(p.in_src)
        self.out_dst = np.asarray(p.out_dst)
        self.out_eid = np.asarray(p.out_eid)
        self.etype_offsets = np.asarray(p.etype_offsets, dtype=np.int64)
        # Positions -> local edge IDs and back (the identity unless the partition has in_eid).
        self.edge_ids_at, self.positions_of = p.edge_ids_at, p.positions_of

    @property
    def homogeneous(self) -> bool:
        return self.num_etypes == 1 and len(self.ntype_offsets) == 2

    def node_types(self, local: np.ndarray) -> np.ndarray:
        """Type ID of each local node."""
        if len(self.ntype_offsets) == 2:
            return np.zeros(local.shape, dtype=np.int64)
        return np.searchsorted(self.ntype_offsets, local, side="right") - 1

    def _seeds_of(
        self, local: np.ndarray, types: np.ndarray, node_type: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(indices into local, offsets inside the type)`` of the seeds of one node type."""
        if self.homogeneous:
            return np.arange(local.size, dtype=np.int64), local
        index = np.flatnonzero(types == node_type)
        return index, local[index] - self.ntype_offsets[node_type]

    def fanouts(self, fanout: int | Sequence[int]) -> list[int]:
        """One fanout per edge type: an int applies to all; a sequence gives one per type (0 skips a
        type, -1 takes all).

        Raises:
            ValueError: a sequence of the wrong length, or a fanout below -1.
        """
        return per_etype_fanouts(fanout, self.num_etypes)

    def sample(
        self,
        local: np.ndarray,
        fanout: int | Sequence[int],
        edge_dir: str,
        replace: bool,
        weights: Sequence[np.ndarray | None] | None,
        rng: np.random.Generator,
        exclude: np.ndarray | None = None,
    ) -> SampledEdges:
        """Sample edges around local seeds, per edge type.

        Args:
            local: local node indices of the seeds (may repeat; each occurrence is sampled).
            fanout: per edge type (see :meth:`fanouts`).
            edge_dir: ``"in"`` (edges into the seeds) or ``"out"``.
            replace: with replacement.
            weights: per edge type, a weight per local edge position (``"in"`` only) or None.
            rng: the random generator.
            exclude: homogeneous edge IDs never to draw (a seed samples among its other edges), or None.

        Returns:
            The sampled edges, homogeneous IDs, grouped by edge type.

        Raises:
            ValueError: a bad fanout or edge_dir, or invalid weights.
        """
        check_edge_dir(edge_dir)
        fanouts = self.fanouts(fanout)
        types = self.node_types(local)
        pieces, counts = [], []
        for e in range(self.num_etypes):
            seed_type = self.dst_type[e] if edge_dir == IN else self.src_type[e]
            index, in_type = self._seeds_of(local, types, seed_type)
            if fanouts[e] == 0 or index.size == 0:
                counts.append(0)
                continue
            indptr = self.in_indptr[e] if edge_dir == IN else self.out_indptr[e]
            w = None if weights is None else weights[e]
            if exclude is None or exclude.size == 0:
                positions, seed_index = sampler.sample_neighbors_csr(
                    indptr, in_type, fanouts[e], replace=replace, weights=w, rng=rng
                )
            else:
                affected, excluded = self._exclusion(e, indptr, in_type, edge_dir, exclude)
                positions, seed_index = sampler.sample_neighbors_avoiding(
                    indptr, in_type, fanouts[e], affected, excluded, replace=replace, weights=w, rng=rng
                )
            pieces.append(self._edges_at(positions, self._seed_ids(local, index, seed_index), edge_dir))
            counts.append(positions.size)
        return _concat(pieces, counts)

    def _exclusion(
        self, etype_id: int, indptr: np.ndarray, seeds: np.ndarray, edge_dir: str, exclude: np.ndarray
    ):
        """``(affected seeds, excluded(positions))`` of edge type ``etype_id`` for excluded edge IDs.

        In-edges are stored here, so an excluded in-edge is a CSR position and only its destination is
        affected. Out-edges belong to their destinations' partitions: every seed is looked at.
        """
        if edge_dir == IN:
            local = exclude - self.edge_start
            lo, hi = self.etype_offsets[etype_id], self.etype_offsets[etype_id + 1]
            positions = self.positions_of(local[(local >= lo) & (local < hi)])
            rows = sampler.dst_of_positions(indptr, positions)
            return np.isin(seeds, rows), lambda candidates: np.isin(candidates, positions)
        out_eid = self.out_eid
        return np.ones(seeds.size, dtype=bool), lambda candidates: np.isin(out_eid[candidates], exclude)

    def _seed_ids(self, local: np.ndarray, index: np.ndarray, seed_index: np.ndarray) -> np.ndarray:
        """Homogeneous IDs of the seeds that sampled edges belong to."""
        chosen = local[seed_index] if self.homogeneous else local[index[seed_index]]
        return chosen + self.node_start

    def _edges_at(self, positions: np.ndarray, seeds: np.ndarray, edge_dir: str):
        if edge_dir == IN:
            return self.in_src[positions], seeds, self.edge_ids_at(positions) + self.edge_start
        return seeds, self.out_dst[positions], self.out_eid[positions]

    def in_edges(self, local: np.ndarray) -> SampledEdges:
        """Every in-edge of the local nodes, grouped by edge type."""
        types = self.node_types(local)
        pieces, counts = [], []
        for e in range(self.num_etypes):
            index, in_type = self._seeds_of(local, types, self.dst_type[e])
            positions, seed_index = sampler.all_neighbors(self.in_indptr[e], in_type)
            pieces.append(self._edges_at(positions, self._seed_ids(local, index, seed_index), IN))
            counts.append(positions.size)
        return _concat(pieces, counts)

    def degrees(self, local: np.ndarray, edge_dir: str, etype_id: int | None = None) -> np.ndarray:
        """In- or out-degrees of local nodes: over every edge type, or over one."""
        check_edge_dir(edge_dir)
        types = self.node_types(local)
        out = np.zeros(local.size, dtype=np.int64)
        for e in range(self.num_etypes) if etype_id is None else (etype_id,):
            seed_type = self.dst_type[e] if edge_dir == IN else self.src_type[e]
            index, in_type = self._seeds_of(local, types, seed_type)
            indptr = self.in_indptr[e] if edge_dir == IN else self.out_indptr[e]
            out[index] += sampler.degrees_of(indptr, in_type)
        return out

    def find_edges(self, local_eids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Homogeneous ``(src, dst)`` of local edge IDs (homogeneous ID - ``edge_start``)."""
        positions = self.positions_of(local_eids)
        src = self.in_src[positions]
        dst = np.empty(positions.size, dtype=np.int64)
        etypes = (
            np.zeros(positions.size, dtype=np.int64)
            if self.num_etypes == 1
            else np.searchsorted(self.etype_offsets, positions, side="right") - 1
        )
        for e in range(self.num_etypes):
            index = np.flatnonzero(etypes == e) if self.num_etypes > 1 else np.arange(positions.size)
            if index.size == 0:
                continue
            row = sampler.dst_of_positions(self.in_indptr[e], positions[index])
            dst[index] = row + self.ntype_offsets[self.dst_type[e]] + self.node_start
        return src, dst


def _concat(pieces, counts: list[int]) -> SampledEdges:
    if not pieces:
        empty = np.empty(0, dtype=np.int64)
        return SampledEdges(empty, empty, empty, np.asarray(counts, dtype=np.int64))
    if len(pieces) == 1:
        src, dst, eid = pieces[0]
    else:
        src, dst, eid = (np.concatenate(column) for column in zip(*pieces, strict=True))
    return SampledEdges(
        np.asarray(src, dtype=np.int64),
        np.asarray(dst, dtype=np.int64),
        np.asarray(eid, dtype=np.int64),
        np.asarray(counts, dtype=np.int64),
    )
