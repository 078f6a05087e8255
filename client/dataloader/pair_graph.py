"""``PairGraph``: the positive or negative node pairs of a link-prediction batch."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from graphstore.client.constants import EID, NID
from graphstore.client.graph_members import PairGraphMembers
from graphstore.client.graph_ops import GraphOps
from graphstore.client.relation_graph import DeviceCopies, RelationGraph, map_frames
from graphstore.client.typed_frames import Frame, TypeFrames, data_view, ntype_resolver
from graphstore.types import DEFAULT_CANONICAL_ETYPE, DEFAULT_NTYPE, CanonicalEtype, GraphSchema

_HOMOGENEOUS = GraphSchema()


class PairGraph(RelationGraph, GraphOps, DeviceCopies, PairGraphMembers):
    """The edges of a link-prediction batch (positive or negative pairs) over compact node IDs.

    Its nodes are the batch's seed nodes (the output nodes of the blocks, same order, per type):
    ``edges()`` gives local endpoints, ``ndata[NID]`` the nodes' IDs in the graph, ``edata[EID]`` the
    graph's edge IDs (positive pairs only). On a typed graph it has every node and edge type of the
    graph (``ndata[NID]`` is ``{ntype: IDs}``, ``edges(etype=...)``), and ``pair_graph[etype]`` is one
    relation's pair graph, whose ``srcdata`` / ``dstdata`` are the frames of its two node types.
    Scoring runs on it as in DGL (``local_scope``, ``apply_edges``, ``update_all``, with ``etype=`` on a
    typed graph); ``srcdata`` and ``dstdata`` are ``ndata`` where both sides are the same nodes.

    Args:
        src, dst: local endpoints of the pairs of a homogeneous graph.
        node_ids: the graph's IDs of the nodes.
        eids: the graph's IDs of the pairs' edges (positive pairs), or None.
    """

    _frame_attrs = ("_node_frames", "_edge_frames")

    def __init__(self, src: torch.Tensor, dst: torch.Tensor, node_ids: torch.Tensor, eids=None):
        self._setup(
            _HOMOGENEOUS,
            {DEFAULT_CANONICAL_ETYPE: (src, dst)},
            {DEFAULT_NTYPE: node_ids},
            None if eids is None else {DEFAULT_CANONICAL_ETYPE: eids},
        )

    @classmethod
    def from_types(
        cls,
        schema: GraphSchema,
        edges: Mapping[CanonicalEtype, tuple[torch.Tensor, torch.Tensor]],
        node_ids: Mapping[str, torch.Tensor],
        eids: Mapping[CanonicalEtype, torch.Tensor] | None = None,
    ) -> PairGraph:
        """A typed pair graph: per canonical type its local ``(src, dst)``; per node type the graph's IDs
        of its nodes; per canonical type the graph's edge IDs (positive pairs) or None."""
        graph = cls.__new__(cls)
        graph._setup(schema, edges, node_ids, eids)
        return graph

    def _setup(self, schema, edges, node_ids, eids) -> None:
        self._attach(
            schema,
            dict(edges),
            {t: {NID: node_ids[t]} for t in schema.ntypes},
            {c: {} if eids is None else {EID: eids[c]} for c in schema.canonical_etypes},
        )

    def _attach(
        self,
        schema: GraphSchema,
        edges: dict[CanonicalEtype, tuple[torch.Tensor, torch.Tensor]],
        node_frames: dict[str, Frame],
        edge_frames: dict[CanonicalEtype, Frame],
    ) -> None:
        self._init_relations(schema, edges, edge_frames)
        self._node_frames = node_frames
        self._resolve_ntype = ntype_resolver(list(node_frames))
        self.nodes = TypeFrames(node_frames, self._resolve_ntype)
        self._derive_views()

    def _derive_views(self) -> None:
        super()._derive_views()
        self.ndata = data_view(self._node_frames, self._resolve_ntype, "node")
        self.srcdata = self.dstdata = self.ndata
        if len(self._edges) == 1:
            src_type, _, dst_type = next(iter(self._edges))
            self.srcdata, self.dstdata = self._node_frames[src_type], self._node_frames[dst_type]
        # Relation views hold this graph's frames of their types: made again after a scope swaps them.
        self._relations: dict[CanonicalEtype, PairGraph] = {}

    def _side(self, ntype: str, source: bool) -> tuple[Frame, int]:
        return self._node_frames[ntype], self.num_nodes(ntype)

    @property
    def ntypes(self) -> list[str]:
        """Node types."""
        return list(self._node_frames)

    def num_nodes(self, ntype: str | None = None) -> int:
        """Nodes of one type (the batch's seed nodes of that type), or of every type (None)."""
        if ntype is None:
            return sum(int(frame[NID].shape[0]) for frame in self._node_frames.values())
        return int(self._node_frames[self._resolve_ntype(ntype)][NID].shape[0])

    number_of_nodes = num_nodes

    def __getitem__(self, etype) -> PairGraph:
        """One relation's pair graph, over this graph's frames of its source and destination types.

        Raises:
            KeyError: an unknown or ambiguous edge type.
        """
        canonical = self.to_canonical_etype(etype)
        types = tuple(dict.fromkeys((canonical[0], canonical[2])))
        if len(self._edges) == 1 and tuple(self._node_frames) == types:
            return self
        view = self._relations.get(canonical)
        if view is None:
            view = PairGraph.__new__(PairGraph)
            view._attach(
                GraphSchema(types, (canonical,)),
                {canonical: self._edges[canonical]},
                {t: self._node_frames[t] for t in types},
                {canonical: self._edge_frames[canonical]},
            )
            self._relations[canonical] = view
        return view

    def _map_tensors(self, move) -> PairGraph:
        out = PairGraph.__new__(PairGraph)
        out._attach(
            self._schema,
            {c: (move(src), move(dst)) for c, (src, dst) in self._edges.items()},
            map_frames(self._node_frames, move),
            map_frames(self._edge_frames, move),
        )
        return out

    def __repr__(self) -> str:
        if len(self._node_frames) == 1 and len(self._edges) == 1:
            return f"PairGraph(num_nodes={self.num_nodes()}, num_edges={self.num_edges()})"
        nodes = {t: self.num_nodes(t) for t in self._node_frames}
        return f"PairGraph(num_nodes={nodes}, num_edges={ {c: self.num_edges(c) for c in self._edges} })"
