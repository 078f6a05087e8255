"""Relabeling global node IDs to compact local IDs (``0..n-1``), the step every block and pair graph
of a mini-batch starts with.

The relabeling is vectorized: a dense ID -> local-ID table when the ID space is not much larger than
the batch (one scatter and one gather, no sort), a sort-based ``unique`` otherwise. On a typed graph
each node type is relabeled in its own per-type ID space (:func:`compact_by_type`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

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


def compact_by_type(
    heads: Mapping[str, np.ndarray],
    arrays: Sequence[tuple[str, np.ndarray]],
    num_nodes: Mapping[str, int],
) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """:func:`compact_ids` per node type: each type's IDs are relabeled in that type's ID space.

    Args:
        heads: per node type, the unique IDs that come first (a type without one has none).
        arrays: ``(node type, IDs)`` pairs to relabel.
        num_nodes: per node type, the size of its ID space; its keys are the types, in order.

    Returns:
        ``(unique_ids, local)``: per node type (every type of ``num_nodes``) the local -> global table,
        and the local IDs of each array of ``arrays``, in order.

    Raises:
        ValueError: a head that repeats an ID.
    """
    empty = np.empty(0, dtype=np.int64)
    by_type: dict[str, list[int]] = {ntype: [] for ntype in num_nodes}
    for index, (ntype, _) in enumerate(arrays):
        by_type[ntype].append(index)
    unique_ids: dict[str, np.ndarray] = {}
    local: list[np.ndarray] = [empty] * len(arrays)
    for ntype, count in num_nodes.items():
        head = heads.get(ntype, empty)
        members = by_type[ntype]
        if not members and head.size == 0:
            unique_ids[ntype] = head
            continue
        unique_ids[ntype], relabeled = compact_ids(head, [arrays[i][1] for i in members], int(count))
        for index, array in zip(members, relabeled, strict=True):
            local[index] = array
    return unique_ids, local
