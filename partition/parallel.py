"""Partition a chunked graph with K MPI ranks (``mpirun -np K graphstore partition --chunks ...``).

No rank holds the graph. Rank ``r`` owns the homogeneous node range ``[vtxdist[r], vtxdist[r+1])`` (an
even split of the type-major ID space) and reads the edge chunks ``j`` with ``j % K == r`` and the
feature rows of its node range. Phases (each timed, with its peak RSS, per rank):

1. ``check``: rank 0 reads the metadata and every chunk header; any problem (a missing file, a chunk of
   the wrong shape or dtype) is raised on every rank, naming the file, before any output exists.
2. ``load``: each rank reads its edge chunks (IDs checked against their types' counts).
3. ``assign``: ``metis`` builds the symmetric adjacency of each rank's nodes by an all-to-all of the
   edge pairs and calls ``ParMETIS_V3_PartKway`` (:mod:`~graphstore.partition.parmetis`) with one balance
   constraint per node category (node type x ``--balance-ntypes`` mask, plus in-edges with
   ``--balance-edges``); ``random`` (a seeded bijection per node type, dealt evenly) and ``range``
   (consecutive IDs per type) need no partitioner.
4. ``relabel``: new node IDs from per-(rank, partition, type) counts, the same layout as the serial
   partitioner (partition ``k`` one contiguous range, types in order, original order inside); each
   rank looks up the new IDs of its edges' endpoints from their owners.
5. ``shuffle``: edges go to the rank writing their destination's partition, nodes and features to the
   rank writing theirs, in rounds of at most ``round_rows`` rows per rank (MPI all-to-all), so send
   buffers stay bounded; partition ``k`` is written by rank ``k % K``.
6. ``write``: each rank writes its partitions in today's format; rank 0 writes ``NAME.json``.

Output is staged in a folder beside ``--out`` and renamed at the end, as the serial partitioner does. On
hosts without a shared file system every rank writes (and renames) its own staging folder with its own
partitions and a copy of ``NAME.json``: run rank ``r`` on the host that serves partitions ``k % K == r``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass

import numpy as np

from graphstore.partition.book import RangePartitionBook
from graphstore.partition.chunked import ChunkedGraph, check_chunk_files, read_metadata, read_rows
from graphstore.partition.format import EDGE_FEAT_DIR, NODE_FEAT_DIR, feature_file
from graphstore.partition.memory import PhaseMeter
from graphstore.partition.relabel import csr_pieces
from graphstore.partition.types import FORMAT_VERSION
from graphstore.partition.writer import _replace_folder, _save, check_output_folder, convert_rows, write_npy
from graphstore.types import GraphSchema

logger = logging.getLogger(__name__)

PARALLEL_METHODS = ("metis", "random", "range")
SHARED_MARK = ".rank0"


@dataclass
class ParallelJob:
    """Options of :func:`partition_chunks` (``graphstore partition --chunks``).

    Attributes:
        chunks: folder of the chunked graph (``metadata.json``).
        graph_name: name of the output (``out_path/graph_name.json``).
        num_parts: number of partitions.
        out_path: output folder; absent or empty unless ``overwrite``.
        part_method: ``metis`` (ParMETIS API), ``random`` or ``range``.
        balance_ntypes: boolean node arrays (e.g. ``["train_mask"]``) whose members each partition gets
            an even share of, per node type.
        balance_edges: also balance in-edges per partition.
        seed: seed of the random assignment and of the partitioner.
        overwrite: replace an existing output folder.
        round_rows: rows each rank sends per all-to-all round (bounds the send buffers).
    """

    chunks: str
    graph_name: str
    num_parts: int
    out_path: str
    part_method: str = "metis"
    balance_ntypes: list[str] | None = None
    balance_edges: bool = False
    seed: int = 0
    overwrite: bool = False
    round_rows: int = 1 << 22


class _Collective:
    """All-to-all exchanges of numpy rows in bounded rounds."""

    def __init__(self, comm) -> None:
        self.comm = comm
        self.size = comm.size
        self.rank = comm.rank

    def exchange(self, rows: np.ndarray, dest: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Send ``rows[i]`` to rank ``dest[i]``.

        Returns:
            ``(received, order, recv_counts)``: the rows received (by source rank, in each source's
            order), the stable order the rows were sent in, and how many came from each rank.
        """
        from mpi4py import MPI

        rows = np.ascontiguousarray(rows)
        dest = np.asarray(dest, dtype=np.int16 if self.size < 2**15 else np.int32)
        order = np.argsort(dest, kind="stable")  # a radix sort on 16-bit keys
        sent = np.ascontiguousarray(rows[order])
        counts = np.bincount(dest, minlength=self.size).astype(np.int64)
        recv_counts = np.empty(self.size, dtype=np.int64)
        self.comm.Alltoall(counts, recv_counts)
        row_bytes = int(rows.dtype.itemsize * int(np.prod(rows.shape[1:], dtype=np.int64)))
        recv = np.empty((int(recv_counts.sum()), *rows.shape[1:]), dtype=rows.dtype)
        send_b, recv_b = counts * row_bytes, recv_counts * row_bytes
        send_d = np.concatenate(([0], np.cumsum(send_b)[:-1]))
        recv_d = np.concatenate(([0], np.cumsum(recv_b)[:-1]))
        self.comm.Alltoallv(
            [
                sent.view(np.uint8).reshape(-1) if sent.size else np.zeros(0, np.uint8),
                (send_b, send_d),
                MPI.BYTE,
            ],
            [
                recv.view(np.uint8).reshape(-1) if recv.size else np.zeros(0, np.uint8),
                (recv_b, recv_d),
                MPI.BYTE,
            ],
        )
        return recv, order, recv_counts

    def reply(self, answers: np.ndarray, recv_counts: np.ndarray, order: np.ndarray) -> np.ndarray:
        """Send ``answers`` (one per row received by :meth:`exchange`) back; returns them in the
        original order of the rows this rank sent."""
        source = np.repeat(np.arange(self.size), recv_counts)
        back, _, _ = self.exchange(answers, source)
        out = np.empty_like(back)
        out[order] = back
        return out

    def rounds(self, n_local: int, round_rows: int) -> int:
        """Rounds every rank runs so that each sends at most ``round_rows`` rows per round."""
        return int(self.comm.allreduce(-(-n_local // round_rows), op=_max()))


def _id_dtype(limit: int) -> np.dtype:
    """int32 for IDs below ``limit`` when it fits 31 bits (half the memory of int64), else int64."""
    return np.dtype(np.int32 if limit < 2**31 else np.int64)


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted: one in-place sort and a comparison (numpy 2's hash-based
    ``np.unique`` is many times slower on tens of millions of int64 keys)."""
    values = np.sort(values)
    if values.size == 0:
        return values
    keep = np.empty(values.size, dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def _max():
    from mpi4py import MPI

    return MPI.MAX


def _owner(ids: np.ndarray, vtxdist: np.ndarray) -> np.ndarray:
    return np.searchsorted(vtxdist, ids, side="right") - 1


def lookup(
    col: _Collective, ids: np.ndarray, vtxdist: np.ndarray, table: np.ndarray, round_rows: int
) -> np.ndarray:
    """``table_global[ids]``, where each rank holds ``table`` for its ``vtxdist`` range (collective)."""
    out = np.empty(ids.shape[0], dtype=table.dtype)
    lo = vtxdist[col.rank]
    for i in range(col.rounds(ids.shape[0], round_rows)):
        piece = ids[i * round_rows : (i + 1) * round_rows]
        asked, order, counts = col.exchange(piece, _owner(piece, vtxdist))
        out[i * round_rows : i * round_rows + piece.shape[0]] = col.reply(table[asked - lo], counts, order)
    return out


def _check(job: ParallelJob) -> ChunkedGraph:
    if job.part_method not in PARALLEL_METHODS:
        raise ValueError(f"part_method must be one of {list(PARALLEL_METHODS)}, got {job.part_method!r}")
    if (
        not isinstance(job.graph_name, str)
        or not job.graph_name
        or not all(c.isalnum() or c in "-_." for c in job.graph_name)
    ):
        raise ValueError(f"graph_name must be letters, digits, '-', '_', '.', got {job.graph_name!r}")
    graph = read_metadata(job.chunks)
    check_chunk_files(graph)
    total = sum(graph.nodes_per_type)
    if (
        isinstance(job.num_parts, bool)
        or not isinstance(job.num_parts, int)
        or not 1 <= job.num_parts <= total
    ):
        raise ValueError(f"num_parts must be an int in [1, {total}], got {job.num_parts!r}")
    for name in job.balance_ntypes or []:
        if not any(name in arrays for arrays in graph.node_data.values()):
            raise ValueError(f"balance_ntypes names {name!r}, which no node type has")
    check_output_folder(job.out_path, job.overwrite)
    return graph


def partition_chunks(job: ParallelJob, comm=None) -> dict:
    """Partition a chunked graph over the ranks of ``comm`` (collective; every rank calls it).

    Args:
        job: the options.
        comm: an mpi4py communicator (default ``MPI.COMM_WORLD``; one rank works too).

    Returns:
        The run's statistics (every rank gets the same dict): edge cut, nodes / edges per partition and
        type, and per rank its phases' seconds and peak RSS.

    Raises:
        FileNotFoundError: the metadata or a chunk file is missing (named), on every rank.
        ValueError: bad options, a malformed chunk or IDs out of range (named), on every rank.
        FileExistsError: the output folder is not empty, without ``overwrite``.
    """
    from mpi4py import MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    col = _Collective(comm)
    start = time.perf_counter()
    meter = PhaseMeter()
    with meter.phase("check"):
        error, graph = None, None
        if comm.rank == 0:
            try:
                graph = _check(job)
            except (ValueError, FileNotFoundError, FileExistsError) as exc:
                error = exc
        error = comm.bcast(error, root=0)
        if error is not None:
            raise error
        graph = read_metadata(job.chunks) if comm.rank else graph
    _log(comm, "check", meter)
    with meter.phase("load"):
        edges = _load_edges(col, graph)
    _log(comm, "load", meter)
    offsets = graph.node_offsets
    num_nodes = int(offsets[-1])
    vtxdist = np.array([num_nodes * r // col.size for r in range(col.size + 1)], dtype=np.int64)
    lo, hi = int(vtxdist[col.rank]), int(vtxdist[col.rank + 1])
    ntype = (np.searchsorted(offsets, np.arange(lo, hi), side="right") - 1).astype(np.int64)
    with meter.phase("assign"):
        part = _assign(col, job, graph, edges, vtxdist, ntype)
    _log(comm, "assign", meter)
    with meter.phase("relabel"):
        labels = _relabel(col, job, graph, edges, vtxdist, ntype, part)
        edges.src = edges.dst = None  # the new IDs replace them
        del part
    _log(comm, "relabel", meter)

    from mpi4py import MPI as _MPI

    parent = os.path.dirname(os.path.abspath(job.out_path)) or "."
    tmp_dir = os.path.join(
        parent, f".{os.path.basename(os.path.abspath(job.out_path))}.tmp-{comm.bcast(os.getpid())}"
    )
    ok = True
    try:
        os.makedirs(tmp_dir, exist_ok=True)
        os.chmod(tmp_dir, 0o755)
        if comm.rank == 0:
            open(os.path.join(tmp_dir, SHARED_MARK), "w").close()
        comm.Barrier()
        with meter.phase("shuffle"):
            mine = _shuffle(col, job, graph, edges, vtxdist, ntype, labels)
        del edges
        _log(comm, "shuffle", meter)
        with meter.phase("write"):
            parts_meta = _write_parts(col, job, graph, labels, mine, tmp_dir)
        _log(comm, "write", meter)
    except BaseException:
        ok = False
        raise
    finally:
        if not ok:
            import shutil

            shutil.rmtree(tmp_dir, ignore_errors=True)
            if col.size > 1:
                _MPI.COMM_WORLD.Abort(1)
    stats = _stats(col, job, graph, labels, meter, start)
    config = _config(job, graph, labels, parts_meta, stats)
    comm.Barrier()
    if comm.rank == 0:
        os.remove(os.path.join(tmp_dir, SHARED_MARK))
        _write_json(tmp_dir, config)
        _replace_folder(tmp_dir, job.out_path)
    comm.Barrier()
    if comm.rank != 0 and os.path.isdir(tmp_dir):  # no shared file system: this host's own copy
        os.remove(os.path.join(tmp_dir, SHARED_MARK)) if os.path.exists(
            os.path.join(tmp_dir, SHARED_MARK)
        ) else None
        _write_json(tmp_dir, config)
        _replace_folder(tmp_dir, job.out_path)
    stats["config_path"] = os.path.join(job.out_path, f"{job.graph_name}.json")
    return stats


def _log(comm, phase: str, meter: PhaseMeter) -> None:
    logger.info(
        "rank %d/%d: %s done in %.2fs, peak RSS %.3f GiB",
        comm.rank,
        comm.size,
        phase,
        meter.seconds.get(phase, 0.0),
        meter.peak_bytes.get(phase, 0) / 2**30,
    )


@dataclass
class _Edges:
    src: np.ndarray  # homogeneous input IDs
    dst: np.ndarray
    etype: np.ndarray
    eid: np.ndarray  # per-type input edge ID
    chunks: list[tuple[int, int]]  # (edge type, chunk index) read by this rank, in order


def _load_edges(col: _Collective, graph: ChunkedGraph) -> _Edges:
    offsets = graph.node_offsets
    counts = graph.nodes_per_type
    src_t, dst_t = graph.endpoint_types()
    work = [(e, i) for e in range(len(graph.etypes)) for i in range(len(graph.edges_per_chunk[e]))]
    mine = [w for j, w in enumerate(work) if j % col.size == col.rank]
    srcs, dsts, types, eids = [], [], [], []
    idt, edt = _id_dtype(int(offsets[-1])), _id_dtype(max(graph.edges_per_type, default=0))
    error = None
    for e, i in mine:
        path = graph.edge_files[e][i]
        pair = np.load(path, allow_pickle=False).astype(np.int64, copy=False)
        first = int(sum(graph.edges_per_chunk[e][:i]))
        for col_i, t, what in ((0, src_t[e], "source"), (1, dst_t[e], "destination")):
            ids = pair[:, col_i]
            if ids.size and (ids.min() < 0 or ids.max() >= counts[t]):
                bad = int(ids[(ids < 0) | (ids >= counts[t])][0])
                error = error or ValueError(
                    f"chunk file {path!r}: {what} ID {bad} out of range [0, {counts[t]}) of node type "
                    f"{graph.ntypes[t]!r}"
                )
        srcs.append((pair[:, 0] + offsets[src_t[e]]).astype(idt))
        dsts.append((pair[:, 1] + offsets[dst_t[e]]).astype(idt))
        types.append(np.full(pair.shape[0], e, dtype=np.int16))
        eids.append(np.arange(first, first + pair.shape[0], dtype=edt))
        del pair
    errors = col.comm.allgather(error)
    first_error = next((x for x in errors if x is not None), None)
    if first_error is not None:
        raise first_error

    def cat(pieces, dtype):
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=dtype)

    return _Edges(cat(srcs, idt), cat(dsts, idt), cat(types, np.int16), cat(eids, edt), mine)


def _node_rows(graph: ChunkedGraph, t: int, name: str, lo: int, hi: int) -> np.ndarray:
    """Rows of node array ``name`` of type ``t`` for homogeneous IDs ``[lo, hi)`` clipped to the type."""
    off = graph.node_offsets
    a, b = max(lo, off[t]) - off[t], min(hi, off[t + 1]) - off[t]
    spec = graph.node_data[graph.ntypes[t]][name]
    return read_rows(spec["files"], graph.nodes_per_chunk[t], int(a), int(b)) if b > a else None


def _assign(col, job, graph, edges, vtxdist, ntype) -> np.ndarray:
    lo, hi = int(vtxdist[col.rank]), int(vtxdist[col.rank + 1])
    num_parts = job.num_parts
    gid = np.arange(lo, hi, dtype=np.int64)
    local = gid - graph.node_offsets[ntype]
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
    return _metis(col, job, graph, edges, vtxdist, ntype)


def _metis(col, job, graph, edges, vtxdist, ntype) -> np.ndarray:
    from graphstore.partition.parmetis import part_kway

    lo, hi = int(vtxdist[col.rank]), int(vtxdist[col.rank + 1])
    n_local = hi - lo
    keys, indeg = [], np.zeros(n_local, dtype=np.int64)
    loops = edges.src != edges.dst
    src, dst = edges.src[loops], edges.dst[loops]
    for i in range(col.rounds(src.shape[0], job.round_rows // 2)):
        s = src[i * (job.round_rows // 2) : (i + 1) * (job.round_rows // 2)]
        d = dst[i * (job.round_rows // 2) : (i + 1) * (job.round_rows // 2)]
        pairs = np.empty((2 * s.shape[0], 3), dtype=np.int64)
        pairs[: s.shape[0], 0], pairs[: s.shape[0], 1], pairs[: s.shape[0], 2] = d, s, 1  # in-edge of d
        pairs[s.shape[0] :, 0], pairs[s.shape[0] :, 1], pairs[s.shape[0] :, 2] = s, d, 0
        got, _, _ = col.exchange(pairs, _owner(pairs[:, 0], vtxdist))
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
    category = _categories(col, job, graph, vtxdist, ntype)
    ncon_cat = int(category.max(initial=-1)) + 1
    ncon_cat = int(col.comm.allreduce(ncon_cat, op=_max()))
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
    col: _Collective,
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
    looser than METIS's), so, as the serial partitioner's repair pass does, nodes move from the fullest
    to the emptiest partition of a category. Every rank plans the same moves from the global counts;
    each move's node count is split over the ranks in proportion to their candidates, and each rank
    moves its candidates with the most neighbors in the receiving partition (neighbor partitions as
    they were before the pass).

    Returns:
        The repaired partition of each local node.
    """
    from graphstore.partition.balance_repair import balance_limits

    num_parts = job.num_parts
    nbr_part = lookup(col, adjncy.astype(np.int64), vtxdist, part, job.round_rows)
    part = part.copy()
    counts = col.comm.allreduce(
        np.bincount(category * num_parts + part, minlength=num_categories * num_parts).astype(np.int64)
    ).reshape(num_categories, num_parts)
    for c in range(num_categories):
        low, high = balance_limits(counts[c], num_parts, tolerance)
        target = counts[c].sum() / num_parts
        row = counts[c].copy()
        moves = []
        for _ in range(4 * num_parts):
            src, dst = int(np.argmax(row)), int(np.argmin(row))
            if row[src] <= high and row[dst] >= low:
                break
            amount = max(1, min(int(row[src] - target), int(target - row[dst])))
            row[src] -= amount
            row[dst] += amount
            moves.append((src, dst, amount))
        for src, dst, amount in moves:
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
            starts, ends = xadj[cand], xadj[cand + 1]
            deg = ends - starts
            row_of = np.repeat(np.arange(cand.size), deg)
            first = np.repeat(np.cumsum(deg) - deg, deg)
            positions = np.repeat(starts, deg) + (np.arange(int(deg.sum())) - first)
            score = (nbr_part[positions] == dst).astype(np.int64) - (nbr_part[positions] == src)
            gain = np.bincount(row_of, weights=score, minlength=cand.size)
            chosen = cand[np.argsort(-gain, kind="stable")[:take]]
            part[chosen] = dst
        counts[c] = col.comm.allreduce(np.bincount(part[category == c], minlength=num_parts).astype(np.int64))
    return part


def _categories(col, job, graph, vtxdist, ntype) -> np.ndarray:
    """Balance category of each local node: its type x (first ``balance_ntypes`` mask holding it),
    renumbered densely over the categories present anywhere."""
    lo, hi = int(vtxdist[col.rank]), int(vtxdist[col.rank + 1])
    names = list(job.balance_ntypes or [])
    width = len(names) + 1
    which = np.full(hi - lo, len(names), dtype=np.int64)
    for t in sorted_unique(ntype):
        for m in reversed(range(len(names))):
            if names[m] not in graph.node_data.get(graph.ntypes[t], {}):
                continue
            rows = _node_rows(graph, int(t), names[m], lo, hi)
            sel = np.flatnonzero(ntype == t)
            which[sel[np.asarray(rows).astype(bool)]] = m
    raw = ntype * width + which
    present = np.zeros(len(graph.ntypes) * width, dtype=np.int64)
    present[sorted_unique(raw)] = 1
    present = col.comm.allreduce(present)
    dense = np.cumsum(present > 0) - 1
    return dense[raw]


@dataclass
class _Labels:
    new_id: np.ndarray  # new ID of each local node (vtxdist range)
    node_bounds: np.ndarray
    ntype_counts: np.ndarray  # [P, T]
    new_src: np.ndarray  # per local edge
    new_dst: np.ndarray
    edge_part: np.ndarray
    edge_bounds: np.ndarray
    etype_counts: np.ndarray  # [P, E]
    edge_cut: float
    train_nodes: list[int]


def _relabel(col, job, graph, edges, vtxdist, ntype, part) -> _Labels:
    num_parts, num_t = job.num_parts, len(graph.ntypes)
    group = part * num_t + ntype
    local_counts = np.bincount(group, minlength=num_parts * num_t).astype(np.int64)
    all_counts = np.array(col.comm.allgather(local_counts))  # [K, P*T]
    ntype_counts = all_counts.sum(axis=0).reshape(num_parts, num_t)
    node_bounds = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(ntype_counts.sum(axis=1), out=node_bounds[1:])
    type_start = node_bounds[:-1, None] + np.concatenate(
        (np.zeros((num_parts, 1), np.int64), np.cumsum(ntype_counts, axis=1)[:, :-1]), axis=1
    )
    base = type_start.reshape(-1) + all_counts[: col.rank].sum(axis=0)
    order = np.argsort(group, kind="stable")
    sorted_group = group[order]
    first = np.searchsorted(sorted_group, sorted_group, side="left")
    new_id = np.empty(group.shape[0], dtype=_id_dtype(int(vtxdist[-1])))
    new_id[order] = base[sorted_group] + np.arange(group.shape[0]) - first
    del order, sorted_group, first
    new_src = lookup(col, edges.src, vtxdist, new_id, job.round_rows)
    new_dst = lookup(col, edges.dst, vtxdist, new_id, job.round_rows)
    src_part = (np.searchsorted(node_bounds, new_src, side="right") - 1).astype(np.int32)
    edge_part = (np.searchsorted(node_bounds, new_dst, side="right") - 1).astype(np.int32)
    cut = int(col.comm.allreduce(int(np.count_nonzero(src_part != edge_part))))
    del src_part
    num_edges = int(col.comm.allreduce(int(edges.src.shape[0])))
    num_e = len(graph.etypes)
    ec = np.bincount(edge_part * num_e + edges.etype, minlength=num_parts * num_e).astype(np.int64)
    etype_counts = col.comm.allreduce(ec).reshape(num_parts, num_e)
    edge_bounds = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(etype_counts.sum(axis=1), out=edge_bounds[1:])
    train = np.zeros(num_parts, dtype=np.int64)
    has_train = False
    lo, hi = int(vtxdist[col.rank]), int(vtxdist[col.rank + 1])
    for t in range(num_t):
        if "train_mask" in graph.node_data.get(graph.ntypes[t], {}):
            has_train = True
            rows = _node_rows(graph, t, "train_mask", lo, hi)
            if rows is not None:
                sel = np.flatnonzero(ntype == t)[np.asarray(rows).astype(bool)]
                train += np.bincount(part[sel], minlength=num_parts)
    train = col.comm.allreduce(train)
    return _Labels(
        new_id=new_id,
        node_bounds=node_bounds,
        ntype_counts=ntype_counts,
        new_src=new_src,
        new_dst=new_dst,
        edge_part=edge_part,
        edge_bounds=edge_bounds,
        etype_counts=etype_counts,
        edge_cut=cut / max(num_edges, 1),
        train_nodes=train.tolist() if has_train else [],
    )


def _writer_of(parts: np.ndarray, size: int) -> np.ndarray:
    return parts % size


def _shuffle_rows(col, job, rows: np.ndarray, dest: np.ndarray) -> np.ndarray:
    """Rows sent to ``dest`` ranks in rounds; everything received, concatenated."""
    got = []
    for i in range(col.rounds(rows.shape[0], job.round_rows)):
        sl = slice(i * job.round_rows, (i + 1) * job.round_rows)
        recv, _, _ = col.exchange(rows[sl], dest[sl])
        got.append(recv)
    if not got:
        return np.zeros((0, *rows.shape[1:]), dtype=rows.dtype)
    return np.concatenate(got)


def _shuffle(col, job, graph, edges, vtxdist, ntype, labels) -> dict:
    """Edges, nodes and arrays to the ranks writing their partitions. Returns this rank's share."""
    lo = int(vtxdist[col.rank])
    num_e = len(graph.etypes)
    # In-edges: (new_src, new_dst, etype, per-type input edge ID) to the writer of the destination's part.
    dest = _writer_of(labels.edge_part, col.size)
    labels.edge_part = None
    rdt = np.result_type(labels.new_src.dtype, edges.eid.dtype, _id_dtype(int(labels.edge_bounds[-1])))
    rec = np.stack([labels.new_src, labels.new_dst, edges.etype.astype(rdt), edges.eid.astype(rdt)], axis=1)
    labels.new_src = labels.new_dst = None
    got = _shuffle_rows(col, job, rec, dest)
    del rec
    # Serial order: (partition, edge type, new destination), ties by input edge ID.
    order = np.lexsort(
        (got[:, 3], got[:, 1], got[:, 2], np.searchsorted(labels.node_bounds, got[:, 1], "right"))
    )
    in_edges = got[order]
    del got, order
    part_of = np.searchsorted(labels.node_bounds, in_edges[:, 1], side="right") - 1
    new_eid = labels.edge_bounds[part_of] + (np.arange(in_edges.shape[0]) - np.searchsorted(part_of, part_of))
    new_eid = new_eid.astype(rdt)
    del part_of
    # Edge arrays follow their edges, one array at a time.
    edge_arrays = {}
    for e, key in enumerate(graph.etypes):
        for name, spec in graph.edge_data.get(key, {}).items():
            sel = np.flatnonzero(edges.etype == e)
            rows = _my_edge_rows(graph, e, spec, edges, sel)
            got_tag = _shuffle_rows(col, job, edges.eid[sel], dest[sel])
            got_rows = _shuffle_rows(col, job, rows, dest[sel])
            # each row goes to its edge's position among this rank's in-edges of type e
            key_mine = in_edges[in_edges[:, 2] == e, 3]
            sorter = np.argsort(key_mine)
            placed = np.empty_like(got_rows)
            placed[sorter[np.searchsorted(key_mine, got_tag, sorter=sorter)]] = got_rows
            edge_arrays[(key, name)] = placed
    # Out-edges: (new_src, new_dst, new_eid, etype) to the writer of the source's partition.
    out_rec = np.stack([in_edges[:, 0], in_edges[:, 1], new_eid, in_edges[:, 2]], axis=1)
    src_part = np.searchsorted(labels.node_bounds, out_rec[:, 0], side="right") - 1
    back = _shuffle_rows(col, job, out_rec, _writer_of(src_part, col.size))
    del out_rec, src_part
    back_part = np.searchsorted(labels.node_bounds, back[:, 0], side="right") - 1
    out_edges = back[np.lexsort((back[:, 2], back[:, 0], back[:, 3], back_part))]
    del back
    # Nodes: (new ID, per-type input ID), then each node array.
    node_part = np.searchsorted(labels.node_bounds, labels.new_id, side="right") - 1
    node_dest = _writer_of(node_part, col.size)
    local = np.arange(lo, lo + ntype.shape[0], dtype=np.int64) - graph.node_offsets[ntype]
    nodes = _shuffle_rows(col, job, np.stack([labels.new_id, local], axis=1), node_dest)
    nodes = nodes[np.argsort(nodes[:, 0])]
    node_arrays = {}
    hi = lo + ntype.shape[0]
    for t, ntype_name in enumerate(graph.ntypes):
        for name in graph.node_data.get(ntype_name, {}):
            sel = np.flatnonzero(ntype == t)
            rows = _node_rows(graph, t, name, lo, hi)
            if rows is None:
                spec = graph.node_data[ntype_name][name]
                from graphstore.partition.chunked import storage_of

                rows = np.zeros((0, *spec["shape"]), dtype=storage_of(spec["dtype"]))
            ids = _shuffle_rows(col, job, labels.new_id[sel], node_dest[sel])
            got_rows = _shuffle_rows(col, job, rows, node_dest[sel])
            order = np.argsort(ids)
            node_arrays[(ntype_name, name)] = (ids[order], got_rows[order])
    return {
        "in_edges": in_edges,
        "new_eid": new_eid,
        "out_edges": out_edges,
        "nodes": nodes,
        "edge_arrays": edge_arrays,
        "node_arrays": node_arrays,
        "num_etypes": num_e,
    }


def _my_edge_rows(graph, e, spec, edges, sel) -> np.ndarray:
    """The rows of an edge array for this rank's edges of type ``e`` (its chunks, in order)."""
    pieces = []
    for t, i in edges.chunks:
        if t == e:
            pieces.append(np.load(spec["files"][i], allow_pickle=False))
    if not pieces:
        from graphstore.partition.chunked import storage_of

        return np.zeros((0, *spec["shape"]), dtype=storage_of(spec["dtype"]))
    return np.concatenate(pieces)


def _write_parts(col, job, graph, labels, mine, out_dir) -> list[dict]:
    schema = GraphSchema(tuple(graph.ntypes), tuple(tuple(k.split(":")) for k in graph.etypes))
    src_types, dst_types = graph.endpoint_types()
    num_e = len(graph.etypes)
    in_edges, out_edges, nodes = mine["in_edges"], mine["out_edges"], mine["nodes"]
    in_part = np.searchsorted(labels.node_bounds, in_edges[:, 1], side="right") - 1
    out_part = np.searchsorted(labels.node_bounds, out_edges[:, 0], side="right") - 1
    node_part = np.searchsorted(labels.node_bounds, nodes[:, 0], side="right") - 1
    metas = []
    for k in range(job.num_parts):
        ns, ne = int(labels.node_bounds[k]), int(labels.node_bounds[k + 1])
        es, ee = int(labels.edge_bounds[k]), int(labels.edge_bounds[k + 1])
        n_out = int(np.count_nonzero(out_part == k)) if k % col.size == col.rank else 0
        metas.append({"path": f"part{k}", "num_nodes": ne - ns, "num_edges": ee - es, "num_out_edges": n_out})
        if k % col.size != col.rank:
            continue
        part_dir = os.path.join(out_dir, f"part{k}")
        os.makedirs(part_dir, exist_ok=True)
        counts = labels.ntype_counts[k]
        toff = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        ins = in_edges[in_part == k]
        in_pieces = csr_pieces(ins[:, 1] - ns, ins[:, 2], toff[dst_types], counts[dst_types], num_e)
        _save(os.path.join(part_dir, "in_indptr.npy"), np.concatenate(in_pieces))
        _save(os.path.join(part_dir, "in_src.npy"), ins[:, 0])
        outs = out_edges[out_part == k]
        out_pieces = csr_pieces(outs[:, 0] - ns, outs[:, 3], toff[src_types], counts[src_types], num_e)
        _save(os.path.join(part_dir, "out_indptr.npy"), np.concatenate(out_pieces))
        _save(os.path.join(part_dir, "out_dst.npy"), outs[:, 1])
        _save(os.path.join(part_dir, "out_eid.npy"), outs[:, 2])
        pn = node_part == k
        _save(os.path.join(part_dir, "orig_nid.npy"), nodes[pn, 1])
        _save(os.path.join(part_dir, "orig_eid.npy"), ins[:, 3])
        for (ntype_name, name), (ids, rows) in mine["node_arrays"].items():
            data = convert_rows(rows[(ids >= ns) & (ids < ne)], graph.node_data[ntype_name][name]["dtype"])
            path = feature_file(part_dir, NODE_FEAT_DIR, schema, ntype_name, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_npy(path, data.dtype, data.shape, [data])
        for (key, name), rows in mine["edge_arrays"].items():
            e = graph.etypes.index(key)
            mask_e = in_edges[:, 2] == e
            sel = in_part[mask_e] == k
            spec = graph.edge_data[key][name]
            path = feature_file(part_dir, EDGE_FEAT_DIR, schema, key, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            data = convert_rows(rows[sel], spec["dtype"])
            write_npy(path, data.dtype, data.shape, [data])
    for meta in metas:
        meta["num_out_edges"] = int(col.comm.allreduce(meta["num_out_edges"]))
    return metas


def _stats(col, job, graph, labels, meter: PhaseMeter, start: float) -> dict:
    ranks = col.comm.allgather(
        {
            "rank": col.rank,
            "host": os.uname().nodename,
            "netns": _netns(),
            "seconds": {k: round(v, 3) for k, v in meter.seconds.items()},
            "cpu_seconds": {k: round(v, 3) for k, v in meter.cpu_seconds.items()},
            "peak_rss_bytes": dict(meter.peak_bytes),
            "run_peak_rss_bytes": meter.run_peak(),
        }
    )
    total = col.comm.allreduce(time.perf_counter() - start, op=_max())
    return {
        "num_nodes": int(graph.node_offsets[-1]),
        "num_edges": int(sum(graph.edges_per_type)),
        "num_parts": job.num_parts,
        "num_ranks": col.size,
        "part_method": job.part_method,
        "edge_cut": labels.edge_cut,
        "part_nodes": np.diff(labels.node_bounds).tolist(),
        "part_edges": np.diff(labels.edge_bounds).tolist(),
        "part_train_nodes": labels.train_nodes,
        "part_type_nodes": {t: labels.ntype_counts[:, i].tolist() for i, t in enumerate(graph.ntypes)},
        "total_seconds": round(total, 3),
        "peak_rss_bytes": max(r["run_peak_rss_bytes"] for r in ranks),
        "total_peak_rss_bytes": sum(r["run_peak_rss_bytes"] for r in ranks),
        "ranks": ranks,
    }


def _config(job, graph, labels, parts_meta, stats) -> dict:
    schema = GraphSchema(tuple(graph.ntypes), tuple(tuple(k.split(":")) for k in graph.etypes))
    book = RangePartitionBook(
        labels.node_bounds,
        labels.edge_bounds,
        schema=schema,
        ntype_counts=labels.ntype_counts,
        etype_counts=labels.etype_counts,
    )

    def schemes(data):
        return {
            t: {n: {"dtype": s["dtype"], "shape": list(s["shape"])} for n, s in arrays.items()}
            for t, arrays in data.items()
        }

    return {
        "format_version": FORMAT_VERSION,
        "graph_name": job.graph_name,
        "num_nodes": stats["num_nodes"],
        "num_edges": stats["num_edges"],
        "num_parts": job.num_parts,
        "part_method": job.part_method,
        "halo_hops": 1,
        "ntypes": {t: i for i, t in enumerate(graph.ntypes)},
        "etypes": {k: i for i, k in enumerate(graph.etypes)},
        "node_map": book.node_map(),
        "edge_map": book.edge_map(),
        "num_nodes_per_type": dict(zip(graph.ntypes, graph.nodes_per_type, strict=True)),
        "num_edges_per_type": dict(zip(graph.etypes, graph.edges_per_type, strict=True)),
        "node_feats": schemes(graph.node_data),
        "edge_feats": schemes(graph.edge_data),
        "parts": parts_meta,
        "balance": {"ntypes": job.balance_ntypes, "edges": bool(job.balance_edges)},
        "stats": {
            "edge_cut": stats["edge_cut"],
            "train_nodes": stats["part_train_nodes"],
            "seed": job.seed,
            "num_ranks": stats["num_ranks"],
            "ranks": [
                {
                    "rank": r["rank"],
                    "host": r["host"],
                    "netns": r["netns"],
                    "seconds": r["seconds"],
                    "cpu_seconds": r["cpu_seconds"],
                    "peak_rss_gib": {k: round(v / 2**30, 3) for k, v in r["peak_rss_bytes"].items()},
                    "run_peak_rss_gib": round(r["run_peak_rss_bytes"] / 2**30, 3),
                }
                for r in stats["ranks"]
            ],
        },
    }


def _netns() -> str:
    """This process's network namespace (``net:[inode]``; ranks in different ones share no loopback)."""
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return ""


def _write_json(out_dir: str, config: dict) -> None:
    with open(os.path.join(out_dir, f"{config['graph_name']}.json"), "w") as fh:
        json.dump(config, fh, indent=1)
