"""The few figures trainers agree on: this trainer's rank, and sums and maxima over the trainer group.

Every function is the identity of a single trainer when no ``torch.distributed`` group exists
(standalone runs), so a script calls them the same way in both modes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from graphstore.client import device as devices


def rank_and_world() -> tuple[int, int]:
    """This trainer's rank and the number of trainers (``(0, 1)`` without a process group)."""
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def all_reduce_sum(values: list[float], device: torch.device) -> list[float]:
    """Sum a few numbers over the trainer group, in float64.

    Args:
        values: this trainer's numbers (every trainer passes as many).
        device: where the group's backend reduces (a CUDA device under NCCL).

    Returns:
        The sums, in order.
    """
    if dist.is_initialized():
        device = devices.collective_device(dist.get_backend(), device)
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    if dist.is_initialized():
        dist.all_reduce(tensor)
    return tensor.tolist()


def all_reduce_max(value: float, device: torch.device) -> float:
    """The largest of every trainer's ``value`` (e.g. the slowest trainer's epoch time).

    Args:
        value: this trainer's number.
        device: where the group's backend reduces.

    Returns:
        The maximum over the group.
    """
    if dist.is_initialized():
        device = devices.collective_device(dist.get_backend(), device)
    tensor = torch.tensor([value], dtype=torch.float64, device=device)
    if dist.is_initialized():
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return float(tensor.item())
