"""PyG's multi-hop neighbor sampling over graphstore's ``sample_neighbors``, relabelled as PyG does.

PyG's ``NeighborSampler`` grows one node list per node type: the seeds first, then, hop after hop, the
nodes each hop found that were not in the list yet (in increasing ID order here). Hop ``k`` samples the
in-edges of the nodes hop ``k - 1`` added (the seeds for the first hop) only, so every node's edges are
sampled once; an edge's ``row`` is the local index of its source in its type's list, ``col`` that of its
destination, and the edges are grouped by hop (``num_sampled_edges``), as PyG's ``trim_to_layer``
expects. The relabeling reuses the client's ID compaction
(:func:`graphstore.client.local_ids.compact_by_type`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from graphstore.client.local_ids import compact_by_type

_EMPTY = np.empty(0, dtype=np.int64)


@dataclass
class HopSample:
    """Sampled hops in PyG's form, per node type and canonical edge type (numpy int64).

    Attributes:
        node: per node type, the global (per-type) IDs: seeds first, then each hop's new nodes.
        row, col, edge: per canonical edge type, local source / destination indices into ``node`` of the
            source / destination type, and the per-type edge IDs; grouped by hop.
        num_sampled_nodes: per node type, the seeds then the new nodes of each hop.
        num_sampled_edges: per canonical edge type, the edges of each hop.
    """

    node: dict[str, np.ndarray]
    row: dict[tuple, np.ndarray] = field(default_factory=dict)
    col: dict[tuple, np.ndarray] = field(default_factory=dict)
    edge: dict[tuple, np.ndarray] = field(default_factory=dict)
    num_sampled_nodes: dict[str, list[int]] = field(default_factory=dict)
    num_sampled_edges: dict[tuple, list[int]] = field(default_factory=dict)


def sample_hops(
    seeds: dict[str, np.ndarray],
    num_nodes: dict[str, int],
    canonical_etypes: list[tuple],
    num_hops: int,
    sample_hop: Callable[
        [int, dict[str, np.ndarray]], dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]]
    ],
) -> HopSample:
    """Expand ``seeds`` hop by hop and relabel as PyG's ``NeighborSampler`` does.

    Args:
        seeds: per node type, unique seed IDs (a type left out has none).
        num_nodes: per node type, the size of its ID space (its keys are every node type, in order).
        canonical_etypes: every canonical edge type, in order.
        num_hops: number of hops.
        sample_hop: ``sample_hop(hop, frontier) -> {canonical: (src, dst, eid)}``: the sampled in-edges
            of the frontier nodes (per-type IDs); a type left out has none.

    Returns:
        The :class:`HopSample`.

    Raises:
        ValueError: a seed repeated within its type.
    """
    nodes = {t: np.asarray(seeds.get(t, _EMPTY), dtype=np.int64) for t in num_nodes}
    for ntype, ids in nodes.items():
        if ids.size and np.unique(ids).size != ids.size:
            raise ValueError(
                f"seed nodes of type {ntype!r} repeat IDs ({ids.size - np.unique(ids).size} repeats)"
            )
    counts_nodes = {t: [int(ids.size)] for t, ids in nodes.items()}
    pieces: dict[tuple, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {c: [] for c in canonical_etypes}
    counts_edges: dict[tuple, list[int]] = {c: [] for c in canonical_etypes}
    frontier = {t: ids for t, ids in nodes.items() if ids.size}
    for hop in range(num_hops):
        sampled = sample_hop(hop, frontier) if frontier else {}
        arrays, order = [], []
        for canonical in canonical_etypes:
            src, dst, eid = sampled.get(canonical, (_EMPTY, _EMPTY, _EMPTY))
            arrays += [
                (canonical[0], np.asarray(src, dtype=np.int64)),
                (canonical[2], np.asarray(dst, dtype=np.int64)),
            ]
            order.append((canonical, np.asarray(eid, dtype=np.int64)))
        unique, local = compact_by_type(nodes, arrays, num_nodes)
        for index, (canonical, eid) in enumerate(order):
            pieces[canonical].append((local[2 * index], local[2 * index + 1], eid))
            counts_edges[canonical].append(int(eid.size))
        frontier = {}
        for ntype in num_nodes:
            new = unique[ntype][nodes[ntype].size :]
            counts_nodes[ntype].append(int(new.size))
            if new.size:
                frontier[ntype] = new
        nodes = {t: unique[t] for t in num_nodes}
    out = HopSample(node=nodes, num_sampled_nodes=counts_nodes, num_sampled_edges=counts_edges)
    for canonical, parts in pieces.items():
        out.row[canonical] = np.concatenate([p[0] for p in parts]) if parts else _EMPTY
        out.col[canonical] = np.concatenate([p[1] for p in parts]) if parts else _EMPTY
        out.edge[canonical] = np.concatenate([p[2] for p in parts]) if parts else _EMPTY
    return out
