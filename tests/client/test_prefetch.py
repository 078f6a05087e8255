"""PrefetchIterator: order, where each batch is produced, errors and shutdown."""

from __future__ import annotations

import threading

import pytest

from graphstore.client.dataloader.prefetch import LOADER_THREAD_PREFIX, PrefetchIterator


def _loader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(LOADER_THREAD_PREFIX)]


def test_first_batch_is_produced_by_the_caller_and_the_rest_by_the_loader_threads():
    where = {}

    def produce(item):
        where[item] = threading.current_thread().name
        return item * 10

    with PrefetchIterator(produce, list(range(6)), prefetch=2) as iterator:
        assert list(iterator) == [0, 10, 20, 30, 40, 50]
    assert where[0] == threading.current_thread().name
    assert all(where[item].startswith(LOADER_THREAD_PREFIX) for item in range(1, 6))
    assert not _loader_threads()


def test_a_failing_first_batch_raises_from_next_and_stops_the_threads():
    def produce(item):
        if item == 0:
            raise ValueError("batch 0")
        return item

    iterator = PrefetchIterator(produce, [0, 1, 2], prefetch=2)
    with pytest.raises(ValueError, match="batch 0"):
        next(iterator)
    assert not _loader_threads()
    with pytest.raises(StopIteration):
        next(iterator)


@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_every_item_once_in_order_whatever_the_depth(prefetch):
    for items in ([], [7], [1, 2], list(range(9))):
        assert list(PrefetchIterator(lambda item: -item, items, prefetch=prefetch)) == [-i for i in items]
    assert not _loader_threads()
