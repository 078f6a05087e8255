"""Stable sorting of large ID arrays by a bounded integer key, and the narrowest dtype for IDs.

:func:`stable_key_order` is the one sort the partitioner's relabeling is built on: each key is packed
with its position into one int64 (``key << bits | position``), the packed array is sorted in place
(numpy's fastest sort, several times faster than a stable argsort), and keys and positions are unpacked
with a shift and a mask. Keys are produced and unpacked a chunk at a time, so besides the packed array
(8 bytes per item) only the two outputs, in the narrowest dtypes that hold them, are allocated.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graphstore.partition.memory import stream

CHUNK = 1 << 23  # items per chunk: a few 64 MB temporaries at a time


def id_dtype(count: int) -> np.dtype:
    """The narrowest of int32 / int64 that holds IDs ``0 .. count - 1`` (and ``count`` itself)."""
    return np.dtype(np.int32 if count < np.iinfo(np.int32).max else np.int64)


def stable_key_order(
    count: int,
    key_bound: int,
    key_of: Callable[[int, int], np.ndarray],
    chunk: int = CHUNK,
) -> tuple[np.ndarray, np.ndarray]:
    """Sort ``count`` items by key, ties by position: the sorted keys and the positions in that order.

    Args:
        count: number of items.
        key_bound: an exclusive upper bound of every key (keys are non-negative).
        key_of: ``key_of(start, end)`` returns the int keys of items ``start .. end - 1``.
        chunk: items per call of ``key_of``.

    Returns:
        ``(sorted_keys, order)``: ``sorted_keys`` in :func:`id_dtype` of ``key_bound``, ``order`` (the
        items' positions, a stable argsort) in :func:`id_dtype` of ``count``.
    """
    key_dtype, order_dtype = id_dtype(key_bound), id_dtype(count)
    bits = max(int(count - 1).bit_length(), 1)
    if max(int(key_bound - 1).bit_length(), 1) + bits > 63:  # does not pack: a plain stable argsort
        keys = np.concatenate([np.asarray(key_of(s, min(count, s + chunk))) for s in range(0, count, chunk)])
        order = np.argsort(keys, kind="stable")
        return keys[order].astype(key_dtype), order.astype(order_dtype)
    packed = np.empty(count, dtype=np.int64)
    for start in range(0, count, chunk):
        end = min(count, start + chunk)
        piece = packed[start:end]
        piece[:] = key_of(start, end)
        piece <<= np.int64(bits)
        piece |= np.arange(start, end, dtype=np.int64)
    packed.sort()
    sorted_keys = np.empty(count, dtype=key_dtype)
    order = np.empty(count, dtype=order_dtype)
    mask = np.int64((1 << bits) - 1)
    for start in range(0, count, chunk):
        piece = packed[start : start + chunk]
        np.bitwise_and(piece, mask, out=order[start : start + chunk], casting="unsafe")
        np.right_shift(piece, np.int64(bits), out=sorted_keys[start : start + chunk], casting="unsafe")
    return sorted_keys, order


def gather(
    table: np.ndarray, index: np.ndarray, chunk: int = CHUNK, dtype: np.dtype | None = None
) -> np.ndarray:
    """``table[index]`` computed a chunk of ``index`` at a time into one array of ``dtype``.

    A memory-mapped ``index`` is streamed (its pages released chunk by chunk), and no index-sized
    temporary of another dtype is made.
    """
    out = np.empty(index.shape[0], dtype=table.dtype if dtype is None else dtype)
    for start, piece in stream(chunk, index):
        out[start : start + piece.shape[0]] = table[piece]
    return out
