"""Partitioning with METIS, single- and multi-constraint.

METIS runs on the symmetrized graph without self loops or duplicate edges
(:mod:`~graphstore.partition.symmetric_csr`). pymetis's ``part_graph`` hands METIS a single balancing
constraint whatever vertex weights it is given, so to balance several quantities at once (training
nodes, in-degrees, node count) this module calls the METIS library that pymetis ships,
``METIS_PartGraphKway`` with ``ncon > 1``, through ctypes. If that library cannot be called (an
unknown ``idx_t`` width, a missing symbol) it falls back to pymetis with the first constraint and then
moves nodes to even out the rest (:func:`~graphstore.partition.balance_repair.repair_balance`).
"""

from __future__ import annotations

import ctypes
import logging

import numpy as np

from graphstore.partition.balance_repair import repair_balance
from graphstore.partition.symmetric_csr import SymmetricCSR

logger = logging.getLogger(__name__)

METIS_NOPTIONS = 40
# Indices into METIS's options array (enum moptions in metis.h; the same numbers pymetis exports).
_OPT_OBJTYPE = 1
_OPT_NITER = 6
_OPT_NCUTS = 7
_OPT_SEED = 8
_OPT_UFACTOR = 16
_OPT_NUMBERING = 17
METIS_OK = 1
DEFAULT_UFACTOR = 30  # METIS's own k-way default: the heaviest part may exceed the average by 3%


def _load_metis():
    """The METIS shared library inside pymetis and its (idx_t, real_t) numpy dtypes, or (None, None, None)."""
    try:
        import pymetis._internal as internal
    except ImportError:  # pragma: no cover - pymetis is a hard dependency
        return None, None, None
    try:
        lib = ctypes.CDLL(internal.__file__)
        kway = lib.METIS_PartGraphKway
        set_defaults = lib.METIS_SetDefaultOptions
    except (OSError, AttributeError) as exc:
        logger.warning("METIS library not callable through ctypes (%s); using pymetis", exc)
        return None, None, None
    width = getattr(internal, "_idx_type_width", None)
    if width is not None:
        bits = int(width())
    else:
        # METIS_SetDefaultOptions sets all METIS_NOPTIONS entries to -1: count the bytes it writes.
        probe = np.zeros(4 * METIS_NOPTIONS, dtype=np.int32)
        set_defaults(probe.ctypes.data_as(ctypes.c_void_p))
        bits = 32 * int((probe == -1).sum()) // METIS_NOPTIONS
    if bits not in (32, 64):
        logger.warning("unexpected METIS idx_t width %s bits; using pymetis", bits)
        return None, None, None
    kway.restype = ctypes.c_int
    set_defaults.restype = ctypes.c_int
    idx = np.dtype(np.int64 if bits == 64 else np.int32)
    return lib, idx, _probe_real_t(lib, idx)


def _probe_real_t(lib, idx: np.dtype) -> np.dtype | None:
    """Find METIS's real_t width by partitioning a 4-cycle with a float32 ``ubvec`` of ``[1.5, 0.5]``.

    With one constraint METIS reads only ``ubvec[0]``: a float32 build reads 1.5 and succeeds; a float64
    build reads the two float32s as one tiny double, rejects it as an imbalance below 1, and fails.
    Returns float32, or None (callers then express imbalance through ``ufactor`` only).
    """
    xadj = np.array([0, 2, 4, 6, 8], dtype=idx)
    adjncy = np.array([1, 3, 0, 2, 1, 3, 2, 0], dtype=idx)
    options = np.empty(METIS_NOPTIONS, dtype=idx)
    lib.METIS_SetDefaultOptions(_ptr(options))
    options[_OPT_NUMBERING] = 0
    ubvec = np.array([1.5, 0.5], dtype=np.float32)
    part = np.zeros(4, dtype=idx)
    status = lib.METIS_PartGraphKway(
        _ptr(np.array([4], dtype=idx)),
        _ptr(np.array([1], dtype=idx)),
        _ptr(xadj),
        _ptr(adjncy),
        None,
        None,
        None,
        _ptr(np.array([2], dtype=idx)),
        None,
        _ptr(ubvec),
        _ptr(options),
        _ptr(np.zeros(1, dtype=idx)),
        _ptr(part),
    )
    return np.dtype(np.float32) if status == METIS_OK else None


def _ptr(arr: np.ndarray | None):
    return None if arr is None else arr.ctypes.data_as(ctypes.c_void_p)


def metis_kway(
    csr: SymmetricCSR,
    num_parts: int,
    vertex_weights: np.ndarray | None = None,
    seed: int = 0,
    ufactor: int = DEFAULT_UFACTOR,
    imbalance: list[float] | None = None,
    extra_options: dict[int, int] | None = None,
) -> tuple[np.ndarray, int]:
    """Partition ``csr`` into ``num_parts`` with METIS k-way, minimizing the edge cut.

    Args:
        csr: the symmetric adjacency.
        num_parts: number of parts (>= 2).
        vertex_weights: int [N] or [N, ncon] non-negative weights; METIS balances every column at once.
        seed: METIS's random seed.
        ufactor: allowed imbalance per constraint, in thousandths (30 -> each part within 3% of even).
        imbalance: per-constraint allowed imbalance (``1.02`` = 2% over even), overriding ``ufactor``
            where the library's real_t could be determined.
        extra_options: METIS options by index into its options array (``{6: 4}`` sets NITER to 4).

    Returns:
        (int64 [N] partition index per node, METIS's reported edge cut of the symmetric graph).

    Raises:
        RuntimeError: if METIS reports an error.
    """
    n = csr.num_nodes
    weights = None
    ncon = 1
    if vertex_weights is not None:
        weights = np.asarray(vertex_weights)
        if weights.ndim == 1:
            weights = weights[:, None]
        ncon = int(weights.shape[1])
    lib, idx, real = _load_metis()
    if lib is None:
        return _pymetis_fallback(csr, num_parts, weights, seed)
    xadj = np.ascontiguousarray(csr.indptr, dtype=idx)
    adjncy = np.ascontiguousarray(csr.indices, dtype=idx)
    vwgt = None if weights is None else np.ascontiguousarray(weights, dtype=idx)
    options = np.empty(METIS_NOPTIONS, dtype=idx)
    lib.METIS_SetDefaultOptions(_ptr(options))
    options[_OPT_SEED] = seed
    options[_OPT_UFACTOR] = ufactor
    options[_OPT_NUMBERING] = 0
    for key, value in (extra_options or {}).items():
        options[key] = value
    nvtxs = np.array([n], dtype=idx)
    ncon_arr = np.array([ncon], dtype=idx)
    nparts = np.array([num_parts], dtype=idx)
    objval = np.zeros(1, dtype=idx)
    part = np.zeros(n, dtype=idx)
    ubvec = None
    if imbalance is not None and real is not None:
        if len(imbalance) != ncon:
            raise ValueError(f"imbalance has {len(imbalance)} entries; expected ncon={ncon}")
        ubvec = np.asarray(imbalance, dtype=real)
    status = lib.METIS_PartGraphKway(
        _ptr(nvtxs),
        _ptr(ncon_arr),
        _ptr(xadj),
        _ptr(adjncy),
        _ptr(vwgt),
        None,  # vsize
        None,  # adjwgt
        _ptr(nparts),
        None,  # tpwgts: equal targets
        _ptr(ubvec),  # None: from options[UFACTOR]
        _ptr(options),
        _ptr(objval),
        _ptr(part),
    )
    if status != METIS_OK:
        raise RuntimeError(
            f"METIS_PartGraphKway failed with status {status} (num_parts={num_parts}, ncon={ncon})"
        )
    return part.astype(np.int64, copy=False), int(objval[0])


def _pymetis_fallback(
    csr: SymmetricCSR, num_parts: int, weights: np.ndarray | None, seed: int
) -> tuple[np.ndarray, int]:
    import pymetis

    options = pymetis.Options()
    options.seed = seed
    first = None if weights is None else weights[:, 0].astype(np.int64)
    adjacency_type = getattr(pymetis, "CSRAdjacency", None)
    if adjacency_type is not None:  # pymetis >= 2025.2
        adjacency = adjacency_type(adj_starts=csr.indptr, adjacent=csr.indices)
        cut, membership = pymetis.part_graph(num_parts, adjacency=adjacency, vweights=first, options=options)
    else:
        cut, membership = pymetis.part_graph(
            num_parts, xadj=csr.indptr, adjncy=csr.indices, vweights=first, options=options
        )
    part = np.asarray(membership, dtype=np.int64)
    if weights is not None and weights.shape[1] > 1:
        part = repair_balance(csr, part, weights, num_parts)
    return part, int(cut)
