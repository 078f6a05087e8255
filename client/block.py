"""Blocks (message-flow graphs) for mini-batch GNN training, and :func:`to_block`.

:func:`to_block` turns a frontier (:class:`~graphstore.client.frontier.SampledSubgraph`) into a
:class:`Block`: a bipartite graph whose destination nodes are the nodes a GNN layer computes, and whose
source nodes of each type are that type's destination nodes followed by every other node of the type
the sampled edges come from (DGL's convention, so ``h[:num_dst]`` is the destination nodes' own input).
Node and edge IDs inside a block are compact (``0..n-1`` per type); the graph's IDs sit in
``srcdata[NID]``, ``dstdata[NID]`` and ``edata[EID]`` (per-type IDs on a typed graph).

A block over a homogeneous graph is the one-type case. A typed block has every node type of the graph
on both sides (``srctypes``, ``dsttypes``, possibly with no nodes) and every canonical edge type;
``block[etype]`` is the block of one relation, a one-type block whose source and destination frames are
the typed block's frames of the relation's source and destination types (so a homogeneous layer runs on
it and what it writes lands in the typed block).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import torch

from graphstore.client.constants import EID, NID
from graphstore.client.frontier import SampledSubgraph, as_tensor
from graphstore.client.graph_members import BlockMembers
from graphstore.client.graph_ops import GraphOps
from graphstore.client.local_ids import compact_by_type, compact_ids
from graphstore.client.relation_graph import DeviceCopies, RelationGraph, map_frames
from graphstore.client.typed_frames import Frame, TypeFrames, data_view, ntype_resolver
from graphstore.ids import as_id_array, check_id_range
from graphstore.types import DEFAULT_CANONICAL_ETYPE, DEFAULT_NTYPE, CanonicalEtype, GraphSchema

_HOMOGENEOUS = GraphSchema()


class Adj(NamedTuple):
    """One layer in PyG's style: ``edge_index`` (2 x E, row 0 source, row 1 target, local IDs),
    the global edge IDs ``e_id``, and the bipartite ``size`` ``(num_src, num_dst)``."""

    edge_index: torch.Tensor
    e_id: torch.Tensor
    size: tuple[int, int]


class Block(RelationGraph, GraphOps, DeviceCopies, BlockMembers):
    """A bipartite message-flow graph for one GNN layer, with compact local node IDs per type.

    Source nodes of each type are ``0..num_src_nodes(ntype)-1``; the first ``num_dst_nodes(ntype)`` of
    them are that type's destination nodes (same nodes, same order). Edges point from source to
    destination. ``local_scope``, ``apply_edges`` and ``update_all`` come from
    :class:`~graphstore.client.graph_ops.GraphOps` (per relation: ``etype=`` on a typed block).

    Args:
        src, dst: local source / destination IDs of the edges (int64) of a homogeneous block.
        src_nids: global IDs of the source nodes (destination nodes first).
        num_dst: number of destination nodes.
        eids: global edge IDs.

    Attributes:
        srctypes, dsttypes: the source and destination node types.
        srcdata, dstdata: per-node data; ``srcdata[NID]`` / ``dstdata[NID]`` are the graph's node IDs
            (``{ntype: tensor}`` with several types).
        srcnodes, dstnodes: ``block.srcnodes[ntype].data`` is one type's source frame.
        edata: per-edge data; ``edata[EID]`` are the graph's edge IDs (``{canonical etype: tensor}``).
    """

    is_block = True
    _frame_attrs = ("_src_frames", "_dst_frames", "_edge_frames")

    def __init__(self, src: torch.Tensor, dst: torch.Tensor, src_nids: torch.Tensor, num_dst: int, eids):
        self._setup(
            _HOMOGENEOUS,
            {DEFAULT_CANONICAL_ETYPE: (src, dst)},
            {DEFAULT_NTYPE: src_nids},
            {DEFAULT_NTYPE: int(num_dst)},
            {DEFAULT_CANONICAL_ETYPE: eids},
        )

    @classmethod
    def from_types(
        cls,
        schema: GraphSchema,
        edges: Mapping[CanonicalEtype, tuple[torch.Tensor, torch.Tensor]],
        src_nids: Mapping[str, torch.Tensor],
        num_dst: Mapping[str, int],
        eids: Mapping[CanonicalEtype, torch.Tensor],
    ) -> Block:
        """A typed block: every node type of ``schema`` on both sides, every canonical type's edges.

        Args:
            schema: the graph's types.
            edges: per canonical type, local ``(src, dst)`` IDs (in its source / destination type).
            src_nids: per node type, the graph's IDs of its source nodes (destination nodes first).
            num_dst: per node type, its number of destination nodes.
            eids: per canonical type, the graph's IDs of its edges.
        """
        block = cls.__new__(cls)
        block._setup(schema, edges, src_nids, num_dst, eids)
        return block

    def _setup(self, schema, edges, src_nids, num_dst, eids) -> None:
        ntypes = list(schema.ntypes)
        self._attach(
            schema,
            dict(edges),
            ntypes,
            ntypes,
            {t: {NID: src_nids[t]} for t in ntypes},
            {t: {NID: src_nids[t][: int(num_dst[t])]} for t in ntypes},
            {c: {EID: eids[c]} for c in schema.canonical_etypes},
            {t: int(src_nids[t].shape[0]) for t in ntypes},
            {t: int(num_dst[t]) for t in ntypes},
        )

    def _attach(
        self,
        schema: GraphSchema,
        edges: dict[CanonicalEtype, tuple[torch.Tensor, torch.Tensor]],
        srctypes: list[str],
        dsttypes: list[str],
        src_frames: dict[str, Frame],
        dst_frames: dict[str, Frame],
        edge_frames: dict[CanonicalEtype, Frame],
        num_src: dict[str, int],
        num_dst: dict[str, int],
    ) -> None:
        self._init_relations(schema, edges, edge_frames)
        self.srctypes, self.dsttypes = list(srctypes), list(dsttypes)
        self._src_frames, self._dst_frames = src_frames, dst_frames
        self._num_src, self._num_dst = num_src, num_dst
        self._resolve_src = ntype_resolver(self.srctypes)
        self._resolve_dst = ntype_resolver(self.dsttypes)
        self.srcnodes = TypeFrames(src_frames, self._resolve_src)
        self.dstnodes = TypeFrames(dst_frames, self._resolve_dst)
        self._in_degrees: dict[CanonicalEtype, torch.Tensor] = {}
        self._csr: dict[CanonicalEtype, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self._derive_views()

    def _derive_views(self) -> None:
        super()._derive_views()
        self.srcdata = data_view(self._src_frames, self._resolve_src, "source node")
        self.dstdata = data_view(self._dst_frames, self._resolve_dst, "destination node")
        # Relation views hold this block's frames of their types: made again after a scope swaps them.
        self._relations: dict[CanonicalEtype, Block] = {}

    # -- types and sizes -------------------------------------------------------------------------
    @property
    def ntypes(self) -> list[str]:
        """The node types (source types, then any destination type that is not one)."""
        return list(dict.fromkeys(self.srctypes + self.dsttypes))

    @property
    def is_homogeneous(self) -> bool:
        """One node type and one edge type."""
        return len(self.ntypes) == 1 and len(self._edges) == 1

    def num_src_nodes(self, ntype: str | None = None) -> int:
        """Source nodes (destination nodes included) of one type, or of every type (None)."""
        if ntype is None:
            return sum(self._num_src.values())
        return self._num_src[self._resolve_src(ntype)]

    def num_dst_nodes(self, ntype: str | None = None) -> int:
        """Destination nodes of one type, or of every type (None)."""
        if ntype is None:
            return sum(self._num_dst.values())
        return self._num_dst[self._resolve_dst(ntype)]

    number_of_src_nodes = num_src_nodes
    number_of_dst_nodes = num_dst_nodes

    # -- structure -------------------------------------------------------------------------------
    def in_degrees(self, v=None, etype=None):
        """In-degrees of the destination nodes along one edge type (None: the only one): all of them
        (int64, on the block's device), or those of the local IDs ``v`` (an int for an int)."""
        canonical = self.to_canonical_etype(etype)
        degrees = self._in_degrees.get(canonical)
        if degrees is None:
            dst = self._edges[canonical][1]
            degrees = torch.bincount(dst, minlength=self._num_dst[canonical[2]])
            self._in_degrees[canonical] = degrees
        if v is None:
            return degrees
        return int(degrees[v]) if isinstance(v, int) else degrees[torch.as_tensor(v, device=degrees.device)]

    def csr(self, etype=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The in-edges of one edge type (None: the only one) grouped by destination (computed once).

        Returns:
            ``(indptr, src, edge_order)``: destination ``i``'s in-edges are positions
            ``indptr[i]:indptr[i+1]`` of ``src`` (local source IDs); ``edge_order[k]`` is the local edge
            ID at position ``k``.
        """
        canonical = self.to_canonical_etype(etype)
        if canonical not in self._csr:
            src, dst = self._edges[canonical]
            self._csr[canonical] = csr_by_destination(src, dst, self._num_dst[canonical[2]])
        return self._csr[canonical]

    def to_pyg(self, etype=None) -> Adj:
        """One edge type (None: the only one) as PyG's ``(edge_index, e_id, size)`` (see :class:`Adj`)."""
        canonical = self.to_canonical_etype(etype)
        src, dst = self._edges[canonical]
        sizes = (self._num_src[canonical[0]], self._num_dst[canonical[2]])
        return Adj(torch.stack([src, dst]), self._edge_frames[canonical][EID], sizes)

    def __getitem__(self, etype) -> Block:
        """The block of one relation: a one-type block over the relation's edges whose source and
        destination frames are this block's frames of the relation's source and destination types.

        Args:
            etype: a canonical triple, ``"src:etype:dst"``, or an unambiguous edge type name.

        Raises:
            KeyError: an unknown or ambiguous edge type.
        """
        canonical = self.to_canonical_etype(etype)
        src_type, _, dst_type = canonical
        if len(self._edges) == 1 and self.srctypes == [src_type] and self.dsttypes == [dst_type]:
            return self
        view = self._relations.get(canonical)
        if view is None:
            view = Block.__new__(Block)
            view._attach(
                GraphSchema(tuple(dict.fromkeys((src_type, dst_type))), (canonical,)),
                {canonical: self._edges[canonical]},
                [src_type],
                [dst_type],
                {src_type: self._src_frames[src_type]},
                {dst_type: self._dst_frames[dst_type]},
                {canonical: self._edge_frames[canonical]},
                {src_type: self._num_src[src_type]},
                {dst_type: self._num_dst[dst_type]},
            )
            self._relations[canonical] = view
        return view

    def _side(self, ntype: str, source: bool) -> tuple[Frame, int]:
        if source:
            return self._src_frames[ntype], self._num_src[ntype]
        return self._dst_frames[ntype], self._num_dst[ntype]

    # -- devices (to, pin_memory: DeviceCopies) ---------------------------------------------------
    def _map_tensors(self, move) -> Block:
        out = Block.__new__(Block)
        out._attach(
            self._schema,
            {c: (move(src), move(dst)) for c, (src, dst) in self._edges.items()},
            self.srctypes,
            self.dsttypes,
            map_frames(self._src_frames, move),
            map_frames(self._dst_frames, move),
            map_frames(self._edge_frames, move),
            dict(self._num_src),
            dict(self._num_dst),
        )
        out._in_degrees = {c: move(d) for c, d in self._in_degrees.items()}
        out._csr = {c: tuple(move(t) for t in csr) for c, csr in self._csr.items()}
        return out

    def __repr__(self) -> str:
        if self.is_homogeneous:
            return (
                f"Block(num_src_nodes={self.num_src_nodes()}, num_dst_nodes={self.num_dst_nodes()}, "
                f"num_edges={self.num_edges()})"
            )
        return (
            f"Block(num_src_nodes={self._num_src}, num_dst_nodes={self._num_dst}, "
            f"num_edges={ {c: self.num_edges(c) for c in self._edges} })"
        )


def csr_by_destination(
    src: torch.Tensor, dst: torch.Tensor, num_dst: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Group edges by destination: ``(indptr, src in that order, edge order)``; see :meth:`Block.csr`."""
    order = torch.argsort(dst, stable=True)
    indptr = torch.zeros(num_dst + 1, dtype=torch.int64, device=dst.device)
    torch.cumsum(torch.bincount(dst, minlength=num_dst), 0, out=indptr[1:])
    return indptr, src[order], order


def to_block(frontier: SampledSubgraph, dst_nodes=None, include_dst_in_src: bool = True) -> Block:
    """Convert a frontier into a :class:`Block` whose destination nodes are ``dst_nodes``.

    Args:
        frontier: sampled edges in the graph's IDs.
        dst_nodes: the destination nodes (unique IDs), in the order the block keeps them: a tensor on a
            graph with one node type, or ``{ntype: IDs}`` (a type left out has none); defaults to the
            distinct destinations of the frontier's edges (sorted, per type).
        include_dst_in_src: must be true (DGL's default; the layers rely on it).

    Returns:
        The block; ``block.srcnodes[t].data[NID][:num_dst_nodes(t)] == dst_nodes[t]`` for every type.

    Raises:
        ValueError: if ``dst_nodes`` repeats a node, or an edge's destination is not in ``dst_nodes``,
            or ``include_dst_in_src`` is false, or a tensor of destinations on a graph with several node
            types.
        IndexError: if a node ID is outside the graph.
        KeyError: an unknown node type in ``dst_nodes``.
    """
    if not include_dst_in_src:
        raise ValueError("include_dst_in_src=False is not supported; blocks keep dst nodes first among src")
    schema = frontier._schema
    ntypes = list(schema.ntypes)
    canonical_etypes = list(schema.canonical_etypes)
    if dst_nodes is None:
        heads = {
            ntype: np.unique(
                np.concatenate([frontier.arrays(c)[1] for c in canonical_etypes if c[2] == ntype])
            )
            if any(c[2] == ntype for c in canonical_etypes)
            else np.empty(0, dtype=np.int64)
            for ntype in ntypes
        }
    else:
        heads = _dst_heads(frontier, dst_nodes)
    homogeneous = frontier.homogeneous_ids()
    if homogeneous is None:
        arrays = []
        for canonical in canonical_etypes:
            src, dst, _ = frontier.arrays(canonical)
            arrays += [(canonical[0], src), (canonical[2], dst)]
        unique_ids, local = compact_by_type(heads, arrays, {t: frontier.num_nodes(t) for t in ntypes})
    else:
        unique_ids, local = _relabel_homogeneous(*homogeneous, heads, ntypes)
    edges = {}
    for index, canonical in enumerate(canonical_etypes):
        local_src, local_dst = local[2 * index], local[2 * index + 1]
        head = heads.get(canonical[2])
        num_heads = 0 if head is None else head.size
        if local_dst.size and local_dst.max() >= num_heads:
            dst = frontier.arrays(canonical)[1]
            bad = dst[local_dst >= num_heads][0]
            where = "" if schema.is_homogeneous else f" of type {canonical[2]!r}"
            raise ValueError(
                f"the frontier has an edge into node {int(bad)}{where}, which is not in dst_nodes"
            )
        edges[canonical] = (as_tensor(local_src), as_tensor(local_dst))
    return Block.from_types(
        schema,
        edges,
        {t: as_tensor(unique_ids[t]) for t in ntypes},
        {t: int(heads[t].size) if t in heads else 0 for t in ntypes},
        {c: frontier.edges(form="eid", etype=c) for c in canonical_etypes},
    )


def _relabel_homogeneous(book, homo, heads: dict[str, np.ndarray], ntypes: list[str]):
    """:func:`compact_by_type`'s result for edges in homogeneous IDs: one relabeling of every type at
    once (the heads of each type first, type after type; the other nodes in homogeneous order, which is
    per-type order within a type), then each node's place within its type.

    Returns:
        ``(unique_ids, local)``: per node type its per-type IDs; per edge array (``src``, ``dst`` of each
        canonical type in order) the local IDs within its type.
    """
    empty = np.empty(0, dtype=np.int64)
    head = [book.map_to_homo_nid(heads[t], t) for t in ntypes if t in heads and heads[t].size]
    rest = [ids for pair in homo.values() for ids in pair]
    unique, local = compact_ids(np.concatenate(head) if head else empty, rest, book.num_nodes())
    types, per_type = book.map_to_per_ntype(unique)
    within = np.empty(unique.size, dtype=np.int64)
    unique_ids = {}
    for type_id, ntype in enumerate(ntypes):
        members = np.flatnonzero(types == type_id)
        within[members] = np.arange(members.size, dtype=np.int64)
        unique_ids[ntype] = per_type[members]
    return unique_ids, [within[ids] for ids in local]


def _dst_heads(frontier: SampledSubgraph, dst_nodes) -> dict[str, np.ndarray]:
    """``dst_nodes`` (a tensor, or ``{ntype: IDs}``) as checked int64 arrays per node type."""
    ntypes = frontier.ntypes
    if not isinstance(dst_nodes, Mapping):
        if len(ntypes) != 1:
            raise ValueError(f"dst_nodes must be {{ntype: IDs}} on a graph with node types {ntypes}")
        dst_nodes = {ntypes[0]: dst_nodes}
    resolve = ntype_resolver(ntypes)
    heads = {}
    for ntype, ids in dst_nodes.items():
        name = resolve(ntype)
        head = as_id_array(ids, "dst_nodes")
        check_id_range(
            head, frontier.num_nodes(name), "dst_nodes" if len(ntypes) == 1 else f"dst_nodes[{name!r}]"
        )
        heads[name] = head
    return heads
