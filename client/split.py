"""Workload split: which training nodes (or edges) each trainer rank takes.

``node_split`` / ``edge_split`` follow DGL's ``dgl.distributed`` functions of the same names: they read
the IDs a mask selects (a local array or a :class:`~graphstore.client.dist_tensor.DistTensor`) and hand
them to the pure rules of :mod:`~graphstore.client.rank_split` (every rank computes the same
deterministic assignment from the same input, so no communication is needed).
"""

from __future__ import annotations

import numpy as np
import torch

from graphstore.client.context import get_context, trainer_rank_and_world
from graphstore.client.dist_tensor import DistTensor
from graphstore.client.rank_split import split_by_trainer_ids, split_ids
from graphstore.ids import check_id_range, to_numpy
from graphstore.types import DEFAULT_ETYPE, DEFAULT_NTYPE


def node_split(
    nodes,
    partition_book=None,
    ntype: str = DEFAULT_NTYPE,
    rank: int | None = None,
    force_even: bool = True,
    *,
    world_size: int | None = None,
    trainer_ids=None,
):
    """The training nodes this trainer takes.

    Args:
        nodes: a boolean mask over all nodes (a torch / numpy array or a :class:`DistTensor`, e.g.
            ``g.ndata['train_mask']``; an integer array of 0/1 with one entry per node counts as a mask,
            as in DGL), or an array of node IDs.
        partition_book: the graph's partition book; default: the connected graph's.
        ntype: the node type (its per-type IDs); ``'_N'``: every node, homogeneous IDs.
        rank: this trainer's rank; default: the trainer group's rank (torch.distributed, else RANK).
        force_even: every rank gets the same count, plus or minus one.
        world_size: number of trainers; default: the trainer group's size (torch.distributed, else
            WORLD_SIZE, else 1).
        trainer_ids: with ``force_even``, each node's trainer (e.g. ``g.ndata['trainer_id']`` of a graph
            partitioned with ``num_trainers_per_machine``): a partition's trainers split its share by
            them (:func:`split_by_trainer_ids`, DGL's ``node_trainer_ids``); ignored without
            ``force_even``, as in DGL.

    Returns:
        A sorted int64 torch tensor of node IDs (per-type IDs for a node type).

    Raises:
        KeyError: an unknown ``ntype`` (the message lists the known ones).
        ValueError: bad rank, or a mask whose length is not the number of nodes (of the type).
        IndexError: a node ID out of range.
        TypeError: a float array.
    """
    return _split(
        nodes, partition_book, "node", ntype, DEFAULT_NTYPE, rank, force_even, world_size, trainer_ids
    )


def edge_split(
    edges,
    partition_book=None,
    etype=DEFAULT_ETYPE,
    rank: int | None = None,
    force_even: bool = True,
    *,
    world_size: int | None = None,
    trainer_ids=None,
):
    """The training edges this trainer takes; the same rules as :func:`node_split` over edge IDs.

    Args:
        edges: a boolean mask over all edges, or an array of edge IDs.
        partition_book: the graph's partition book; default: the connected graph's.
        etype: the edge type (its per-type IDs); ``'_E'``: every edge, homogeneous IDs.
        rank, force_even, world_size, trainer_ids: as in :func:`node_split` (per edge).

    Returns:
        A sorted int64 torch tensor of edge IDs (per-type IDs for an edge type).

    Raises:
        KeyError, ValueError, IndexError, TypeError: as in :func:`node_split`.
    """
    return _split(
        edges, partition_book, "edge", etype, DEFAULT_ETYPE, rank, force_even, world_size, trainer_ids
    )


def _split(items, book, kind, type_name, default_type, rank, force_even, world_size, trainer_ids=None):
    if book is None:
        book = get_context().book
    if kind == "node":
        bounds = book.node_type_bounds(None if type_name in (None, default_type) else type_name)
    else:
        bounds = book.edge_type_bounds(None if type_name in (None, default_type) else type_name)
    bounds = np.asarray(bounds, dtype=np.int64)
    total = int(bounds[-1])
    if rank is None or world_size is None:
        ctx_rank, ctx_world = trainer_rank_and_world()
        rank = ctx_rank if rank is None else rank
        world_size = ctx_world if world_size is None else world_size
    ids = _selected_ids(items, total, kind)
    if trainer_ids is not None and force_even:
        _check_length(trainer_ids, total, "trainer IDs")
        if int(world_size) > len(bounds) - 1:  # only then does a partition have several trainers
            owners = _whole_array(trainer_ids, total)
            return torch.from_numpy(split_by_trainer_ids(ids, bounds, int(rank), int(world_size), owners))
    return torch.from_numpy(split_ids(ids, bounds, int(rank), int(world_size), bool(force_even)))


def _check_length(values, total: int, what: str) -> None:
    """Check that a per-node (or per-edge) array, a :class:`DistTensor` or a local one, has ``total``
    entries, without reading its rows.

    Raises:
        ValueError: not ``total`` entries.
    """
    if isinstance(values, DistTensor):
        if values.shape[0] != total:
            raise ValueError(f"{what} {values.name!r} have {values.shape[0]} rows, expected {total}")
    elif to_numpy(values).size != total:
        raise ValueError(f"{what} have {to_numpy(values).size} entries, expected {total}")


def _whole_array(values, total: int) -> np.ndarray:
    """Every entry of a per-node (or per-edge) array of ``total`` entries, a :class:`DistTensor` or a
    local one, as int64."""
    if isinstance(values, DistTensor):
        return values.read(slice(0, total)).numpy().reshape(total, -1)[:, 0].astype(np.int64)
    return to_numpy(values).reshape(-1).astype(np.int64, copy=False)


def _selected_ids(items, total: int, policy: str) -> np.ndarray:
    """The IDs a mask selects, or the given IDs (as int64 numpy)."""
    what = "nodes" if policy == "node" else "edges"
    if isinstance(items, DistTensor):
        if items.shape[0] != total:
            raise ValueError(
                f"mask {items.name!r} has {items.shape[0]} rows but the graph has {total} {what}"
            )
        arr = items.read(slice(0, total)).numpy().reshape(total, -1)[:, 0]
        return np.flatnonzero(arr).astype(np.int64)
    arr = to_numpy(items)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be a 1-D mask or ID array, got shape {tuple(arr.shape)}")
    kind = arr.dtype.kind
    if kind == "b":
        if arr.size != total:
            raise ValueError(f"boolean mask of {what} has length {arr.size} but the graph has {total} {what}")
        return np.flatnonzero(arr).astype(np.int64)
    if kind not in ("i", "u"):
        if arr.size == 0:
            return np.empty(0, dtype=np.int64)
        raise TypeError(f"{what} must be a boolean mask or integer IDs, got dtype {arr.dtype}")
    if arr.size == total and total > 2 and arr.size and int(arr.min()) >= 0 and int(arr.max()) <= 1:
        # A 0/1 integer mask with one entry per node/edge, as DGL accepts (e.g. uint8 train masks).
        return np.flatnonzero(arr).astype(np.int64)
    ids = arr.astype(np.int64, copy=False)
    check_id_range(ids, total, what)
    return ids
