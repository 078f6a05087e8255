"""``LocalGraph``: the in-memory graph a DGL partition script builds (``dgl.graph``, ``dgl.heterograph``,
``dgl.from_scipy``, ``dgl.rand_graph``, ...) and hands to ``partition_graph``.

It is a ``dgl.DGLGraph`` (``isinstance(g, dgl.DGLGraph)`` holds) with DGL's members for building and
inspecting a graph: node and edge types (sorted, as DGL orders them, so type IDs match DGL's), per-type
node counts and edges, ``ndata`` / ``edata`` (``g.nodes[ntype].data`` / ``g.edges[etype].data`` per type),
``nodes()`` / ``edges(form=..., order=...)``, ``find_edges``, ``in_degrees`` / ``out_degrees``,
``in_edges`` / ``out_edges``, ``edge_ids`` / ``has_edges_between``, ``adj()``, ``formats()``, and message
passing with the built-ins (``update_all``, ``apply_edges``, ``local_scope``), the same code blocks run.

Node and edge IDs are ``idtype`` tensors (int64 unless the graph was built with ``idtype=torch.int32``).
Graphs live on the CPU here (``to(device)`` moves a copy).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from graphstore.client.graph_members import GraphMembers
from graphstore.client.graph_ops import ALL, GraphOps, Relation
from graphstore.client.relation_graph import EDGE_FORMS, DeviceCopies, RelationGraph, map_frames
from graphstore.client.typed_frames import Frame, TypeFrames, data_view, ntype_resolver
from graphstore.types import CanonicalEtype, GraphSchema

ID_DTYPES = (torch.int32, torch.int64)
SPARSE_FORMATS = ("coo", "csr", "csc")


class SizedFrame(dict):
    """A frame (name -> tensor) that refuses a tensor whose first dimension is not its row count, as
    DGL does when data is set on a graph."""

    def __init__(self, rows: int, what: str, items=()):
        super().__init__(items)
        self.rows, self.what = rows, what

    def __setitem__(self, name, value) -> None:
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{self.what} data {name!r} must be a torch tensor, got {type(value).__name__}")
        if value.dim() == 0 or value.shape[0] != self.rows:
            raise ValueError(
                f"{self.what} data {name!r} has shape {tuple(value.shape)}: expected {self.rows} rows "
                "(one per node or edge)"
            )
        super().__setitem__(name, value)

    def update(self, *args, **kwargs) -> None:
        for name, value in dict(*args, **kwargs).items():
            self[name] = value


def _is_all(ids) -> bool:
    return ids is None or (isinstance(ids, str) and ids == ALL)


def as_ids(ids, dtype: torch.dtype, what: str) -> torch.Tensor:
    """``ids`` (an int, a sequence, an array or a tensor) as a 1-D tensor of ``dtype``.

    Raises:
        TypeError: floating-point IDs.
    """
    tensor = torch.as_tensor(ids)
    if tensor.is_floating_point() or tensor.dtype == torch.bool:
        raise TypeError(f"{what} must be integer IDs, got {tensor.dtype}")
    return tensor.to(dtype).reshape(-1)


class SparseAdjacency:
    """``g.adj(etype)``: one relation's adjacency as a sparse matrix (rows: sources, columns:
    destinations), in the three layouts DGL's sparse matrices give."""

    def __init__(self, src: torch.Tensor, dst: torch.Tensor, shape: tuple[int, int]):
        self._src, self._dst, self.shape = src, dst, shape

    def coo(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(row, col)``: sources and destinations by edge ID."""
        return self._src, self._dst

    def _compressed(self, major: torch.Tensor, minor: torch.Tensor, rows: int):
        order = torch.argsort(major.long(), stable=True)
        indptr = torch.zeros(rows + 1, dtype=torch.int64)
        indptr[1:] = torch.cumsum(torch.bincount(major.long(), minlength=rows), 0)
        return indptr.to(major.dtype), minor[order], order.to(major.dtype)

    def csr(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(indptr, indices, edge IDs)`` grouped by source, edge ID order within a source."""
        return self._compressed(self._src, self._dst, self.shape[0])

    def csc(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(indptr, indices, edge IDs)`` grouped by destination, edge ID order within a destination."""
        return self._compressed(self._dst, self._src, self.shape[1])


class NodeView:
    """``g.nodes``: called, a node type's IDs (``g.nodes('user')``); indexed, that type's data space
    (``g.nodes['user'].data``)."""

    def __init__(self, graph: LocalGraph):
        self._graph = graph

    def __call__(self, ntype: str | None = None) -> torch.Tensor:
        return torch.arange(self._graph.num_nodes(ntype), dtype=self._graph.idtype)

    def __getitem__(self, ntype):
        graph = self._graph
        return TypeFrames(graph._node_frames, graph._resolve_ntype)[ntype]


class LocalEdgeView:
    """``g.edges``: called, one type's edges (``form``, ``order``, ``etype`` as DGL); indexed, that
    type's data space (``g.edges['follows'].data``)."""

    def __init__(self, graph: LocalGraph):
        self._graph = graph

    def __call__(self, form: str = "uv", order: str = "eid", etype=None):
        """Args:
            form: ``"uv"`` (``(src, dst)``), ``"all"`` (with the edge IDs) or ``"eid"``.
            order: ``"eid"`` (by edge ID) or ``"srcdst"`` (by source, then destination).
            etype: the edge type; None on a graph with one.

        Raises:
            ValueError: an unknown ``form`` or ``order``.
            KeyError: an unknown edge type, or none named on a graph with several.
        """
        if form not in EDGE_FORMS:
            raise ValueError(f"form must be 'uv', 'all' or 'eid', got {form!r}")
        if order not in ("eid", "srcdst"):
            raise ValueError(f"order must be 'eid' or 'srcdst', got {order!r}")
        graph = self._graph
        canonical = graph.to_canonical_etype(etype)
        src, dst = graph._edges[canonical]
        eids = graph._edge_ids(canonical)
        if order == "srcdst" and src.numel():
            width = int(dst.max()) + 1
            perm = torch.argsort(src.long() * width + dst.long(), stable=True)
            src, dst, eids = src[perm], dst[perm], eids[perm]
        if form == "uv":
            return src, dst
        return (src, dst, eids) if form == "all" else eids

    def __getitem__(self, etype):
        graph = self._graph
        return TypeFrames(graph._edge_frames, graph._schema.to_canonical_etype)[etype]


class LocalGraph(RelationGraph, GraphOps, DeviceCopies, GraphMembers):
    """An in-memory typed graph (homogeneous: one node type ``_N`` and one edge type ``_N:_E:_N``).

    Build it with :func:`graphstore.compat.dgl.graph` or :func:`graphstore.compat.dgl.heterograph`.

    Args:
        edges: per canonical edge type, its ``(src, dst)`` per-type node IDs (1-D integer tensors).
        num_nodes: per node type, its node count (every type the edges name).
        idtype: ``torch.int64`` or ``torch.int32``.

    Raises:
        ValueError: unequal ``src`` / ``dst`` lengths, an ID outside its type's nodes, a node type
            without a count, or another ``idtype``.
    """

    _frame_attrs = ("_node_frames", "_edge_frames")
    is_block = False
    is_unibipartite = False

    def __init__(
        self,
        edges: Mapping[CanonicalEtype, tuple[torch.Tensor, torch.Tensor]],
        num_nodes: Mapping[str, int],
        idtype: torch.dtype = torch.int64,
    ):
        if idtype not in ID_DTYPES:
            raise ValueError(f"idtype must be torch.int32 or torch.int64, got {idtype}")
        ntypes = sorted(num_nodes)
        canonical = sorted(tuple(c) for c in edges)
        schema = GraphSchema(tuple(ntypes), tuple(canonical))
        counts = {ntype: int(num_nodes[ntype]) for ntype in ntypes}
        structure = {}
        for c in canonical:
            src, dst = (as_ids(t, idtype, f"edges of {c}") for t in edges[c])
            if src.shape != dst.shape:
                raise ValueError(f"edge type {c}: {src.numel()} sources but {dst.numel()} destinations")
            for ids, ntype, end in ((src, c[0], "source"), (dst, c[2], "destination")):
                if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= counts[ntype]):
                    raise ValueError(
                        f"edge type {c}: {end} IDs must be in [0, {counts[ntype]}) ({ntype!r} nodes), got "
                        f"[{int(ids.min())}, {int(ids.max())}]"
                    )
            structure[c] = (src, dst)
        self._attach(
            schema,
            structure,
            {t: SizedFrame(counts[t], f"node type {t!r}") for t in ntypes},
            {c: SizedFrame(structure[c][0].numel(), f"edge type {c}") for c in canonical},
            counts,
            idtype,
        )

    def _attach(self, schema, edges, node_frames, edge_frames, counts, idtype) -> None:
        self._counts, self._idtype = dict(counts), idtype
        self._init_relations(schema, edges, edge_frames)
        self._node_frames = node_frames
        self._resolve_ntype = ntype_resolver(list(schema.ntypes))
        self._formats = list(SPARSE_FORMATS)
        self._derive_views()

    def _derive_views(self) -> None:
        super()._derive_views()
        self.ndata = data_view(self._node_frames, self._resolve_ntype, "node")
        self.srcdata = self.dstdata = self.ndata

    # -- types and sizes ------------------------------------------------------------------------
    @property
    def ntypes(self) -> list[str]:
        """Node types, in type-ID order (sorted)."""
        return list(self._schema.ntypes)

    srctypes = dsttypes = ntypes

    @property
    def is_homogeneous(self) -> bool:
        """One node type and one edge type."""
        return self._schema.is_homogeneous

    @property
    def idtype(self) -> torch.dtype:
        """The dtype of node and edge IDs."""
        return self._idtype

    def get_ntype_id(self, ntype: str | None) -> int:
        """The ID of a node type (None: the only one).

        Raises:
            KeyError: an unknown type, or None on a graph with several.
        """
        return self._schema.ntype_id(ntype)

    def get_etype_id(self, etype) -> int:
        """The ID of an edge type (a canonical triple, an unambiguous name, None: the only one).

        Raises:
            KeyError: an unknown or ambiguous edge type.
        """
        return self._schema.etype_id(etype)

    def num_nodes(self, ntype: str | None = None) -> int:
        """Nodes of one type, or of every type (None)."""
        if ntype is None:
            return sum(self._counts.values())
        return self._counts[self._resolve_ntype(ntype)]

    number_of_nodes = num_nodes
    num_src_nodes = num_dst_nodes = number_of_src_nodes = number_of_dst_nodes = num_nodes

    def _num_src_of(self, ntype: str) -> int:
        return self._counts[ntype]

    def _edge_ids(self, canonical: CanonicalEtype) -> torch.Tensor:
        return torch.arange(self._count(canonical), dtype=self._idtype)

    @property
    def nodes(self) -> NodeView:
        """``g.nodes(ntype)``: IDs; ``g.nodes[ntype].data``: that type's node data."""
        return NodeView(self)

    srcnodes = dstnodes = nodes

    @property
    def edges(self) -> LocalEdgeView:
        """``g.edges(form, order, etype)``: edges; ``g.edges[etype].data``: that type's edge data."""
        return LocalEdgeView(self)

    def _side(self, ntype: str, source: bool) -> tuple[Frame, int]:
        return self._node_frames[ntype], self._counts[ntype]

    def _relation(self, canonical: CanonicalEtype) -> Relation:
        relation = super()._relation(canonical)
        return relation._replace(src=relation.src.long(), dst=relation.dst.long())

    # -- structure queries -----------------------------------------------------------------------
    def _degrees(self, ids, canonical: CanonicalEtype, column: int):
        ends = self._edges[canonical][column]
        count = self._counts[canonical[2 * column]]
        degrees = torch.bincount(ends.long(), minlength=count).to(self._idtype)
        if _is_all(ids):
            return degrees
        if isinstance(ids, int):
            return int(degrees[ids])
        return degrees[as_ids(ids, torch.int64, "node IDs")]

    def in_degrees(self, v=ALL, etype=None):
        """In-degrees along one edge type (None: the only one): every destination node's, or ``v``'s
        (an int for an int)."""
        return self._degrees(v, self.to_canonical_etype(etype), 1)

    def out_degrees(self, u=ALL, etype=None):
        """Out-degrees along one edge type: every source node's, or ``u``'s (an int for an int)."""
        return self._degrees(u, self.to_canonical_etype(etype), 0)

    def _incident(self, ids, form: str, etype, column: int):
        if form not in EDGE_FORMS:
            raise ValueError(f"form must be 'uv', 'all' or 'eid', got {form!r}")
        canonical = self.to_canonical_etype(etype)
        src, dst = self._edges[canonical]
        ends = (src, dst)[column]
        eids = torch.nonzero(torch.isin(ends, as_ids(ids, ends.dtype, "node IDs")), as_tuple=True)[0]
        eids = eids.to(self._idtype)
        if form == "eid":
            return eids
        return (src[eids], dst[eids], eids) if form == "all" else (src[eids], dst[eids])

    def in_edges(self, v, form: str = "uv", etype=None):
        """The edges into the nodes ``v`` (in edge ID order), in ``form`` (``uv``, ``all``, ``eid``)."""
        return self._incident(v, form, etype, 1)

    def out_edges(self, u, form: str = "uv", etype=None):
        """The edges out of the nodes ``u`` (in edge ID order), in ``form``."""
        return self._incident(u, form, etype, 0)

    def adj(self, etype=None, eweight_name=None) -> SparseAdjacency:
        """One relation's adjacency (rows: source nodes, columns: destination nodes).

        Raises:
            NotImplementedError: ``eweight_name`` (weighted adjacency).
        """
        if eweight_name is not None:
            raise NotImplementedError("adj(eweight_name=...) is not supported: the adjacency is unweighted")
        canonical = self.to_canonical_etype(etype)
        src, dst = self._edges[canonical]
        return SparseAdjacency(src, dst, (self._counts[canonical[0]], self._counts[canonical[2]]))

    def formats(self, formats=None):
        """Without an argument, ``{"created": [...], "not created": [...]}`` (every layout is derived
        on demand here, so all count as created); with one, a graph restricted to those layouts (the
        same structure and data).

        Raises:
            ValueError: an unknown layout.
        """
        if formats is None:
            return {"created": list(self._formats), "not created": []}
        wanted = [formats] if isinstance(formats, str) else list(formats)
        unknown = [f for f in wanted if f not in SPARSE_FORMATS]
        if unknown:
            raise ValueError(f"formats: unknown sparse formats {unknown}; choose from {list(SPARSE_FORMATS)}")
        out = self._map_tensors(lambda tensor: tensor)
        out._formats = [f for f in SPARSE_FORMATS if f in wanted]
        return out

    def create_formats_(self) -> None:
        """Accepted as DGL's: every layout is derived on demand."""

    # -- copies ----------------------------------------------------------------------------------
    def _map_tensors(self, move) -> LocalGraph:
        out = LocalGraph.__new__(LocalGraph)
        out._attach(
            self._schema,
            {c: (move(src), move(dst)) for c, (src, dst) in self._edges.items()},
            {
                t: SizedFrame(self._counts[t], f.what, map_frames({t: f}, move)[t])
                for t, f in self._node_frames.items()
            },
            {
                c: SizedFrame(f.rows, f.what, map_frames({c: f}, move)[c])
                for c, f in self._edge_frames.items()
            },
            self._counts,
            self._idtype,
        )
        return out

    def clone(self) -> LocalGraph:
        """A graph with the same structure and data tensors whose data changes stay its own."""
        return self._map_tensors(lambda tensor: tensor)

    def astype(self, idtype: torch.dtype) -> LocalGraph:
        """A copy with ``idtype`` node and edge IDs (data shared).

        Raises:
            ValueError: an ``idtype`` other than ``torch.int32`` / ``torch.int64``.
        """
        if idtype not in ID_DTYPES:
            raise ValueError(f"idtype must be torch.int32 or torch.int64, got {idtype}")
        out = self.clone()
        out._edges = {c: (s.to(idtype), d.to(idtype)) for c, (s, d) in out._edges.items()}
        out._idtype = idtype
        return out

    def int(self) -> LocalGraph:
        """A copy with int32 IDs."""
        return self.astype(torch.int32)

    def long(self) -> LocalGraph:
        """A copy with int64 IDs."""
        return self.astype(torch.int64)

    def __repr__(self) -> str:
        if self.is_homogeneous:
            return f"Graph(num_nodes={self.num_nodes()}, num_edges={self.num_edges()})"
        nodes = {t: self.num_nodes(t) for t in self.ntypes}
        edges = {c: self.num_edges(c) for c in self.canonical_etypes}
        return f"Graph(num_nodes={nodes}, num_edges={edges})"
