"""Sampling frontiers: the edges :func:`graphstore.client.sampling.sample_neighbors` returns.

A *frontier* (:class:`SampledSubgraph`) stands in for the DGLGraph DGL's sampling returns: every node
of the graph and only the sampled edges, in the graph's IDs. On a typed graph the edges are grouped by
canonical edge type, with per-type node IDs and the per-type edge IDs in ``edata[EID]``
(``{canonical etype: IDs}``), DGL's typed form; a homogeneous graph is the one-type case, where
``src`` / ``dst`` / ``eid`` and ``edata[EID]`` are plain tensors.

A frontier made from the partitions' answers keeps their homogeneous node IDs beside: its per-type
node IDs are computed only when asked for, and :func:`~graphstore.client.block.to_block` relabels the
homogeneous IDs directly (one relabeling for every type, no per-edge ID mapping).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch

from graphstore.client.constants import EID
from graphstore.client.relation_graph import RelationGraph
from graphstore.ids import as_id_array, check_id_range
from graphstore.types import DEFAULT_CANONICAL_ETYPE, DEFAULT_NTYPE, CanonicalEtype, GraphSchema

_HOMOGENEOUS = GraphSchema()


def as_tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor sharing a (contiguous) numpy array's memory."""
    return torch.from_numpy(np.ascontiguousarray(array))


class _LazyPairs(dict):
    """``{canonical etype: (src, dst) tensors}``, computed for a type when it is first asked for."""

    def __init__(self, compute: Callable):
        super().__init__()
        self._compute = compute

    def __missing__(self, canonical):
        value = self._compute(canonical)
        self[canonical] = value
        return value


class _PerTypeArrays:
    """A frontier's ``(src, dst, eid)`` per canonical type in per-type IDs: given, or mapped from the
    homogeneous IDs (once, when first asked for)."""

    def __init__(self, arrays: dict, eids: dict, homo: dict | None, book):
        self._arrays, self._eids, self._homo, self._book = arrays, eids, homo, book

    def __call__(self, canonical: CanonicalEtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if canonical not in self._arrays:
            src, dst = self._homo[canonical]
            _, src = self._book.map_to_per_ntype(src)
            _, dst = self._book.map_to_per_ntype(dst)
            self._arrays[canonical] = (src, dst, self._eids[canonical])
        return self._arrays[canonical]


class SampledSubgraph(RelationGraph):
    """A set of edges of a (distributed) graph, in the graph's IDs: a sampling *frontier*.

    Args:
        src, dst, eid: the edges of a homogeneous graph (global IDs, equal lengths).
        num_nodes: number of nodes of the whole graph.

    Attributes:
        edata: ``{EID: edge IDs}`` (``{EID: {canonical etype: IDs}}`` on a typed graph).

    Raises:
        ValueError: if the lengths differ.
        IndexError: if a node ID is outside the graph.
    """

    def __init__(self, src, dst, eid, num_nodes: int):
        self._setup(_HOMOGENEOUS, {DEFAULT_CANONICAL_ETYPE: (src, dst, eid)}, {DEFAULT_NTYPE: int(num_nodes)})

    @classmethod
    def from_types(
        cls,
        schema: GraphSchema,
        edges: Mapping[CanonicalEtype, tuple],
        num_nodes: Mapping[str, int],
    ) -> SampledSubgraph:
        """A typed frontier.

        Args:
            schema: the graph's types.
            edges: per canonical type ``(src, dst, eid)`` in per-type IDs; a missing type has no edges.
            num_nodes: per node type, its number of nodes in the graph.

        Raises:
            ValueError, IndexError: as the constructor, per type.
        """
        frontier = cls.__new__(cls)
        frontier._setup(schema, edges, num_nodes)
        return frontier

    @classmethod
    def from_partitions(cls, book, src: np.ndarray, dst: np.ndarray, eid: np.ndarray) -> SampledSubgraph:
        """The frontier of the partitions' answers in homogeneous IDs (an edge's type follows from its ID).

        Args:
            book: the partition book.
            src, dst, eid: homogeneous IDs of the sampled edges.
        """
        schema = book.schema
        if schema.is_homogeneous:
            return cls(src, dst, eid, book.num_nodes())
        etypes, per_type_eid = book.map_to_per_etype(eid)
        order = np.argsort(etypes.astype(np.int16), kind="stable")
        ends = np.cumsum(np.bincount(etypes, minlength=len(schema.canonical_etypes)))
        starts = ends - np.bincount(etypes, minlength=len(schema.canonical_etypes))
        src, dst, per_type_eid = src[order], dst[order], per_type_eid[order]
        frontier = cls.__new__(cls)
        frontier._book = book
        frontier._homo = {}
        frontier._arrays = {}
        eids = {}
        for canonical, start, end in zip(schema.canonical_etypes, starts, ends, strict=True):
            frontier._homo[canonical] = (src[start:end], dst[start:end])
            eids[canonical] = per_type_eid[start:end]
        frontier._finish(schema, eids, {ntype: book.num_nodes(ntype) for ntype in schema.ntypes})
        return frontier

    def _setup(self, schema: GraphSchema, edges: Mapping, num_nodes: Mapping[str, int]) -> None:
        empty = np.empty(0, dtype=np.int64)
        num_nodes = {ntype: int(num_nodes[ntype]) for ntype in schema.ntypes}
        self._homo = None
        self._arrays: dict[CanonicalEtype, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for canonical in schema.canonical_etypes:
            src, dst, eid = edges.get(canonical, (empty, empty, empty))
            src, dst, eid = as_id_array(src, "src"), as_id_array(dst, "dst"), as_id_array(eid, "eid")
            if not (src.size == dst.size == eid.size):
                raise ValueError(f"src, dst and eid lengths differ: {src.size}, {dst.size}, {eid.size}")
            check_id_range(src, num_nodes[canonical[0]], "src")
            check_id_range(dst, num_nodes[canonical[2]], "dst")
            self._arrays[canonical] = (src, dst, eid)
        self._finish(schema, {c: arrays[2] for c, arrays in self._arrays.items()}, num_nodes)

    def _finish(self, schema: GraphSchema, eids: dict, num_nodes: dict[str, int]) -> None:
        self._num_nodes = num_nodes
        self._eids = eids
        # Computed without a reference to this frontier (no cycle keeps its arrays alive).
        self._per_type = _PerTypeArrays(self._arrays, eids, self._homo, getattr(self, "_book", None))
        per_type = self._per_type
        self._init_relations(
            schema,
            _LazyPairs(lambda c: tuple(as_tensor(a) for a in per_type(c)[:2])),
            {c: {EID: as_tensor(eid)} for c, eid in eids.items()},
        )

    def _count(self, canonical: CanonicalEtype) -> int:
        return int(self._eids[canonical].size)

    def arrays(self, etype=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(src, dst, eid)`` of one edge type as numpy arrays (None: the only type)."""
        return self._per_type(self.to_canonical_etype(etype))

    def homogeneous_ids(self):
        """``(book, {canonical etype: (src, dst)})`` in homogeneous node IDs when the frontier came from
        the partitions (:meth:`from_partitions`), else None."""
        return None if self._homo is None else (self._book, self._homo)

    def _edge_ids(self, canonical: CanonicalEtype) -> torch.Tensor:
        return self._edge_frames[canonical][EID]

    # -- the one-type accessors ------------------------------------------------------------------
    @property
    def src(self) -> torch.Tensor:
        """Source node IDs of the edges (a graph with one edge type)."""
        return self.edges()[0]

    @property
    def dst(self) -> torch.Tensor:
        """Destination node IDs of the edges (a graph with one edge type)."""
        return self.edges()[1]

    @property
    def eid(self) -> torch.Tensor:
        """Edge IDs of the edges (a graph with one edge type)."""
        return self.edges(form="eid")

    # -- nodes -----------------------------------------------------------------------------------
    @property
    def ntypes(self) -> list[str]:
        """Node types of the graph."""
        return list(self._schema.ntypes)

    def num_nodes(self, ntype: str | None = None) -> int:
        """Nodes of one type in the whole graph, or of every type (None)."""
        if ntype is None:
            return sum(self._num_nodes.values())
        return self._num_nodes[self._schema.ntypes[self._schema.ntype_id(ntype)]]

    number_of_nodes = num_nodes

    def reversed(self) -> SampledSubgraph:
        """The same edges with source and destination swapped (a graph with one node type, whose
        reversed edges keep their edge type)."""
        if len(self._schema.ntypes) != 1:
            raise ValueError(f"only a graph with one node type reverses its edges, not {self.ntypes}")
        swapped = {}
        for canonical in self._schema.canonical_etypes:
            src, dst, eid = self.arrays(canonical)
            swapped[canonical] = (dst, src, eid)
        return SampledSubgraph.from_types(self._schema, swapped, self._num_nodes)

    def __repr__(self) -> str:
        types = "" if self._schema.is_homogeneous else f", canonical_etypes={self.canonical_etypes}"
        return f"SampledSubgraph(num_nodes={self.num_nodes()}, num_edges={self.num_edges()}{types})"
