"""``ParMETIS_V3_PartKway`` through ctypes: the parallel k-way partitioner called over MPI.

The library is PT-Scotch's ParMETIS-compatible ``libparmetis.so`` (Debian's ``libscotchparmetis-dev``,
which ``deploy/system-packages.sh`` installs with Debian's Open MPI): a maintained parallel partitioner
that implements the ParMETIS v3 API, so a real ParMETIS build (``GRAPHSTORE_PARMETIS_LIB``) drops in
unchanged. Indices are 32-bit (``idx_t`` = int32, the Debian default build): global vertex IDs below
2^31 and each rank's adjacency below 2^31 entries.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

import numpy as np

LIBRARY_ENV = "GRAPHSTORE_PARMETIS_LIB"
_CANDIDATES = ("libparmetis.so", "libptscotchparmetisv3.so", "libptscotchparmetisv3-7.0.so")
_lib: ctypes.CDLL | None = None


def load_library() -> ctypes.CDLL:
    """Load the ParMETIS API library (``$GRAPHSTORE_PARMETIS_LIB`` first, then Debian's names).

    Raises:
        RuntimeError: no library with ``ParMETIS_V3_PartKway`` could be loaded (how to install it).
    """
    global _lib
    if _lib is not None:
        return _lib
    names = [os.environ[LIBRARY_ENV]] if os.environ.get(LIBRARY_ENV) else []
    names += list(_CANDIDATES)
    found = ctypes.util.find_library("parmetis")
    if found:
        names.append(found)
    errors = []
    for name in names:
        try:
            lib = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
            lib.ParMETIS_V3_PartKway.restype = ctypes.c_int
            _lib = lib
            return lib
        except (OSError, AttributeError) as exc:
            errors.append(f"{name}: {exc}")
    raise RuntimeError(
        "no ParMETIS API library found (install Debian's libscotchparmetis-dev and openmpi-bin: "
        "deploy/system-packages.sh, or set GRAPHSTORE_PARMETIS_LIB); tried " + "; ".join(errors)
    )


def _ptr(arr: np.ndarray | None) -> ctypes.c_void_p | None:
    return None if arr is None else arr.ctypes.data_as(ctypes.c_void_p)


def part_kway(
    comm,
    vtxdist: np.ndarray,
    xadj: np.ndarray,
    adjncy: np.ndarray,
    vwgt: np.ndarray | None,
    ncon: int,
    num_parts: int,
    seed: int,
    imbalance: float = 1.03,
) -> np.ndarray:
    """Partition a distributed graph with ``ParMETIS_V3_PartKway`` (collective over ``comm``).

    Args:
        comm: the mpi4py communicator of all ranks.
        vtxdist: ``size + 1`` global vertex boundaries: rank ``r`` holds ``[vtxdist[r], vtxdist[r+1])``.
        xadj, adjncy: this rank's CSR over global vertex IDs (symmetric overall, no self loops).
        vwgt: int32 ``[n_local * ncon]`` vertex weights, or None (unit weights, ``ncon`` must be 1).
        ncon: number of balance constraints.
        num_parts: number of partitions.
        seed: the partitioner's random seed (ParMETIS ``options[2]``).
        imbalance: allowed imbalance per constraint (``ubvec``).

    Returns:
        int32 [n_local]: the partition of each local vertex.

    Raises:
        RuntimeError: the library is missing or returned an error.
    """
    from mpi4py import MPI

    # Determinism: one thread per rank (Scotch 7 reads SCOTCH_PTHREAD_NUMBER when a call sets up its
    # context), and the random generator reset to the seed before each call.
    os.environ.setdefault("SCOTCH_PTHREAD_NUMBER", "1")
    lib = load_library()
    for name, args in (
        ("SCOTCH_randomSeed", (ctypes.c_int32(seed & 0x7FFFFFFF),)),
        ("SCOTCH_randomReset", ()),
    ):
        fn = getattr(lib, name, None)
        if fn is not None:
            fn(*args)
    n_local = int(vtxdist[comm.rank + 1] - vtxdist[comm.rank])
    i32 = np.int32
    vtxdist = np.ascontiguousarray(vtxdist, dtype=i32)
    xadj = np.ascontiguousarray(xadj, dtype=i32)
    adjncy = np.ascontiguousarray(adjncy, dtype=i32)
    if adjncy.size == 0:
        adjncy = np.zeros(1, dtype=i32)  # a valid pointer for a rank without edges
    vwgt = None if vwgt is None else np.ascontiguousarray(vwgt, dtype=i32)
    tpwgts = np.full(ncon * num_parts, 1.0 / num_parts, dtype=np.float32)
    ubvec = np.full(ncon, imbalance, dtype=np.float32)
    options = np.array([1, 0, seed & 0x7FFFFFFF], dtype=i32)
    part = np.zeros(max(n_local, 1), dtype=i32)
    wgtflag = ctypes.c_int32(0 if vwgt is None else 2)
    numflag, c_ncon, c_parts = ctypes.c_int32(0), ctypes.c_int32(ncon), ctypes.c_int32(num_parts)
    edgecut = ctypes.c_int32(0)
    handle = ctypes.c_void_p(MPI._addressof(comm))
    rc = lib.ParMETIS_V3_PartKway(
        _ptr(vtxdist),
        _ptr(xadj),
        _ptr(adjncy),
        _ptr(vwgt),
        None,
        ctypes.byref(wgtflag),
        ctypes.byref(numflag),
        ctypes.byref(c_ncon),
        ctypes.byref(c_parts),
        _ptr(tpwgts),
        _ptr(ubvec),
        _ptr(options),
        ctypes.byref(edgecut),
        _ptr(part),
        handle,
    )
    if rc != 1:  # METIS_OK
        raise RuntimeError(f"ParMETIS_V3_PartKway returned {rc} on rank {comm.rank}")
    return part[:n_local]
