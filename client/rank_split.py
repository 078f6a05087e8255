"""Which trainer rank takes which IDs: ranks mapped onto partitions and the per-rank split of an ID set.

Pure numpy functions of the rank, the trainer count and the partition bounds (no connection, no
communication: every rank computes the same answer). :func:`~graphstore.client.split.node_split` and
:func:`~graphstore.client.split.edge_split` apply them to a graph's IDs; the client's connection uses
:func:`rank_partitions` to find a trainer's home partition.

- ranks map onto partitions (:func:`partition_trainers`): with at least as many trainers as partitions,
  consecutive ranks share a partition (``rank * num_parts // world_size``, DGL's machine-major order);
  with fewer, partition ``p`` belongs to rank ``p % world_size``;
- locality first: each rank takes IDs of its own partition(s) before anything else;
- with ``force_even`` every rank gets ``n // world_size`` or one more IDs, the IDs a partition's trainers
  cannot absorb going to the ranks still short of their quota;
- without ``force_even`` each partition's IDs are split evenly among its own trainers only;
- in both cases the ranks' splits are disjoint and their union is exactly the input set.

:func:`split_ids` loops over partitions and ranks only, never over IDs.
"""

from __future__ import annotations

import numpy as np

from graphstore.client.routing import partition_of


def even_sizes(total: int, num_chunks: int) -> np.ndarray:
    """Sizes of ``num_chunks`` chunks of ``total`` items differing by at most one (larger ones first)."""
    sizes = np.full(num_chunks, total // num_chunks, dtype=np.int64)
    sizes[: total % num_chunks] += 1
    return sizes


def partition_trainers(part_id: int, world_size: int, num_parts: int) -> list[int]:
    """Ranks whose home is partition ``part_id``.

    With ``world_size >= num_parts`` these are the consecutive ranks ``r`` with
    ``r * num_parts // world_size == part_id`` (every partition gets at least one); with fewer trainers
    than partitions, the single rank ``part_id % world_size``.

    Raises:
        ValueError: for a non-positive ``world_size`` / ``num_parts`` or an out-of-range ``part_id``.
    """
    _check_positive("world_size", world_size)
    _check_positive("num_parts", num_parts)
    if not 0 <= part_id < num_parts:
        raise ValueError(f"part_id {part_id} is out of range for {num_parts} partitions")
    if world_size < num_parts:
        return [part_id % world_size]
    first = -(-part_id * world_size // num_parts)
    end = -(-(part_id + 1) * world_size // num_parts)
    return list(range(first, end))


def rank_partitions(rank: int, world_size: int, num_parts: int) -> list[int]:
    """Home partitions of ``rank`` (the inverse of :func:`partition_trainers`).

    Raises:
        ValueError: for a rank outside ``[0, world_size)``.
    """
    _check_rank(rank, world_size)
    _check_positive("num_parts", num_parts)
    if world_size < num_parts:
        return list(range(rank, num_parts, world_size))
    return [rank * num_parts // world_size]


def split_ids(
    ids: np.ndarray,
    bounds: np.ndarray,
    rank: int,
    world_size: int,
    force_even: bool = True,
) -> np.ndarray:
    """The IDs of ``ids`` that ``rank`` takes (see the module docstring for the rules).

    Args:
        ids: 1-D int64 global IDs; duplicates are dropped.
        bounds: ``num_parts + 1`` range boundaries (partition ``k`` owns ``[bounds[k], bounds[k+1])``).
        rank: this trainer's rank.
        world_size: number of trainers.
        force_even: give every rank the same count, plus or minus one.

    Returns:
        Sorted int64 IDs for ``rank``.

    Raises:
        ValueError: for a bad ``rank`` / ``world_size``.
        IndexError: for an ID outside ``[0, bounds[-1])``.
    """
    _check_rank(rank, world_size)
    bounds = np.asarray(bounds, dtype=np.int64)
    unique_ids, owner = assign_owners(ids, bounds, world_size, force_even)
    return unique_ids[owner == rank]


def split_by_trainer_ids(
    ids: np.ndarray, bounds: np.ndarray, rank: int, world_size: int, trainer_ids: np.ndarray
) -> np.ndarray:
    """DGL's split of a partition's share among its trainers by the nodes' trainer IDs.

    The partitions first take even shares of ``ids``, locality first (``force_even``). A partition's
    ``world_size // num_parts`` trainers then split its share: the IDs whose trainer ID names this
    partition, ordered by their local trainer (``trainer_id % per_part``), are cut into even runs,
    and so are the share's other IDs; the rank takes its run of each. With trainer IDs for more
    trainers than run now (a multiple of ``world_size``), consecutive trainer IDs are merged first.

    Args:
        ids: 1-D int64 global IDs; duplicates are dropped.
        bounds: ``num_parts + 1`` range boundaries.
        rank: this trainer's rank.
        world_size: number of trainers: at most the number of partitions (the trainer IDs are then
            not needed) or a multiple of it.
        trainer_ids: the trainer ID of every ID in ``[0, bounds[-1])`` (``part_id * N + local``).

    Returns:
        Sorted int64 IDs for ``rank``.

    Raises:
        ValueError: a bad rank, ``world_size`` not a multiple of the partitions, trainer IDs of the
            wrong length or for a trainer count that is not a multiple of ``world_size``.
    """
    _check_rank(rank, world_size)
    bounds = np.asarray(bounds, dtype=np.int64)
    num_parts = len(bounds) - 1
    if world_size <= num_parts:  # no partition has several trainers: the trainer IDs change nothing
        return split_ids(ids, bounds, rank, world_size, force_even=True)
    if world_size % num_parts:
        raise ValueError(
            f"splitting by trainer IDs needs a world_size that is a multiple of the {num_parts} partitions, "
            f"got {world_size}"
        )
    trainer_ids = np.asarray(trainer_ids, dtype=np.int64).reshape(-1)
    if trainer_ids.size != int(bounds[-1]):
        raise ValueError(f"trainer IDs have {trainer_ids.size} entries but there are {int(bounds[-1])} IDs")
    per_part = world_size // num_parts
    unique_ids, part_owner = assign_owners(ids, bounds, num_parts, force_even=True)
    part_id = rank // per_part
    share = unique_ids[part_owner == part_id]
    if per_part == 1:
        return share
    trainers = trainer_ids[share]
    num_trainers = int(trainer_ids.max()) + 1 if trainer_ids.size else 0
    if num_trainers > world_size:
        if num_trainers % world_size:
            raise ValueError(
                f"trainer IDs name {num_trainers} trainers, not a multiple of world_size {world_size}"
            )
        trainers = trainers // (num_trainers // world_size)
    own = trainers // per_part == part_id
    local = share[own][np.argsort(trainers[own] % per_part, kind="stable")]
    other = share[~own]
    slot = rank % per_part
    picked = []
    for group in (local, other):
        ends = np.concatenate(([0], np.cumsum(even_sizes(group.size, per_part))))
        picked.append(group[ends[slot] : ends[slot + 1]])
    return np.sort(np.concatenate(picked))


def assign_owners(
    ids: np.ndarray, bounds: np.ndarray, world_size: int, force_even: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """The distinct IDs of ``ids`` (sorted) and the rank that takes each of them.

    Raises:
        ValueError: for a non-positive ``world_size``.
        IndexError: for an ID outside ``[0, bounds[-1])``.
    """
    _check_positive("world_size", world_size)
    bounds = np.asarray(bounds, dtype=np.int64)
    num_parts = len(bounds) - 1
    ids = np.unique(np.asarray(ids, dtype=np.int64))
    parts = partition_of(ids, bounds)
    counts = np.bincount(parts, minlength=num_parts)
    # ids are sorted and partitions own ascending ranges, so each partition's IDs are contiguous here.
    starts = np.concatenate(([0], np.cumsum(counts)))
    owner = np.full(ids.size, -1, dtype=np.int64)
    if not force_even:
        for part_id in range(num_parts):
            ranks = np.asarray(partition_trainers(part_id, world_size, num_parts), dtype=np.int64)
            sizes = even_sizes(int(counts[part_id]), ranks.size)
            owner[starts[part_id] : starts[part_id + 1]] = np.repeat(ranks, sizes)
        return ids, owner
    quotas = even_sizes(ids.size, world_size)
    taken = np.zeros(world_size, dtype=np.int64)
    for part_id in range(num_parts):
        cursor, end = int(starts[part_id]), int(starts[part_id + 1])
        for rank in partition_trainers(part_id, world_size, num_parts):
            take = min(int(quotas[rank] - taken[rank]), end - cursor)
            owner[cursor : cursor + take] = rank
            cursor += take
            taken[rank] += take
    leftovers = np.flatnonzero(owner < 0)
    owner[leftovers] = np.repeat(np.arange(world_size, dtype=np.int64), quotas - taken)
    return ids, owner


def _check_positive(name: str, value: int) -> None:
    if int(value) < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")


def _check_rank(rank: int, world_size: int) -> None:
    _check_positive("world_size", world_size)
    if not 0 <= int(rank) < int(world_size):
        raise ValueError(f"rank {rank} is out of range for world_size {world_size}")
