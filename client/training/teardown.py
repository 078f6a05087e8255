"""The end of a trainer: stop its loader, wait for every trainer, leave the servers and the group."""

from __future__ import annotations

import torch.distributed as dist

from graphstore.client import DistNodeDataLoader, exit_client


def finish_training(loader: DistNodeDataLoader, distributed: bool) -> None:
    """Stop the loader, wait for every rank, leave the servers and the process group.

    Args:
        loader: the training loader (its background threads stop).
        distributed: whether a process group exists (then every rank must call this).
    """
    loader.close()
    if distributed:
        dist.barrier()
    exit_client()
    if distributed:
        dist.destroy_process_group()
