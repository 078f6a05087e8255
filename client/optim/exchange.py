"""The all-to-all exchange of gradient rows between trainers (``torch.distributed``, gloo or NCCL).

A trainer packs each embedding's (id, gradient, count) rows into one float32 buffer grouped by
destination (:func:`pack_rows`), tells every peer how many rows it sends along with its own status
(:func:`exchange_sizes`), and moves the rows with one uneven ``all_to_all_single``
(:func:`exchange_rows`); the receiver unpacks them (:func:`unpack_rows`). After pushing, the trainers
agree that every push succeeded (:func:`agree_on_push`).

Every collective runs on the device its caller names (the group's device, never a thread's current
CUDA device).
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def pack_rows(ids: torch.Tensor, grads: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """One float32 ``[n, dim + 3]`` buffer: gradients, the id's 64 bits as two float32 words, the count.

    One buffer means one all_to_all per embedding; the id bits are copied, never computed on, so
    they survive the float32 view exactly.
    """
    n, dim = grads.shape
    packed = torch.empty((n, dim + 3), dtype=torch.float32, device=grads.device)
    packed[:, :dim] = grads
    packed[:, dim : dim + 2] = ids.to(torch.int64).clone().view(torch.float32).view(n, 2)
    packed[:, dim + 2] = counts
    return packed


def unpack_rows(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inverse of :func:`pack_rows`: ``(ids, grads, counts)``."""
    n, width = packed.shape
    dim = width - 3
    # A fresh buffer: a contiguous slice may start at an odd float offset, which int64 cannot view.
    id_words = torch.empty((n, 2), dtype=torch.float32, device=packed.device)
    id_words.copy_(packed[:, dim : dim + 2])
    ids = id_words.view(torch.int64).view(n)
    return ids, packed[:, :dim], packed[:, dim + 2]


def exchange_sizes(send_counts: torch.Tensor, status: int, group=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Tell every trainer how many rows it will receive from each peer, and every peer's status.

    Args:
        send_counts: int64 ``[world_size, num_embeddings]``: rows this trainer sends to each peer, per
            embedding, on the exchange device.
        status: this trainer's status (0 = ready).
        group: the process group (None: the default group).

    Returns:
        ``(recv_counts [world_size, num_embeddings], peer_status [world_size])``.
    """
    world_size, num_emb = send_counts.shape
    buf = torch.empty((world_size, num_emb + 1), dtype=torch.int64, device=send_counts.device)
    buf[:, :num_emb] = send_counts
    buf[:, num_emb] = status
    out = torch.empty_like(buf)
    dist.all_to_all_single(out.view(-1), buf.view(-1), group=group)
    return out[:, :num_emb], out[:, num_emb]


def exchange_rows(
    packed: torch.Tensor, send_counts: list[int], recv_counts: list[int], group=None
) -> torch.Tensor:
    """All-to-all of packed rows with uneven splits (``all_to_all_single``; works on gloo and NCCL).

    Args:
        packed: ``[sum(send_counts), width]`` rows grouped by destination rank.
        send_counts: rows for each rank.
        recv_counts: rows from each rank (from :func:`exchange_sizes`).
        group: the process group.

    Returns:
        ``[sum(recv_counts), width]`` rows grouped by source rank.
    """
    out = torch.empty((sum(recv_counts), packed.shape[1]), dtype=packed.dtype, device=packed.device)
    dist.all_to_all_single(
        out, packed, output_split_sizes=recv_counts, input_split_sizes=send_counts, group=group
    )
    return out


def agree_on_push(push_error: BaseException | None, device: torch.device, group=None) -> None:
    """Wait until every trainer pushed (so a row read after ``step()`` returns is up to date) and make
    every trainer raise when any push failed.

    Args:
        push_error: this trainer's push error, or None.
        device: where the group's collectives run.
        group: the process group (None: the default group).

    Raises:
        the trainer's own ``push_error``; RuntimeError naming the ranks whose push failed.
    """
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    failed = torch.zeros(world_size, dtype=torch.int32, device=device)
    if push_error is not None:
        failed[rank] = 1
    dist.all_reduce(failed, group=group)
    if push_error is not None:
        raise push_error
    ranks = torch.nonzero(failed).flatten().tolist()
    if ranks:
        raise RuntimeError(
            f"sparse optimizer step failed on rank(s) {ranks} while pushing to the servers (see their "
            "error); the rows those ranks own may not have been updated in this step"
        )
