"""``dgl.distributed.graph_partition_book``: DGL's module path of the partition book and policies (the
classes of :mod:`.partition_book`), with DGL's helpers for canonical edge type strings and
:class:`HeteroDataName`, the name DGL gives a piece of node or edge data of one type.
"""

from __future__ import annotations

from graphstore.compat.dgl.distributed.partition_book import (
    EdgePartitionPolicy,
    GraphPartitionBook,
    NodePartitionPolicy,
    RangePartitionBook,
)
from graphstore.partition import PartitionPolicy
from graphstore.types import DEFAULT_CANONICAL_ETYPE, DEFAULT_NTYPE, etype_key

# DGL's default type names: DEFAULT_ETYPE is the canonical triple in DGL 2.x.
DEFAULT_ETYPE = DEFAULT_CANONICAL_ETYPE
NODE_PART_POLICY = "node"
EDGE_PART_POLICY = "edge"


def _etype_tuple_to_str(c_etype) -> str:
    """``(src, etype, dst)`` -> ``"src:etype:dst"`` (DGL's helper).

    Raises:
        ValueError: not a triple.
    """
    if not (isinstance(c_etype, (tuple, list)) and len(c_etype) == 3):
        raise ValueError(f"a canonical edge type is a (src, etype, dst) triple, got {c_etype!r}")
    return etype_key(tuple(c_etype))


def _etype_str_to_tuple(c_etype: str) -> tuple[str, str, str]:
    """``"src:etype:dst"`` -> ``(src, etype, dst)`` (DGL's helper).

    Raises:
        ValueError: not three ``:``-separated parts.
    """
    parts = tuple(str(c_etype).split(":"))
    if len(parts) != 3:
        raise ValueError(f"a canonical edge type string is 'src:etype:dst', got {c_etype!r}")
    return parts


class HeteroDataName:
    """The name of one piece of node or edge data of one type (DGL's ``HeteroDataName``).

    Args:
        is_node: node data (else edge data).
        entity_type: the node type, or for edge data the canonical ``(src, etype, dst)``.
        data_name: the data's name.

    Raises:
        ValueError: edge data whose type is not a canonical triple.
    """

    def __init__(self, is_node: bool, entity_type, data_name: str):
        if not is_node and not (isinstance(entity_type, tuple) and len(entity_type) == 3):
            raise ValueError(f"edge data needs a canonical edge type (src, etype, dst), got {entity_type!r}")
        self._policy = NODE_PART_POLICY if is_node else EDGE_PART_POLICY
        self._entity_type = entity_type
        self.data_name = data_name

    @property
    def policy_str(self) -> str:
        """``"node~ntype"`` or ``"edge~src:etype:dst"`` (DGL's policy string)."""
        entity = self._entity_type if self.is_node() else _etype_tuple_to_str(self._entity_type)
        return f"{self._policy}~{entity}"

    def is_node(self) -> bool:
        """Whether this names node data."""
        return self._policy == NODE_PART_POLICY

    def is_edge(self) -> bool:
        """Whether this names edge data."""
        return self._policy == EDGE_PART_POLICY

    def get_type(self):
        """The node type or canonical edge type."""
        return self._entity_type

    def get_name(self) -> str:
        """The data's name."""
        return self.data_name

    def __str__(self) -> str:
        return f"{self.policy_str}:{self.data_name}"


__all__ = [
    "DEFAULT_ETYPE",
    "DEFAULT_NTYPE",
    "EdgePartitionPolicy",
    "GraphPartitionBook",
    "HeteroDataName",
    "NodePartitionPolicy",
    "PartitionPolicy",
    "RangePartitionBook",
]
