"""The range partition book: which partition owns a node or edge, in homogeneous and per-type IDs.

After relabeling, partition ``k`` owns the homogeneous node IDs ``[node_bounds[k], node_bounds[k+1])``
and edge IDs ``[edge_bounds[k], edge_bounds[k+1])``. Inside that range the node types lie one after
the other in type-ID order (the edge types likewise), so every type's nodes in partition ``k`` are one
contiguous range of the type's own (per-type) IDs too. Routing an ID is one ``np.searchsorted`` over
the boundaries of its ID space; converting between homogeneous and per-type IDs is one more over the
``num_parts * num_types`` (partition, type) segments. A homogeneous graph is the one-type case: the
per-type IDs of ``_N`` / ``_E`` are the homogeneous IDs. Method names follow
``dgl.distributed.RangePartitionBook``.

Every lookup is vectorized and accepts a numpy array, a torch tensor, a Python sequence or a scalar;
it returns the same kind it was given (a torch tensor for a torch tensor, a numpy array otherwise),
with int64 values. torch is imported only when a torch tensor is passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from graphstore.ids import as_id_array, check_id_range, first_outside
from graphstore.partition.typed_ranges import TypedRanges, layout_from_ranges, route_ids, type_maps
from graphstore.types import DEFAULT_ETYPE, DEFAULT_NTYPE, NODE, GraphSchema, etype_key


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _like(result: np.ndarray, template: Any):
    """Return ``result`` as the same kind (torch tensor or numpy array) as ``template``."""
    if _is_torch(template):
        import torch

        return torch.from_numpy(np.ascontiguousarray(result)).to(template.device)
    return result


def _check_bounds(bounds: Sequence[int] | np.ndarray, what: str) -> np.ndarray:
    arr = np.asarray(bounds, dtype=np.int64).reshape(-1)
    if arr.size < 2:
        raise ValueError(f"{what} must have num_parts + 1 >= 2 entries, got {arr.tolist()}")
    if arr[0] != 0:
        raise ValueError(f"{what} must start at 0, got {arr.tolist()[:4]}")
    if np.any(np.diff(arr) < 0):
        raise ValueError(f"{what} must be non-decreasing, got {arr.tolist()}")
    return arr


class RangePartitionBook:
    """Maps node and edge IDs to partitions when every partition owns contiguous ID ranges.

    Args:
        node_bounds: ``num_parts + 1`` homogeneous boundaries; partition ``k`` owns ``[b[k], b[k+1])``.
        edge_bounds: the same for edge IDs.
        part_id: the partition this book is used from (``partid``).
        graph_name: the graph's name.
        schema: the node and edge types (default: homogeneous).
        ntype_counts: int64 ``[num_parts, num_ntypes]`` nodes of each type per partition (default:
            one type, the whole range).
        etype_counts: int64 ``[num_parts, num_etypes]`` edges of each type per partition.

    Raises:
        ValueError: malformed bounds, counts that do not add up, partition counts that differ, or
            ``part_id`` out of range.
    """

    def __init__(
        self,
        node_bounds: Sequence[int] | np.ndarray,
        edge_bounds: Sequence[int] | np.ndarray,
        part_id: int = 0,
        graph_name: str = "",
        *,
        schema: GraphSchema | None = None,
        ntype_counts: np.ndarray | None = None,
        etype_counts: np.ndarray | None = None,
    ):
        node_bounds = _check_bounds(node_bounds, "node_bounds")
        edge_bounds = _check_bounds(edge_bounds, "edge_bounds")
        if node_bounds.size != edge_bounds.size:
            raise ValueError(
                f"node_bounds has {node_bounds.size - 1} partitions but edge_bounds has "
                f"{edge_bounds.size - 1}"
            )
        num_parts = node_bounds.size - 1
        if not 0 <= int(part_id) < num_parts:
            raise ValueError(f"part_id={part_id} out of range [0, {num_parts})")
        self.schema = schema if schema is not None else GraphSchema()
        if ntype_counts is None:
            ntype_counts = np.diff(node_bounds)[:, None]
        if etype_counts is None:
            etype_counts = np.diff(edge_bounds)[:, None]
        ntype_counts = np.asarray(ntype_counts, dtype=np.int64).reshape(num_parts, -1)
        etype_counts = np.asarray(etype_counts, dtype=np.int64).reshape(num_parts, -1)
        if ntype_counts.shape[1] != len(self.schema.ntypes):
            raise ValueError(
                f"ntype_counts has {ntype_counts.shape[1]} columns for {len(self.schema.ntypes)} node types"
            )
        if etype_counts.shape[1] != len(self.schema.canonical_etypes):
            raise ValueError(
                f"etype_counts has {etype_counts.shape[1]} columns for "
                f"{len(self.schema.canonical_etypes)} edge types"
            )
        for array in (node_bounds, edge_bounds, ntype_counts, etype_counts):
            array.setflags(write=False)
        self._nodes = TypedRanges(node_bounds, ntype_counts, "node")
        self._edges = TypedRanges(edge_bounds, etype_counts, "edge")
        self._part_id = int(part_id)
        self.graph_name = graph_name

    @classmethod
    def from_maps(
        cls,
        part_id: int,
        node_map: dict[str, Any],
        edge_map: dict[str, Any],
        ntypes: Sequence[str],
        canonical_etypes: Sequence[tuple[str, str, str]],
        graph_name: str = "",
    ) -> RangePartitionBook:
        """Build a book from DGL-shaped maps: per type, one ``[homo_start, homo_end)`` per partition.

        Raises:
            ValueError: ranges that are not laid out partition by partition, type by type.
        """
        schema = GraphSchema(tuple(ntypes), tuple(tuple(c) for c in canonical_etypes))
        node_ranges = [np.asarray(node_map[t], dtype=np.int64).reshape(-1, 2) for t in schema.ntypes]
        edge_ranges = [
            np.asarray(
                edge_map[etype_key(c)] if etype_key(c) in edge_map else edge_map[c[1]], dtype=np.int64
            ).reshape(-1, 2)
            for c in schema.canonical_etypes
        ]
        node_bounds, ntype_counts = layout_from_ranges(node_ranges, "node_map")
        edge_bounds, etype_counts = layout_from_ranges(edge_ranges, "edge_map")
        return cls(
            node_bounds,
            edge_bounds,
            part_id,
            graph_name,
            schema=schema,
            ntype_counts=ntype_counts,
            etype_counts=etype_counts,
        )

    @classmethod
    def from_metadata(cls, meta, part_id: int) -> RangePartitionBook:
        """The book a server describes in its :class:`~graphstore.types.PartitionMetadata`."""
        num_parts = len(meta.node_bounds) - 1
        return cls(
            meta.node_bounds,
            meta.edge_bounds,
            part_id,
            meta.graph_name,
            schema=meta.schema,
            ntype_counts=np.asarray(meta.ntype_counts, dtype=np.int64).reshape(num_parts, -1)
            if meta.ntype_counts
            else None,
            etype_counts=np.asarray(meta.etype_counts, dtype=np.int64).reshape(num_parts, -1)
            if meta.etype_counts
            else None,
        )

    def for_partition(self, part_id: int) -> RangePartitionBook:
        """The same book used from partition ``part_id`` (its ``partid``)."""
        return RangePartitionBook(
            self.node_bounds,
            self.edge_bounds,
            part_id,
            self.graph_name,
            schema=self.schema,
            ntype_counts=self.ntype_counts,
            etype_counts=self.etype_counts,
        )

    # ----- shape of the book -------------------------------------------------------------------

    @property
    def node_bounds(self) -> np.ndarray:
        """Read-only int64 array of ``num_parts + 1`` homogeneous node boundaries."""
        return self._nodes.bounds

    @property
    def edge_bounds(self) -> np.ndarray:
        """Read-only int64 array of ``num_parts + 1`` homogeneous edge boundaries."""
        return self._edges.bounds

    @property
    def node_ranges(self) -> TypedRanges:
        """The per-(partition, node type) layout of the node IDs (read-only arrays)."""
        return self._nodes

    @property
    def edge_ranges(self) -> TypedRanges:
        """The per-(partition, edge type) layout of the edge IDs (read-only arrays)."""
        return self._edges

    @property
    def ntype_counts(self) -> np.ndarray:
        """int64 ``[num_parts, num_ntypes]``: nodes of each type per partition."""
        return self._nodes.counts

    @property
    def etype_counts(self) -> np.ndarray:
        """int64 ``[num_parts, num_etypes]``: edges of each type per partition."""
        return self._edges.counts

    @property
    def partid(self) -> int:
        """The partition this book is used from."""
        return self._part_id

    @property
    def ntypes(self) -> list[str]:
        """Node types in ID order (homogeneous graphs: ``['_N']``)."""
        return list(self.schema.ntypes)

    @property
    def etypes(self) -> list[str]:
        """Edge type names in ID order (homogeneous graphs: ``['_E']``)."""
        return self.schema.etypes

    @property
    def canonical_etypes(self) -> list[tuple[str, str, str]]:
        """Canonical edge types (homogeneous graphs: ``[('_N', '_E', '_N')]``)."""
        return list(self.schema.canonical_etypes)

    def num_partitions(self) -> int:
        """Number of partitions."""
        return int(self._nodes.bounds.size - 1)

    def num_nodes(self, ntype: str | None = None) -> int:
        """Nodes of one type, or of the whole graph for None / ``'_N'``."""
        return int(self.node_type_bounds(ntype)[-1])

    def num_edges(self, etype=None) -> int:
        """Edges of one type, or of the whole graph for None / ``'_E'``."""
        return int(self.edge_type_bounds(etype)[-1])

    def node_type_bounds(self, ntype: str | None) -> np.ndarray:
        """The partition boundaries of one node type's per-type IDs (None / ``'_N'``: homogeneous IDs).

        Raises:
            KeyError: an unknown node type.
        """
        type_id = self._ntype_id(ntype)
        return self._nodes.bounds if type_id is None else self._nodes.type_bounds[type_id]

    def edge_type_bounds(self, etype) -> np.ndarray:
        """The partition boundaries of one edge type's per-type IDs (None / ``'_E'``: homogeneous IDs).

        Raises:
            KeyError: an unknown or ambiguous edge type.
        """
        type_id = self._etype_id(etype)
        return self._edges.bounds if type_id is None else self._edges.type_bounds[type_id]

    def policy_bounds(self, policy: str) -> np.ndarray:
        """The partition boundaries of the ID space a policy names (``"node"``, ``"node:<ntype>"``,
        ``"edge"``, ``"edge:<src>:<etype>:<dst>"``).

        Raises:
            ValueError: a malformed policy. KeyError: an unknown type.
        """
        kind, type_id = self.schema.policy_type(policy)
        ranges = self._nodes if kind == NODE else self._edges
        return ranges.bounds if type_id is None else ranges.type_bounds[type_id]

    def metadata(self) -> list[dict[str, int]]:
        """Per partition: ``{'machine_id', 'num_nodes', 'num_edges'}``."""
        nodes = np.diff(self._nodes.bounds)
        edges = np.diff(self._edges.bounds)
        return [
            {"machine_id": k, "num_nodes": int(nodes[k]), "num_edges": int(edges[k])}
            for k in range(self.num_partitions())
        ]

    def node_range(self, partid: int, ntype: str | None = None) -> tuple[int, int]:
        """``(start, end)`` of the node IDs (per-type IDs for a type) owned by ``partid``."""
        self._check_partid(partid)
        bounds = self.node_type_bounds(ntype)
        return int(bounds[partid]), int(bounds[partid + 1])

    def edge_range(self, partid: int, etype=None) -> tuple[int, int]:
        """``(start, end)`` of the edge IDs (per-type IDs for a type) owned by ``partid``."""
        self._check_partid(partid)
        bounds = self.edge_type_bounds(etype)
        return int(bounds[partid]), int(bounds[partid + 1])

    def node_map(self) -> dict[str, list[list[int]]]:
        """DGL's ``node_map``: per node type, the homogeneous ``[start, end)`` in each partition."""
        return type_maps(self._nodes, list(self.schema.ntypes))

    def edge_map(self) -> dict[str, list[list[int]]]:
        """DGL's ``edge_map``: per canonical edge type (``"src:etype:dst"``), the homogeneous ranges."""
        return type_maps(self._edges, [etype_key(c) for c in self.schema.canonical_etypes])

    # ----- ID lookups ----------------------------------------------------------------------------

    def nid2partid(self, nids: Any, ntype: str = DEFAULT_NTYPE):
        """Owning partition of each node ID (per-type IDs when ``ntype`` names a type of a typed graph).

        Returns:
            int64 partition indices, the same kind as ``nids``.

        Raises:
            IndexError: an ID outside its ID space (the message names it). KeyError: unknown ntype.
        """
        bounds = self.node_type_bounds(ntype)
        ids = as_id_array(nids, "nids")
        check_id_range(ids, int(bounds[-1]), f"{_space(ntype)} node IDs")
        return _like(route_ids(ids, bounds), nids)

    def eid2partid(self, eids: Any, etype=DEFAULT_ETYPE):
        """Owning partition of each edge ID (see :meth:`nid2partid`)."""
        bounds = self.edge_type_bounds(etype)
        ids = as_id_array(eids, "eids")
        check_id_range(ids, int(bounds[-1]), f"{_space(etype)} edge IDs")
        return _like(route_ids(ids, bounds), eids)

    def partid2nids(self, partid: int, ntype: str = DEFAULT_NTYPE):
        """All node IDs (per-type IDs for a type) owned by ``partid``, int64; a torch tensor if
        ``partid`` is one."""
        start, end = self.node_range(int(partid), ntype)
        return _like(np.arange(start, end, dtype=np.int64), partid)

    def partid2eids(self, partid: int, etype=DEFAULT_ETYPE):
        """All edge IDs (per-type IDs for a type) owned by ``partid``."""
        start, end = self.edge_range(int(partid), etype)
        return _like(np.arange(start, end, dtype=np.int64), partid)

    def nid2localnid(self, nids: Any, partid: int, ntype: str = DEFAULT_NTYPE):
        """Offsets of node IDs inside ``partid``'s range of their ID space.

        Raises:
            IndexError: an ID not owned by ``partid``.
        """
        start, end = self.node_range(int(partid), ntype)
        ids = as_id_array(nids, "nids")
        _check_owned(ids, start, end, partid, "node")
        return _like(ids - start, nids)

    def eid2localeid(self, eids: Any, partid: int, etype=DEFAULT_ETYPE):
        """Offsets of edge IDs inside ``partid``'s range (see :meth:`nid2localnid`)."""
        start, end = self.edge_range(int(partid), etype)
        ids = as_id_array(eids, "eids")
        _check_owned(ids, start, end, partid, "edge")
        return _like(ids - start, eids)

    def map_to_per_ntype(self, ids: Any):
        """``(type IDs, per-type IDs)`` of homogeneous node IDs.

        Raises:
            IndexError: an ID outside the graph.
        """
        arr = as_id_array(ids, "ids")
        check_id_range(arr, self.num_nodes(), "node IDs")
        types, per_type = self._nodes.to_per_type(arr)
        return _like(types, ids), _like(per_type, ids)

    def map_to_per_etype(self, ids: Any):
        """``(type IDs, per-type IDs)`` of homogeneous edge IDs."""
        arr = as_id_array(ids, "ids")
        check_id_range(arr, self.num_edges(), "edge IDs")
        types, per_type = self._edges.to_per_type(arr)
        return _like(types, ids), _like(per_type, ids)

    def map_to_homo_nid(self, ids: Any, ntype: str):
        """Homogeneous IDs of per-type node IDs of ``ntype``.

        Raises:
            IndexError: an ID outside the type. KeyError: an unknown type.
        """
        type_id = self._ntype_id(ntype)
        arr = as_id_array(ids, "ids")
        if type_id is None:
            check_id_range(arr, self.num_nodes(), "node IDs")
            return _like(arr, ids)
        check_id_range(arr, self.num_nodes(ntype), f"{ntype} node IDs")
        return _like(self._nodes.to_homo(arr, type_id), ids)

    def map_to_homo_eid(self, ids: Any, etype):
        """Homogeneous IDs of per-type edge IDs of ``etype``."""
        type_id = self._etype_id(etype)
        arr = as_id_array(ids, "ids")
        if type_id is None:
            check_id_range(arr, self.num_edges(), "edge IDs")
            return _like(arr, ids)
        check_id_range(arr, self.num_edges(etype), f"{_space(etype)} edge IDs")
        return _like(self._edges.to_homo(arr, type_id), ids)

    # ----- helpers -------------------------------------------------------------------------------

    def _ntype_id(self, ntype) -> int | None:
        """None for the homogeneous ID space (None, ``'_N'``, or the type of a one-type graph)."""
        if ntype is None or ntype == DEFAULT_NTYPE:
            return None
        type_id = self.schema.ntype_id(ntype)
        return None if self.schema.is_homogeneous else type_id

    def _etype_id(self, etype) -> int | None:
        """None for the homogeneous ID space (None, ``'_E'``, ``('_N', '_E', '_N')``, or the type of a
        one-type graph)."""
        if etype is None or etype == DEFAULT_ETYPE or _is_default_canonical(etype):
            return None
        type_id = self.schema.etype_id(etype)
        return None if self.schema.is_homogeneous else type_id

    def _check_partid(self, partid: int) -> None:
        if not 0 <= int(partid) < self.num_partitions():
            raise IndexError(f"partid={partid} out of range [0, {self.num_partitions()})")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, RangePartitionBook)
            and self.schema == other.schema
            and np.array_equal(self._nodes.bounds, other._nodes.bounds)
            and np.array_equal(self._edges.bounds, other._edges.bounds)
            and np.array_equal(self._nodes.counts, other._nodes.counts)
            and np.array_equal(self._edges.counts, other._edges.counts)
        )

    def __hash__(self) -> int:
        return hash((self._nodes.bounds.tobytes(), self._edges.bounds.tobytes()))

    def __repr__(self) -> str:
        types = "" if self.schema.is_homogeneous else f", ntypes={self.ntypes}"
        return (
            f"RangePartitionBook(graph_name={self.graph_name!r}, num_parts={self.num_partitions()}, "
            f"partid={self._part_id}, num_nodes={self.num_nodes()}, num_edges={self.num_edges()}{types})"
        )


def _is_default_canonical(etype) -> bool:
    default = (DEFAULT_NTYPE, DEFAULT_ETYPE, DEFAULT_NTYPE)
    return (isinstance(etype, (tuple, list)) and tuple(etype) == default) or etype == etype_key(default)


def _space(type_name) -> str:
    if type_name is None or type_name in (DEFAULT_NTYPE, DEFAULT_ETYPE):
        return "homogeneous"
    return etype_key(type_name) if isinstance(type_name, tuple) else str(type_name)


def _check_owned(ids: np.ndarray, start: int, end: int, partid: int, what: str) -> None:
    bad = first_outside(ids, start, end)
    if bad is not None:
        raise IndexError(f"{what} ID {bad} is not owned by partition {partid} (owns [{start}, {end}))")
