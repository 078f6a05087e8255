"""``dgl.graphbolt``: the part of GraphBolt that DGL's partition scripts and tests touch.

:class:`FusedCSCSamplingGraph` is GraphBolt's per-partition graph as *data*: the CSC structure
(``csc_indptr``, ``indices``), the edge types (``type_per_edge``, ``node_type_to_id``,
``edge_type_to_id``) and named node and edge attributes. ``dgl.distributed.load_partition(...,
use_graphbolt=True)`` returns one per partition (built from graphstore's partition files, see
:mod:`graphstore.compat.dgl.distributed.graphbolt_partition`). Its sampling methods are GraphBolt's
and not provided: graphstore samples on its own structures (``DistGraph``, the loaders).
"""

from __future__ import annotations

import torch

from graphstore.types import etype_key


def etype_tuple_to_str(c_etype) -> str:
    """``(src, etype, dst)`` -> ``"src:etype:dst"``."""
    return etype_key(tuple(c_etype))


def etype_str_to_tuple(c_etype: str) -> tuple[str, str, str]:
    """``"src:etype:dst"`` -> ``(src, etype, dst)``.

    Raises:
        ValueError: not three ``:``-separated parts.
    """
    parts = tuple(c_etype.split(":"))
    if len(parts) != 3:
        raise ValueError(f"a canonical edge type string is 'src:etype:dst', got {c_etype!r}")
    return parts


def expand_indptr(indptr: torch.Tensor, dtype=None, node_ids=None, output_size=None) -> torch.Tensor:
    """The row (column) of every position of a compressed layout: ``node_ids[i]`` (default ``i``)
    repeated ``indptr[i + 1] - indptr[i]`` times."""
    counts = torch.diff(indptr.long())
    rows = torch.arange(counts.numel()) if node_ids is None else torch.as_tensor(node_ids)
    out = torch.repeat_interleave(rows, counts, output_size=output_size)
    return out.to(dtype or indptr.dtype)


class FusedCSCSamplingGraph:
    """GraphBolt's sampling graph of one partition, as data (see the module docstring).

    Args:
        csc_indptr: ``[num_nodes + 1]`` offsets of each destination's in-edges.
        indices: ``[num_edges]`` source node of each edge, in CSC order.
        node_type_offset: where each node type starts, or None.
        type_per_edge: edge type ID of each edge (CSC order), or None on a homogeneous graph.
        node_type_to_id, edge_type_to_id: ``{type: ID}`` (edge types as ``"src:etype:dst"``), or None.
        node_attributes, edge_attributes: ``{name: tensor}`` (edge attributes in CSC order).
    """

    def __init__(
        self,
        csc_indptr: torch.Tensor,
        indices: torch.Tensor,
        node_type_offset=None,
        type_per_edge=None,
        node_type_to_id=None,
        edge_type_to_id=None,
        node_attributes=None,
        edge_attributes=None,
    ):
        self.csc_indptr, self.indices = csc_indptr, indices
        self.node_type_offset, self.type_per_edge = node_type_offset, type_per_edge
        self.node_type_to_id, self.edge_type_to_id = node_type_to_id, edge_type_to_id
        self.node_attributes = dict(node_attributes or {})
        self.edge_attributes = dict(edge_attributes or {})

    @property
    def total_num_nodes(self) -> int:
        """Number of nodes."""
        return int(self.csc_indptr.numel()) - 1

    @property
    def total_num_edges(self) -> int:
        """Number of edges."""
        return int(self.indices.numel())

    def sample_neighbors(self, *args, **kwargs):
        """GraphBolt's sampler: not provided.

        Raises:
            NotImplementedError: always (sample through DistGraph and the loaders).
        """
        raise NotImplementedError(
            "FusedCSCSamplingGraph.sample_neighbors is GraphBolt's: graphstore samples through DistGraph "
            "(dgl.distributed.sample_neighbors, the loaders)"
        )

    def __repr__(self) -> str:
        return f"FusedCSCSamplingGraph(num_nodes={self.total_num_nodes}, num_edges={self.total_num_edges})"


# GraphBolt's constructor function takes the class's arguments.
fused_csc_sampling_graph = FusedCSCSamplingGraph


__all__ = [
    "FusedCSCSamplingGraph",
    "etype_str_to_tuple",
    "etype_tuple_to_str",
    "expand_indptr",
    "fused_csc_sampling_graph",
]
