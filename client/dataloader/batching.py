"""How many batches an epoch has and which items each holds, the same count on every trainer rank.

DDP hangs when one rank runs more steps than another, so the ranks agree on the largest batch count
(:func:`agree_on_batch_count`), and a rank with fewer batches adds full batches taken by wrapping
around its own (shuffled) items (:func:`batch_plan`).
"""

from __future__ import annotations

import numpy as np
import torch

from graphstore.client.device import group_device


def num_batches(num_items: int, batch_size: int, drop_last: bool) -> int:
    """How many batches ``num_items`` items make."""
    return num_items // batch_size if drop_last else -(-num_items // batch_size)


def batch_plan(
    num_items: int,
    batch_size: int,
    num_batches_total: int,
    drop_last: bool,
    order: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Positions of the items in each batch of one epoch.

    The first ``num_batches(num_items, batch_size, drop_last)`` batches cover ``order`` once (the
    last one may be short unless ``drop_last``); batches past those (to reach ``num_batches_total``)
    are full batches continuing around ``order`` cyclically, without repeating an item inside a batch.

    Args:
        num_items: number of items of this rank.
        batch_size: items per batch.
        num_batches_total: batches to produce (at least this rank's own count).
        drop_last: drop the last short batch of the rank's own items.
        order: the epoch's item order (a permutation of ``range(num_items)``); identity when None.

    Returns:
        One int64 position array per batch.

    Raises:
        ValueError: padding batches requested while the rank has no items.
    """
    if order is None:
        order = np.arange(num_items, dtype=np.int64)
    own = num_batches(num_items, batch_size, drop_last)
    plan = [order[start : start + batch_size] for start in range(0, own * batch_size, batch_size)]
    if num_batches_total > own:
        if num_items == 0:
            raise ValueError(
                f"this rank has no items but other ranks have {num_batches_total} batches; give every "
                "rank at least one item (node_split / edge_split do)"
            )
        width = min(batch_size, num_items)
        for index in range(own, num_batches_total):
            positions = (index * batch_size + np.arange(width)) % num_items
            plan.append(order[positions])
    return plan


def agree_on_batch_count(own_batches: int, num_items: int) -> tuple[int, int]:
    """The largest batch count and the smallest item count over the ranks of the default
    ``torch.distributed`` group (a collective call: every rank must make it), or
    ``(own_batches, num_items)`` when no group is initialized."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return own_batches, num_items
    counts = torch.tensor([own_batches, -num_items], dtype=torch.int64, device=group_device())
    dist.all_reduce(counts, op=dist.ReduceOp.MAX)
    return int(counts[0]), -int(counts[1])
