"""Partitioning with METIS, single- and multi-constraint.

METIS runs on the symmetrized graph without self loops or duplicate edges
(:mod:`~graphstore.partition.symmetric_csr`). pymetis's ``part_graph`` hands METIS a single balancing
constraint whatever vertex weights it is given, so to balance several quantities at once (training
nodes, in-degrees, node count) this module calls ``METIS_PartGraphKway`` with ``ncon > 1`` through
ctypes, from the narrowest METIS build that holds the graph
(:mod:`~graphstore.partition.metis_library`: a 32-bit build when cmeel-metis is installed, else the
64-bit one inside pymetis). If no library can be called it falls back to pymetis with the first
constraint and then moves nodes to even out the rest
(:func:`~graphstore.partition.balance_repair.repair_balance`).

Memory: METIS keeps every coarse level of the graph until it is done, and on a dense graph the levels
shrink slowly (each holds 70-95% of the previous level's edges), so METIS needs about five times the
adjacency's size. Above :data:`DROP_EDGES_ABOVE` adjacency entries, METIS 5.2's ``DROPEDGES`` option
keeps only the heavier edges of each coarse level: a third less memory at about the same cut, for a
slower coarsening.
"""

from __future__ import annotations

import logging

import numpy as np

from graphstore.partition.balance_repair import repair_balance
from graphstore.partition.metis_library import METIS_NOPTIONS, METIS_OK, metis_library, pointer
from graphstore.partition.symmetric_csr import SymmetricCSR

logger = logging.getLogger(__name__)

DEFAULT_UFACTOR = 30  # METIS's own k-way default: the heaviest part may exceed the average by 3%
# Adjacency entries (twice the undirected edges) above which coarse levels drop their light edges.
DROP_EDGES_ABOVE = 1 << 27


def metis_kway(
    csr: SymmetricCSR,
    num_parts: int,
    vertex_weights: np.ndarray | None = None,
    seed: int = 0,
    ufactor: int = DEFAULT_UFACTOR,
    imbalance: list[float] | None = None,
    extra_options: dict[str, int] | None = None,
    drop_edges: bool | None = None,
) -> tuple[np.ndarray, int]:
    """Partition ``csr`` into ``num_parts`` with METIS k-way, minimizing the edge cut.

    Args:
        csr: the symmetric adjacency (int32 or int64 indices; passed to METIS without a copy when they
            have its ``idx_t`` width).
        num_parts: number of parts (>= 2).
        vertex_weights: int [N] or [N, ncon] non-negative weights; METIS balances every column at once.
        seed: METIS's random seed.
        ufactor: allowed imbalance per constraint, in thousandths (30 -> each part within 3% of even).
        imbalance: per-constraint allowed imbalance (``1.02`` = 2% over even), overriding ``ufactor``
            where the library's real_t could be determined.
        extra_options: METIS options by name (``{"NITER": 4}``), as in ``METIS_OPTION_<name>``.
        drop_edges: METIS 5.2's ``DROPEDGES`` (ignored by builds without it); None: on above
            :data:`DROP_EDGES_ABOVE` adjacency entries.

    Returns:
        (int64 [N] partition index per node, METIS's reported edge cut of the symmetric graph).

    Raises:
        RuntimeError: if METIS reports an error.
        ValueError: an ``imbalance`` of the wrong length, an unknown option name.
    """
    n = csr.num_nodes
    weights = None
    ncon = 1
    if vertex_weights is not None:
        weights = np.asarray(vertex_weights)
        if weights.ndim == 1:
            weights = weights[:, None]
        ncon = int(weights.shape[1])
    library = metis_library(n, int(csr.indices.shape[0]))
    if library is None:
        return _pymetis_fallback(csr, num_parts, weights, seed)
    idx = library.idx
    options = np.empty(METIS_NOPTIONS, dtype=idx)
    library.lib.METIS_SetDefaultOptions(pointer(options))
    wanted = {"SEED": seed, "UFACTOR": ufactor, "NUMBERING": 0, **(extra_options or {})}
    if drop_edges is None:
        drop_edges = csr.indices.shape[0] > DROP_EDGES_ABOVE
    if drop_edges and "DROPEDGES" in library.options:
        wanted["DROPEDGES"] = 1
    for name, value in wanted.items():
        if name not in library.options:
            known = sorted(library.options)
            raise ValueError(f"unknown METIS option {name!r} for {library.name}; it has {known}")
        options[library.options[name]] = value
    ubvec = None
    if imbalance is not None and library.real is not None:
        if len(imbalance) != ncon:
            raise ValueError(f"imbalance has {len(imbalance)} entries; expected ncon={ncon}")
        ubvec = np.asarray(imbalance, dtype=library.real)
    xadj = np.ascontiguousarray(csr.indptr, dtype=idx)
    adjncy = np.ascontiguousarray(csr.indices, dtype=idx)  # no copy when the widths match
    vwgt = None if weights is None else np.ascontiguousarray(weights, dtype=idx)
    objval = np.zeros(1, dtype=idx)
    part = np.zeros(n, dtype=idx)
    logger.info("METIS k-way with %s on %d nodes, %d adjacency entries", library.name, n, adjncy.shape[0])
    status = library.lib.METIS_PartGraphKway(
        pointer(np.array([n], dtype=idx)),
        pointer(np.array([ncon], dtype=idx)),
        pointer(xadj),
        pointer(adjncy),
        pointer(vwgt),
        None,  # vsize
        None,  # adjwgt
        pointer(np.array([num_parts], dtype=idx)),
        None,  # tpwgts: equal targets
        pointer(ubvec),  # None: from options[UFACTOR]
        pointer(options),
        pointer(objval),
        pointer(part),
    )
    if status != METIS_OK:
        raise RuntimeError(
            f"METIS_PartGraphKway failed with status {status} (num_parts={num_parts}, ncon={ncon}, "
            f"{library.name})"
        )
    return part.astype(np.int64, copy=False), int(objval[0])


def _pymetis_fallback(
    csr: SymmetricCSR, num_parts: int, weights: np.ndarray | None, seed: int
) -> tuple[np.ndarray, int]:
    import pymetis

    options = pymetis.Options()
    options.seed = seed
    first = None if weights is None else weights[:, 0].astype(np.int64)
    indptr, indices = csr.indptr.astype(np.int64, copy=False), csr.indices.astype(np.int64, copy=False)
    adjacency_type = getattr(pymetis, "CSRAdjacency", None)
    if adjacency_type is not None:  # pymetis >= 2025.2
        adjacency = adjacency_type(adj_starts=indptr, adjacent=indices)
        cut, membership = pymetis.part_graph(num_parts, adjacency=adjacency, vweights=first, options=options)
    else:
        cut, membership = pymetis.part_graph(
            num_parts, xadj=indptr, adjncy=indices, vweights=first, options=options
        )
    part = np.asarray(membership, dtype=np.int64)
    if weights is not None and weights.shape[1] > 1:
        part = repair_balance(csr, part, weights, num_parts)
    return part, int(cut)
