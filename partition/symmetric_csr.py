"""The symmetric adjacency METIS partitions.

:func:`symmetrize` turns the directed edge list into the undirected simple graph (both directions, no
self loops, no duplicate edges) as CSR.

Memory: the edges are read a chunk at a time (a memory-mapped input stays out of the resident set),
each undirected pair is packed into one int64 key, and the keys are sorted and de-duplicated in place;
the CSR's neighbor IDs are int32 whenever the node IDs fit. At ``E`` input edges and ``U`` distinct
undirected pairs the peak is about ``8 E + 8 U`` bytes (the keys, then the int32 adjacency), plus a chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphstore.partition.key_sort import id_dtype
from graphstore.partition.memory import stream

CHUNK = 1 << 23  # entries per streamed chunk: a few 64 MB temporaries at a time


@dataclass(frozen=True)
class SymmetricCSR:
    """The symmetrized, de-duplicated, loop-free adjacency METIS partitions.

    Attributes:
        indptr: int64 [N + 1].
        indices: neighbor IDs, sorted within each row; int32 when the node count and the number of
            entries are below 2**31, else int64.
    """

    indptr: np.ndarray
    indices: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.indptr.shape[0] - 1)


def _pair_keys(src: np.ndarray, dst: np.ndarray, bits: int, chunk: int) -> np.ndarray:
    """The loop-free undirected pairs as int64 keys ``min << bits | max``, read a chunk at a time."""
    keys = np.empty(int(src.shape[0]), dtype=np.int64)
    filled = 0
    for _, s, d in stream(chunk, src, dst):
        lo = np.minimum(s, d).astype(np.int64, copy=False)
        hi = np.maximum(s, d).astype(np.int64, copy=False)
        keep = lo != hi
        if not keep.all():
            lo, hi = lo[keep], hi[keep]
        lo <<= np.int64(bits)
        lo |= hi
        keys[filled : filled + lo.shape[0]] = lo
        filled += lo.shape[0]
    return keys[:filled]


def _unique_sorted(keys: np.ndarray, chunk: int) -> np.ndarray:
    """Drop repeated values of a sorted array in place; returns the leading view that holds them."""
    written = 0
    previous = None
    for start in range(0, keys.shape[0], chunk):
        piece = keys[start : start + chunk]
        keep = np.empty(piece.shape[0], dtype=bool)
        keep[0] = previous is None or piece[0] != previous
        np.not_equal(piece[1:], piece[:-1], out=keep[1:])
        previous = piece[-1]
        kept = piece[keep]  # a copy: safe to write below ``start``
        keys[written : written + kept.shape[0]] = kept
        written += kept.shape[0]
    return keys[:written]


def symmetrize(src: np.ndarray, dst: np.ndarray, num_nodes: int, chunk: int = CHUNK) -> SymmetricCSR:
    """Build the undirected simple graph of ``src -> dst`` as CSR (both directions, no loops or duplicates).

    Args:
        src, dst: int arrays of length E with IDs in ``[0, num_nodes)`` (memory-mapped ones are streamed).
        num_nodes: N, below 2**31.
        chunk: entries per streamed chunk.

    Returns:
        The :class:`SymmetricCSR`; row ``r`` lists its neighbors in increasing order.

    Raises:
        ValueError: ``num_nodes`` of 2**31 or more.
    """
    if num_nodes >= 1 << 31:
        raise ValueError(f"symmetrize supports num_nodes < 2**31, got {num_nodes}")
    bits = max(int(num_nodes - 1).bit_length(), 1)
    mask = np.int64((1 << bits) - 1)
    keys = _pair_keys(src, dst, bits, chunk)
    keys.sort()
    keys = _unique_sorted(keys, chunk)  # the pairs lo < hi, sorted
    count_fwd = np.zeros(num_nodes, dtype=np.int64)  # per node: its larger neighbors
    count_rev = np.zeros(num_nodes, dtype=np.int64)  # per node: its smaller neighbors
    for start in range(0, keys.shape[0], chunk):
        piece = keys[start : start + chunk]
        count_fwd += np.bincount(piece >> np.int64(bits), minlength=num_nodes)
        count_rev += np.bincount(piece & mask, minlength=num_nodes)
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(count_fwd + count_rev, out=indptr[1:])
    first_fwd = np.zeros(num_nodes, dtype=np.int64)  # position in ``keys`` of each node's first pair
    np.cumsum(count_fwd[:-1], out=first_fwd[1:])
    # Row r lists its smaller neighbors first, then its larger ones. Keys are sorted by (lo, hi), so a
    # row's larger neighbors are consecutive keys, and its smaller neighbors come chunk after chunk in
    # increasing order: each chunk's are ranked among themselves and placed after the earlier chunks'.
    fwd_base = indptr[:-1] + count_rev - first_fwd
    del count_fwd, first_fwd
    rev_filled = indptr[:-1].copy()
    # int32 while node IDs and positions fit (a 32-bit METIS takes it as is); else the int64 that a
    # 64-bit METIS takes without a copy.
    indices = np.empty(2 * keys.shape[0], dtype=id_dtype(max(num_nodes, 2 * keys.shape[0])))
    local_bits = max(int(chunk - 1).bit_length(), 1)
    for start in range(0, keys.shape[0], chunk):
        piece = keys[start : start + chunk]
        lo = piece >> np.int64(bits)
        hi = piece & mask
        indices[fwd_base[lo] + np.arange(start, start + piece.shape[0])] = hi
        by_hi = hi << np.int64(local_bits)
        by_hi |= np.arange(piece.shape[0], dtype=np.int64)
        by_hi.sort()
        order = by_hi & np.int64((1 << local_bits) - 1)
        by_hi >>= np.int64(local_bits)  # hi, sorted
        run_start = np.empty(by_hi.shape[0], dtype=bool)
        run_start[:1] = True
        np.not_equal(by_hi[1:], by_hi[:-1], out=run_start[1:])
        positions = np.arange(by_hi.shape[0], dtype=np.int64)
        rank = positions - np.maximum.accumulate(np.where(run_start, positions, 0))
        indices[rev_filled[by_hi] + rank] = lo[order]
        rev_filled += np.bincount(hi, minlength=num_nodes)
    return SymmetricCSR(indptr=indptr, indices=indices)
