"""Where a DistTensor's rows of one partition are read, and how they reach their places in the answer.

Rows of read-only data loaded from the partition files are read in this process (standalone mode, or
the co-located partition's mapped files); everything else is pulled from the partition's server.
A multi-partition read puts each partition's rows in place from a worker thread, so the placement
overlaps the other partitions' transfers; :func:`schedule_reads` decides which reads run in the
calling thread and which beside it.
"""

from __future__ import annotations

import numpy as np

from graphstore.client.context import ClientContext
from graphstore.client.routing import scatter_rows, split_runs
from graphstore.client.transport.channel import wait_all
from graphstore.types import PartitionAPI

# Runs of consecutive answer positions at least this long are copied as slices; shorter ones are
# scattered together (a slice copy costs a Python call, a scattered row a fancy-index step).
_MIN_RUN = 64
# In-process reads up to this many bytes run in the calling thread before the remote ones: handing
# them to a worker thread and waiting for it costs more than the gather (about 0.1 ms for 256 KB).
INLINE_READ_BYTES = 256 * 1024


class InProcessReader:
    """A partition read in this process (sorted first so it runs while the RPCs are in flight)."""

    __slots__ = ("partition",)

    def __init__(self, partition):
        self.partition = partition

    def pull(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Rows of ``name`` for ``ids`` (see :meth:`graphstore.types.PartitionAPI.pull`)."""
        return self.partition.pull(name, ids)

    def pull_into(self, name: str, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Gather rows of ``name`` for ``ids`` straight into ``out``."""
        return self.partition.pull_into(name, ids, out)


def partition_reader(ctx: ClientContext, part_id: int, local_reads: bool) -> PartitionAPI | InProcessReader:
    """Where partition ``part_id``'s rows of a tensor are read: in-process or its server.

    Args:
        ctx: the client context.
        part_id: the partition.
        local_reads: the tensor's rows may be read from the co-located partition's files (read-only
            data loaded from the partition files).
    """
    if ctx.standalone:
        return InProcessReader(ctx.partition(part_id))
    if local_reads and part_id == ctx.local_part_id:
        reader = ctx.local_reader(part_id)
        if reader is not None:
            return InProcessReader(reader)
    return ctx.partition(part_id)


def schedule_reads(
    targets: list[tuple], row_bytes: int, inline_bytes: int = INLINE_READ_BYTES
) -> tuple[list[tuple], list[tuple]]:
    """Order one multi-partition read's per-partition reads: ``(first, concurrent)``.

    ``first`` are the in-process reads of at most ``inline_bytes`` (run one after the other in the
    calling thread, before anything else: cheaper than a thread handoff). ``concurrent`` are the
    others, to run together, a remote read first: ``run_parallel`` runs its first call in the calling
    thread, so the calling thread waits on its own RPC (no handoff to a pool thread and back on the
    path every small pull takes) while larger in-process gathers and other servers' reads run beside it.

    Args:
        targets: ``(reader, positions, part_ids)`` per partition.
        row_bytes: bytes of one row.
        inline_bytes: the largest in-process read run first in the calling thread.

    Returns:
        ``(first, concurrent)``, two lists of the given targets.
    """
    first, local, remote = [], [], []
    for target in targets:
        if not isinstance(target[0], InProcessReader):
            remote.append(target)
        elif target[2].size * row_bytes <= inline_bytes:
            first.append(target)
        else:
            local.append(target)
    return first, remote + local


def read_into(
    out: np.ndarray,
    reader: PartitionAPI | InProcessReader,
    name: str,
    positions: np.ndarray,
    part_ids: np.ndarray,
) -> None:
    """Read one partition's rows of ``name`` for ``part_ids`` into ``out[positions]``.

    A loader's input nodes are the seeds, then the other sources, each sorted: a partition's rows
    fill a few long runs of the answer (copied, or gathered in-process straight into place) and a
    scattered remainder.
    """
    if not isinstance(reader, InProcessReader):
        place_rows(out, positions, reader.pull(name, part_ids))
        return
    runs, rest = split_runs(positions, _MIN_RUN)
    for start, stop in runs:
        first = int(positions[start])
        reader.pull_into(name, part_ids[start:stop], out[first : first + stop - start])
    if not runs:
        scatter_rows(out, positions, reader.pull(name, part_ids))
    elif rest.size:
        scatter_rows(out, positions[rest], reader.pull(name, part_ids[rest]))


def place_rows(out: np.ndarray, positions: np.ndarray, rows: np.ndarray) -> None:
    """``out[positions] = rows``: long runs of consecutive positions copied as slices, the rest scattered."""
    rows = rows.reshape((positions.size, *out.shape[1:]))
    runs, rest = split_runs(positions, _MIN_RUN)
    for start, stop in runs:
        first = int(positions[start])
        out[first : first + stop - start] = rows[start:stop]
    if not runs:
        scatter_rows(out, positions, rows)
    elif rest.size:
        scatter_rows(out, positions[rest], rows[rest])


def read_routes(ctx: ClientContext, out: np.ndarray, name: str, targets: list[tuple], row_bytes: int) -> None:
    """Read every partition's rows of ``name`` into ``out`` (``targets``: ``(reader, positions, part_ids)``
    per partition, positions into ``out``).

    Remote pulls that can be sent without a thread (``pull_started``: over a free call stream, or as a
    unary call in flight) go out first; the in-process reads then run while they are in flight
    (:func:`schedule_reads`), and the remote rows are placed as their answers arrive: a mixed read costs
    about what its remote part costs alone.
    """
    started, others = [], []
    for target in targets:
        start = getattr(target[0], "pull_started", None)
        if start is None:
            others.append(target)
        else:
            started.append((target[1], start(name, target[2])))
    try:
        first, concurrent = schedule_reads(others, row_bytes)
        for reader, positions, part_ids in first:
            read_into(out, reader, name, positions, part_ids)
        ctx.run_parallel(
            [lambda t=t, pos=pos, i=i: read_into(out, t, name, pos, i) for t, pos, i in concurrent]
        )
    except BaseException as exc:
        wait_all([wait for _, wait in started], failed=exc)
        raise
    for (positions, _), rows in zip(started, wait_all([wait for _, wait in started]), strict=True):
        place_rows(out, positions, rows)


def fill_from_carried(ids: np.ndarray, carried, out: np.ndarray) -> np.ndarray:
    """Put into ``out`` the rows of ``ids`` that arrived with another answer (``carried``: rows with their
    sorted IDs, :class:`~graphstore.protos.edges_wire.CarriedRows`); returns the positions of ``ids``
    still to read, in order.

    >>> from graphstore.protos.edges_wire import CarriedRows
    >>> out = np.zeros((4, 1))
    >>> carried = [CarriedRows("x", np.array([3, 9]), np.array([[1.0], [2.0]]))]
    >>> fill_from_carried(np.array([7, 3, 9, 3]), carried, out)
    array([0])
    >>> out[:, 0].tolist()
    [0.0, 1.0, 2.0, 1.0]
    """
    missing = np.ones(ids.size, dtype=bool)
    for rows in carried:
        if rows.ids.size == 0:
            continue
        at = np.searchsorted(rows.ids, ids)
        np.minimum(at, rows.ids.size - 1, out=at)
        hit = (rows.ids[at] == ids) & missing
        found = np.flatnonzero(hit)
        if found.size:
            out[found] = rows.rows[at[found]]
            missing[found] = False
    return np.flatnonzero(missing)
