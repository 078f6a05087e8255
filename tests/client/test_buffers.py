"""RowBufferPool: a buffer is reused only once nothing references it, so kept batches stay intact."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphstore.client.buffers import RowBufferPool
from tests.utils.threads import run_in_threads


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

    def worker(tag: int) -> None:
        for _ in range(200):
            rows = pool.empty(64, (16,), np.int32)
            rows[:] = tag
            assert (rows == tag).all()

    run_in_threads(worker, [(tag,) for tag in range(6)])
    assert pool.reused > 0


@pytest.mark.parametrize("kwargs", [{"max_buffers": -1}, {"min_bytes": -1}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        RowBufferPool(**kwargs)
