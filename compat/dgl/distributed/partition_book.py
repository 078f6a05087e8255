"""``dgl.distributed``'s partition book and policies: DGL's constructor, and every ID method taking and
returning torch tensors (int64), whatever it was given.

:class:`RangePartitionBook` is the native :class:`graphstore.partition.RangePartitionBook` (a subclass,
so it goes wherever the native one does) with DGL's ``__init__(part_id, num_parts, node_map, edge_map,
ntypes, etypes)`` and DGL's extra properties. ``DistGraph.get_partition_book()`` of the compat
namespace returns one (:meth:`RangePartitionBook.of` turns a native book into one).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping

import numpy as np
import torch

from graphstore.partition import PartitionPolicy
from graphstore.partition import RangePartitionBook as _NativeBook
from graphstore.types import DEFAULT_CANONICAL_ETYPE, DEFAULT_ETYPE, DEFAULT_NTYPE, etype_key


def _tensor(result):
    """An int64 torch tensor of a lookup's result (numpy array, tensor or scalar)."""
    if isinstance(result, torch.Tensor):
        return result
    return torch.from_numpy(np.ascontiguousarray(np.asarray(result, dtype=np.int64)))


def _names_by_id(types: Mapping, what: str) -> list:
    if not isinstance(types, Mapping):
        raise TypeError(
            f"{what} must be a dict of type name -> type ID (DGL's form), got {type(types).__name__}"
        )
    ordered = sorted(types.items(), key=lambda item: int(item[1]))
    if [int(type_id) for _, type_id in ordered] != list(range(len(ordered))):
        raise ValueError(f"{what} IDs must be 0..{len(ordered) - 1}, got {dict(types)}")
    return [name for name, _ in ordered]


def _canonical(etype, ntypes: list[str]) -> tuple[str, str, str]:
    if isinstance(etype, (tuple, list)) and len(etype) == 3:
        return tuple(etype)
    if isinstance(etype, str) and etype.count(":") == 2:
        return tuple(etype.split(":"))
    if etype == DEFAULT_ETYPE and ntypes == [DEFAULT_NTYPE]:
        return DEFAULT_CANONICAL_ETYPE
    raise ValueError(
        f"edge type {etype!r}: give canonical edge types ((src, etype, dst) or 'src:etype:dst') in etypes"
    )


class GraphPartitionBook(abc.ABC):  # noqa: B024 - DGL's interface; every member is overridden
    """DGL's ``GraphPartitionBook``: the interface of partition books (``isinstance(book,
    GraphPartitionBook)`` holds for the books of :meth:`DistGraph.get_partition_book`, which are
    :class:`RangePartitionBook`). Its members, with DGL's signatures, are implemented there."""

    def _interface(self, name: str):
        raise NotImplementedError(f"GraphPartitionBook.{name} is implemented by RangePartitionBook")

    def shared_memory(self, graph_name):
        """Not supported (see :meth:`RangePartitionBook.shared_memory`)."""
        raise NotImplementedError("shared_memory() is not supported: trainers get the book from the servers")

    def num_partitions(self):
        """Number of partitions."""
        return self._interface("num_partitions")

    def metadata(self):
        """Per partition: ``machine_id``, ``num_nodes``, ``num_edges``."""
        return self._interface("metadata")

    def nid2partid(self, nids, ntype):
        """Owning partition of each node ID."""
        return self._interface("nid2partid")

    def eid2partid(self, eids, etype):
        """Owning partition of each edge ID."""
        return self._interface("eid2partid")

    def partid2nids(self, partid, ntype):
        """Node IDs a partition owns."""
        return self._interface("partid2nids")

    def partid2eids(self, partid, etype):
        """Edge IDs a partition owns."""
        return self._interface("partid2eids")

    def nid2localnid(self, nids, partid, ntype):
        """Offsets of node IDs in their partition."""
        return self._interface("nid2localnid")

    def eid2localeid(self, eids, partid, etype):
        """Offsets of edge IDs in their partition."""
        return self._interface("eid2localeid")

    @property
    def partid(self):
        """The partition the book is used from."""
        return self._interface("partid")

    @property
    def ntypes(self):
        """Node types."""
        return self._interface("ntypes")

    @property
    def etypes(self):
        """Edge types."""
        return self._interface("etypes")

    @property
    def canonical_etypes(self):
        """Canonical edge types."""
        return self._interface("canonical_etypes")

    def to_canonical_etype(self, etype):
        """The canonical type of an edge type."""
        return self._interface("to_canonical_etype")

    @property
    def is_homogeneous(self):
        """One node type and one edge type."""
        return self._interface("is_homogeneous")

    def map_to_per_ntype(self, ids):
        """``(type IDs, per-type IDs)`` of homogeneous node IDs."""
        return self._interface("map_to_per_ntype")

    def map_to_per_etype(self, ids):
        """``(type IDs, per-type IDs)`` of homogeneous edge IDs."""
        return self._interface("map_to_per_etype")

    def map_to_homo_nid(self, ids, ntype):
        """Homogeneous IDs of per-type node IDs."""
        return self._interface("map_to_homo_nid")

    def map_to_homo_eid(self, ids, etype):
        """Homogeneous IDs of per-type edge IDs."""
        return self._interface("map_to_homo_eid")


class RangePartitionBook(_NativeBook, GraphPartitionBook):
    """DGL's ``RangePartitionBook(part_id, num_parts, node_map, edge_map, ntypes, etypes)``.

    Args:
        part_id: the partition the book is used from.
        num_parts: number of partitions.
        node_map: per node type, a ``[num_parts, 2]`` array of ``[start, end)`` homogeneous node IDs.
        edge_map: per canonical edge type (a triple, ``'src:etype:dst'``, or the edge type's name), the
            same for edge IDs.
        ntypes: ``{node type: type ID}``.
        etypes: ``{canonical edge type: type ID}`` (``'_E'`` is accepted on a homogeneous graph).

    Raises:
        TypeError: ``ntypes`` / ``etypes`` not dicts.
        ValueError: maps that do not tile the ID spaces, or that disagree with ``num_parts``.
    """

    def __init__(self, part_id, num_parts, node_map, edge_map, ntypes, etypes):
        ntype_names = _names_by_id(ntypes, "ntypes")
        canonical = [_canonical(e, ntype_names) for e in _names_by_id(etypes, "etypes")]
        edge_map = {
            etype_key(tuple(k)) if isinstance(k, (tuple, list)) else k: v for k, v in edge_map.items()
        }
        native = _NativeBook.from_maps(
            int(part_id),
            {name: np.asarray(ranges) for name, ranges in node_map.items()},
            {name: np.asarray(ranges) for name, ranges in edge_map.items()},
            ntype_names,
            canonical,
        )
        if native.num_partitions() != int(num_parts):
            raise ValueError(
                f"num_parts={num_parts} but the maps describe {native.num_partitions()} partitions"
            )
        self.__dict__.update(native.__dict__)

    @classmethod
    def of(cls, book: _NativeBook) -> RangePartitionBook:
        """The compat view of a native book (the same ranges, types and ``partid``)."""
        if isinstance(book, cls):
            return book
        view = cls.__new__(cls)
        view.__dict__.update(book.__dict__)
        return view

    # ----- DGL's ID methods, returning tensors ---------------------------------------------------

    def nid2partid(self, nids, ntype=DEFAULT_NTYPE):
        """Owning partition of each node ID (int64 tensor)."""
        return _tensor(super().nid2partid(nids, ntype))

    def eid2partid(self, eids, etype=DEFAULT_CANONICAL_ETYPE):
        """Owning partition of each edge ID (int64 tensor)."""
        return _tensor(super().eid2partid(eids, etype))

    def partid2nids(self, partid, ntype=DEFAULT_NTYPE):
        """Node IDs owned by ``partid`` (int64 tensor)."""
        return _tensor(super().partid2nids(partid, ntype))

    def partid2eids(self, partid, etype=DEFAULT_CANONICAL_ETYPE):
        """Edge IDs owned by ``partid`` (int64 tensor)."""
        return _tensor(super().partid2eids(partid, etype))

    def nid2localnid(self, nids, partid, ntype=DEFAULT_NTYPE):
        """Offsets of node IDs inside ``partid`` (int64 tensor)."""
        return _tensor(super().nid2localnid(nids, partid, ntype))

    def eid2localeid(self, eids, partid, etype=DEFAULT_CANONICAL_ETYPE):
        """Offsets of edge IDs inside ``partid`` (int64 tensor)."""
        return _tensor(super().eid2localeid(eids, partid, etype))

    def map_to_per_ntype(self, ids):
        """``(type IDs, per-type IDs)`` of homogeneous node IDs (tensors)."""
        types, per_type = super().map_to_per_ntype(ids)
        return _tensor(types), _tensor(per_type)

    def map_to_per_etype(self, ids):
        """``(type IDs, per-type IDs)`` of homogeneous edge IDs (tensors)."""
        types, per_type = super().map_to_per_etype(ids)
        return _tensor(types), _tensor(per_type)

    def map_to_homo_nid(self, ids, ntype):
        """Homogeneous IDs of per-type node IDs (tensor)."""
        return _tensor(super().map_to_homo_nid(ids, ntype))

    def map_to_homo_eid(self, ids, etype):
        """Homogeneous IDs of per-type edge IDs (tensor)."""
        return _tensor(super().map_to_homo_eid(ids, etype))

    # ----- DGL's other members -------------------------------------------------------------------

    def _num_nodes(self, ntype=DEFAULT_NTYPE) -> int:
        """Nodes of one type, or of the whole graph for ``'_N'`` (DGL's private count, which its
        partition tests call)."""
        return self.num_nodes(ntype)

    def _num_edges(self, etype=DEFAULT_ETYPE) -> int:
        """Edges of one type, or of the whole graph for ``'_E'`` (DGL's private count)."""
        return self.num_edges(etype)

    @property
    def is_homogeneous(self) -> bool:
        """One node type and one edge type."""
        return self.schema.is_homogeneous

    def to_canonical_etype(self, etype) -> tuple[str, str, str]:
        """The canonical ``(src, etype, dst)`` of an edge type.

        Raises:
            KeyError: an unknown or ambiguous edge type.
        """
        return self.schema.to_canonical_etype(etype)

    @property
    def local_ntype_offset(self) -> list[int]:
        """Where each node type starts among this partition's nodes (and the total at the end)."""
        return np.concatenate(([0], np.cumsum(self.ntype_counts[self.partid]))).astype(int).tolist()

    @property
    def local_etype_offset(self) -> list[int]:
        """Where each edge type starts among this partition's edges (and the total at the end)."""
        return np.concatenate(([0], np.cumsum(self.etype_counts[self.partid]))).astype(int).tolist()

    @property
    def global_nid_dtype(self) -> torch.dtype:
        """The dtype of node IDs."""
        return torch.int64

    @property
    def global_eid_dtype(self) -> torch.dtype:
        """The dtype of edge IDs."""
        return torch.int64

    def shared_memory(self, graph_name):
        """Not supported: graphstore trainers read the book from the servers, not from shared memory.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError(
            "RangePartitionBook.shared_memory() is not supported: every trainer gets the partition book "
            "from the servers when it connects"
        )


class NodePartitionPolicy(PartitionPolicy):
    """The partition policy of one node type's data (``'node:<ntype>'``)."""

    def __init__(self, partition_book, ntype: str = DEFAULT_NTYPE):
        super().__init__(f"node:{ntype}", partition_book)


class EdgePartitionPolicy(PartitionPolicy):
    """The partition policy of one edge type's data (a name, ``'src:etype:dst'`` or a triple)."""

    def __init__(self, partition_book, etype=DEFAULT_CANONICAL_ETYPE):
        super().__init__(f"edge:{etype_key(etype) if isinstance(etype, tuple) else etype}", partition_book)
