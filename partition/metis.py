"""Node-to-partition assignment: METIS (single- and multi-constraint) and random.

METIS runs on the symmetrized graph without self loops or duplicate edges. pymetis's ``part_graph``
hands METIS a single balancing constraint whatever vertex weights it is given, so to balance several
quantities at once (training nodes, in-degrees, node count) this module calls the METIS library that
pymetis ships, ``METIS_PartGraphKway`` with ``ncon > 1``, through ctypes. If that library cannot be
called (an unknown ``idx_t`` width, a missing symbol) it falls back to pymetis with the first
constraint and then moves nodes to even out the rest (:func:`rebalance_assignment`).
"""

from __future__ import annotations

import ctypes
import logging
from dataclasses import dataclass

import numpy as np

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


def random_assignment(num_nodes: int, num_parts: int, seed: int = 0) -> np.ndarray:
    """Assign nodes to partitions uniformly at random with equal part sizes (±1).

    Returns:
        int64 [num_nodes] partition index per node.
    """
    rng = np.random.default_rng(seed)
    parts = np.arange(num_nodes, dtype=np.int64) % num_parts
    rng.shuffle(parts)
    return parts


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


def balance_limits(totals: np.ndarray, num_parts: int, tolerance: float) -> tuple[float, float]:
    """The (low, high) per-part total allowed for one weight column: even share +- ``tolerance``, but
    never tighter than the nearest integers around the even share."""
    target = float(totals.sum()) / num_parts
    return min(target * (1 - tolerance), np.floor(target)), max(target * (1 + tolerance), np.ceil(target))


def _neighbor_gain(
    csr: SymmetricCSR, part: np.ndarray, nodes: np.ndarray, source: int, dest: int
) -> np.ndarray:
    """For each node in ``nodes``: (# neighbors in ``dest``) - (# neighbors in ``source``)."""
    starts = csr.indptr[nodes]
    counts = csr.indptr[nodes + 1] - starts
    total = int(counts.sum())
    if total == 0:
        return np.zeros(nodes.size, dtype=np.int64)
    # Positions of every neighbor of every node, without a Python loop per node.
    row_of = np.repeat(np.arange(nodes.size), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    positions = np.repeat(starts, counts) + (np.arange(total) - first)
    neighbor_part = part[csr.indices[positions]]
    score = (neighbor_part == dest).astype(np.int64) - (neighbor_part == source)
    return np.bincount(row_of, weights=score, minlength=nodes.size).astype(np.int64)


def repair_balance(
    csr: SymmetricCSR,
    part: np.ndarray,
    weights: np.ndarray,
    num_parts: int,
    tolerance: float = 0.02,
    max_moves: int | None = None,
) -> np.ndarray:
    """Move nodes between parts until every weight column is within ``tolerance`` of even per part.

    Multi-constraint METIS treats its imbalance bound as a goal; on small categories (35 training
    nodes per part) it can miss by a few nodes. This fixes what is left: repeatedly, the most
    overloaded part of a column gives the nodes with the best edge-cut gain (most neighbors in the
    receiving part) to the most underloaded one.

    Args:
        csr: the symmetric adjacency METIS partitioned.
        part: partition per node (not modified).
        weights: int [N, ncon] vertex weights.
        num_parts: number of parts.
        tolerance: allowed relative deviation from the even share.
        max_moves: bound on the number of move rounds (default ``8 * num_parts * ncon``).

    Returns:
        A new int64 assignment.
    """
    part = np.array(part, dtype=np.int64)
    weights = np.asarray(weights)
    if weights.ndim == 1:
        weights = weights[:, None]
    ncon = weights.shape[1]
    rounds = max_moves if max_moves is not None else 8 * num_parts * ncon
    for _ in range(rounds):
        moved = False
        for col in range(ncon):
            w = weights[:, col]
            totals = np.bincount(part, weights=w, minlength=num_parts)
            low, high = balance_limits(totals, num_parts, tolerance)
            if totals.max() <= high and totals.min() >= low:
                continue
            target = totals.sum() / num_parts
            source = int(np.argmax(totals))
            dest = int(np.argmin(totals))
            amount = min(totals[source] - target, target - totals[dest])
            candidates = np.flatnonzero((part == source) & (w > 0))
            if candidates.size == 0 or amount <= 0:
                continue
            gain = _neighbor_gain(csr, part, candidates, source, dest)
            order = np.argsort(-gain, kind="stable")
            cum = np.cumsum(w[candidates[order]])
            take = max(1, int(np.searchsorted(cum, amount, side="right")))
            part[candidates[order[:take]]] = dest
            moved = True
        if not moved:
            break
    return part


def edge_cut_fraction(src: np.ndarray, dst: np.ndarray, part: np.ndarray, chunk: int = 1 << 24) -> float:
    """Fraction of directed edges whose endpoints lie in different partitions.

    Args:
        src, dst: edge endpoints.
        part: partition index per node.
        chunk: edges processed per step (bounds temporary memory).
    """
    total = int(src.shape[0])
    if total == 0:
        return 0.0
    cut = 0
    for start in range(0, total, chunk):
        s = np.asarray(src[start : start + chunk])
        d = np.asarray(dst[start : start + chunk])
        cut += int(np.count_nonzero(part[s] != part[d]))
    return cut / total
