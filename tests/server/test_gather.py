"""RowGatherer: split gathers equal np.take, under concurrency and with a busy pool."""

from __future__ import annotations

import numpy as np
import pytest

from graphstore.server.gather import RowGatherer, take_rows
from tests.utils.threads import run_in_threads


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.uint8, np.bool_])
def test_split_gather_equals_numpy(threads, dtype):
    rng = np.random.default_rng(threads)
    data = (rng.random((5_000, 7)) * 100).astype(dtype)
    ids = rng.integers(0, len(data), 3_001)  # duplicates, odd length
    gatherer = RowGatherer(threads=threads, min_split_bytes=0)
    try:
        out = np.empty((len(ids), 7), dtype=dtype)
        assert gatherer.take(data, ids, out) is out
        np.testing.assert_array_equal(out, data[ids])
    finally:
        gatherer.close()


def test_small_and_tiny_requests():
    data = np.arange(40, dtype=np.int32).reshape(10, 4)
    gatherer = RowGatherer(threads=4, min_split_bytes=0)
    try:
        for ids in (np.array([], dtype=np.int64), np.array([3]), np.array([9, 0])):
            out = np.empty((len(ids), 4), np.int32)
            np.testing.assert_array_equal(gatherer.take(data, ids, out), data[ids])
    finally:
        gatherer.close()


def test_concurrent_callers_get_their_own_rows():
    """Many threads gathering at once through one small pool (slices get taken back inline)."""
    rng = np.random.default_rng(0)
    data = rng.random((20_000, 16)).astype(np.float32)
    gatherer = RowGatherer(threads=2, min_split_bytes=0)

    def worker(seed: int) -> None:
        local_rng = np.random.default_rng(seed)
        for _ in range(30):
            ids = local_rng.integers(0, len(data), 4_000)
            out = np.empty((len(ids), 16), np.float32)
            gatherer.take(data, ids, out)
            np.testing.assert_array_equal(out, data[ids])

    try:
        run_in_threads(worker, [(seed,) for seed in range(8)])
    finally:
        gatherer.close()


def test_below_threshold_stays_on_the_caller_and_close_is_reusable():
    # Row i holds i in every column, and the IDs are shuffled with repeats: a gather that loses the
    # request order, drops a slice or repeats one cannot give the same rows.
    data = np.repeat(np.arange(100, dtype=np.float64)[:, None], 4, axis=1)
    ids = np.random.default_rng(7).permutation(np.concatenate([np.arange(50), [3, 97, 3]]))
    expected = data[ids]
    gatherer = RowGatherer(threads=2, min_split_bytes=1 << 20)
    out = np.empty((len(ids), 4))
    np.testing.assert_array_equal(gatherer.take(data, ids, out), expected)
    assert gatherer._pool is None  # nothing was handed off
    big = RowGatherer(threads=2, min_split_bytes=0)
    for _ in range(2):  # the pool starts again after close
        out = np.full((len(ids), 4), -1.0)
        np.testing.assert_array_equal(big.take(data, ids, out), expected)
        np.testing.assert_array_equal(out[:, 0], ids)
        big.close()


def test_take_rows_never_clips_checked_ids():
    data = np.arange(12).reshape(6, 2)
    out = np.empty((3, 2), data.dtype)
    np.testing.assert_array_equal(take_rows(data, np.array([5, 0, 5]), out), data[[5, 0, 5]])


@pytest.mark.parametrize("kwargs", [{"threads": 0}, {"min_split_bytes": -1}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        RowGatherer(**kwargs)
