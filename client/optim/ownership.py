"""Which trainer owns which embedding rows: the trainer that merges their gradients and pushes them.

Ownership maps partitions onto trainers (:func:`trainer_assignment`) so that, when trainers are
started host by host, a row's owner runs beside the row's server; :func:`owner_of` applies the map
to a batch of ids.
"""

from __future__ import annotations

import numpy as np
import torch


def trainer_assignment(num_parts: int, world_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Which trainers own the rows of each partition.

    With at least as many trainers as partitions, trainer ``t`` serves partition ``t * P // T``: each
    partition gets a contiguous block of ranks (the ranks launched on its host when trainers are
    started host by host); its rows are split among them by id. With fewer trainers than partitions,
    partition ``p`` goes to trainer ``p mod T``.

    Args:
        num_parts: number of partitions ``P``.
        world_size: number of trainers ``T``.

    Returns:
        ``(first, count)``: int64 arrays of length ``P``; partition ``p``'s rows belong to trainers
        ``first[p] .. first[p] + count[p] - 1``.

    Raises:
        ValueError: if either count is < 1.
    """
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1, got {num_parts}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    parts = np.arange(num_parts, dtype=np.int64)
    if world_size >= num_parts:
        first = -((-parts * world_size) // num_parts)
        end = -((-(parts + 1) * world_size) // num_parts)
        return first, end - first
    return parts % world_size, np.ones(num_parts, dtype=np.int64)


def owner_of(
    ids: torch.Tensor, bounds: torch.Tensor, first: torch.Tensor, count: torch.Tensor
) -> torch.Tensor:
    """The owning trainer of each id (see :func:`trainer_assignment`), vectorized, on ``ids``' device.

    Args:
        ids: int64 global ids, within ``[bounds[0], bounds[-1])``.
        bounds: int64 ``num_parts + 1`` partition boundaries.
        first, count: the output of :func:`trainer_assignment` as int64 tensors.

    Returns:
        int64 owner ranks, one per id.
    """
    part = torch.searchsorted(bounds, ids, right=True) - 1
    return first[part] + torch.remainder(ids - bounds[part], count[part])
