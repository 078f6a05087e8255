"""The client's pure hot-path helpers: index normalization, routing, write de-duplication, reassembly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphstore.client.routing import (
    assemble,
    last_occurrence,
    normalize_index,
    partition_of,
    scatter_rows,
    split_by_partition,
    whole_answer,
)

NUM_ROWS = 50


@pytest.mark.parametrize(
    "index, expected",
    [
        (7, [7]),
        (np.int32(7), [7]),
        (slice(3, 9, 2), [3, 5, 7]),
        (slice(None, None, -20), [49, 29, 9]),
        (slice(45, None), [45, 46, 47, 48, 49]),
        ([4, 4, 0], [4, 4, 0]),
        ((1, 2), [1, 2]),
        (range(2, 5), [2, 3, 4]),
        ([], []),
        (np.array([3, 1], dtype=np.int32), [3, 1]),
        (np.array([3, 1], dtype=np.uint8), [3, 1]),
        (torch.tensor([9, 9, 2]), [9, 9, 2]),
        (torch.tensor([9, 2], dtype=torch.int32), [9, 2]),
        (torch.tensor(5), [5]),
        (torch.empty(0, dtype=torch.float32), []),
    ],
)
def test_normalize_index_forms(index, expected):
    ids = normalize_index(index, NUM_ROWS)
    assert ids.dtype == np.int64 and ids.ndim == 1
    assert ids.tolist() == expected


@pytest.mark.parametrize("make_mask", [np.asarray, torch.tensor, list])
def test_normalize_index_bool_masks(make_mask):
    mask = np.zeros(NUM_ROWS, dtype=bool)
    mask[[0, 13, 49]] = True
    ids = normalize_index(make_mask(mask.tolist() if make_mask is list else mask), NUM_ROWS)
    assert ids.tolist() == [0, 13, 49]


@pytest.mark.parametrize(
    "index, error, text",
    [
        (50, IndexError, "50"),
        (-1, IndexError, "-1"),
        ([1, 2, 77], IndexError, "77"),
        (torch.tensor([3, -4]), IndexError, "-4"),
        (np.zeros(49, dtype=bool), IndexError, "length 49"),
        (1.5, TypeError, "1.5"),
        ([0.5, 1.0], TypeError, "float64"),
        (torch.tensor([1.0]), TypeError, "torch.float32"),
        ("3", TypeError, "'3'"),
        (True, TypeError, "True"),
        (np.zeros((2, 2), dtype=np.int64), ValueError, "(2, 2)"),
        ({1, 2}, TypeError, "set"),
    ],
)
def test_normalize_index_rejects_bad_input(index, error, text):
    with pytest.raises(error, match=text.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        normalize_index(index, NUM_ROWS)


@st.composite
def bounds_and_ids(draw):
    num_parts = draw(st.integers(1, 5))
    sizes = draw(st.lists(st.integers(0, 20), min_size=num_parts, max_size=num_parts))
    bounds = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    total = int(bounds[-1])
    if total == 0:
        return bounds, np.empty(0, dtype=np.int64)
    ids = draw(st.lists(st.integers(0, total - 1), max_size=60))
    return bounds, np.asarray(ids, dtype=np.int64)


@settings(max_examples=200, deadline=None)
@given(bounds_and_ids())
def test_split_by_partition_matches_reference(case):
    bounds, ids = case
    groups = split_by_partition(ids, bounds)
    seen = np.zeros(ids.size, dtype=np.int64)
    previous_part = -1
    for part_id, positions, part_ids in groups:
        assert part_id > previous_part, "groups come in partition order"
        previous_part = part_id
        assert positions.size > 0
        assert np.all(np.diff(positions) > 0), "request order kept within a partition"
        np.testing.assert_array_equal(part_ids, ids[positions])
        assert np.all((bounds[part_id] <= part_ids) & (part_ids < bounds[part_id + 1]))
        seen[positions] += 1
    assert np.all(seen == 1), "every position routed exactly once"


def test_split_by_partition_out_of_range_names_the_id():
    with pytest.raises(IndexError, match="30"):
        split_by_partition(np.array([1, 30]), np.array([0, 10, 20]))
    with pytest.raises(IndexError, match="-1"):
        split_by_partition(np.array([3, -1, 4]), np.array([0, 10, 20]))
    with pytest.raises(IndexError, match="20"):
        split_by_partition(np.array([12, 20]), np.array([0, 10, 20]))  # the last partition's end
    with pytest.raises(IndexError, match="-2"):
        partition_of(np.array([-2]), np.array([0, 10]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 12), max_size=40))
def test_last_occurrence_keeps_the_last_row_of_each_id(values):
    ids = np.asarray(values, dtype=np.int64)
    keep = last_occurrence(ids)
    expected = {}
    for position, value in enumerate(values):
        expected[value] = position
    if keep is None:
        assert len(set(values)) == len(values)
    else:
        assert sorted(expected.values()) == keep.tolist()


@settings(max_examples=100, deadline=None)
@given(bounds_and_ids(), st.integers(1, 3))
def test_assemble_restores_request_order(case, width):
    bounds, ids = case
    table = np.arange(int(bounds[-1]) * width, dtype=np.float32).reshape(-1, width)
    pieces = [(positions, table[part_ids]) for _, positions, part_ids in split_by_partition(ids, bounds)]
    out = assemble(ids.size, (width,), table.dtype, pieces)
    assert out.flags.writeable
    np.testing.assert_array_equal(out, table[ids])


def test_assemble_permuted_single_piece():
    rows = np.array([[10.0], [20.0], [30.0]], dtype=np.float32)
    out = assemble(3, (1,), rows.dtype, [(np.array([0, 2, 1]), rows)])
    np.testing.assert_array_equal(out[:, 0], [10.0, 30.0, 20.0])


def test_whole_answer_is_writable_and_copies_only_read_only_rows():
    rows = np.arange(12, dtype=np.float32)
    kept = whole_answer(rows, 4, (3,))
    assert kept.shape == (4, 3) and np.shares_memory(kept, rows)
    received = np.frombuffer(rows.tobytes(), dtype=np.float32)  # read-only, as received bytes are
    answer = whole_answer(received, 4, (3,))
    assert answer.flags.writeable and not np.shares_memory(answer, received)
    np.testing.assert_array_equal(answer, rows.reshape(4, 3))


@pytest.mark.parametrize("min_length", [1, 2, 3, 64])
def test_split_runs_covers_every_position_once(min_length):
    from graphstore.client.routing import split_runs

    rng = np.random.default_rng(min_length)
    # Scattered seeds first, then long sorted stretches (a loader's input nodes), plus edge cases.
    cases = [
        np.array([0, 1, 2, 7, 8, 10], dtype=np.int64),
        np.array([5], dtype=np.int64),
        np.empty(0, dtype=np.int64),
        np.concatenate([np.sort(rng.choice(1000, 300, replace=False)), np.arange(1000, 1500)]),
        np.arange(100, 400),
    ]
    for positions in cases:
        runs, rest = split_runs(positions, min_length)
        for a, b in runs:
            assert b - a >= min_length
            assert np.array_equal(positions[a:b], np.arange(positions[a], positions[a] + b - a))
        covered = np.concatenate([np.arange(a, b) for a, b in runs] + [rest]).astype(np.int64)
        assert np.array_equal(np.sort(covered), np.arange(positions.size))
        assert np.all(np.diff(rest) > 0)
    runs, rest = split_runs(np.array([0, 1, 2, 3, 9, 20, 21, 22]), 3)
    assert runs == [(0, 4), (5, 8)] and rest.tolist() == [4]


@pytest.mark.parametrize(
    "row_shape, dtype",
    [
        ((100,), np.float32),
        ((3, 4), np.float16),
        ((2,), np.uint16),
        ((1,), np.int64),
        ((), np.int32),
        ((2, 0), np.float32),
    ],
)
def test_scatter_rows_equals_fancy_assignment(row_shape, dtype):
    rng = np.random.default_rng(len(row_shape))
    positions = rng.permutation(50)[:23]
    rows = (rng.random((23, *row_shape)) * 100).astype(dtype)
    expected = np.zeros((50, *row_shape), dtype)
    expected[positions] = rows
    for given_rows in (rows, rows.reshape(-1), np.asfortranarray(rows)):
        out = np.zeros((50, *row_shape), dtype)
        scatter_rows(out, positions, given_rows)
        np.testing.assert_array_equal(out, expected)
