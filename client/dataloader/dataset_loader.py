"""``DistDataLoader``: batches of a dataset of IDs through a user ``collate_fn`` (DGL's API)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from graphstore.client.dataloader.loader_base import LoaderBase


class DistDataLoader(LoaderBase):
    """Batches of a dataset through ``collate_fn``, produced in background threads.

    Args:
        dataset: a tensor / numpy array of IDs (or any indexable sequence).
        batch_size: items per batch.
        shuffle: reshuffle every epoch.
        collate_fn: turns a batch (same kind as ``dataset``: a tensor slice for a tensor) into what the
            loader yields; identity by default.
        drop_last: drop the last short batch.
        queue_size: DGL's name for ``prefetch`` (used when given).
        prefetch: batches produced ahead (0: produce in the caller's thread).
        num_workers: background threads.
        seed: shuffling seed (epoch ``e`` uses ``(seed, e)``).
        equal_batches: agree with the other trainer ranks on the batch count (a collective call
            at construction when ``torch.distributed`` is initialized).
    """

    def __init__(
        self,
        dataset,
        batch_size: int,
        shuffle: bool = False,
        collate_fn: Callable | None = None,
        drop_last: bool = False,
        queue_size: int | None = None,
        *,
        prefetch: int = 2,
        num_workers: int = 1,
        seed: int | None = None,
        equal_batches: bool = True,
    ):
        self.dataset = dataset
        self.collate_fn = collate_fn
        super().__init__(
            len(dataset),
            batch_size,
            shuffle,
            drop_last,
            queue_size if queue_size is not None else prefetch,
            num_workers,
            seed,
            equal_batches,
        )

    def _produce(self, positions: np.ndarray):
        if isinstance(self.dataset, torch.Tensor):
            batch = self.dataset[torch.from_numpy(positions)]
        elif isinstance(self.dataset, np.ndarray):
            batch = self.dataset[positions]
        else:
            batch = [self.dataset[int(p)] for p in positions]
        return self.collate_fn(batch) if self.collate_fn is not None else batch
