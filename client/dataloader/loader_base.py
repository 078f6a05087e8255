"""What every loader shares: the items of this rank, shuffling per epoch, equal batch counts across
the trainer ranks, and the prefetching iterators of its epochs."""

from __future__ import annotations

import weakref

import numpy as np

from graphstore.client.context import current_context
from graphstore.client.dataloader.batching import agree_on_batch_count, batch_plan, num_batches
from graphstore.client.dataloader.prefetch import PrefetchIterator
from graphstore.priority import DEFAULT_BACKGROUND_NICE


class LoaderBase:
    """Shared machinery: the item array, shuffling, equal batch counts, prefetching iterators."""

    def __init__(
        self,
        num_items: int,
        batch_size: int,
        shuffle: bool,
        drop_last: bool,
        prefetch: int,
        num_workers: int,
        seed: int | None,
        equal_batches: bool,
    ):
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if int(prefetch) < 0:
            raise ValueError(f"prefetch must be >= 0, got {prefetch}")
        if int(num_workers) < 1:
            raise ValueError(f"num_workers must be at least 1, got {num_workers}")
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.prefetch = int(prefetch)
        self.num_workers = int(num_workers)
        self._seed = seed
        self._epoch = 0
        self._num_items = int(num_items)
        self.num_own_batches = num_batches(self._num_items, self.batch_size, self.drop_last)
        if equal_batches:
            most, fewest_items = agree_on_batch_count(self.num_own_batches, self._num_items)
            if most > 0 and fewest_items == 0:
                # A rank without items cannot pad its batches and every other rank would wait for it
                # in DDP: fail on every rank alike.
                raise ValueError(
                    f"a trainer rank has no items while another has {most} batches; give every rank at "
                    "least one item (node_split / edge_split do)"
                )
            self._num_batches = most
        else:
            self._num_batches = self.num_own_batches
        self._iterators: weakref.WeakSet[PrefetchIterator] = weakref.WeakSet()

    def __len__(self) -> int:
        return self._num_batches

    def _epoch_order(self) -> np.ndarray:
        if not self.shuffle:
            return np.arange(self._num_items, dtype=np.int64)
        seed = None if self._seed is None else (self._seed, self._epoch)
        return np.random.default_rng(seed).permutation(self._num_items)

    def _produce(self, positions: np.ndarray):
        raise NotImplementedError

    def _make_batch(self, positions: np.ndarray):
        """What the worker threads run for one batch (loaders that move batches wrap :meth:`_produce`)."""
        return self._produce(positions)

    def _deliver_batch(self, batch):
        """What the iterating thread does with a made batch before yielding it."""
        return batch

    def __iter__(self) -> PrefetchIterator:
        plan = batch_plan(
            self._num_items, self.batch_size, self._num_batches, self.drop_last, self._epoch_order()
        )
        self._epoch += 1
        ctx = current_context()
        nice = ctx.background_nice if ctx is not None else DEFAULT_BACKGROUND_NICE
        iterator = PrefetchIterator(
            self._make_batch, plan, self.prefetch, self.num_workers, nice, deliver=self._deliver_batch
        )
        self._iterators.add(iterator)
        return iterator

    def close(self) -> None:
        """Stop every iterator of this loader that is still running."""
        for iterator in list(self._iterators):
            iterator.close()
