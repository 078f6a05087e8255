"""PyG's ``GraphStore`` over a DistGraph's structure: every canonical edge type in COO, CSC and CSR.

Listing the edge types (:meth:`GraphStore.get_all_edge_attrs`) reads only the partition book (types,
counts). An edge index is pulled from the partitions (``find_edges`` over the type's edge IDs, a chunk
at a time) only when PyG asks for it with :meth:`get_edge_index`, and kept for the next request of the
same type in any layout (``cache=False`` drops it). Edge type keys are PyG's: ``None`` on a homogeneous
graph, ``(src, rel, dst)`` on a typed one. Column ``i`` of the COO index is the edge of (per-type) ID
``i``, the ID the sampler's ``edge`` / a batch's ``e_id`` carries.
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import EdgeAttr, EdgeLayout
from torch_geometric.data import GraphStore as _PyGGraphStore

from graphstore.client.block import csr_by_destination

# Edges looked up per find_edges call when an edge index is pulled.
FIND_EDGES_CHUNK = 1 << 20


class GraphStore(_PyGGraphStore):
    """PyG's ``GraphStore`` over a :class:`~graphstore.client.DistGraph` (read-only structure).

    Args:
        g: the DistGraph.
        cache: keep each pulled edge index (COO per edge type) for later requests.
    """

    def __init__(self, g, cache: bool = True):
        super().__init__()
        self.graph = g
        self.cache = bool(cache)
        self._homogeneous = bool(g.is_homogeneous)
        self._coo: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}

    def pyg_edge_type(self, canonical) -> tuple[str, str, str] | None:
        """PyG's key of a graphstore canonical edge type (None on a homogeneous graph)."""
        return None if self._homogeneous else tuple(canonical)

    def canonical_etype(self, edge_type) -> tuple[str, str, str]:
        """graphstore's canonical edge type of a PyG edge type (None: the one of a homogeneous graph).

        Raises:
            KeyError: an unknown edge type.
        """
        if edge_type is None or self._homogeneous:
            if edge_type is None and not self._homogeneous:
                raise KeyError(
                    f"edge_type None names no edge type on a typed graph; {self.graph.canonical_etypes}"
                )
            return tuple(self.graph.canonical_etypes[0])
        return tuple(self.graph.to_canonical_etype(tuple(edge_type)))

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        """Every canonical edge type in the COO, CSC and CSR layouts, with its ``(num_src, num_dst)``."""
        g, attrs = self.graph, []
        for canonical in g.canonical_etypes:
            size = (g.num_nodes(canonical[0]), g.num_nodes(canonical[2]))
            for layout in (EdgeLayout.COO, EdgeLayout.CSC, EdgeLayout.CSR):
                attrs.append(EdgeAttr(self.pyg_edge_type(canonical), layout, size=size))
        return attrs

    def _pull_coo(self, canonical) -> tuple[torch.Tensor, torch.Tensor]:
        cached = self._coo.get(canonical)
        if cached is not None:
            return cached
        g = self.graph
        count = g.num_edges(canonical)
        etype = None if self._homogeneous else canonical
        src = torch.empty(count, dtype=torch.int64)
        dst = torch.empty(count, dtype=torch.int64)
        for start in range(0, count, FIND_EDGES_CHUNK):
            end = min(count, start + FIND_EDGES_CHUNK)
            part_src, part_dst = g.find_edges(torch.arange(start, end, dtype=torch.int64), etype)
            src[start:end] = part_src
            dst[start:end] = part_dst
        if self.cache:
            self._coo[canonical] = (src, dst)
        return src, dst

    def _get_edge_index(self, edge_attr: EdgeAttr):
        """The edge index of one edge type in the requested layout: COO ``(row, col)``, CSC
        ``(row, colptr)`` (sorted by destination), CSR ``(rowptr, col)`` (sorted by source).

        Raises:
            KeyError: an unknown edge type.
        """
        canonical = self.canonical_etype(edge_attr.edge_type)
        src, dst = self._pull_coo(canonical)
        layout = EdgeLayout(edge_attr.layout)
        if layout == EdgeLayout.COO:
            if edge_attr.is_sorted:
                order = torch.from_numpy(np.argsort(dst.numpy(), kind="stable"))
                return src[order], dst[order]
            return src, dst
        num_src, num_dst = self.graph.num_nodes(canonical[0]), self.graph.num_nodes(canonical[2])
        if layout == EdgeLayout.CSC:
            colptr, row, _ = csr_by_destination(src, dst, num_dst)
            return row, colptr
        rowptr, col, _ = csr_by_destination(dst, src, num_src)
        return rowptr, col

    def _put_edge_index(self, edge_index, edge_attr: EdgeAttr) -> bool:
        """The structure is the partitions' (read-only).

        Raises:
            PermissionError: always.
        """
        raise PermissionError(
            f"GraphStore over DistGraph {self.graph.graph_name!r} is read-only: edge_type "
            f"{edge_attr.edge_type!r} cannot be written (partition the new graph instead)"
        )

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        """Drop a cached edge index (the partitions keep theirs); False when none was cached."""
        try:
            canonical = self.canonical_etype(edge_attr.edge_type)
        except KeyError:
            return False
        return self._coo.pop(canonical, None) is not None

    def __repr__(self) -> str:
        return f"GraphStore(graph={self.graph.graph_name!r}, edge_types={self.graph.canonical_etypes})"
