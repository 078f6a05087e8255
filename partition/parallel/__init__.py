"""Partition a chunked graph with K MPI ranks (``mpirun -np K graphstore partition --chunks ...``).

No rank holds the graph. Rank ``r`` owns the homogeneous node range ``[vtxdist[r], vtxdist[r+1])`` (an
even split of the type-major ID space) and reads the edge chunks ``j`` with ``j % K == r`` and the
feature rows of its node range. Phases (each timed, with its peak RSS, per rank), one module each:

1. ``check`` (:mod:`.job`): rank 0 reads the metadata and every chunk header; any problem (a missing
   file, a chunk of the wrong shape or dtype) is raised on every rank, naming the file, before any output
   exists.
2. ``load`` (:mod:`.load`): each rank reads its edge chunks (IDs checked against their types' counts).
3. ``assign`` (:mod:`.assign`): ParMETIS (``metis``), ``random`` or ``range``, then the balance repair.
4. ``relabel`` (:mod:`.relabel`): new node IDs, the same layout as the serial partitioner.
5. ``shuffle`` (:mod:`.shuffle`): edges, nodes and arrays to the ranks writing their partitions.
6. ``write`` (:mod:`.write`): each rank writes its partitions in today's format; rank 0 writes
   ``NAME.json`` through the writer's one config function.

The driver is :mod:`.run`; :mod:`.collective` holds the bounded all-to-all exchanges they share.
"""

from graphstore.partition.parallel.assign import repair_balance_parallel
from graphstore.partition.parallel.collective import Collective, lookup, sorted_unique
from graphstore.partition.parallel.job import PARALLEL_METHODS, ParallelJob
from graphstore.partition.parallel.run import SHARED_MARK, partition_chunks

__all__ = [
    "PARALLEL_METHODS",
    "SHARED_MARK",
    "Collective",
    "ParallelJob",
    "lookup",
    "partition_chunks",
    "repair_balance_parallel",
    "sorted_unique",
]
