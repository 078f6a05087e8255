"""Phase ``assign`` of the parallel partitioner: the partition of each node of this rank's range.

``metis`` builds the symmetric adjacency of each rank's nodes by an all-to-all of the edge pairs and
calls ``ParMETIS_V3_PartKway`` (:mod:`~graphstore.partition.parmetis`) with one balance constraint per
node category (node type x ``--balance-ntypes`` mask, plus in-edges with ``--balance-edges``), then
repairs what balance the partitioner missed (:func:`repair_balance_parallel`); ``random`` (a seeded
bijection per node type, dealt evenly) and ``range`` (consecutive IDs per type) need no partitioner.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from graphstore.partition.balance_repair import balance_limits, neighbor_gain
from graphstore.partition.parallel.collective import Collective, lookup, mpi_max, owner_rank, sorted_unique
from graphstore.partition.parallel.job import ParallelJob, RankScope
from graphstore.partition.parallel.load import LocalEdges

logger = logging.getLogger(__name__)


def assign_parts(scope: RankScope, edges: LocalEdges) -> np.ndarray:
    """The partition of each node of this rank's range (collective).

    Args:
        scope: this rank's ranks, options, graph and nodes (``part_method``, ``num_parts``, ``seed``,
            balance settings).
        edges: this rank's edges.

    Returns:
        int64, one partition per node of the range.
    """
    job, graph, ntype = scope.job, scope.graph, scope.ntype
    lo, hi = scope.lo, scope.hi
    num_parts = job.num_parts
    local = np.arange(lo, hi, dtype=np.int64) - graph.node_offsets[ntype]
    counts = np.asarray(graph.nodes_per_type, dtype=np.int64)[ntype]
    if num_parts == 1:
        return np.zeros(hi - lo, dtype=np.int64)
    if job.part_method == "range":
        return local * num_parts // counts
    if job.part_method == "random":
        # A seeded bijection of each type's IDs (an affine map modulo the count), dealt out evenly.
        part = np.empty(hi - lo, dtype=np.int64)
        for t in sorted_unique(ntype):
            sel = ntype == t
            n = int(graph.nodes_per_type[t])
            rng = np.random.default_rng([job.seed, int(t)])
            a = int(rng.integers(1, max(n, 2)))
            while np.gcd(a, n) != 1:
                a += 1
            b = int(rng.integers(0, max(n, 1)))
            pos = (local[sel] * a + b) % n
            part[sel] = pos * num_parts // n
        return part
    return _metis(scope, edges)


def _metis(scope: RankScope, edges: LocalEdges) -> np.ndarray:
    from graphstore.partition.parmetis import part_kway

    col, job, vtxdist = scope.col, scope.job, scope.vtxdist
    lo, hi = scope.lo, scope.hi
    n_local = hi - lo
    keys, indeg = [], np.zeros(n_local, dtype=np.int64)
    loops = edges.src != edges.dst
    src, dst = edges.src[loops], edges.dst[loops]
    half = job.round_rows // 2  # each edge is sent as two pairs
    for i in range(col.rounds(src.shape[0], half)):
        s = src[i * half : (i + 1) * half]
        d = dst[i * half : (i + 1) * half]
        pairs = np.empty((2 * s.shape[0], 3), dtype=np.int64)
        pairs[: s.shape[0], 0], pairs[: s.shape[0], 1], pairs[: s.shape[0], 2] = d, s, 1  # in-edge of d
        pairs[s.shape[0] :, 0], pairs[s.shape[0] :, 1], pairs[s.shape[0] :, 2] = s, d, 0
        got, _, _ = col.exchange(pairs, owner_rank(pairs[:, 0], vtxdist))
        indeg += np.bincount(got[:, 0] - lo, weights=got[:, 2], minlength=n_local).astype(np.int64)
        keys.append(sorted_unique((got[:, 0] - lo) * int(vtxdist[-1]) + got[:, 1]))
    key = sorted_unique(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.int64)
    del keys
    num_nodes = int(vtxdist[-1])
    rows = key // num_nodes
    adjncy = (key % num_nodes).astype(np.int32)
    del key
    xadj = np.zeros(n_local + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_local), out=xadj[1:])
    del rows
    category = _categories(scope)
    ncon_cat = int(category.max(initial=-1)) + 1
    ncon_cat = int(col.comm.allreduce(ncon_cat, op=mpi_max()))
    ncon = ncon_cat + (1 if job.balance_edges else 0)
    vwgt = None
    if ncon > 1:
        vwgt = np.zeros((n_local, ncon), dtype=np.int32)
        vwgt[np.arange(n_local), category] = 1
        if job.balance_edges:
            vwgt[:, -1] = indeg
    t0 = time.perf_counter()
    part = part_kway(col.comm, vtxdist, xadj, adjncy, vwgt, ncon, job.num_parts, job.seed).astype(np.int64)
    logger.info(
        "rank %d: ParMETIS_V3_PartKway on %d nodes, %d adjacency entries, ncon=%d: %.2fs",
        col.rank,
        n_local,
        adjncy.shape[0],
        ncon,
        time.perf_counter() - t0,
    )
    if ncon_cat >= 1:
        part = repair_balance_parallel(col, job, vtxdist, xadj, adjncy, category, ncon_cat, part)
    return part


def repair_balance_parallel(
    col: Collective,
    job: ParallelJob,
    vtxdist: np.ndarray,
    xadj: np.ndarray,
    adjncy: np.ndarray,
    category: np.ndarray,
    num_categories: int,
    part: np.ndarray,
    tolerance: float = 0.02,
) -> np.ndarray:
    """Bring every balance category within ``tolerance`` of an even share per partition (collective).

    The partitioner treats its imbalance bound as a goal (PT-Scotch's multi-constraint balance is
    looser than METIS's), so, as the serial partitioner's repair pass does
    (:func:`~graphstore.partition.balance_repair.repair_balance`, with the same limits and the same
    neighbor gain), nodes move from the fullest to the emptiest partition of a category. Every rank
    plans the same moves from the global counts; each move's node count is split over the ranks in
    proportion to their candidates, and each rank moves its candidates with the most neighbors in the
    receiving partition (neighbor partitions as they were before the pass).

    Args:
        col: the ranks.
        job: the options (``num_parts``, ``round_rows``).
        vtxdist: ``[size + 1]`` node range boundaries of the ranks.
        xadj, adjncy: this rank's rows of the symmetric adjacency (global neighbor IDs).
        category: balance category of each local node.
        num_categories: categories over all ranks.
        part: partition of each local node (not modified).
        tolerance: allowed relative deviation from the even share.

    Returns:
        The repaired partition of each local node.
    """
    num_parts = job.num_parts
    nbr_part = lookup(col, adjncy.astype(np.int64), vtxdist, part, job.round_rows)
    part = part.copy()
    counts = col.comm.allreduce(
        np.bincount(category * num_parts + part, minlength=num_categories * num_parts).astype(np.int64)
    ).reshape(num_categories, num_parts)
    for c in range(num_categories):
        for src, dst, amount in _planned_moves(counts[c], num_parts, tolerance):
            cand = np.flatnonzero((category == c) & (part == src))
            have = np.array(col.comm.allgather(int(cand.size)), dtype=np.int64)
            total = int(have.sum())
            if total == 0:
                continue
            cum = np.concatenate(([0], np.cumsum(have)))
            amount = min(amount, total)
            take = amount * cum[col.rank + 1] // total - amount * cum[col.rank] // total
            if take <= 0:
                continue
            gain = neighbor_gain(xadj, cand, nbr_part, src, dst)
            part[cand[np.argsort(-gain, kind="stable")[:take]]] = dst
        counts[c] = col.comm.allreduce(np.bincount(part[category == c], minlength=num_parts).astype(np.int64))
    return part


def _planned_moves(counts: np.ndarray, num_parts: int, tolerance: float) -> list[tuple[int, int, int]]:
    """``(from, to, nodes)`` moves, fullest partition to emptiest, that bring one category's ``counts``
    within the balance limits."""
    low, high = balance_limits(counts, num_parts, tolerance)
    target = counts.sum() / num_parts
    row = counts.copy()
    moves = []
    for _ in range(4 * num_parts):
        src, dst = int(np.argmax(row)), int(np.argmin(row))
        if row[src] <= high and row[dst] >= low:
            break
        amount = max(1, min(int(row[src] - target), int(target - row[dst])))
        row[src] -= amount
        row[dst] += amount
        moves.append((src, dst, amount))
    return moves


def _categories(scope: RankScope) -> np.ndarray:
    """Balance category of each local node: its type x (first ``balance_ntypes`` mask holding it),
    renumbered densely over the categories present anywhere."""
    graph, ntype = scope.graph, scope.ntype
    names = list(scope.job.balance_ntypes or [])
    width = len(names) + 1
    which = np.full(ntype.shape[0], len(names), dtype=np.int64)
    for t in sorted_unique(ntype):
        for m in reversed(range(len(names))):
            if names[m] not in graph.node_data.get(graph.ntypes[t], {}):
                continue
            rows = scope.node_rows(int(t), names[m])
            sel = np.flatnonzero(ntype == t)
            which[sel[np.asarray(rows).astype(bool)]] = m
    raw = ntype * width + which
    present = np.zeros(len(graph.ntypes) * width, dtype=np.int64)
    present[sorted_unique(raw)] = 1
    present = scope.col.comm.allreduce(present)
    dense = np.cumsum(present > 0) - 1
    return dense[raw]
