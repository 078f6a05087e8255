"""Which edges a link-prediction batch keeps out of its sampled blocks, so that the model does not see the
edges it must predict: the batch's own edges (``'self'``), and their reverses, given by ID
(``'reverse_id'``, one edge type) or by reverse edge type (``'reverse_types'``).

By edge type, a reverse edge is found by its endpoints: for a batch edge ``u -> v`` of type ``E`` whose
reverse type is ``R``, every edge ``v -> u`` of type ``R`` is excluded (the partitioner renumbers edges,
so the reverse of edge ``i`` of ``E`` is not edge ``i`` of ``R`` as in an unpartitioned DGL graph). They
are looked up in one all-neighbor request along the reverse types only.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from graphstore.client.sampling import sample_neighbors
from graphstore.types import CanonicalEtype, GraphSchema, etype_key

EXCLUDE_MODES = (None, "self", "reverse_id", "reverse_types")


def resolve_reverse_etypes(schema: GraphSchema, reverse_etypes) -> dict[CanonicalEtype, CanonicalEtype]:
    """``{etype: reverse etype}`` as canonical types, checked.

    Raises:
        ValueError: no mapping, or a reverse type whose ends are not the type's ends swapped.
        KeyError: an unknown or ambiguous edge type.
    """
    if not isinstance(reverse_etypes, Mapping) or not reverse_etypes:
        raise ValueError("exclude='reverse_types' needs reverse_etypes={etype: its reverse edge type, ...}")
    out = {}
    for etype, reverse in reverse_etypes.items():
        canonical, opposite = schema.to_canonical_etype(etype), schema.to_canonical_etype(reverse)
        if (opposite[0], opposite[2]) != (canonical[2], canonical[0]):
            raise ValueError(
                f"reverse_etypes: {etype_key(opposite)} cannot be the reverse of {etype_key(canonical)} "
                "(its source and destination types must be swapped)"
            )
        out[canonical] = opposite
    return out


def reverse_edge_ids(
    g,
    pairs: Mapping[CanonicalEtype, tuple[np.ndarray, np.ndarray]],
    reverse: Mapping[CanonicalEtype, CanonicalEtype],
) -> dict[CanonicalEtype, np.ndarray]:
    """The per-type IDs of every reverse-type edge ``v -> u`` of the batch's edges ``u -> v``.

    Args:
        g: the DistGraph.
        pairs: per canonical type, the batch's ``(src, dst)`` in per-type IDs.
        reverse: per canonical type, its reverse type (types without one are skipped).

    Returns:
        ``{reverse type: edge IDs}``.
    """
    wanted = {c: reverse[c] for c, (src, _) in pairs.items() if c in reverse and src.size}
    if not wanted:
        return {}
    # The reverse edges v -> u are in-edges of u: one request for every reverse type at once.
    seeds: dict[str, list[np.ndarray]] = {}
    for canonical in wanted:
        seeds.setdefault(canonical[0], []).append(pairs[canonical][0])
    seed_ids = {ntype: np.unique(np.concatenate(ids)) for ntype, ids in seeds.items()}
    reverse_types = set(wanted.values())
    fanout = {c: -1 if c in reverse_types else 0 for c in g.canonical_etypes}
    frontier = sample_neighbors(g, seed_ids, fanout)
    found: dict[CanonicalEtype, list[np.ndarray]] = {}
    for canonical, opposite in wanted.items():
        src, dst = pairs[canonical]
        rev_src, rev_dst, rev_eid = frontier.arrays(opposite)
        width = g.num_nodes(opposite[0])
        # An edge v -> u of the reverse type has source v (the batch edge's destination), destination u.
        hit = np.isin(rev_dst * width + rev_src, src * width + dst)
        found.setdefault(opposite, []).append(rev_eid[hit])
    return {c: np.concatenate(ids) for c, ids in found.items()}
