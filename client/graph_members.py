"""The members DGL 2.x scripts call on blocks and pair graphs beyond message passing: ``local_var``,
``num_nodes`` (and the ``number_of_*`` spellings DGL 2.x still has), ``out_degrees``, ``find_edges``,
``has_edges_between``, ``edge_ids``, ``idtype``, ``is_unibipartite``, ``cpu``; and, on pair graphs, the
block-side names (``srctypes``, ``num_src_nodes``, ``srcnodes``, ...), which there are the graph's one
set of nodes.

:class:`BlockMembers` and :class:`PairGraphMembers` are mixins of
:class:`~graphstore.client.block.Block` and :class:`~graphstore.client.dataloader.pair_graph.PairGraph`;
they read the graphs' edges per canonical type (``_edges``) and node counts.
"""

from __future__ import annotations

import torch


def _as_ids(ids, device) -> torch.Tensor:
    """``ids`` (an int, a list, an array or a tensor) as a 1-d int64 tensor on ``device``."""
    return torch.as_tensor(ids, dtype=torch.int64, device=device).reshape(-1)


class GraphMembers:
    """Members shared by blocks and pair graphs."""

    idtype = torch.int64

    def local_var(self):
        """A graph over the same structure and data tensors whose data changes stay its own (DGL's
        ``local_var``: setting or deleting a name on it leaves this graph as it was)."""
        return self._map_tensors(lambda tensor: tensor)

    def cpu(self):
        """A copy on the CPU (``to('cpu')``)."""
        return self.to("cpu")

    def _num_src_of(self, ntype: str) -> int:
        raise NotImplementedError

    def out_degrees(self, u=None, etype=None):
        """Out-degrees of the source nodes along one edge type (None: the only one): all of them, or
        those of the local IDs ``u`` (an int for an int).

        Raises:
            KeyError: an unknown or ambiguous edge type.
        """
        canonical = self.to_canonical_etype(etype)
        src = self._edges[canonical][0]
        degrees = torch.bincount(src, minlength=self._num_src_of(canonical[0]))
        if u is None:
            return degrees
        return int(degrees[u]) if isinstance(u, int) else degrees[_as_ids(u, degrees.device)]

    def find_edges(self, eid, etype=None) -> tuple[torch.Tensor, torch.Tensor]:
        """The local ``(src, dst)`` of the local edge IDs ``eid`` of one edge type.

        Raises:
            IndexError: an edge ID out of range.
        """
        src, dst = self._edges[self.to_canonical_etype(etype)]
        ids = _as_ids(eid, src.device)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= src.shape[0]):
            raise IndexError(f"eid must be in [0, {src.shape[0]}), got {ids.tolist()[:8]}")
        return src[ids], dst[ids]

    def _pair_keys(self, canonical, u, v) -> tuple[torch.Tensor, torch.Tensor]:
        src, dst = self._edges[canonical]
        width = int(max(int(dst.max()) + 1 if dst.numel() else 1, int(_as_ids(v, dst.device).max()) + 1))
        return src * width + dst, _as_ids(u, src.device) * width + _as_ids(v, src.device)

    def has_edges_between(self, u, v, etype=None):
        """Whether an edge goes from each ``u`` to its ``v`` (local IDs): a bool for two ints, else a
        bool tensor."""
        canonical = self.to_canonical_etype(etype)
        edge_keys, query = self._pair_keys(canonical, u, v)
        found = torch.isin(query, edge_keys)
        return bool(found[0]) if isinstance(u, int) and isinstance(v, int) else found

    def edge_ids(self, u, v, return_uv: bool = False, etype=None):
        """The local ID of an edge from each ``u`` to its ``v`` (the first such edge).

        Args:
            u, v: local source and destination IDs.
            return_uv: return ``(src, dst, eid)`` of every edge between the pairs instead.
            etype: the edge type (None: the only one).

        Returns:
            An int for two ints, an int64 tensor, or the ``(src, dst, eid)`` triple.

        Raises:
            ValueError: a pair with no edge (without ``return_uv``), as DGL.
        """
        canonical = self.to_canonical_etype(etype)
        edge_keys, query = self._pair_keys(canonical, u, v)
        if return_uv:
            eids = torch.nonzero(torch.isin(edge_keys, query), as_tuple=True)[0]
            src, dst = self._edges[canonical]
            return src[eids], dst[eids], eids
        order = torch.argsort(edge_keys, stable=True)
        position = torch.searchsorted(edge_keys[order], query).clamp(max=max(edge_keys.numel() - 1, 0))
        if edge_keys.numel() == 0 or not bool((edge_keys[order][position] == query).all()):
            raise ValueError(f"some of the pairs ({u}, {v}) have no edge of type {canonical}")
        eids = order[position]
        return int(eids[0]) if isinstance(u, int) and isinstance(v, int) else eids


class BlockMembers(GraphMembers):
    """Members of :class:`~graphstore.client.block.Block` (its source and destination sides)."""

    is_unibipartite = True

    def _num_src_of(self, ntype: str) -> int:
        return self.num_src_nodes(ntype)

    def num_nodes(self, ntype: str | None = None) -> int:
        """Source plus destination nodes of one type, or of every type (DGL's count on a block)."""
        return self.num_src_nodes(ntype) + self.num_dst_nodes(ntype)

    number_of_nodes = num_nodes


class PairGraphMembers(GraphMembers):
    """Members of :class:`~graphstore.client.dataloader.pair_graph.PairGraph`: one set of nodes, which
    is both its source and its destination side."""

    is_block = False
    is_unibipartite = False

    def _num_src_of(self, ntype: str) -> int:
        return self.num_nodes(ntype)

    @property
    def srctypes(self) -> list[str]:
        """The node types (the same on both sides)."""
        return self.ntypes

    @property
    def dsttypes(self) -> list[str]:
        """The node types (the same on both sides)."""
        return self.ntypes

    @property
    def srcnodes(self):
        """``g.srcnodes[ntype].data``: ``g.nodes`` (both sides are the same nodes)."""
        return self.nodes

    @property
    def dstnodes(self):
        """``g.dstnodes[ntype].data``: ``g.nodes``."""
        return self.nodes

    def num_src_nodes(self, ntype: str | None = None) -> int:
        """Nodes of one type (or all): the graph's nodes."""
        return self.num_nodes(ntype)

    def num_dst_nodes(self, ntype: str | None = None) -> int:
        """Nodes of one type (or all): the graph's nodes."""
        return self.num_nodes(ntype)

    number_of_src_nodes = num_src_nodes
    number_of_dst_nodes = num_dst_nodes

    def in_degrees(self, v=None, etype=None):
        """In-degrees of the nodes along one edge type (None: the only one): all, or those of ``v``."""
        canonical = self.to_canonical_etype(etype)
        dst = self._edges[canonical][1]
        degrees = torch.bincount(dst, minlength=self.num_nodes(canonical[2]))
        if v is None:
            return degrees
        return int(degrees[v]) if isinstance(v, int) else degrees[_as_ids(v, degrees.device)]
