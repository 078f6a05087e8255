"""RowBufferPool: a buffer is reused only once nothing references it, so kept batches stay intact."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from graphstore.client.buffers import RowBufferPool


def test_reuses_a_buffer_only_after_its_last_reference_is_gone():
    pool = RowBufferPool(max_buffers=2, min_bytes=0)
    first = pool.empty(100, (4,), np.float32)
    assert first.shape == (100, 4) and first.dtype == np.float32 and first.flags.c_contiguous
    held = torch.from_numpy(first)[10:20]  # a torch view of a slice keeps the buffer alive
    del first
    second = pool.empty(90, (4,), np.float32)
    assert (pool.allocated, pool.reused) == (2, 0)
    del held
    third = pool.empty(100, (4,), np.float32)
    assert (pool.allocated, pool.reused) == (2, 1)
    del second, third
    assert pool.empty(80, (2, 2), np.float16).shape == (80, 2, 2)  # other shapes and dtypes fit too
    assert pool.reused == 2


def test_values_of_a_kept_batch_survive_later_requests():
    pool = RowBufferPool(max_buffers=2, min_bytes=0)
    kept = []
    for value in range(6):
        rows = pool.empty(50, (3,), np.int64)
        rows[:] = value
        kept.append(torch.from_numpy(rows) if value % 2 else rows)
    for value, rows in enumerate(kept):
        assert (np.asarray(rows) == value).all()


def test_small_requests_and_a_full_pool_get_fresh_arrays():
    pool = RowBufferPool(max_buffers=1, min_bytes=1 << 20)
    pool.empty(10, (4,), np.float32)
    assert pool.allocated == 0  # below min_bytes: an ordinary array
    big = [pool.empty(1 << 16, (8,), np.float32) for _ in range(3)]  # 2 MB each, all held
    assert pool.allocated == 3 and len(pool._buffers) == 1
    del big
    pool.empty(1 << 16, (8,), np.float32)
    assert pool.reused == 1


def test_concurrent_requests_never_share_a_buffer():
    pool = RowBufferPool(max_buffers=3, min_bytes=0)
    errors: list[BaseException] = []

    def worker(tag: int) -> None:
        try:
            for _ in range(200):
                rows = pool.empty(64, (16,), np.int32)
                rows[:] = tag
                assert (rows == tag).all()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert pool.reused > 0


@pytest.mark.parametrize("kwargs", [{"max_buffers": -1}, {"min_bytes": -1}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        RowBufferPool(**kwargs)
