"""Concurrent pulls of one tensor merged into fewer requests, each thread getting its own rows."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from graphstore.client.transport.pull_coalescer import (
    PullCoalescer,
    PullCoalescers,
    _Waiter,
    merge_offsets,
    take_batch,
)
from tests.utils.threads import run_in_threads


def rows_of(ids: np.ndarray) -> np.ndarray:
    """The fake tensor: row ``i`` is ``[i, -i]``."""
    return np.stack([ids, -ids], axis=1)


class GatedServer:
    """A ``send`` whose first request blocks until released; records every request's IDs."""

    def __init__(self, fail_below_zero: bool = False) -> None:
        self.requests: list[list[int]] = []
        self.release = threading.Event()
        self.first_started = threading.Event()
        self.fail_below_zero = fail_below_zero

    def send(self, ids: np.ndarray) -> np.ndarray:
        self.requests.append(ids.tolist())
        if len(self.requests) == 1:
            self.first_started.set()
            assert self.release.wait(30), "never released"
        if self.fail_below_zero and (ids < 0).any():
            raise ValueError(f"ID {int(ids[ids < 0][0])} is not owned here")
        return rows_of(ids)


def wait_until(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


def pull_while_first_is_in_flight(coalescer, server, later_ids, expected_queue):
    """Start a first pull that blocks in ``send``, then the later pulls (in order); release once they
    are all queued. Returns ``{ids tuple: rows or exception}`` of every pull."""
    results = {}

    def pull(ids):
        try:
            results[tuple(ids.tolist())] = coalescer.pull(ids)
        except Exception as exc:  # noqa: BLE001 - checked by the test
            results[tuple(ids.tolist())] = exc

    first = threading.Thread(target=pull, args=(np.array([100]),))
    first.start()
    assert server.first_started.wait(30)
    threads = []
    for index, ids in enumerate(later_ids):
        thread = threading.Thread(target=pull, args=(ids,))
        thread.start()
        threads.append(thread)
        wait_until(lambda n=index + 1: len(coalescer._queue) == n)  # keep the arrival order known
    assert len(coalescer._queue) == expected_queue
    server.release.set()
    for thread in [first, *threads]:
        thread.join(30)
        assert not thread.is_alive()
    return results


def test_a_lone_pull_goes_out_at_once_and_alone():
    server = GatedServer()
    server.release.set()
    coalescer = PullCoalescer(server.send, max_rows=100)
    for ids in ([1, 2], [3], [2, 2, 9]):
        np.testing.assert_array_equal(coalescer.pull(np.array(ids)), rows_of(np.array(ids)))
    assert server.requests == [[1, 2], [3], [2, 2, 9]]


def test_pulls_arriving_during_a_request_share_the_next_one():
    server = GatedServer()
    coalescer = PullCoalescer(server.send, max_rows=100)
    later = [np.array([5, 3]), np.array([7]), np.array([3, 3, 1])]
    results = pull_while_first_is_in_flight(coalescer, server, later, expected_queue=3)
    assert server.requests == [[100], [5, 3, 7, 3, 3, 1]]
    for ids in [np.array([100]), *later]:
        np.testing.assert_array_equal(results[tuple(ids.tolist())], rows_of(ids))
    assert not coalescer._busy and not coalescer._queue


def test_a_merged_request_holds_at_most_max_rows_ids():
    server = GatedServer()
    coalescer = PullCoalescer(server.send, max_rows=4)
    later = [np.array([1, 2]), np.array([3, 4]), np.array([5, 6, 7, 8, 9]), np.array([10])]
    results = pull_while_first_is_in_flight(coalescer, server, later, expected_queue=4)
    # arrival order is kept: a pull that does not fit waits, and so do those behind it
    assert server.requests == [[100], [1, 2, 3, 4], [5, 6, 7, 8, 9], [10]]
    for ids in later:
        np.testing.assert_array_equal(results[tuple(ids.tolist())], rows_of(ids))


def test_one_pulls_bad_ids_fail_that_pull_only():
    server = GatedServer(fail_below_zero=True)
    coalescer = PullCoalescer(server.send, max_rows=100)
    later = [np.array([4, 5]), np.array([-3]), np.array([6])]
    results = pull_while_first_is_in_flight(coalescer, server, later, expected_queue=3)
    assert server.requests[:2] == [[100], [4, 5, -3, 6]]  # merged, refused, then one by one
    assert isinstance(results[(-3,)], ValueError) and "-3" in str(results[(-3,)])
    np.testing.assert_array_equal(results[(4, 5)], rows_of(np.array([4, 5])))
    np.testing.assert_array_equal(results[(6,)], rows_of(np.array([6])))


def test_many_threads_each_get_their_own_rows():
    calls = []

    def send(ids):
        calls.append(ids.size)
        time.sleep(0.0005)  # a request takes a moment, so others arrive meanwhile
        return rows_of(ids)

    coalescers = PullCoalescers(
        lambda name, ids: send(ids) * (2 if name == "b" else 1),
        max_pull_bytes=16 * 20,
        max_request_bytes=16 * 64,
    )

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(50):
            ids = rng.integers(0, 1000, rng.integers(1, 20))
            name = "ab"[int(rng.integers(0, 2))]
            got = coalescers.pull(name, ids, row_bytes=16)
            np.testing.assert_array_equal(got, rows_of(ids) * (2 if name == "b" else 1))

    run_in_threads(worker, [(seed,) for seed in range(8)])
    assert sum(calls) > 0 and max(calls) <= 64


def test_large_pulls_are_never_merged():
    sent = []
    coalescers = PullCoalescers(lambda name, ids: sent.append(ids.size) or rows_of(ids), max_pull_bytes=100)
    coalescers._by_name["feat"] = None  # a large pull must not reach a coalescer
    np.testing.assert_array_equal(
        coalescers.pull("feat", np.arange(11), row_bytes=10), rows_of(np.arange(11))
    )
    assert sent == [11]


def test_batches_and_offsets():
    waiters = [_Waiter(np.arange(n)) for n in (3, 2, 4, 1)]
    batch, rest = take_batch(waiters, max_rows=5)
    assert batch == waiters[:2] and rest == waiters[2:]
    big = [_Waiter(np.arange(9)), _Waiter(np.arange(1))]
    assert take_batch(big, max_rows=5) == (big[:1], big[1:])  # at least one, even if too large
    assert merge_offsets([3, 0, 2]).tolist() == [0, 3, 3, 5]
    with pytest.raises(ValueError, match="max_rows"):
        PullCoalescer(lambda ids: ids, max_rows=0)
