"""Pure, vectorized helpers on the client's hot path: index normalization, routing IDs to their
owning partitions, de-duplicating writes and reassembling per-partition answers in request order.

Every function here works on whole arrays (numpy), never loops per ID, and has no side effects,
so it is tested directly (``tests/client/test_routing.py``).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np

from graphstore.errors import IdTypeError
from graphstore.ids import check_id_range, to_numpy
from graphstore.protos.tensor_wire import writable_rows

_INT_KINDS = ("i", "u")
# Up to this many partitions, routing uses one boolean pass per partition instead of a sort.
_MASK_ROUTING_MAX_PARTS = 8


def normalize_index(index, num_rows: int, *, what: str = "index") -> np.ndarray:
    """Turn any supported row index into a 1-D int64 numpy array of row IDs, checked against ``num_rows``.

    Supported: a Python / numpy integer (one row: DGL returns ``[1, ...]`` for it), a slice (over
    ``num_rows``), a list / tuple / range of integers, numpy arrays and torch tensors of integers, and
    boolean masks (list, numpy or torch) of length ``num_rows``.

    Args:
        index: the index to normalize.
        num_rows: the size of the indexed dimension.
        what: how to call the index in error messages.

    Returns:
        A 1-D int64 array (a copy only where a conversion is needed).

    Raises:
        TypeError: a float / complex / string / object index or an unsupported type.
        ValueError: an index with more than one dimension.
        IndexError: an ID below 0 or at least ``num_rows``, or a mask of the wrong length.
    """
    if isinstance(index, (bool, np.bool_)):
        raise TypeError(f"{what} must be integers, a slice or a boolean mask, got the scalar {index!r}")
    if isinstance(index, numbers.Integral):
        ids = np.array([int(index)], dtype=np.int64)
    elif isinstance(index, slice):
        ids = np.arange(*index.indices(num_rows), dtype=np.int64)
        return ids
    elif isinstance(index, (float, complex, str, bytes)):
        raise TypeError(f"{what} must be integers, a slice or a boolean mask, got {index!r}")
    else:
        if not isinstance(index, (np.ndarray, list, tuple, range)) and not hasattr(index, "__array__"):
            raise TypeError(
                f"unsupported index type {type(index).__name__}; use an int, a slice, a list, a numpy "
                "array, a torch tensor of integers, or a boolean mask"
            )
        try:
            arr = to_numpy(index)
        except IdTypeError:
            raise TypeError(f"{what} must hold integers or booleans, got {index.dtype}") from None
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.ndim != 1:
            raise ValueError(f"{what} must be one-dimensional, got shape {tuple(arr.shape)}")
        kind = arr.dtype.kind
        if kind == "b":
            if arr.shape[0] != num_rows:
                raise IndexError(
                    f"boolean mask {what} has length {arr.shape[0]} but the tensor has {num_rows} rows"
                )
            return np.flatnonzero(arr).astype(np.int64, copy=False)
        if kind not in _INT_KINDS:
            if arr.size == 0:
                return np.empty(0, dtype=np.int64)
            raise TypeError(f"{what} must hold integers or booleans, got dtype {arr.dtype}")
        ids = arr.astype(np.int64, copy=False)
    check_id_range(ids, num_rows, what)
    return ids


def partition_of(ids: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Owning partition of each ID under range bounds (partition k owns ``[bounds[k], bounds[k+1])``).

    Raises:
        IndexError: if an ID lies outside ``[bounds[0], bounds[-1])``.
    """
    bounds = np.asarray(bounds, dtype=np.int64)
    check_id_range(ids, int(bounds[-1]), "IDs")
    return np.searchsorted(bounds, ids, side="right") - 1


def split_by_partition(
    ids: np.ndarray, bounds: Sequence[int] | np.ndarray
) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Group ``ids`` by owning partition, keeping each group's request order.

    Args:
        ids: 1-D int64 global IDs (duplicates allowed).
        bounds: ``num_parts + 1`` range boundaries of the partition book.

    Returns:
        For each partition owning at least one ID, in partition order: ``(part_id, positions, part_ids)``
        where ``positions`` are indices into ``ids`` and ``part_ids == ids[positions]``.

    Raises:
        IndexError: if an ID is outside the graph's range.
    """
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0:
        return []
    bounds = np.asarray(bounds, dtype=np.int64)
    # The smallest and largest ID settle the range check and, when they share a partition, the whole
    # routing: no per-ID search for the common single-partition read (a co-located one).
    lowest, highest = int(ids.min()), int(ids.max())
    if lowest < 0 or highest >= int(bounds[-1]):
        check_id_range(ids, int(bounds[-1]), "IDs")
    first, last = (int(p) for p in np.searchsorted(bounds, (lowest, highest), side="right") - 1)
    if first == last:
        return [(first, np.arange(ids.size, dtype=np.int64), ids)]
    parts = np.searchsorted(bounds, ids, side="right") - 1
    num_parts = len(bounds) - 1
    groups = []
    if num_parts <= _MASK_ROUTING_MAX_PARTS:
        # A few passes of a comparison are cheaper than a stable sort for the usual 2-8 partitions.
        for part_id in range(num_parts):
            positions = np.flatnonzero(parts == part_id)
            if positions.size:
                groups.append((part_id, positions, ids[positions]))
        return groups
    order = np.argsort(parts, kind="stable")
    counts = np.bincount(parts, minlength=num_parts)
    ends = np.cumsum(counts)
    for part_id in np.flatnonzero(counts):
        positions = order[ends[part_id] - counts[part_id] : ends[part_id]]
        groups.append((int(part_id), positions, ids[positions]))
    return groups


def last_occurrence(ids: np.ndarray) -> np.ndarray | None:
    """Positions of the last occurrence of each distinct ID, or None when ``ids`` has no duplicates.

    A write with duplicate IDs keeps the last row given for each ID (what ``array[ids] = rows`` does in
    numpy); de-duplicating on the client makes that well defined whatever order the server applies rows in.
    """
    if ids.size < 2:
        return None
    diffs = np.diff(ids)
    if bool(np.all(diffs > 0)):
        return None
    reversed_ids = ids[::-1]
    _, first_in_reversed = np.unique(reversed_ids, return_index=True)
    if first_in_reversed.size == ids.size:
        return None
    return np.sort(ids.size - 1 - first_in_reversed)


def scatter_rows(out: np.ndarray, positions: np.ndarray, rows: np.ndarray) -> None:
    """``out[positions] = rows`` along the first axis, for rows of any shape.

    Multi-element rows are moved as single opaque items (a ``void`` view of each row): numpy's fancy
    assignment of a 400-byte row then costs one copy instead of a strided transfer per row, which
    took the scatter of 5,000 random 100-d float32 rows from 0.43 to 0.28 ms.
    """
    rows = np.asarray(rows)
    row_size = int(np.prod(out.shape[1:], dtype=np.int64))
    if (
        row_size > 1
        and out.flags.c_contiguous
        and rows.flags.c_contiguous
        and rows.dtype == out.dtype
        and rows.size == positions.size * row_size
    ):
        as_items = np.dtype((np.void, row_size * out.dtype.itemsize))
        targets = out.reshape(out.shape[0], row_size).view(as_items).reshape(-1)
        targets[positions] = rows.reshape(positions.size, row_size).view(as_items).reshape(-1)
        return
    out[positions] = rows.reshape((positions.size, *out.shape[1:]))


def assemble(
    num_ids: int,
    row_shape: tuple[int, ...],
    dtype: np.dtype,
    pieces: list[tuple[np.ndarray, np.ndarray]],
) -> np.ndarray:
    """Put per-partition answers back in request order.

    Args:
        num_ids: length of the original request.
        row_shape: shape of one row.
        dtype: storage dtype of the rows.
        pieces: ``(positions, rows)`` per partition, as routed by :func:`split_by_partition`.

    Returns:
        A writable array ``[num_ids, *row_shape]`` with ``out[positions] = rows`` for every piece.
    """
    if len(pieces) == 1 and pieces[0][0].size == num_ids:
        positions, rows = pieces[0]
        if num_ids == 0 or (positions[0] == 0 and bool(np.all(np.diff(positions) == 1))):
            return whole_answer(rows, num_ids, row_shape)
    out = np.empty((num_ids, *row_shape), dtype=dtype)
    for positions, rows in pieces:
        scatter_rows(out, positions, rows)
    return out


def whole_answer(rows: np.ndarray, num_ids: int, row_shape: tuple[int, ...]) -> np.ndarray:
    """One partition's answer to a whole request, already in request order, as the result: shaped
    ``[num_ids, *row_shape]`` and writable (a read-only view of received bytes takes over their memory,
    :func:`~graphstore.protos.pull_wire.writable_rows`; anything else read-only is copied)."""
    return writable_rows(np.asarray(rows).reshape((num_ids, *row_shape)))


def split_runs(positions: np.ndarray, min_length: int) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Split ``positions`` (ascending) into long runs of consecutive values and the scattered rest.

    Returns:
        ``(runs, rest)``: ``[start, stop)`` index spans of ``positions`` holding at least ``min_length``
        consecutive values, and the (sorted) indices of ``positions`` outside them.

    >>> split_runs(np.array([0, 1, 2, 3, 9, 20, 21, 22]), 3)
    ([(0, 4), (5, 8)], array([4]))
    """
    if positions.size == 0:
        return [], np.empty(0, dtype=np.int64)
    breaks = np.flatnonzero(np.diff(positions) != 1) + 1
    starts = np.concatenate(([0], breaks))
    stops = np.concatenate((breaks, [positions.size]))
    lengths = stops - starts
    long = lengths >= min_length
    runs = list(zip(starts[long].tolist(), stops[long].tolist(), strict=True))
    rest = np.flatnonzero(~np.repeat(long, lengths))
    return runs, rest
