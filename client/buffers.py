"""Recycled output buffers for the loader's large feature reads.

A mini-batch's input features are large (112,000 rows of 100 float32 = 45 MB on the 200k benchmark
graph). glibc serves allocations above 32 MiB with a fresh ``mmap``, so every batch's feature array
page-faults and zeroes its memory again: about 6 ms of kernel time per batch on the 2-core development
machine, taken from the model training beside the loader. :class:`RowBufferPool` hands out views of a
few long-lived buffers instead, and reuses a buffer only once nothing references it any more.

Whether a buffer is free is read from its reference count: the pool holds one reference, and every
array or tensor built on it (a numpy view, ``torch.from_numpy``, autograd's saved tensors, a user's
copy of the reference) holds the buffer through its base. So a batch the caller kept is never
overwritten: the pool just allocates another buffer.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

# Below this the allocator already reuses heap memory (see graphstore.malloc).
DEFAULT_MIN_BYTES = 16 << 20
# Room for growth so that a slightly larger next batch still fits.
_HEADROOM = 1.25
# References to a buffer nobody uses, seen from a loop over the pool: the pool's list, the loop
# variable and getrefcount's own argument.
_FREE_REFS = 3


class RowBufferPool:
    """Views of recycled buffers for ``[num_rows, *row_shape]`` arrays.

    Args:
        max_buffers: buffers kept for reuse (e.g. prefetched batches + the one in training + 1);
            requests beyond them get ordinary fresh arrays.
        min_bytes: smaller requests get ordinary fresh arrays.

    Raises:
        ValueError: ``max_buffers`` < 0 or ``min_bytes`` < 0.
    """

    def __init__(self, max_buffers: int = 4, min_bytes: int = DEFAULT_MIN_BYTES) -> None:
        if max_buffers < 0:
            raise ValueError(f"max_buffers must be >= 0, got {max_buffers}")
        if min_bytes < 0:
            raise ValueError(f"min_bytes must be >= 0, got {min_bytes}")
        self.max_buffers = max_buffers
        self.min_bytes = min_bytes
        self._buffers: list[np.ndarray] = []
        self._lock = threading.Lock()
        self.reused = 0
        self.allocated = 0

    def empty(self, num_rows: int, row_shape: tuple[int, ...], dtype) -> np.ndarray:
        """An uninitialized C-contiguous ``[num_rows, *row_shape]`` array of ``dtype``.

        The caller owns the result for as long as it (or anything derived from it) is referenced.
        """
        dtype = np.dtype(dtype)
        shape = (int(num_rows), *row_shape)
        row_items = int(np.prod(row_shape, dtype=np.int64))
        nbytes = shape[0] * row_items * dtype.itemsize
        if nbytes < self.min_bytes or self.max_buffers == 0:
            return np.empty(shape, dtype=dtype)
        with self._lock:
            for buffer in self._buffers:
                if buffer.nbytes >= nbytes and sys.getrefcount(buffer) == _FREE_REFS:
                    self.reused += 1
                    return buffer[:nbytes].view(dtype).reshape(shape)
            buffer = np.empty(int(nbytes * _HEADROOM), dtype=np.uint8)
            self.allocated += 1
            if len(self._buffers) < self.max_buffers:
                self._buffers.append(buffer)
            else:
                # Replace a free buffer that was too small, if any; else this one stays untracked.
                for index, old in enumerate(self._buffers):
                    if sys.getrefcount(old) == _FREE_REFS:
                        self._buffers[index] = buffer
                        break
            return buffer[:nbytes].view(dtype).reshape(shape)

    def clear(self) -> None:
        """Forget every buffer (those still in use stay valid for their holders)."""
        with self._lock:
            self._buffers.clear()
