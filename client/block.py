"""Sampled subgraphs and blocks (message-flow graphs) for mini-batch GNN training.

A *frontier* (:class:`SampledSubgraph`) is what :func:`graphstore.client.sampling.sample_neighbors`
returns: a set of edges of the full graph, given by global source, destination and edge IDs.
:func:`to_block` turns a frontier into a :class:`Block`: a bipartite graph whose destination
nodes are the nodes a GNN layer computes, and whose source nodes are the destination nodes
followed by every other node the sampled edges come from (DGL's convention, so ``h[:num_dst]``
is the destination nodes' own input). Node and edge IDs inside a block are compact (``0..n-1``);
the global IDs sit in ``block.srcdata[NID]``, ``block.dstdata[NID]`` and ``block.edata[EID]``.

The relabeling is vectorized: a dense ID -> local-ID table when the graph is not much larger
than the batch (one scatter and one gather, no sort), a sort-based ``unique`` otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from graphstore.client.constants import EID, NID
from graphstore.client.device import pin_host_tensor
from graphstore.client.graph_ops import GraphOps, Relation
from graphstore.ids import as_id_array, check_id_range

# Use the dense ID table while the graph has at most this many nodes, or at most
# _DENSE_RATIO times the number of IDs to relabel; past that a sort is cheaper than
# touching a table the size of the graph.
_DENSE_MAX_NODES = 1 << 22
_DENSE_RATIO = 64


def compact_ids(
    head: np.ndarray, rest: Sequence[np.ndarray], num_nodes: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Relabel IDs to compact local IDs: ``head`` keeps positions ``0..len(head)-1``, every other ID
    found in ``rest`` follows (in increasing ID order).

    Args:
        head: unique IDs that must come first, in this order.
        rest: arrays of IDs to relabel (may repeat, may contain IDs of ``head``).
        num_nodes: size of the ID space (all IDs are in ``[0, num_nodes)``).

    Returns:
        ``(unique_ids, local_rest)``: the local -> global table (``head`` first) and, for each array
        of ``rest``, its local IDs.

    Raises:
        ValueError: if ``head`` holds duplicate IDs.
    """
    total = sum(r.size for r in rest)
    if num_nodes <= max(_DENSE_MAX_NODES, _DENSE_RATIO * (total + head.size)):
        return _compact_dense(head, rest, num_nodes)
    return _compact_sorted(head, rest)


def _compact_dense(head, rest, num_nodes):
    seen = np.zeros(num_nodes, dtype=bool)
    for r in rest:
        seen[r] = True
    seen[head] = False
    others = np.flatnonzero(seen)
    table = np.empty(num_nodes, dtype=np.int64)
    table[head] = np.arange(head.size, dtype=np.int64)
    if head.size and not np.array_equal(table[head], np.arange(head.size)):
        raise ValueError(f"dst_nodes must be unique; {head.size - np.unique(head).size} duplicates found")
    table[others] = np.arange(head.size, head.size + others.size, dtype=np.int64)
    unique_ids = np.concatenate([head, others])
    return unique_ids, [table[r] for r in rest]


def _compact_sorted(head, rest):
    sorted_head_pos = np.argsort(head, kind="stable")
    sorted_head = head[sorted_head_pos]
    if sorted_head.size > 1 and (sorted_head[1:] == sorted_head[:-1]).any():
        raise ValueError(f"dst_nodes must be unique; {head.size - np.unique(head).size} duplicates found")
    everything = torch.from_numpy(np.concatenate(list(rest))) if rest else torch.empty(0, dtype=torch.int64)
    candidates = torch.unique(everything).numpy()
    # Remove the head IDs from the candidates: positions where a candidate matches a head ID.
    where = np.searchsorted(sorted_head, candidates)
    where_clipped = np.minimum(where, max(sorted_head.size - 1, 0))
    in_head = (
        (sorted_head[where_clipped] == candidates) if sorted_head.size else np.zeros(candidates.size, bool)
    )
    others = candidates[~in_head]
    unique_ids = np.concatenate([head, others])
    # local ID of each sorted unique ID, then look every array up with searchsorted.
    order = np.argsort(unique_ids, kind="stable")
    sorted_unique = unique_ids[order]
    local = []
    for r in rest:
        local.append(order[np.searchsorted(sorted_unique, r)])
    return unique_ids, local


def _t(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array))


class SampledSubgraph:
    """A set of edges of a (distributed) graph, in global IDs: a sampling *frontier*.

    It stands in for the DGLGraph that ``dgl.distributed.sample_neighbors`` returns: it has every
    node of the graph (``num_nodes()``) and only the sampled edges.

    Attributes:
        src, dst: global source and destination node IDs of the edges (int64 tensors).
        edata: ``{EID: global edge IDs}``.
    """

    def __init__(self, src, dst, eid, num_nodes: int):
        """Args:
        src, dst, eid: global IDs of the edges (numpy arrays or tensors, equal lengths).
        num_nodes: number of nodes of the whole graph.

        Raises:
            ValueError: if the lengths differ.
            IndexError: if a node ID is outside ``[0, num_nodes)``.
        """
        src, dst, eid = as_id_array(src, "src"), as_id_array(dst, "dst"), as_id_array(eid, "eid")
        if not (src.size == dst.size == eid.size):
            raise ValueError(f"src, dst and eid lengths differ: {src.size}, {dst.size}, {eid.size}")
        check_id_range(src, num_nodes, "src")
        check_id_range(dst, num_nodes, "dst")
        self._src_np, self._dst_np, self._eid_np = src, dst, eid
        self.src, self.dst = _t(src), _t(dst)
        self.edata: dict[str, torch.Tensor] = {EID: _t(eid)}
        self._num_nodes = int(num_nodes)

    @property
    def eid(self) -> torch.Tensor:
        """Global edge IDs of the edges."""
        return self.edata[EID]

    def num_nodes(self) -> int:
        """Number of nodes of the whole graph."""
        return self._num_nodes

    number_of_nodes = num_nodes

    def num_edges(self) -> int:
        """Number of sampled edges."""
        return int(self._src_np.size)

    number_of_edges = num_edges

    def edges(self, form: str = "uv", order: str = "eid"):
        """The edges in global IDs.

        Args:
            form: ``"uv"`` for ``(src, dst)``, ``"all"`` for ``(src, dst, eid)``, ``"eid"`` for the edge IDs.
            order: accepted for DGL compatibility; edges come in sampling order.

        Raises:
            ValueError: for an unknown ``form``.
        """
        if form == "uv":
            return self.src, self.dst
        if form == "all":
            return self.src, self.dst, self.eid
        if form == "eid":
            return self.eid
        raise ValueError(f"form must be 'uv', 'all' or 'eid', got {form!r}")

    def filter_edges(self, keep: np.ndarray) -> SampledSubgraph:
        """A new frontier with the edges where the boolean mask ``keep`` is true."""
        return SampledSubgraph(self._src_np[keep], self._dst_np[keep], self._eid_np[keep], self._num_nodes)

    def __repr__(self) -> str:
        return f"SampledSubgraph(num_nodes={self._num_nodes}, num_edges={self.num_edges()})"


class Adj(NamedTuple):
    """One layer in PyG's style: ``edge_index`` (2 x E, row 0 source, row 1 target, local IDs),
    the global edge IDs ``e_id``, and the bipartite ``size`` ``(num_src, num_dst)``."""

    edge_index: torch.Tensor
    e_id: torch.Tensor
    size: tuple[int, int]


class Block(GraphOps):
    """A bipartite message-flow graph for one GNN layer, with compact local node IDs.

    Source nodes ``0..num_src_nodes()-1``; the first ``num_dst_nodes()`` of them are the destination
    nodes (same nodes, same order). Edges point from source to destination. ``local_scope``,
    ``apply_edges`` and ``update_all`` come from :class:`~graphstore.client.graph_ops.GraphOps`.

    Attributes:
        srcdata, dstdata: per-node data; ``srcdata[NID]`` / ``dstdata[NID]`` are global node IDs.
        edata: per-edge data; ``edata[EID]`` are global edge IDs.
    """

    is_block = True
    _frame_attrs = ("srcdata", "dstdata", "edata")

    def __init__(self, src: torch.Tensor, dst: torch.Tensor, src_nids: torch.Tensor, num_dst: int, eids):
        """Args:
        src, dst: local source / destination IDs of the edges (int64).
        src_nids: global IDs of the source nodes (destination nodes first).
        num_dst: number of destination nodes.
        eids: global edge IDs.
        """
        self._src = src
        self._dst = dst
        self._num_src = int(src_nids.shape[0])
        self._num_dst = int(num_dst)
        self.srcdata: dict[str, torch.Tensor] = {NID: src_nids}
        self.dstdata: dict[str, torch.Tensor] = {NID: src_nids[: self._num_dst]}
        self.edata: dict[str, torch.Tensor] = {EID: eids}
        self._in_degrees: torch.Tensor | None = None
        self._csr: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    # -- sizes ---------------------------------------------------------------------------------
    def num_src_nodes(self, ntype: str | None = None) -> int:
        """Number of source nodes (destination nodes included)."""
        return self._num_src

    def num_dst_nodes(self, ntype: str | None = None) -> int:
        """Number of destination nodes."""
        return self._num_dst

    number_of_src_nodes = num_src_nodes
    number_of_dst_nodes = num_dst_nodes

    def num_edges(self, etype: str | None = None) -> int:
        """Number of edges."""
        return int(self._src.shape[0])

    number_of_edges = num_edges

    @property
    def device(self) -> torch.device:
        """The device of the block's structure."""
        return self._src.device

    # -- structure -----------------------------------------------------------------------------
    def edges(self, form: str = "uv", order: str = "eid"):
        """Local edge endpoints: ``(src, dst)`` for ``form="uv"``, plus the local edge IDs ``0..E-1``
        for ``form="all"``, or just those for ``form="eid"``.

        Raises:
            ValueError: for an unknown ``form``.
        """
        if form == "uv":
            return self._src, self._dst
        local_eid = torch.arange(self.num_edges(), device=self.device)
        if form == "all":
            return self._src, self._dst, local_eid
        if form == "eid":
            return local_eid
        raise ValueError(f"form must be 'uv', 'all' or 'eid', got {form!r}")

    @property
    def edge_index(self) -> torch.Tensor:
        """``[2, E]`` local edge index, row 0 source, row 1 destination."""
        return torch.stack([self._src, self._dst])

    def in_degrees(self) -> torch.Tensor:
        """In-degree of each destination node (int64, on the block's device)."""
        if self._in_degrees is None:
            self._in_degrees = torch.bincount(self._dst, minlength=self._num_dst)
        return self._in_degrees

    def csr(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The in-edges grouped by destination (computed once, on the block's device).

        Returns:
            ``(indptr, src, edge_order)``: destination ``i``'s in-edges are positions
            ``indptr[i]:indptr[i+1]`` of ``src`` (local source IDs); ``edge_order[k]`` is the local edge
            ID at position ``k``.
        """
        if self._csr is None:
            self._csr = csr_by_destination(self._src, self._dst, self._num_dst)
        return self._csr

    def to_pyg(self) -> Adj:
        """The block as PyG's ``(edge_index, e_id, size)`` triple (see :class:`Adj`)."""
        return Adj(self.edge_index, self.edata[EID], (self._num_src, self._num_dst))

    def _relation(self) -> Relation:
        return Relation(
            self._src, self._dst, self._num_src, self._num_dst, self.srcdata, self.dstdata, self.edata
        )

    # -- devices -------------------------------------------------------------------------------
    def to(self, device, non_blocking: bool = False) -> Block:
        """A copy of the block (structure and every data tensor) on ``device``."""
        device = torch.device(device)
        return self._map_tensors(lambda tensor: tensor.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> Block:
        """A copy of the block whose host tensors are in pinned (page-locked) memory, for non-blocking
        copies to a GPU (needs CUDA); tensors already pinned or on a GPU are shared."""
        return self._map_tensors(pin_host_tensor)

    def _map_tensors(self, move) -> Block:
        """A copy of the block with ``move`` applied to its structure and every data tensor."""
        out = Block.__new__(Block)
        out._src, out._dst = move(self._src), move(self._dst)
        out._num_src, out._num_dst = self._num_src, self._num_dst
        out.srcdata = {k: move(v) for k, v in self.srcdata.items()}
        out.dstdata = {k: move(v) for k, v in self.dstdata.items()}
        out.edata = {k: move(v) for k, v in self.edata.items()}
        out._in_degrees = None if self._in_degrees is None else move(self._in_degrees)
        out._csr = None if self._csr is None else tuple(move(t) for t in self._csr)
        return out

    def __repr__(self) -> str:
        return (
            f"Block(num_src_nodes={self._num_src}, num_dst_nodes={self._num_dst}, "
            f"num_edges={self.num_edges()})"
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
        frontier: sampled edges in global IDs.
        dst_nodes: the destination nodes (unique global IDs), in the order the block keeps them;
            defaults to the distinct destinations of the frontier's edges (sorted).
        include_dst_in_src: must be true (DGL's default; the layers rely on it).

    Returns:
        The block; ``block.srcdata[NID][:num_dst] == dst_nodes``.

    Raises:
        ValueError: if ``dst_nodes`` repeats a node, or an edge's destination is not in ``dst_nodes``,
            or ``include_dst_in_src`` is false.
        IndexError: if a node ID is outside the graph.
    """
    if not include_dst_in_src:
        raise ValueError("include_dst_in_src=False is not supported; blocks keep dst nodes first among src")
    num_nodes = frontier.num_nodes()
    src, dst = frontier._src_np, frontier._dst_np
    if dst_nodes is None:
        head = np.unique(dst)
    else:
        head = as_id_array(dst_nodes, "dst_nodes")
        check_id_range(head, num_nodes, "dst_nodes")
    unique_ids, (local_src, local_dst) = compact_ids(head, [src, dst], num_nodes)
    if local_dst.size and local_dst.max() >= head.size:
        bad = dst[local_dst >= head.size][0]
        raise ValueError(f"the frontier has an edge into node {int(bad)}, which is not in dst_nodes")
    return Block(_t(local_src), _t(local_dst), _t(unique_ids), head.size, frontier.edata[EID])
