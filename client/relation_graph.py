"""What the graphs of a mini-batch share (frontiers, blocks, pair graphs): edges grouped by canonical edge
type, one edge frame per type, DGL's edge accessors, and each relation as message passing
(:class:`~graphstore.client.graph_ops.GraphOps`, for blocks and pair graphs) runs on it.

A homogeneous graph is the one-type case: one canonical type ``('_N', '_E', '_N')``, whose edges and
frame are the graph's. On a typed graph the accessors take ``etype`` (a canonical triple, a
``"src:etype:dst"`` key, or a name when it is unambiguous) and ``graph[etype]`` is the one-type view of
one relation (see the subclasses).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from graphstore.client.device import pin_host_tensor
from graphstore.client.graph_ops import Relation
from graphstore.client.typed_frames import Frame, TypeFrames, data_view
from graphstore.types import CanonicalEtype, GraphSchema

EDGE_FORMS = ("uv", "all", "eid")


def map_frames(frames: Mapping, move) -> dict:
    """``{type: {name: move(tensor)}}`` of per-type frames."""
    return {key: {name: move(tensor) for name, tensor in frame.items()} for key, frame in frames.items()}


class DeviceCopies:
    """``to(device)`` and ``pin_memory()`` of the graphs a loader moves (blocks, pair graphs): copies the
    subclass makes in :meth:`_map_tensors`, so that its frames and the views that share them stay
    shared."""

    def to(self, device, non_blocking: bool = False, **kwargs):
        """A copy of the graph (structure and every data tensor) on ``device`` (``kwargs`` go to each
        tensor's ``to``, as in DGL)."""
        device = torch.device(device)
        return self._map_tensors(lambda tensor: tensor.to(device, non_blocking=non_blocking, **kwargs))

    def pin_memory(self):
        """A copy whose host tensors are in pinned (page-locked) memory, for non-blocking copies to a GPU
        (needs CUDA); tensors already pinned or on a GPU are shared."""
        return self._map_tensors(pin_host_tensor)

    def _map_tensors(self, move):
        """A copy of the graph with ``move`` applied to its structure and every data tensor."""
        raise NotImplementedError


class RelationGraph:
    """Edges per canonical edge type, with an edge frame per type.

    Attributes:
        edata: the only edge type's frame, or ``{name: {canonical etype: tensor}}`` over several.
    """

    def _init_relations(
        self,
        schema: GraphSchema,
        edges: Mapping[CanonicalEtype, tuple[torch.Tensor, torch.Tensor]],
        edge_frames: dict[CanonicalEtype, Frame],
    ) -> None:
        """Args:
        schema: the node and edge types (``edges`` has every canonical type of it, in order).
        edges: per canonical type, the ``(src, dst)`` node IDs of its edges (a mapping that may compute
            them when first asked).
        edge_frames: per canonical type, its edge data.
        """
        self._schema = schema
        self._edges = edges
        self._edge_frames = edge_frames
        RelationGraph._derive_views(self)

    def _derive_views(self) -> None:
        """Derive ``edata`` from the edge frames (again after a local scope replaced them)."""
        # The schema resolves types (not a method of this graph): no reference cycle keeps a batch's
        # tensors alive after its last reference goes.
        self.edata = data_view(self._edge_frames, self._schema.to_canonical_etype, "edge")

    # -- types ---------------------------------------------------------------------------------
    @property
    def canonical_etypes(self) -> list[CanonicalEtype]:
        """Canonical edge types ``(src_type, edge_type, dst_type)``, in type-ID order."""
        return list(self._schema.canonical_etypes)

    @property
    def etypes(self) -> list[str]:
        """Edge type names, in type-ID order."""
        return self._schema.etypes

    def to_canonical_etype(self, etype) -> CanonicalEtype:
        """The canonical type of ``etype`` (None: the only one).

        Raises:
            KeyError: an unknown or ambiguous edge type, or None among several (the message lists them).
        """
        return self._schema.to_canonical_etype(etype)

    def _side(self, ntype: str, source: bool) -> tuple[Frame, int]:
        """The frame and node count of one node type on the source (or destination) side."""
        raise NotImplementedError

    def _relation(self, canonical: CanonicalEtype) -> Relation:
        """One canonical type's edges and frames, as :class:`~graphstore.client.graph_ops.GraphOps`
        (message passing) runs on them."""
        src_type, _, dst_type = canonical
        src, dst = self._edges[canonical]
        (src_frame, num_src), (dst_frame, num_dst) = self._side(src_type, True), self._side(dst_type, False)
        return Relation(src, dst, num_src, num_dst, src_frame, dst_frame, self._edge_frames[canonical])

    # -- edges ---------------------------------------------------------------------------------
    def num_edges(self, etype=None) -> int:
        """Edges of one type, or of every type (None)."""
        if etype is None:
            return sum(self._count(c) for c in self._schema.canonical_etypes)
        return self._count(self.to_canonical_etype(etype))

    number_of_edges = num_edges

    def _count(self, canonical: CanonicalEtype) -> int:
        """Edges of one canonical type."""
        return int(self._edges[canonical][0].shape[0])

    def _edge_ids(self, canonical: CanonicalEtype) -> torch.Tensor:
        """The IDs ``edges(form="all")`` gives for one type's edges: local ``0..E-1``."""
        src = self._edges[canonical][0]
        return torch.arange(int(src.shape[0]), device=src.device)

    @property
    def edges(self) -> EdgeView:
        """``graph.edges(form="uv", order="eid", etype=None)``: the edges of one type (see
        :meth:`EdgeView.__call__`); ``graph.edges[etype].data``: that type's edge frame."""
        return EdgeView(self)

    def _select_edges(self, form: str, etype):
        """The edges of one type in ``form`` (see :meth:`EdgeView.__call__`).

        Raises:
            ValueError: an unknown ``form``.
            KeyError: an unknown edge type, or none named on a graph with several.
        """
        if form not in EDGE_FORMS:
            raise ValueError(f"form must be 'uv', 'all' or 'eid', got {form!r}")
        canonical = self.to_canonical_etype(etype)
        src, dst = self._edges[canonical]
        if form == "uv":
            return src, dst
        eids = self._edge_ids(canonical)
        return (src, dst, eids) if form == "all" else eids

    @property
    def edge_index(self) -> torch.Tensor:
        """``[2, E]`` edge index of the only edge type, row 0 source, row 1 destination."""
        return torch.stack(self.edges())

    @property
    def device(self) -> torch.device:
        """The device of the graph's structure."""
        return self._edges[self._schema.canonical_etypes[0]][0].device


class EdgeView:
    """DGL's ``graph.edges``: called, the edges of one type; indexed, one type's data.

    Args:
        graph: the graph.
    """

    def __init__(self, graph: RelationGraph):
        self._graph = graph

    def __call__(self, form: str = "uv", order: str = "eid", etype=None):
        """``(src, dst)`` for ``form="uv"``, with the edge IDs for ``"all"``, or the edge IDs for ``"eid"``.

        Args:
            form: ``"uv"``, ``"all"`` or ``"eid"``.
            order: accepted for DGL compatibility; edges come in their stored order.
            etype: the edge type; None on a graph with one.

        Raises:
            ValueError: an unknown ``form``.
            KeyError: an unknown edge type, or none named on a graph with several.
        """
        return self._graph._select_edges(form, etype)

    def __getitem__(self, etype):
        """The edge type's :class:`~graphstore.client.graph_data.TypeSpace` (``.data`` is its frame)."""
        graph = self._graph
        return TypeFrames(graph._edge_frames, graph._schema.to_canonical_etype)[etype]
