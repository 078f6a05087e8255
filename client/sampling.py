"""Distributed neighbor sampling and edge look-ups over a :class:`~graphstore.client.DistGraph`.

Seeds are routed to the partitions that own them (a range look-up in the partition book). The
co-located partition, when the client has one, is sampled in-process from its memory-mapped
structure (``ctx.local_reader(part)``); every other partition is asked over RPC. All partitions
are asked at once (``ctx.run_parallel``), one request each for every edge type, and their edges make
one :class:`~graphstore.client.frontier.SampledSubgraph`: on a typed graph, the partitions answer in
homogeneous IDs and the edges are grouped by edge type in per-type IDs (:mod:`.per_type`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from graphstore.client.batch_rows import BatchRows
from graphstore.client.context import get_context
from graphstore.client.frontier import SampledSubgraph
from graphstore.client.per_type import (
    etype_fanouts,
    etype_probs,
    homo_edge_ids,
    homo_node_ids,
)
from graphstore.client.transport.channel import wait_all
from graphstore.client.transport.sample_requests import SampleSpec
from graphstore.ids import as_id_array
from graphstore.sampling_rules import partition_seed

EDGE_DIRS = ("in", "out")


def graph_context(g):
    """The client context a DistGraph talks through (``g._ctx``, else the process's context)."""
    ctx = getattr(g, "_ctx", None)
    if ctx is not None:
        return ctx
    return get_context()


def _reader(ctx, part_id: int):
    """The in-process reader of ``part_id`` when it is co-located, else the (remote) partition."""
    local = ctx.local_reader(part_id)
    return local if local is not None else ctx.partition(part_id)


def _local_sample_call(ctx, local, part_id, seeds, spec: SampleSpec):
    """A no-argument call sampling ``seeds`` on the co-located partition ``part_id`` in-process (its rows
    are read in-process too, so none are carried): ``(src, dst, eid, [])``."""
    args = (seeds, spec.fanout, spec.edge_dir, spec.replace, spec.prob, spec.random_seed, spec.exclude)

    def call():
        try:
            return (*local.sample_neighbors(*args), [])
        except KeyError:
            if spec.prob is None:
                raise
            # The weights are a run-time tensor, held by the server only (the local view has the
            # partition files' data): ask the server.
            return (*ctx.partition(part_id).sample_neighbors(*args), [])

    return call


def _remote_sample_call(remote, seeds, spec: SampleSpec):
    """A no-argument call sampling ``seeds`` on ``remote``: started at once where the transport can
    (``sample_started``), run when called otherwise; ``(src, dst, eid, carried rows)``."""
    start = getattr(remote, "sample_started", None)
    if start is not None:
        return start(seeds, spec)
    with_rows = getattr(remote, "sample_with_rows", None)
    if with_rows is not None:
        return lambda: with_rows(seeds, spec)
    args = (seeds, spec.fanout, spec.edge_dir, spec.replace, spec.prob, spec.random_seed, spec.exclude)
    return lambda: (*remote.sample_neighbors(*args), [])


def sample_neighbors(
    g,
    nodes,
    fanout,
    edge_dir: str = "in",
    prob=None,
    exclude_edges=None,
    replace: bool = False,
    random_seed: int | None = None,
    *,
    rows: BatchRows | None = None,
    carry_hop: tuple[bool, bool] = (True, True),
) -> SampledSubgraph:
    """Sample up to ``fanout`` neighbors of each node of ``nodes``, per edge type.

    With ``edge_dir='in'`` the sampled edges are in-edges of the seeds (``dst`` in ``nodes``), with
    ``'out'`` out-edges (``src`` in ``nodes``). Per edge type, without replacement a seed gets
    ``min(degree, fanout)`` distinct edges; with replacement exactly ``fanout`` (none for a seed without
    edges); ``fanout=-1`` takes every edge, 0 none. Every partition is asked once for all edge types.

    Args:
        g: the DistGraph.
        nodes: seed node IDs: ``{ntype: per-type IDs}`` on a typed graph; a tensor, numpy array or list
            of IDs on a graph with one node type.
        fanout: edges per seed and edge type: an int for every type, or ``{etype: int}`` naming every
            edge type of the graph (a canonical triple, ``"src:etype:dst"`` or an unambiguous name).
        edge_dir: ``'in'`` or ``'out'``.
        prob: edge weights to sample in proportion to (zero-weight edges are never drawn): the name of
            an edge feature that every sampled edge type has, or ``{etype: name}`` (types left out, or
            None, sample uniformly). ``edge_dir='in'`` only.
        exclude_edges: edges never sampled (``{etype: per-type IDs}``, or IDs on a graph with one edge
            type). They are left out before drawing, so a seed still gets ``fanout`` edges of its others.
        replace: sample with replacement.
        random_seed: makes the sample reproducible (in-process and over RPC alike).
        rows: a loader's batch: the remote partitions' answers carry the node rows it asks for this hop
            (``carry_hop``: whether this is the batch's ``(first, last)`` hop), kept in it.
        carry_hop: see ``rows``.

    Returns:
        A :class:`SampledSubgraph` (frontier): per canonical edge type the sampled edges in per-type
        node IDs, with their per-type edge IDs in ``edata[EID]``.

    Raises:
        ValueError: bad ``fanout`` / ``edge_dir``, a fanout dict that leaves edge types out, or plain IDs
            on a graph with several node types; errors from the servers propagate.
        KeyError: an unknown node or edge type, or ``prob`` missing on a sampled edge type.
        IndexError: a seed outside its type.
    """
    if edge_dir not in EDGE_DIRS:
        raise ValueError(f"edge_dir must be 'in' or 'out', got {edge_dir!r}")
    ctx = graph_context(g)
    book = ctx.book
    schema = book.schema
    fanouts = etype_fanouts(schema, fanout)
    probs = etype_probs(g, prob, fanouts)
    seeds = homo_node_ids(book, nodes)
    excluded = None if exclude_edges is None else homo_edge_ids(book, exclude_edges)
    if excluded is not None and excluded.size == 0:
        excluded = None
    wire_fanout = fanouts[0] if len(fanouts) == 1 else fanouts
    with_rows, with_seed_rows = rows.ask(*carry_hop) if rows is not None else ((), ())
    started, inline = [], []
    if seeds.size and any(fanouts):
        # An in-edge is stored (and so excluded) by its destination's partition only.
        exclude_of = (
            {part: ids for part, _, ids in ctx.route(excluded, "edge")}
            if excluded is not None and edge_dir == "in"
            else None
        )
        for part_id, _, part_seeds in ctx.route(seeds, "node"):
            part_excluded = excluded if exclude_of is None else exclude_of.get(part_id)
            local = ctx.local_reader(part_id)
            spec = SampleSpec(
                wire_fanout,
                edge_dir,
                replace,
                probs,
                partition_seed(random_seed, part_id),
                part_excluded,
                () if local is not None else with_rows,
                () if local is not None else with_seed_rows,
            )
            if local is not None:
                inline.append(
                    (len(started) + len(inline), _local_sample_call(ctx, local, part_id, part_seeds, spec))
                )
            else:
                started.append(
                    (
                        len(started) + len(inline),
                        _remote_sample_call(ctx.partition(part_id), part_seeds, spec),
                    )
                )
    results = _run_sample_calls(ctx, inline, started)
    if rows is not None:
        for result in results:
            rows.add(result[3])
    return _frontier(book, results)


def _run_sample_calls(ctx, inline: list, started: list) -> list:
    """The answers of every partition's sample, in partition order: the remote ones already in flight
    go on while the co-located partition samples here (every started call is waited for, also when the
    co-located one fails)."""
    results: list = [None] * (len(inline) + len(started))
    calls = [call for _, call in inline]
    try:
        answers = ctx.run_parallel(calls) if len(calls) > 1 else [call() for call in calls]
    except BaseException as exc:
        wait_all([wait for _, wait in started], failed=exc)
        raise
    for (index, _), answer in zip(inline, answers, strict=True):
        results[index] = answer
    for (index, _), answer in zip(started, wait_all([wait for _, wait in started]), strict=True):
        results[index] = answer
    return results


def _frontier(book, results) -> SampledSubgraph:
    """The frontier of the partitions' homogeneous ``(src, dst, eid)`` answers."""
    empty = np.empty(0, dtype=np.int64)
    src = np.concatenate([r[0] for r in results]) if results else empty
    dst = np.concatenate([r[1] for r in results]) if results else empty
    eid = np.concatenate([r[2] for r in results]) if results else empty
    return SampledSubgraph.from_partitions(book, src, dst, eid)


def find_edges(g, edge_ids):
    """Source and destination nodes of edges, in the order given.

    Args:
        g: the DistGraph.
        edge_ids: edge IDs (may repeat); or ``{etype: per-type IDs}`` on a typed graph (all types in one
            request per partition).

    Returns:
        ``(src, dst)`` int64 tensors; for dict ``edge_ids``, ``{canonical etype: (src, dst)}`` in per-type
        node IDs.

    Raises:
        IndexError: an edge ID outside the graph (its type). KeyError: an unknown edge type.
    """
    ctx = graph_context(g)
    book = ctx.book
    eids = homo_edge_ids(book, edge_ids, "edge_ids")
    src = np.empty(eids.size, dtype=np.int64)
    dst = np.empty(eids.size, dtype=np.int64)
    routes = ctx.route(eids, "edge")
    calls = [lambda r=_reader(ctx, part_id), e=part_eids: r.find_edges(e) for part_id, _, part_eids in routes]
    if calls:
        results = ctx.run_parallel(calls) if len(calls) > 1 else [calls[0]()]
        for (_, positions, _), (part_src, part_dst) in zip(routes, results, strict=True):
            src[positions] = part_src
            dst[positions] = part_dst
    if not isinstance(edge_ids, Mapping):
        return torch.from_numpy(src), torch.from_numpy(dst)
    _, src = book.map_to_per_ntype(src)
    _, dst = book.map_to_per_ntype(dst)
    out, start = {}, 0
    for etype, ids in edge_ids.items():
        count = as_id_array(ids, "edge_ids").size
        out[book.schema.to_canonical_etype(etype)] = (
            torch.from_numpy(src[start : start + count]),
            torch.from_numpy(dst[start : start + count]),
        )
        start += count
    return out


def in_subgraph(g, nodes) -> SampledSubgraph:
    """Every in-edge of ``nodes`` (``{ntype: IDs}`` on a typed graph), as a :class:`SampledSubgraph`.

    Raises:
        IndexError: a node outside its type. KeyError: an unknown node type.
    """
    ctx = graph_context(g)
    seeds = homo_node_ids(ctx.book, nodes)
    calls = [
        lambda r=_reader(ctx, part_id), s=part_seeds: r.in_subgraph(s)
        for part_id, _, part_seeds in ctx.route(seeds, "node")
    ]
    results = ctx.run_parallel(calls) if len(calls) > 1 else [call() for call in calls]
    return _frontier(ctx.book, results)
