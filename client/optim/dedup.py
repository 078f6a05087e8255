"""Merging the gradients of equal ids: sums with occurrence counts, then their means.

The sparse optimizers' updates are non-linear, so every id is pushed once, with its gradient
averaged over all its occurrences in the step (the reference's de-duplication).
"""

from __future__ import annotations

import torch


def sum_duplicates(ids: torch.Tensor, grads: torch.Tensor, counts: torch.Tensor | None = None):
    """Sum the gradients (and counts) of equal ids.

    Args:
        ids: int64 ``[n]``.
        grads: float32 ``[n, dim]``.
        counts: float32 ``[n]`` occurrences behind each row, or None for one each.

    Returns:
        ``(unique_ids, grad_sums, counts)``: sorted unique ids, the summed gradients and the summed counts.
    """
    if counts is None:
        counts = torch.ones(ids.shape[0], dtype=torch.float32, device=ids.device)
    unique_ids, inverse = torch.unique(ids, sorted=True, return_inverse=True)
    if unique_ids.shape[0] == ids.shape[0]:
        order = torch.empty_like(inverse)
        order[inverse] = torch.arange(ids.shape[0], device=ids.device)
        return unique_ids, grads[order], counts[order]
    sums = torch.zeros((unique_ids.shape[0], grads.shape[1]), dtype=torch.float32, device=grads.device)
    sums.index_add_(0, inverse, grads)
    total = torch.zeros(unique_ids.shape[0], dtype=torch.float32, device=ids.device)
    total.index_add_(0, inverse, counts)
    return unique_ids, sums, total


def mean_by_id(ids: torch.Tensor, grads: torch.Tensor, counts: torch.Tensor | None = None):
    """Unique ids and their gradients averaged over all occurrences (the reference's de-duplication).

    Args:
        ids: int64 ``[n]``.
        grads: float32 ``[n, dim]`` gradient sums.
        counts: float32 ``[n]`` occurrences summed into each row, or None for one each.

    Returns:
        ``(unique_ids, mean_grads)``, ids sorted.
    """
    unique_ids, sums, total = sum_duplicates(ids, grads, counts)
    return unique_ids, sums / total.unsqueeze(1)
