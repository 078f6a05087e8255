"""Which node rows a sample answer carries: for each tensor the client asked for, the nodes of the answer
that this partition owns, in that tensor's ID space.

A mini-batch's last sampling hop is followed by a pull of its input nodes' features; a server answering
the hop owns most of those nodes' rows (partitioning keeps neighbors together), so it sends them with
the edges and the client pulls only the rest (``SampleRequest.with_rows``). Rows are carried only
within the request limits; a tensor whose rows would exceed them is left out, and the client pulls it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from graphstore import dtypes
from graphstore.errors import LimitExceededError, MemoryBudgetError
from graphstore.protos.edges_wire import RowsToCarry
from graphstore.types import NODE


def held_node_ids(book, part_id: int, policy: str, nodes: np.ndarray) -> np.ndarray:
    """The IDs, in the ID space ``policy``, of those homogeneous node IDs ``nodes`` that partition
    ``part_id`` owns: sorted and unique.

    Args:
        book: the partition book.
        part_id: the partition.
        policy: a node tensor's ID space (``"node"``, or ``"node:<ntype>"`` on a typed graph).
        nodes: homogeneous node IDs (any order, repeats allowed).

    Raises:
        ValueError: ``policy`` is an edge ID space.
    """
    kind, type_id = book.schema.policy_type(policy)
    if kind != NODE:
        raise ValueError(f"with_rows: {policy!r} is not a node ID space; only node rows are carried")
    low, high = (int(b) for b in np.asarray(book.node_bounds)[part_id : part_id + 2])
    unique = np.unique(nodes)
    owned = unique[np.searchsorted(unique, low) : np.searchsorted(unique, high)]
    if type_id is None:
        return owned
    types, per_type = book.map_to_per_ntype(owned)
    return np.asarray(per_type)[np.asarray(types) == type_id].astype(np.int64, copy=False)


def rows_to_carry(
    server,
    guard,
    book,
    names: Sequence[str],
    seed_names: Sequence[str],
    seeds: np.ndarray,
    neighbors: np.ndarray,
    reservations,
) -> list[RowsToCarry]:
    """What a sample answer carries: ``names``' rows for the seeds and neighbors this partition owns,
    ``seed_names``' rows for the seeds; each reserved in ``guard``'s memory budget (entered on
    ``reservations``, an ``ExitStack`` held until the answer is built) or left out when over a limit
    (every carried tensor together holds at most ``max_request_bytes``).

    Raises:
        KeyError: an unknown tensor. ValueError: an edge tensor.
    """
    carried = []
    room = guard.limits.max_request_bytes  # every carried tensor together, so no answer gets too large
    nodes = np.concatenate((seeds, neighbors)) if names else seeds
    for name, scope in [(n, nodes) for n in names] + [(n, seeds) for n in seed_names]:
        scheme = server.tensor_scheme(name)
        ids = held_node_ids(book, server.part_id, scheme.policy, scope)
        itemsize = dtypes.info(scheme.dtype).storage.itemsize
        nbytes = len(ids) * itemsize * int(np.prod(scheme.shape[1:], dtype=np.int64))
        if nbytes > room:
            continue  # the client pulls these rows itself
        try:
            reservations.enter_context(guard.pull(scheme, len(ids), itemsize))
        except (LimitExceededError, MemoryBudgetError):
            continue
        room -= nbytes
        carried.append(RowsToCarry(name, ids, tuple(scheme.shape[1:]), scheme.dtype))
    return carried
