"""Distributed neighbor sampling and edge look-ups over a :class:`~graphstore.client.DistGraph`.

Seeds are routed to the partitions that own them (a range look-up in the partition book). The
co-located partition, when the client has one, is sampled in-process from its memory-mapped
structure (``ctx.local_reader(part)``); every other partition is asked over RPC. All partitions
are asked at once (``ctx.run_parallel``) and their edges concatenated into one
:class:`~graphstore.client.block.SampledSubgraph` in global IDs.
"""

from __future__ import annotations

import numpy as np
import torch

from graphstore.client.block import SampledSubgraph
from graphstore.ids import as_id_array, check_id_range

EDGE_DIRS = ("in", "out")


def graph_context(g):
    """The client context a DistGraph talks through (``g._ctx``, else the process's context)."""
    ctx = getattr(g, "_ctx", None)
    if ctx is not None:
        return ctx
    from graphstore.client.context import get_context

    return get_context()


def _reader(ctx, part_id: int):
    """The in-process reader of ``part_id`` when it is co-located, else the (remote) partition."""
    local = ctx.local_reader(part_id)
    return local if local is not None else ctx.partition(part_id)


def _sample_call(ctx, part_id, seeds, fanout, edge_dir, replace, prob, random_seed):
    """A no-argument call sampling ``seeds`` on ``part_id`` (in-process when co-located)."""
    local = ctx.local_reader(part_id)
    if local is None:
        remote = ctx.partition(part_id)
        return lambda: remote.sample_neighbors(seeds, fanout, edge_dir, replace, prob, random_seed)

    def call():
        try:
            return local.sample_neighbors(seeds, fanout, edge_dir, replace, prob, random_seed)
        except KeyError:
            if prob is None:
                raise
            # The weights are a run-time tensor, held by the server only (the local view has the
            # partition files' data): ask the server.
            return ctx.partition(part_id).sample_neighbors(
                seeds, fanout, edge_dir, replace, prob, random_seed
            )

    return call


def _derive_seed(random_seed: int | None, part_id: int) -> int | None:
    # Each partition draws from its own stream so that a given seed reproduces the whole sample.
    return None if random_seed is None else (int(random_seed) * 1_000_003 + part_id) % (1 << 63)


def sample_neighbors(
    g,
    nodes,
    fanout: int,
    edge_dir: str = "in",
    prob: str | None = None,
    exclude_edges=None,
    replace: bool = False,
    random_seed: int | None = None,
) -> SampledSubgraph:
    """Sample up to ``fanout`` neighbors of each node of ``nodes``.

    With ``edge_dir='in'`` the sampled edges are in-edges of the seeds (``dst`` in ``nodes``), with
    ``'out'`` out-edges (``src`` in ``nodes``). Without replacement a seed gets ``min(degree, fanout)``
    distinct edges; with replacement exactly ``fanout`` (none for a seed without edges); ``fanout=-1``
    takes every edge.

    Args:
        g: the DistGraph.
        nodes: seed node IDs (tensor, numpy array or list of global IDs).
        fanout: edges per seed, or -1 for all.
        edge_dir: ``'in'`` or ``'out'``.
        prob: name of an edge feature (non-negative weights) to sample proportionally to; edges of
            weight 0 are never drawn.
        exclude_edges: global edge IDs to drop from the result (filtered after sampling, so a seed
            may get fewer than ``fanout`` edges).
        replace: sample with replacement.
        random_seed: makes the sample reproducible.

    Returns:
        A :class:`SampledSubgraph` with the sampled edges in global IDs (``edata[EID]``).

    Raises:
        ValueError: bad ``fanout`` / ``edge_dir``; errors from the servers (unknown ``prob`` feature:
            KeyError) propagate.
        IndexError: a seed outside the graph.
    """
    if edge_dir not in EDGE_DIRS:
        raise ValueError(f"edge_dir must be 'in' or 'out', got {edge_dir!r}")
    fanout = int(fanout)
    if fanout < -1:
        raise ValueError(f"fanout must be -1 (all neighbors) or >= 0, got {fanout}")
    ctx = graph_context(g)
    num_nodes = int(ctx.book.num_nodes())
    seeds = as_id_array(nodes, "nodes")
    check_id_range(seeds, num_nodes, "nodes")
    if fanout == 0 or seeds.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return SampledSubgraph(empty, empty, empty, num_nodes)

    calls = [
        _sample_call(
            ctx, part_id, part_seeds, fanout, edge_dir, replace, prob, _derive_seed(random_seed, part_id)
        )
        for part_id, _, part_seeds in ctx.route(seeds, "node")
    ]
    results = ctx.run_parallel(calls) if len(calls) > 1 else [calls[0]()]
    src = np.concatenate([r[0] for r in results])
    dst = np.concatenate([r[1] for r in results])
    eid = np.concatenate([r[2] for r in results])
    frontier = SampledSubgraph(src, dst, eid, num_nodes)
    if exclude_edges is not None:
        excluded = as_id_array(exclude_edges, "exclude_edges")
        if excluded.size:
            frontier = frontier.filter_edges(~np.isin(eid, excluded))
    return frontier


def find_edges(g, edge_ids) -> tuple[torch.Tensor, torch.Tensor]:
    """Source and destination nodes of edges, in the order given.

    Args:
        g: the DistGraph.
        edge_ids: global edge IDs (may repeat).

    Returns:
        ``(src, dst)`` int64 tensors.

    Raises:
        IndexError: an edge ID outside the graph.
    """
    ctx = graph_context(g)
    eids = as_id_array(edge_ids, "edge_ids")
    check_id_range(eids, int(ctx.book.num_edges()), "edge_ids")
    src = np.empty(eids.size, dtype=np.int64)
    dst = np.empty(eids.size, dtype=np.int64)
    routes = ctx.route(eids, "edge")
    calls = [lambda r=_reader(ctx, part_id), e=part_eids: r.find_edges(e) for part_id, _, part_eids in routes]
    if calls:
        results = ctx.run_parallel(calls) if len(calls) > 1 else [calls[0]()]
        for (_, positions, _), (part_src, part_dst) in zip(routes, results, strict=True):
            src[positions] = part_src
            dst[positions] = part_dst
    return torch.from_numpy(src), torch.from_numpy(dst)


def in_subgraph(g, nodes) -> SampledSubgraph:
    """Every in-edge of ``nodes``, as a :class:`SampledSubgraph` in global IDs.

    Raises:
        IndexError: a node outside the graph.
    """
    ctx = graph_context(g)
    num_nodes = int(ctx.book.num_nodes())
    seeds = as_id_array(nodes, "nodes")
    check_id_range(seeds, num_nodes, "nodes")
    calls = [
        lambda r=_reader(ctx, part_id), s=part_seeds: r.in_subgraph(s)
        for part_id, _, part_seeds in ctx.route(seeds, "node")
    ]
    if not calls:
        empty = np.empty(0, dtype=np.int64)
        return SampledSubgraph(empty, empty, empty, num_nodes)
    results = ctx.run_parallel(calls) if len(calls) > 1 else [calls[0]()]
    return SampledSubgraph(
        np.concatenate([r[0] for r in results]),
        np.concatenate([r[1] for r in results]),
        np.concatenate([r[2] for r in results]),
        num_nodes,
    )
