"""The METIS shared libraries graphstore can call through ctypes, with their integer width and option layout.

Two builds are looked for:

- ``cmeel-metis`` (METIS 5.2, a PyPI wheel): ``idx_t`` of 32 bits, so METIS holds a graph and its coarse
  copies in half the memory and runs about twice as fast as a 64-bit build. Its ``metis.h`` (shipped
  beside the library) gives the integer and float widths and the option indices, which moved between
  METIS 5.1 and 5.2.
- the METIS inside pymetis (5.1 with 64-bit ``idx_t``): needed once a symmetric adjacency has 2^31
  entries or more, and the fallback when cmeel-metis is not installed. Its option indices are the ones
  pymetis exports as ``pymetis.OptionKey``.

:func:`metis_library` picks the narrowest build whose integers hold the graph.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import re
import sysconfig
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)

METIS_NOPTIONS = 40
METIS_OK = 1
# The option indices of METIS 5.1 (enum moptions in its metis.h), for a 5.1 build without a header.
_OPTIONS_5_1 = {"OBJTYPE": 1, "NITER": 6, "NCUTS": 7, "SEED": 8, "NO2HOP": 9, "UFACTOR": 16, "NUMBERING": 17}


@dataclass(frozen=True)
class MetisLibrary:
    """One callable METIS build.

    Attributes:
        name: where it came from (for logs and statistics).
        lib: the loaded shared library.
        idx: numpy dtype of METIS's ``idx_t``.
        real: numpy dtype of ``real_t``, or None when unknown (imbalance then goes through ``ufactor``).
        options: option name (``"SEED"``, ``"UFACTOR"``, ...) -> index into the options array.
    """

    name: str
    lib: ctypes.CDLL
    idx: np.dtype
    real: np.dtype | None
    options: dict[str, int]

    def fits(self, num_nodes: int, num_entries: int) -> bool:
        """Whether a graph of ``num_nodes`` and ``num_entries`` adjacency entries fits ``idx_t``."""
        limit = np.iinfo(self.idx).max
        return num_nodes < limit and num_entries < limit


def _prepare(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.METIS_PartGraphKway.restype = ctypes.c_int
    lib.METIS_SetDefaultOptions.restype = ctypes.c_int
    return lib


def _parse_header(path: str) -> tuple[int, int, dict[str, int]] | None:
    """(idx bits, real bits, option indices) from a ``metis.h``, or None when it cannot be read."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return None
    idx = re.search(r"^#define IDXTYPEWIDTH (\d+)", text, re.M)
    real = re.search(r"^#define REALTYPEWIDTH (\d+)", text, re.M)
    enum = re.search(r"typedef enum \{([^}]*)\}\s*moptions_et;", text)
    if not (idx and real and enum):
        return None
    names = [re.sub(r"/\*.*?\*/", "", item).strip() for item in enum.group(1).split(",")]
    options = {
        name[len("METIS_OPTION_") :]: i
        for i, name in enumerate(n for n in names if n)
        if name.startswith("METIS_OPTION_")
    }
    return int(idx.group(1)), int(real.group(1)), options


def _load_cmeel() -> MetisLibrary | None:
    prefix = os.path.join(sysconfig.get_paths()["purelib"], "cmeel.prefix")
    lib_path = os.path.join(prefix, "lib", "libmetis.so")
    if not os.path.isfile(lib_path):
        return None
    parsed = _parse_header(os.path.join(prefix, "include", "metis.h"))
    if parsed is None:
        return None
    idx_bits, real_bits, options = parsed
    try:
        gklib = os.path.join(prefix, "lib", "libGKlib.so")
        if os.path.isfile(gklib):  # libmetis needs its symbols and has no rpath to find it
            ctypes.CDLL(gklib, mode=ctypes.RTLD_GLOBAL)
        lib = _prepare(ctypes.CDLL(lib_path))
    except (OSError, AttributeError) as exc:
        logger.warning("cmeel-metis found but not loadable (%s); using pymetis's METIS", exc)
        return None
    return MetisLibrary(
        name=f"cmeel-metis ({idx_bits}-bit idx)",
        lib=lib,
        idx=np.dtype(f"int{idx_bits}"),
        real=np.dtype(f"float{real_bits}"),
        options=options,
    )


def _load_pymetis() -> MetisLibrary | None:
    try:
        import pymetis
        import pymetis._internal as internal
    except ImportError:  # pragma: no cover - pymetis is a hard dependency
        return None
    try:
        lib = _prepare(ctypes.CDLL(internal.__file__))
    except (OSError, AttributeError) as exc:
        logger.warning("METIS library not callable through ctypes (%s); using pymetis", exc)
        return None
    width = getattr(internal, "_idx_type_width", None)
    if width is not None:
        bits = int(width())
    else:
        # METIS_SetDefaultOptions sets all METIS_NOPTIONS entries to -1: count the bytes it writes.
        probe = np.zeros(4 * METIS_NOPTIONS, dtype=np.int32)
        lib.METIS_SetDefaultOptions(probe.ctypes.data_as(ctypes.c_void_p))
        bits = 32 * int((probe == -1).sum()) // METIS_NOPTIONS
    if bits not in (32, 64):
        logger.warning("unexpected METIS idx_t width %s bits; using pymetis", bits)
        return None
    keys = getattr(pymetis, "OptionKey", None)
    options = dict(_OPTIONS_5_1)
    if keys is not None:
        options.update({name: int(getattr(keys, name)) for name in options if hasattr(keys, name)})
    idx = np.dtype(np.int64 if bits == 64 else np.int32)
    real = _probe_real_t(lib, idx, options)
    return MetisLibrary(name=f"pymetis ({bits}-bit idx)", lib=lib, idx=idx, real=real, options=options)


def _probe_real_t(lib: ctypes.CDLL, idx: np.dtype, options_at: dict[str, int]) -> np.dtype | None:
    """Find METIS's real_t width by partitioning a 4-cycle with a float32 ``ubvec`` of ``[1.5, 0.5]``.

    With one constraint METIS reads only ``ubvec[0]``: a float32 build reads 1.5 and succeeds; a float64
    build reads the two float32s as one tiny double, rejects it as an imbalance below 1, and fails.
    Returns float32, or None (callers then express imbalance through ``ufactor`` only).
    """
    xadj = np.array([0, 2, 4, 6, 8], dtype=idx)
    adjncy = np.array([1, 3, 0, 2, 1, 3, 2, 0], dtype=idx)
    options = np.empty(METIS_NOPTIONS, dtype=idx)
    lib.METIS_SetDefaultOptions(pointer(options))
    options[options_at["NUMBERING"]] = 0
    ubvec = np.array([1.5, 0.5], dtype=np.float32)
    part = np.zeros(4, dtype=idx)
    status = lib.METIS_PartGraphKway(
        pointer(np.array([4], dtype=idx)),
        pointer(np.array([1], dtype=idx)),
        pointer(xadj),
        pointer(adjncy),
        None,
        None,
        None,
        pointer(np.array([2], dtype=idx)),
        None,
        pointer(ubvec),
        pointer(options),
        pointer(np.zeros(1, dtype=idx)),
        pointer(part),
    )
    return np.dtype(np.float32) if status == METIS_OK else None


def pointer(arr: np.ndarray | None):
    """A ctypes pointer to an array's data (None stays None, METIS's "not given")."""
    return None if arr is None else arr.ctypes.data_as(ctypes.c_void_p)


@functools.lru_cache(maxsize=1)
def available_libraries() -> tuple[MetisLibrary, ...]:
    """Every loadable METIS build, narrowest ``idx_t`` first."""
    found = [lib for lib in (_load_cmeel(), _load_pymetis()) if lib is not None]
    return tuple(sorted(found, key=lambda lib: lib.idx.itemsize))


def metis_library(num_nodes: int, num_entries: int) -> MetisLibrary | None:
    """The narrowest METIS build that holds a graph of this size, or None when none is callable.

    Args:
        num_nodes: vertices.
        num_entries: adjacency entries (twice the undirected edges).
    """
    for lib in available_libraries():
        if lib.fits(num_nodes, num_entries):
            return lib
    return None
