"""Partition policies: how the rows of one ID space (all nodes, all edges, or one type's) are spread.

A policy names an ID space: ``"node"`` / ``"edge"`` (homogeneous IDs of the whole graph; on a
one-type graph DGL spells them ``'node:_N'`` / ``'edge:_E'``) or ``"node:<ntype>"`` /
``"edge:<src>:<etype>:<dst>"`` (per-type IDs). A tensor partitioned by a policy has, in partition
``k``, the rows of the IDs that partition owns in that space.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphstore.partition.book import RangePartitionBook
from graphstore.types import DEFAULT_ETYPE, DEFAULT_NTYPE, EDGE, NODE, etype_key


class PartitionPolicy:
    """The spread of one ID space's rows over the partitions (DGL's ``PartitionPolicy``).

    Args:
        policy_str: ``'node'``, ``'edge'``, ``'node:<ntype>'``, ``'edge:<etype>'`` (a plain name when
            unambiguous) or ``'edge:<src>:<etype>:<dst>'``; ``'node:_N'`` / ``'edge:_E'`` are the
            homogeneous spaces.
        partition_book: the graph's :class:`RangePartitionBook`.

    Raises:
        ValueError: a malformed policy string. KeyError: an unknown type.
    """

    def __init__(self, policy_str: str, partition_book: RangePartitionBook):
        kind, _, type_name = str(policy_str).partition(":")
        if kind not in (NODE, EDGE):
            raise ValueError(
                f"policy_str={policy_str!r}: expected 'node', 'edge', 'node:<ntype>' or "
                "'edge:<src>:<etype>:<dst>'"
            )
        schema = partition_book.schema
        self._kind = kind
        self._book = partition_book
        if kind == NODE:
            self._type_name = type_name or DEFAULT_NTYPE
            homogeneous = self._type_name == DEFAULT_NTYPE or schema.is_homogeneous
            if not homogeneous or type_name not in ("", DEFAULT_NTYPE):
                schema.ntype_id(self._type_name)
            self._policy = NODE if homogeneous else f"{NODE}:{self._type_name}"
        else:
            raw = type_name or DEFAULT_ETYPE
            homogeneous = raw in (DEFAULT_ETYPE, etype_key((DEFAULT_NTYPE, DEFAULT_ETYPE, DEFAULT_NTYPE)))
            if homogeneous and not schema.is_homogeneous:
                self._type_name = DEFAULT_ETYPE
                self._policy = EDGE
            else:
                canonical = schema.to_canonical_etype(raw)
                self._type_name = canonical[1] if schema.is_homogeneous else etype_key(canonical)
                self._policy = EDGE if schema.is_homogeneous else f"{EDGE}:{etype_key(canonical)}"

    @property
    def policy_str(self) -> str:
        """DGL's form: ``'node:_N'``, ``'edge:_E'``, ``'node:<ntype>'``, ``'edge:<src>:<etype>:<dst>'``."""
        return f"{self._kind}:{self._type_name}"

    @property
    def policy(self) -> str:
        """The ID-space name servers and tensors use (``"node"``, ``"node:paper"``, ...)."""
        return self._policy

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
        """The node type, or the edge type (``src:etype:dst`` on a typed graph)."""
        return self._type_name

    @property
    def partition_book(self) -> RangePartitionBook:
        """The partition book."""
        return self._book

    @property
    def part_id(self) -> int:
        """The partition this policy is used from."""
        return self._book.partid

    def bounds(self) -> np.ndarray:
        """The partition boundaries of this ID space."""
        return self._book.policy_bounds(self._policy)

    def _type_arg(self):
        return None if self._policy in (NODE, EDGE) else self._type_name

    def to_local(self, id_tensor: Any):
        """Offsets, inside this policy's partition, of IDs it owns (DGL's parameter name).

        Raises:
            IndexError: an ID this partition does not own.
        """
        if self._kind == NODE:
            return self._book.nid2localnid(id_tensor, self.part_id, self._type_arg())
        return self._book.eid2localeid(id_tensor, self.part_id, self._type_arg())

    def to_partid(self, id_tensor: Any):
        """Owning partition of each ID (DGL's parameter name).

        Raises:
            IndexError: an ID outside the ID space.
        """
        if self._kind == NODE:
            return self._book.nid2partid(id_tensor, self._type_arg())
        return self._book.eid2partid(id_tensor, self._type_arg())

    def get_part_size(self) -> int:
        """Number of rows owned by this policy's partition."""
        bounds = self.bounds()
        return int(bounds[self.part_id + 1] - bounds[self.part_id])

    def get_size(self) -> int:
        """Number of rows in the whole ID space."""
        return int(self.bounds()[-1])

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, PartitionPolicy)
            and self._policy == other._policy
            and self.part_id == other.part_id
            and self._book == other._book
        )

    def __hash__(self) -> int:
        return hash((self._policy, self.part_id))

    def __repr__(self) -> str:
        return f"PartitionPolicy({self.policy_str!r}, part_id={self.part_id})"
