"""Batches produced in order by a small thread pool, a few ahead of the training loop.

Each batch is made by ``produce`` (in a worker thread) and handed over by ``deliver`` (in the thread
that iterates: e.g. making the training loop's CUDA stream wait for the batch's copies). An exception
raised while producing a batch is raised by ``next()`` for that batch, and leaving the loop early
(``break``, an exception, garbage collection of the iterator) cancels the batches not started and joins
the threads.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from graphstore.priority import lower_thread_priority

# Name prefix of the loader threads (they run at a lower priority than the training loop).
LOADER_THREAD_PREFIX = "graphstore-loader"


def _identity(batch):
    return batch


class PrefetchIterator:
    """Yields ``deliver(produce(item))`` for each item of ``items`` in order, ``produce`` running
    ``prefetch`` items ahead in worker threads and ``deliver`` in the iterating thread.

    ``prefetch=0`` produces each batch in the caller's thread when asked (no threads). The worker
    threads run ``background_nice`` lower than normal (see :mod:`graphstore.priority`). The first batch
    is produced by the caller's first ``next()`` itself, while the workers start on the next ones:
    the caller has nothing to overlap it with and would otherwise wait on a lower-priority thread
    (on a machine whose other processes keep the cores busy, much longer than the batch takes).
    ``deliver`` defaults to the identity.
    """

    def __init__(
        self,
        produce: Callable,
        items: Sequence,
        prefetch: int,
        num_workers: int = 1,
        background_nice: int = 0,
        deliver: Callable | None = None,
    ):
        self._produce = produce
        self._deliver = deliver if deliver is not None else _identity
        self._items = items
        self._prefetch = max(0, int(prefetch))
        self._next_submit = 0
        self._next_yield = 0
        self._pending: collections.deque[Future] = collections.deque()
        self._executor: ThreadPoolExecutor | None = None
        if self._prefetch > 0 and len(items) > 0:
            workers = max(1, min(int(num_workers), self._prefetch))
            self._executor = ThreadPoolExecutor(
                workers,
                thread_name_prefix=LOADER_THREAD_PREFIX,
                initializer=functools.partial(lower_thread_priority, background_nice),
            )
            self._next_submit = 1  # the first batch is the caller's (see the class docstring)
            self._fill()

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self):
        return self

    def _fill(self) -> None:
        while len(self._pending) < self._prefetch and self._next_submit < len(self._items):
            self._pending.append(self._executor.submit(self._produce, self._items[self._next_submit]))
            self._next_submit += 1

    def __next__(self):
        if self._executor is None:
            if self._next_yield >= len(self._items):
                raise StopIteration
            item = self._items[self._next_yield]
            self._next_yield += 1
            return self._deliver(self._produce(item))
        if self._next_yield == 0:
            self._next_yield = 1
            try:
                return self._deliver(self._produce(self._items[0]))
            except BaseException:
                self.close()
                raise
        if not self._pending:
            self.close()
            raise StopIteration
        future = self._pending.popleft()
        self._fill()
        try:
            result = future.result()
        except BaseException:
            self.close()
            raise
        self._next_yield += 1
        return self._deliver(result)

    def close(self) -> None:
        """Cancel the batches not started, wait for the running ones, end the threads. Idempotent."""
        executor, self._executor = self._executor, None
        self._next_yield = len(self._items)
        if executor is None:
            return
        for future in self._pending:
            future.cancel()
        self._pending.clear()
        executor.shutdown(wait=True, cancel_futures=True)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to clean
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
