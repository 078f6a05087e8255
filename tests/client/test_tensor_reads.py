"""Where a multi-partition read's per-partition reads run: schedule_reads (pure) and read_into."""

from __future__ import annotations

import numpy as np

from graphstore.client.tensor_reads import InProcessReader, read_into, schedule_reads


class _Rows:
    """A partition whose row ``i`` is ``[i, i]`` (float32), read in-process or "remotely"."""

    def pull(self, name, ids):
        return np.repeat(ids.astype(np.float32)[:, None], 2, axis=1)

    def pull_into(self, name, ids, out):
        out[:] = self.pull(name, ids)
        return out


def _target(reader, rows: int, start: int = 0):
    ids = np.arange(start, start + rows, dtype=np.int64)
    return (reader, np.arange(rows, dtype=np.int64), ids)


def test_small_in_process_reads_run_first_and_a_remote_read_leads_the_rest():
    remote_a, remote_b = object(), object()
    small = _target(InProcessReader(_Rows()), 10)
    large = _target(InProcessReader(_Rows()), 1000)
    targets = [small, _target(remote_a, 10), large, _target(remote_b, 5)]
    first, concurrent = schedule_reads(targets, row_bytes=400, inline_bytes=10 * 400)
    assert first == [small]
    assert [t[0] for t in concurrent] == [remote_a, remote_b, large[0]]


def test_without_remote_reads_the_large_in_process_ones_run_concurrently():
    small, large = _target(InProcessReader(_Rows()), 4), _target(InProcessReader(_Rows()), 5)
    first, concurrent = schedule_reads([large, small], row_bytes=8, inline_bytes=32)
    assert first == [small] and concurrent == [large]
    assert schedule_reads([], row_bytes=8) == ([], [])


def test_read_into_places_rows_whatever_the_reader():
    positions = np.array([0, 2, 3, 4, 9], dtype=np.int64)
    part_ids = np.array([7, 1, 2, 3, 5], dtype=np.int64)
    for reader in (InProcessReader(_Rows()), _Rows()):
        out = np.full((10, 2), -1.0, dtype=np.float32)
        read_into(out, reader, "feat", positions, part_ids)
        np.testing.assert_array_equal(out[positions, 0], part_ids)
        assert (out[[1, 5, 6, 7, 8]] == -1).all()
