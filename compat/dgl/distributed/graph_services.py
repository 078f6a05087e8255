"""``dgl.distributed``'s graph services: neighbor sampling and edge look-ups on a DistGraph.

:func:`sample_neighbors`, :func:`sample_etype_neighbors` and :func:`in_subgraph` return a
:class:`graphstore.client.frontier.SampledSubgraph` (the graph's IDs, per-type on a typed graph, with
``edata[EID]``); ``dgl.to_block(frontier, seeds)`` turns it into a block as in DGL.
:func:`edge_subgraph` asks the servers for the given edges only (``find_edges``) and builds their
subgraph on the trainer, as DGL does; the graph itself is never gathered.
``_find_edges(local_g, gpb, eids)`` is DGL's look-up in one partition's loaded graph (DGL's partition
tests call it).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from graphstore.client import sampling as _sampling
from graphstore.client.dataloader.pair_graph import PairGraph
from graphstore.client.frontier import SampledSubgraph
from graphstore.client.local_ids import compact_by_type
from graphstore.compat.dgl.distributed.graphbolt_partition import (  # noqa: F401 - DGL's private name
    find_edges_in_partition as _find_edges,
)
from graphstore.types import GraphSchema


def _check_default(function: str, name: str, value, default) -> None:
    if value != default:
        raise NotImplementedError(f"{function}({name}={value!r}) is not supported; only {name}={default!r}")


def sample_neighbors(
    g,
    nodes,
    fanout: int,
    edge_dir: str = "in",
    prob=None,
    exclude_edges=None,
    replace: bool = False,
    use_graphbolt: bool = False,
    etype_sorted: bool = True,
    output_device=None,
) -> SampledSubgraph:
    """Sample up to ``fanout`` in- (or out-) edges of each node (``dgl.distributed.sample_neighbors``).

    Args:
        g: the DistGraph.
        nodes: global node IDs.
        fanout: edges per node; -1 takes all.
        edge_dir: ``'in'`` or ``'out'``.
        prob: name of an edge feature of sampling weights.
        exclude_edges: global edge IDs never sampled.
        replace: sample with replacement.
        use_graphbolt: False.
        etype_sorted: True (DGL's default; ``DistGraph.sample_neighbors`` passes it).
        output_device: None or the CPU (the frontier stays on the CPU; blocks move with ``to``).

    Returns:
        The sampled frontier.

    Raises:
        NotImplementedError: another value of ``etype_sorted``, ``output_device`` or ``use_graphbolt``.
    """
    _check_default("sample_neighbors", "etype_sorted", bool(etype_sorted), True)
    _check_default("sample_neighbors", "use_graphbolt", bool(use_graphbolt), False)
    if output_device is not None and torch.device(output_device).type != "cpu":
        raise NotImplementedError(
            f"sample_neighbors(output_device={output_device!r}): frontiers stay on the CPU; move the block "
            "with block.to(device) (or NeighborSampler(output_device=...))"
        )
    return _sampling.sample_neighbors(
        g, nodes, fanout, edge_dir=edge_dir, prob=prob, exclude_edges=exclude_edges, replace=replace
    )


def sample_etype_neighbors(
    g,
    nodes,
    fanout,
    edge_dir: str = "in",
    prob=None,
    exclude_edges=None,
    replace: bool = False,
    etype_sorted: bool = True,
    use_graphbolt: bool = False,
) -> SampledSubgraph:
    """Sample up to ``fanout`` edges of each node per edge type (``dgl.distributed.sample_etype_neighbors``).

    Args:
        g: the DistGraph.
        nodes: ``{ntype: per-type IDs}``, or IDs on a graph with one node type.
        fanout: edges per node and edge type: an int for every type, or ``{etype: int}`` naming every
            edge type (-1 takes all).
        edge_dir: ``'in'`` or ``'out'``.
        prob: an edge feature name (or ``{etype: name}``) of sampling weights.
        exclude_edges: ``{etype: per-type IDs}`` never sampled.
        replace: sample with replacement.
        etype_sorted: accepted (DGL's hint about its storage; every value gives the same sample here).
        use_graphbolt: False.

    Returns:
        The frontier: per canonical edge type the sampled edges in per-type IDs, ``edata[EID]`` per type.

    Raises:
        NotImplementedError: ``use_graphbolt=True``.
        ValueError, KeyError, IndexError: as :func:`graphstore.client.sampling.sample_neighbors`.
    """
    _check_default("sample_etype_neighbors", "use_graphbolt", bool(use_graphbolt), False)
    return _sampling.sample_neighbors(
        g, nodes, fanout, edge_dir=edge_dir, prob=prob, exclude_edges=exclude_edges, replace=replace
    )


def in_subgraph(g, nodes) -> SampledSubgraph:
    """Every in-edge of ``nodes`` (``dgl.distributed.in_subgraph``); ``{ntype: IDs}`` on a typed graph.

    Returns:
        The frontier of those edges (per canonical edge type on a typed graph).

    Raises:
        IndexError: a node outside its type. KeyError: an unknown node type.
    """
    return _sampling.in_subgraph(g, nodes)


def edge_subgraph(g, edges, relabel_nodes: bool = True, store_ids: bool = True):
    """The subgraph of the given edges (``DistGraph.edge_subgraph``): their endpoints come from the servers
    (``find_edges``), nothing else is read.

    Args:
        g: the DistGraph.
        edges: edge IDs, or ``{etype: per-type IDs}`` on a typed graph.
        relabel_nodes: keep only the endpoints, numbered ``0..n-1`` per type, their IDs in the graph in
            ``ndata[NID]`` (DGL's default); False: the edges in the graph's node IDs.
        store_ids: True (the graph's edge IDs are in ``edata[EID]``, as DGL always stores them).

    Returns:
        With ``relabel_nodes``: a graph (a :class:`~graphstore.client.dataloader.pair_graph.PairGraph`,
        a ``dgl.DGLGraph``) with ``edges()`` in local IDs, ``ndata[NID]``, ``edata[EID]``; without: a
        :class:`~graphstore.client.frontier.SampledSubgraph` in the graph's IDs.

    Raises:
        NotImplementedError: ``store_ids=False``.
        IndexError, KeyError: as :func:`find_edges`.
    """
    _check_default("edge_subgraph", "store_ids", bool(store_ids), True)
    schema = GraphSchema(tuple(g.ntypes), tuple(g.canonical_etypes))
    if isinstance(edges, Mapping):
        wanted = {
            g.to_canonical_etype(t): torch.as_tensor(ids, dtype=torch.int64) for t, ids in edges.items()
        }
        ends = _sampling.find_edges(g, {c: ids for c, ids in wanted.items()})
    else:
        canonical = schema.canonical_etypes[0]
        if len(schema.canonical_etypes) != 1:
            raise ValueError(f"edges must be {{etype: IDs}} on a graph with edge types {g.etypes}")
        wanted = {canonical: torch.as_tensor(edges, dtype=torch.int64)}
        ends = {canonical: _sampling.find_edges(g, wanted[canonical])}
    empty = torch.empty(0, dtype=torch.int64)
    triples = {c: (*ends.get(c, (empty, empty)), wanted.get(c, empty)) for c in schema.canonical_etypes}
    if not relabel_nodes:
        num_nodes = {t: g.num_nodes(t) for t in schema.ntypes}
        return SampledSubgraph.from_types(
            schema, {c: tuple(t.numpy() for t in v) for c, v in triples.items()}, num_nodes
        )
    arrays = []
    for canonical, (src, dst, _) in triples.items():
        arrays += [(canonical[0], src.numpy()), (canonical[2], dst.numpy())]
    unique_ids, local = compact_by_type({}, arrays, {t: g.num_nodes(t) for t in schema.ntypes})
    local_edges = {
        c: (torch.from_numpy(local[2 * i]), torch.from_numpy(local[2 * i + 1]))
        for i, c in enumerate(schema.canonical_etypes)
    }
    return PairGraph.from_types(
        schema,
        local_edges,
        {t: torch.from_numpy(np.asarray(unique_ids[t], dtype=np.int64)) for t in schema.ntypes},
        {c: triples[c][2] for c in schema.canonical_etypes},
    )


find_edges = _sampling.find_edges

__all__ = ["edge_subgraph", "find_edges", "in_subgraph", "sample_etype_neighbors", "sample_neighbors"]
