"""The parallel partitioner's driver: the phases in order on every rank, the staging folder, the
statistics.

Output is staged in a folder beside ``--out`` and renamed at the end, as the serial partitioner does. On
hosts without a shared file system every rank writes (and renames) its own staging folder with its own
partitions and a copy of ``NAME.json``: run rank ``r`` on the host that serves partitions ``k % K == r``.
"""

from __future__ import annotations

import logging
import os
import shutil
import time

import numpy as np

from graphstore.partition.chunked import ChunkedGraph, read_metadata
from graphstore.partition.memory import PhaseMeter
from graphstore.partition.parallel.assign import assign_parts
from graphstore.partition.parallel.collective import Collective, mpi_max
from graphstore.partition.parallel.job import ParallelJob, RankScope, check_job
from graphstore.partition.parallel.load import load_edges
from graphstore.partition.parallel.relabel import ParallelLabels, relabel_parallel
from graphstore.partition.parallel.shuffle import shuffle
from graphstore.partition.parallel.write import write_config, write_parts
from graphstore.partition.writer import replace_folder

logger = logging.getLogger(__name__)

SHARED_MARK = ".rank0"


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
    col = Collective(comm)
    start = time.perf_counter()
    meter = PhaseMeter()
    with meter.phase("check"):
        graph = _checked_graph(comm, job)
    _log(comm, "check", meter)
    with meter.phase("load"):
        edges = load_edges(col, graph)
    _log(comm, "load", meter)
    scope = RankScope.split(col, job, graph)
    with meter.phase("assign"):
        part = assign_parts(scope, edges)
    _log(comm, "assign", meter)
    with meter.phase("relabel"):
        labels = relabel_parallel(scope, edges, part)
        edges.src = edges.dst = None  # the new IDs replace them
        del part

    _log(comm, "relabel", meter)
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
            share = shuffle(scope, edges, labels)
        del edges
        _log(comm, "shuffle", meter)
        with meter.phase("write"):
            parts = write_parts(scope, labels, share, tmp_dir)
        _log(comm, "write", meter)
    except BaseException:
        ok = False
        raise
    finally:
        if not ok:
            shutil.rmtree(tmp_dir, ignore_errors=True)
            if col.size > 1:
                MPI.COMM_WORLD.Abort(1)
    stats = _stats(col, job, graph, labels, meter, start)
    comm.Barrier()
    if comm.rank == 0:
        os.remove(os.path.join(tmp_dir, SHARED_MARK))
        write_config(tmp_dir, job, graph, labels, parts, stats)
        replace_folder(tmp_dir, job.out_path)
    comm.Barrier()
    if comm.rank != 0 and os.path.isdir(tmp_dir):  # no shared file system: this host's own copy
        if os.path.exists(os.path.join(tmp_dir, SHARED_MARK)):
            os.remove(os.path.join(tmp_dir, SHARED_MARK))
        write_config(tmp_dir, job, graph, labels, parts, stats)
        replace_folder(tmp_dir, job.out_path)
    stats["config_path"] = os.path.join(job.out_path, f"{job.graph_name}.json")
    return stats


def _checked_graph(comm, job: ParallelJob) -> ChunkedGraph:
    """Rank 0 checks the job and the chunks; a problem is raised on every rank."""
    error, graph = None, None
    if comm.rank == 0:
        try:
            graph = check_job(job)
        except (ValueError, FileNotFoundError, FileExistsError) as exc:
            error = exc
    error = comm.bcast(error, root=0)
    if error is not None:
        raise error
    return read_metadata(job.chunks) if comm.rank else graph


def _log(comm, phase: str, meter: PhaseMeter) -> None:
    logger.info(
        "rank %d/%d: %s done in %.2fs, peak RSS %.3f GiB",
        comm.rank,
        comm.size,
        phase,
        meter.seconds.get(phase, 0.0),
        meter.peak_bytes.get(phase, 0) / 2**30,
    )


def _stats(
    col: Collective,
    job: ParallelJob,
    graph: ChunkedGraph,
    labels: ParallelLabels,
    meter: PhaseMeter,
    start: float,
) -> dict:
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
    total = col.comm.allreduce(time.perf_counter() - start, op=mpi_max())
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


def _netns() -> str:
    """This process's network namespace (``net:[inode]``; ranks in different ones share no loopback)."""
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return ""
