"""The symmetric adjacency METIS partitions, and the one-key pair sort that builds it.

:func:`symmetrize` turns the directed edge list into the undirected simple graph (both directions, no
self loops, no duplicate edges) as CSR; :func:`sort_pairs` is the vectorized sort it (and the ID
relabeling) is built on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SymmetricCSR:
    """The symmetrized, de-duplicated, loop-free adjacency METIS partitions.

    Attributes:
        indptr: int64 [N + 1].
        indices: int64 neighbor IDs, sorted within each row.
    """

    indptr: np.ndarray
    indices: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.indptr.shape[0] - 1)


def sort_pairs(major: np.ndarray, minor: np.ndarray, minor_count: int) -> tuple[np.ndarray, np.ndarray]:
    """Sort pairs by (major, minor) through one int64 key sort; returns both columns in that order.

    Packs each pair into one int64 (``major << bits | minor``) when they fit, which sorts several times
    faster than a stable argsort and unpacks with shifts instead of divisions; falls back to
    ``major * minor_count + minor`` otherwise. Both columns must be non-negative, ``minor < minor_count``.
    """
    bits = max(int(minor_count - 1).bit_length(), 1)
    major_max = int(major.max()) if major.size else 0
    keys = major.astype(np.int64)  # always a copy we own
    if major_max.bit_length() + bits <= 63:
        keys <<= np.int64(bits)
        keys |= minor
        keys.sort()
        minor_sorted = keys & np.int64((1 << bits) - 1)
        keys >>= np.int64(bits)  # in place: one fresh array fewer to page in
        return keys, minor_sorted
    keys *= np.int64(minor_count)
    keys += minor
    keys.sort()
    return np.divmod(keys, np.int64(minor_count))


def symmetrize(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> SymmetricCSR:
    """Build the undirected simple graph of ``src -> dst`` as CSR (both directions, no loops or duplicates).

    Args:
        src, dst: int arrays of length E with IDs in ``[0, num_nodes)``.
        num_nodes: N.

    Returns:
        The :class:`SymmetricCSR`.
    """
    src = np.asarray(src)
    dst = np.asarray(dst)
    lo = np.minimum(src, dst).astype(np.int64, copy=False)
    hi = np.maximum(src, dst).astype(np.int64, copy=False)
    not_loop = lo != hi
    if not not_loop.all():  # most graphs have no self loops: skip two copies then
        lo, hi = lo[not_loop], hi[not_loop]
    del not_loop
    # Sorting the (lo, hi) pairs puts duplicates side by side.
    lo, hi = sort_pairs(lo, hi, num_nodes)
    if lo.size:
        keep = np.empty(lo.size, dtype=bool)
        keep[0] = True
        np.not_equal(lo[1:], lo[:-1], out=keep[1:])
        keep[1:] |= hi[1:] != hi[:-1]
        lo, hi = lo[keep], hi[keep]  # pairs with lo < hi, sorted by (lo, hi)
        del keep
    # The reverse direction sorted by (hi, lo).
    rev_row, rev_col = sort_pairs(hi, lo, num_nodes)
    count_fwd = np.bincount(lo, minlength=num_nodes)
    count_rev = np.bincount(rev_row, minlength=num_nodes)
    off_fwd = np.zeros(num_nodes + 1, dtype=np.int64)
    off_rev = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(count_fwd, out=off_fwd[1:])
    np.cumsum(count_rev, out=off_rev[1:])
    indptr = off_fwd + off_rev
    # Row r lists its smaller neighbors (reverse pairs) first, then its larger ones (forward pairs),
    # so each row comes out sorted without a sort: entry i of a group lands at i plus the other
    # group's entries that precede it.
    indices = np.empty(2 * lo.size, dtype=np.int64)
    positions = np.arange(lo.size, dtype=np.int64)
    indices[positions + off_rev[lo + 1]] = hi
    indices[positions + off_fwd[rev_row]] = rev_col
    return SymmetricCSR(indptr=indptr, indices=indices)
