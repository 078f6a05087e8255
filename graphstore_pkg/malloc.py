"""glibc allocator tuning for processes that move multi-megabyte messages.

By default glibc serves allocations above 128 KiB-32 MiB (its dynamic mmap threshold) with fresh
``mmap`` calls and trims freed memory back to the kernel, so every 4 MB pull answer page-faults its
memory afresh. Raising the mmap and trim thresholds once at process start keeps those buffers in
the heap for reuse; on the 2-core development machine this was worth about 3x on 4 MB pulls
(DESIGN.md, "Measured on this machine"). The environment variables ``MALLOC_MMAP_THRESHOLD_`` /
``MALLOC_TRIM_THRESHOLD_`` do the same but must be set before the process starts.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

logger = logging.getLogger(__name__)

# glibc's mallopt parameter numbers (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

DEFAULT_MMAP_THRESHOLD = 32 * 1024 * 1024
DEFAULT_TRIM_THRESHOLD = 256 * 1024 * 1024


def raise_malloc_thresholds(
    mmap_threshold: int = DEFAULT_MMAP_THRESHOLD,
    trim_threshold: int = DEFAULT_TRIM_THRESHOLD,
) -> bool:
    """Set glibc's mmap and trim thresholds (idempotent; a no-op off glibc).

    Args:
        mmap_threshold: allocations below this come from the heap (glibc caps it at 32 MiB on 64-bit).
        trim_threshold: free heap memory above this is returned to the kernel.

    Returns:
        True when both settings were applied.
    """
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(_M_TRIM_THRESHOLD, trim_threshold))
    if not ok:
        logger.debug("mallopt refused the thresholds (mmap=%d, trim=%d)", mmap_threshold, trim_threshold)
    return ok
