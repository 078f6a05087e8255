"""The range partition book and partition policies: which partition owns a node or edge ID.

After relabeling, partition ``k`` owns the node IDs ``[node_bounds[k], node_bounds[k+1])`` and the
edge IDs ``[edge_bounds[k], edge_bounds[k+1])``, so routing an ID is one ``np.searchsorted`` over
``num_parts + 1`` boundaries. The method names follow ``dgl.distributed.RangePartitionBook``.

Every lookup is vectorized and accepts a numpy array, a torch tensor, a Python sequence or a scalar;
it returns the same kind it was given (a torch tensor for a torch tensor, a numpy array otherwise),
with int64 values. torch is imported only when a torch tensor is passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from graphstore.ids import as_id_array, check_id_range, first_outside
from graphstore.partition.types import DEFAULT_ETYPE, DEFAULT_NTYPE
from graphstore.types import EDGE, NODE


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _like(result: np.ndarray, template: Any):
    """Return ``result`` as the same kind (torch tensor or numpy array) as ``template``."""
    if _is_torch(template):
        import torch

        return torch.from_numpy(np.ascontiguousarray(result)).to(template.device)
    return result


def route_ids(ids: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Partition index of each ID under range ``bounds`` (``num_parts + 1`` ascending boundaries).

    IDs must already be known to lie in ``[bounds[0], bounds[-1])``.
    """
    return np.searchsorted(bounds, ids, side="right") - 1


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
        node_bounds: ``num_parts + 1`` boundaries; partition ``k`` owns nodes ``[b[k], b[k+1])``.
        edge_bounds: the same for edge IDs.
        part_id: the partition this book is used from (``partid``).
        graph_name: the graph's name.

    Raises:
        ValueError: if the bounds are malformed or their partition counts differ, or ``part_id`` is out
            of range.
    """

    def __init__(
        self,
        node_bounds: Sequence[int] | np.ndarray,
        edge_bounds: Sequence[int] | np.ndarray,
        part_id: int = 0,
        graph_name: str = "",
    ):
        self._node_bounds = _check_bounds(node_bounds, "node_bounds")
        self._edge_bounds = _check_bounds(edge_bounds, "edge_bounds")
        self._node_bounds.setflags(write=False)
        self._edge_bounds.setflags(write=False)
        if self._node_bounds.size != self._edge_bounds.size:
            raise ValueError(
                f"node_bounds has {self._node_bounds.size - 1} partitions but edge_bounds has "
                f"{self._edge_bounds.size - 1}"
            )
        if not 0 <= int(part_id) < self.num_partitions():
            raise ValueError(f"part_id={part_id} out of range [0, {self.num_partitions()})")
        self._part_id = int(part_id)
        self.graph_name = graph_name

    # ----- shape of the book -------------------------------------------------------------------

    @property
    def node_bounds(self) -> np.ndarray:
        """Read-only int64 array of ``num_parts + 1`` node boundaries."""
        return self._node_bounds

    @property
    def edge_bounds(self) -> np.ndarray:
        """Read-only int64 array of ``num_parts + 1`` edge boundaries."""
        return self._edge_bounds

    @property
    def partid(self) -> int:
        """The partition this book is used from."""
        return self._part_id

    @property
    def ntypes(self) -> list[str]:
        """Node types (homogeneous graphs: ``['_N']``)."""
        return [DEFAULT_NTYPE]

    @property
    def etypes(self) -> list[str]:
        """Edge types (homogeneous graphs: ``['_E']``)."""
        return [DEFAULT_ETYPE]

    @property
    def canonical_etypes(self) -> list[tuple[str, str, str]]:
        """Canonical edge types (homogeneous graphs: ``[('_N', '_E', '_N')]``)."""
        return [(DEFAULT_NTYPE, DEFAULT_ETYPE, DEFAULT_NTYPE)]

    def num_partitions(self) -> int:
        """Number of partitions."""
        return int(self._node_bounds.size - 1)

    def num_nodes(self, ntype: str = DEFAULT_NTYPE) -> int:
        """Number of nodes in the whole graph."""
        self._check_ntype(ntype)
        return int(self._node_bounds[-1])

    def num_edges(self, etype: str = DEFAULT_ETYPE) -> int:
        """Number of edges in the whole graph."""
        self._check_etype(etype)
        return int(self._edge_bounds[-1])

    def metadata(self) -> list[dict[str, int]]:
        """Per partition: ``{'machine_id', 'num_nodes', 'num_edges'}``."""
        nodes = np.diff(self._node_bounds)
        edges = np.diff(self._edge_bounds)
        return [
            {"machine_id": k, "num_nodes": int(nodes[k]), "num_edges": int(edges[k])}
            for k in range(self.num_partitions())
        ]

    def node_range(self, partid: int) -> tuple[int, int]:
        """``(start, end)`` of the node IDs owned by ``partid``."""
        self._check_partid(partid)
        return int(self._node_bounds[partid]), int(self._node_bounds[partid + 1])

    def edge_range(self, partid: int) -> tuple[int, int]:
        """``(start, end)`` of the edge IDs owned by ``partid``."""
        self._check_partid(partid)
        return int(self._edge_bounds[partid]), int(self._edge_bounds[partid + 1])

    # ----- ID lookups ----------------------------------------------------------------------------

    def nid2partid(self, nids: Any, ntype: str = DEFAULT_NTYPE):
        """Owning partition of each node ID.

        Args:
            nids: global node IDs (array, tensor, sequence or scalar).
            ntype: node type; only ``'_N'`` exists.

        Returns:
            int64 partition indices, the same kind as ``nids``.

        Raises:
            IndexError: if an ID is outside ``[0, num_nodes)`` (the message names it).
        """
        self._check_ntype(ntype)
        ids = as_id_array(nids, "nids")
        check_id_range(ids, int(self._node_bounds[-1]), "node IDs")
        return _like(route_ids(ids, self._node_bounds), nids)

    def eid2partid(self, eids: Any, etype: str = DEFAULT_ETYPE):
        """Owning partition of each edge ID (see :meth:`nid2partid`)."""
        self._check_etype(etype)
        ids = as_id_array(eids, "eids")
        check_id_range(ids, int(self._edge_bounds[-1]), "edge IDs")
        return _like(route_ids(ids, self._edge_bounds), eids)

    def partid2nids(self, partid: int, ntype: str = DEFAULT_NTYPE):
        """All node IDs owned by ``partid`` (an int64 numpy array; a torch tensor if ``partid`` is one)."""
        self._check_ntype(ntype)
        start, end = self.node_range(int(partid))
        return _like(np.arange(start, end, dtype=np.int64), partid)

    def partid2eids(self, partid: int, etype: str = DEFAULT_ETYPE):
        """All edge IDs owned by ``partid``."""
        self._check_etype(etype)
        start, end = self.edge_range(int(partid))
        return _like(np.arange(start, end, dtype=np.int64), partid)

    def nid2localnid(self, nids: Any, partid: int, ntype: str = DEFAULT_NTYPE):
        """Local indices (offsets into ``partid``'s range) of node IDs owned by ``partid``.

        Raises:
            IndexError: if an ID is not owned by ``partid``.
        """
        self._check_ntype(ntype)
        start, end = self.node_range(int(partid))
        ids = as_id_array(nids, "nids")
        _check_owned(ids, start, end, partid, "node")
        return _like(ids - start, nids)

    def eid2localeid(self, eids: Any, partid: int, etype: str = DEFAULT_ETYPE):
        """Local indices of edge IDs owned by ``partid`` (see :meth:`nid2localnid`)."""
        self._check_etype(etype)
        start, end = self.edge_range(int(partid))
        ids = as_id_array(eids, "eids")
        _check_owned(ids, start, end, partid, "edge")
        return _like(ids - start, eids)

    def map_to_homo_nid(self, ids: Any, ntype: str = DEFAULT_NTYPE):
        """Homogeneous graphs: the IDs unchanged (DGL compatibility)."""
        self._check_ntype(ntype)
        return ids

    def map_to_homo_eid(self, ids: Any, etype: str = DEFAULT_ETYPE):
        """Homogeneous graphs: the IDs unchanged (DGL compatibility)."""
        self._check_etype(etype)
        return ids

    def map_to_per_ntype(self, ids: Any):
        """Homogeneous graphs: ``(type IDs (all 0), ids)`` (DGL compatibility)."""
        arr = as_id_array(ids, "ids")
        return _like(np.zeros(arr.shape, dtype=np.int64), ids), ids

    def map_to_per_etype(self, ids: Any):
        """Homogeneous graphs: ``(type IDs (all 0), ids)`` (DGL compatibility)."""
        arr = as_id_array(ids, "ids")
        return _like(np.zeros(arr.shape, dtype=np.int64), ids), ids

    # ----- helpers -------------------------------------------------------------------------------

    def _check_partid(self, partid: int) -> None:
        if not 0 <= int(partid) < self.num_partitions():
            raise IndexError(f"partid={partid} out of range [0, {self.num_partitions()})")

    @staticmethod
    def _check_ntype(ntype: str) -> None:
        if ntype != DEFAULT_NTYPE:
            raise KeyError(f"unknown node type {ntype!r}; this graph has only {DEFAULT_NTYPE!r}")

    @staticmethod
    def _check_etype(etype: Any) -> None:
        if isinstance(etype, tuple) and len(etype) == 3:
            etype = etype[1]
        if etype != DEFAULT_ETYPE:
            raise KeyError(f"unknown edge type {etype!r}; this graph has only {DEFAULT_ETYPE!r}")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, RangePartitionBook)
            and np.array_equal(self._node_bounds, other._node_bounds)
            and np.array_equal(self._edge_bounds, other._edge_bounds)
        )

    def __hash__(self) -> int:
        return hash((self._node_bounds.tobytes(), self._edge_bounds.tobytes()))

    def __repr__(self) -> str:
        return (
            f"RangePartitionBook(graph_name={self.graph_name!r}, num_parts={self.num_partitions()}, "
            f"partid={self._part_id}, num_nodes={self.num_nodes()}, num_edges={self.num_edges()})"
        )


def _check_owned(ids: np.ndarray, start: int, end: int, partid: int, what: str) -> None:
    bad = first_outside(ids, start, end)
    if bad is not None:
        raise IndexError(f"{what} ID {bad} is not owned by partition {partid} (owns [{start}, {end}))")


class PartitionPolicy:
    """How one kind of data (node or edge rows) is spread over the partitions.

    Args:
        policy_str: ``'node:_N'`` or ``'edge:_E'`` (``'node'`` / ``'edge'`` also accepted).
        partition_book: the graph's :class:`RangePartitionBook`.

    Raises:
        ValueError: for an unknown policy string.
    """

    def __init__(self, policy_str: str, partition_book: RangePartitionBook):
        kind, _, type_name = str(policy_str).partition(":")
        if kind == NODE:
            type_name = type_name or DEFAULT_NTYPE
            if type_name != DEFAULT_NTYPE:
                raise ValueError(f"policy_str={policy_str!r}: unknown node type {type_name!r}")
        elif kind == EDGE:
            type_name = type_name or DEFAULT_ETYPE
            if type_name != DEFAULT_ETYPE:
                raise ValueError(f"policy_str={policy_str!r}: unknown edge type {type_name!r}")
        else:
            raise ValueError(f"policy_str={policy_str!r}: expected 'node:_N', 'edge:_E', 'node' or 'edge'")
        self._kind = kind
        self._type_name = type_name
        self._book = partition_book

    @property
    def policy_str(self) -> str:
        """``'node:_N'`` or ``'edge:_E'``."""
        return f"{self._kind}:{self._type_name}"

    @property
    def kind(self) -> str:
        """``'node'`` or ``'edge'``."""
        return self._kind

    @property
    def is_node(self) -> bool:
        """Whether the rows are indexed by node IDs."""
        return self._kind == NODE

    @property
    def is_edge(self) -> bool:
        """Whether the rows are indexed by edge IDs."""
        return self._kind == EDGE

    @property
    def type_name(self) -> str:
        """The node or edge type name."""
        return self._type_name

    @property
    def partition_book(self) -> RangePartitionBook:
        """The partition book."""
        return self._book

    @property
    def part_id(self) -> int:
        """The partition this policy is used from."""
        return self._book.partid

    def _bounds(self) -> np.ndarray:
        return self._book.node_bounds if self._kind == NODE else self._book.edge_bounds

    def to_local(self, ids: Any):
        """Local offsets, in this policy's partition, of global IDs it owns.

        Raises:
            IndexError: for an ID this partition does not own.
        """
        if self._kind == NODE:
            return self._book.nid2localnid(ids, self.part_id, self._type_name)
        return self._book.eid2localeid(ids, self.part_id, self._type_name)

    def to_partid(self, ids: Any):
        """Owning partition of each global ID.

        Raises:
            IndexError: for an ID outside the graph.
        """
        if self._kind == NODE:
            return self._book.nid2partid(ids, self._type_name)
        return self._book.eid2partid(ids, self._type_name)

    def get_part_size(self) -> int:
        """Number of rows owned by this policy's partition."""
        bounds = self._bounds()
        return int(bounds[self.part_id + 1] - bounds[self.part_id])

    def get_size(self) -> int:
        """Number of rows in the whole graph."""
        return int(self._bounds()[-1])

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, PartitionPolicy)
            and self.policy_str == other.policy_str
            and self.part_id == other.part_id
            and self._book == other._book
        )

    def __hash__(self) -> int:
        return hash((self.policy_str, self.part_id))

    def __repr__(self) -> str:
        return f"PartitionPolicy({self.policy_str!r}, part_id={self.part_id})"
