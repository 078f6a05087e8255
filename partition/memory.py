"""Time and peak memory per partitioning phase, and handing memory-mapped input pages back to the kernel.

:class:`PhaseMeter` records, for each phase (``symmetrize``, ``metis``, ``relabel``, ``write``...), its
seconds and the process's peak resident set size while it ran. On Linux the kernel's peak mark
(``VmHWM``) is reset at each phase start through ``/proc/self/clear_refs``, so every phase gets its own
peak; the largest of them is the run's peak. Side effect: afterwards the process's ``ru_maxrss`` covers
only the time since the last phase started, so read the partitioner's figure, not ``ru_maxrss``. Where
the mark cannot be reset (another OS, a locked-down ``/proc``), each phase reports the peak so far.

Resident memory includes the pages of memory-mapped input files that were touched (``RssFile``).
:func:`release_pages` drops them from the process (they stay in the page cache), so reading a large
input in passes costs one chunk of resident memory, not the file's size.
"""

from __future__ import annotations

import contextlib
import mmap
import resource
import time
from collections.abc import Iterator

import numpy as np

_CLEAR_REFS = "/proc/self/clear_refs"
_STATUS = "/proc/self/status"


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (Linux ``ru_maxrss`` is in KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _status_bytes(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` in bytes, or None where it cannot be read."""
    try:
        with open(_STATUS) as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def current_rss_bytes() -> int | None:
    """Resident set size of this process now (None where ``/proc`` is unavailable)."""
    return _status_bytes("VmRSS")


def _reset_peak_mark() -> bool:
    """Reset the kernel's peak-RSS mark to the current RSS; False where that is not possible."""
    try:
        with open(_CLEAR_REFS, "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


class PhaseMeter:
    """Seconds and peak RSS of each named phase of a run.

    Attributes:
        seconds: phase name -> wall-clock seconds (a phase entered twice adds up).
        cpu_seconds: phase name -> CPU seconds of this process (what the wall time would be on an idle
            machine: the phases are single-threaded).
        peak_bytes: phase name -> peak RSS in bytes while it ran.
        start_peak: the process's peak RSS when the meter was created (the input already mapped or read).
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}
        self.peak_bytes: dict[str, int] = {}
        self.start_peak = peak_rss_bytes()
        self._resettable = True

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Measure the block as phase ``name``."""
        self._resettable = self._resettable and _reset_peak_mark()
        start, cpu_start = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
            self.cpu_seconds[name] = self.cpu_seconds.get(name, 0.0) + time.process_time() - cpu_start
            hwm = _status_bytes("VmHWM") if self._resettable else None
            peak = hwm if hwm is not None else peak_rss_bytes()
            self.peak_bytes[name] = max(self.peak_bytes.get(name, 0), peak)

    def run_peak(self) -> int:
        """The largest peak RSS of any phase (or before the first one)."""
        return max([self.start_peak, *self.peak_bytes.values()])

    def report(self) -> dict:
        """``{"seconds": {...}, "cpu_seconds": {...}, "peak_rss_gib": {...}, "run_peak_rss_gib": x}``,
        rounded, for the partition config's statistics."""
        return {
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "cpu_seconds": {k: round(v, 3) for k, v in self.cpu_seconds.items()},
            "peak_rss_gib": {k: round(v / 2**30, 3) for k, v in self.peak_bytes.items()},
            "run_peak_rss_gib": round(self.run_peak() / 2**30, 3),
        }


def _backing_mmap(array: np.ndarray) -> mmap.mmap | None:
    """The ``mmap`` object behind a ``np.memmap`` or a view of one, else None."""
    base = array
    while base is not None:
        if isinstance(base, mmap.mmap):
            return base
        backing = getattr(base, "_mmap", None)
        if isinstance(backing, mmap.mmap):
            return backing
        base = getattr(base, "base", None)
    return None


def release_pages(*arrays: np.ndarray) -> None:
    """Drop the resident pages behind memory-mapped arrays (or views of them) from this process.

    Only the pages a (contiguous) view spans are dropped, so releasing chunk after chunk of a large
    mapping costs one chunk each time. The data stays in the file and the page cache; the next access
    maps it again, so a released array stays valid. Arrays not backed by a file mapping are left alone.
    """
    for array in arrays:
        backing = _backing_mmap(array) if isinstance(array, np.ndarray) else None
        if backing is None or not hasattr(backing, "madvise") or array.size == 0:
            continue
        with contextlib.suppress(OSError, ValueError, BufferError):
            base = np.frombuffer(backing, dtype=np.uint8).ctypes.data
            start = array.ctypes.data - base
            end = start + array.nbytes if array.flags.contiguous else len(backing)
            if not array.flags.contiguous:
                start = 0
            start -= start % mmap.PAGESIZE
            end = min(len(backing), -(-end // mmap.PAGESIZE) * mmap.PAGESIZE)
            if end > start >= 0:
                backing.madvise(mmap.MADV_DONTNEED, start, end - start)


def stream(chunk: int, *arrays: np.ndarray) -> Iterator[tuple]:
    """Yield ``(start, a[start:start + chunk], b[start:start + chunk], ...)`` over arrays of one length,
    releasing each chunk's mapped pages (:func:`release_pages`) once the consumer moves on.

    Args:
        chunk: rows per chunk (>= 1).
        arrays: arrays of the same first dimension; memory-mapped ones are read without growing the
            resident set past a chunk.
    """
    length = int(arrays[0].shape[0]) if arrays else 0
    for start in range(0, length, chunk):
        pieces = [a[start : start + chunk] for a in arrays]
        yield (start, *(np.asarray(p) for p in pieces))
        release_pages(*pieces)
