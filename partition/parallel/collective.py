"""Collective helpers of the parallel partitioner: bounded all-to-all exchanges of numpy rows over MPI,
the rank owning an ID, and a distributed table lookup.

Every function here is collective where it says so: every rank of the communicator calls it, with its
own rows, the same number of times.
"""

from __future__ import annotations

import numpy as np


def mpi_max():
    """``MPI.MAX`` (mpi4py is imported only where a collective runs)."""
    from mpi4py import MPI

    return MPI.MAX


class Collective:
    """All-to-all exchanges of numpy rows over one mpi4py communicator.

    Attributes:
        comm: the communicator.
        size: its number of ranks.
        rank: this process's rank.
    """

    def __init__(self, comm) -> None:
        self.comm = comm
        self.size = comm.size
        self.rank = comm.rank

    def exchange(self, rows: np.ndarray, dest: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Send ``rows[i]`` to rank ``dest[i]`` (collective).

        Args:
            rows: the rows to send (any dtype, any row shape).
            dest: the destination rank of each row.

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
            [_bytes_of(sent), (send_b, send_d), MPI.BYTE],
            [_bytes_of(recv), (recv_b, recv_d), MPI.BYTE],
        )
        return recv, order, recv_counts

    def reply(self, answers: np.ndarray, recv_counts: np.ndarray, order: np.ndarray) -> np.ndarray:
        """Send ``answers`` (one per row received by :meth:`exchange`) back to where the rows came from
        (collective).

        Returns:
            The answers in the original order of the rows this rank sent.
        """
        source = np.repeat(np.arange(self.size), recv_counts)
        back, _, _ = self.exchange(answers, source)
        out = np.empty_like(back)
        out[order] = back
        return out

    def rounds(self, n_local: int, round_rows: int) -> int:
        """Rounds every rank runs so that each sends at most ``round_rows`` rows per round (collective)."""
        return int(self.comm.allreduce(-(-n_local // round_rows), op=mpi_max()))

    def shuffle(self, rows: np.ndarray, dest: np.ndarray, round_rows: int) -> np.ndarray:
        """Send ``rows[i]`` to rank ``dest[i]`` in rounds of at most ``round_rows`` rows (collective).

        Returns:
            Everything this rank received, concatenated (by round, then by source rank).
        """
        got = []
        for i in range(self.rounds(rows.shape[0], round_rows)):
            piece = slice(i * round_rows, (i + 1) * round_rows)
            recv, _, _ = self.exchange(rows[piece], dest[piece])
            got.append(recv)
        if not got:
            return np.zeros((0, *rows.shape[1:]), dtype=rows.dtype)
        return np.concatenate(got)


def _bytes_of(array: np.ndarray) -> np.ndarray:
    return array.view(np.uint8).reshape(-1) if array.size else np.zeros(0, np.uint8)


def id_dtype(limit: int) -> np.dtype:
    """int32 for IDs below ``limit`` when it fits 31 bits (half the memory of int64), else int64."""
    return np.dtype(np.int32 if limit < 2**31 else np.int64)


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted: one sort and a comparison (numpy 2's hash-based ``np.unique`` is
    many times slower on tens of millions of int64 keys)."""
    values = np.sort(values)
    if values.size == 0:
        return values
    keep = np.empty(values.size, dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def owner_rank(ids: np.ndarray, vtxdist: np.ndarray) -> np.ndarray:
    """The rank holding each of ``ids``, rank ``r`` holding ``[vtxdist[r], vtxdist[r + 1])``."""
    return np.searchsorted(vtxdist, ids, side="right") - 1


def lookup(
    col: Collective, ids: np.ndarray, vtxdist: np.ndarray, table: np.ndarray, round_rows: int
) -> np.ndarray:
    """``table_global[ids]``, where each rank holds ``table`` for its ``vtxdist`` range (collective).

    Args:
        col: the ranks.
        ids: global IDs to look up (any range).
        vtxdist: ``[size + 1]`` range boundaries of the ranks.
        table: this rank's entries, one per ID of its range.
        round_rows: IDs sent per round.

    Returns:
        One entry per ID, in the order of ``ids``.
    """
    out = np.empty(ids.shape[0], dtype=table.dtype)
    lo = vtxdist[col.rank]
    for i in range(col.rounds(ids.shape[0], round_rows)):
        piece = ids[i * round_rows : (i + 1) * round_rows]
        asked, order, counts = col.exchange(piece, owner_rank(piece, vtxdist))
        out[i * round_rows : i * round_rows + piece.shape[0]] = col.reply(table[asked - lo], counts, order)
    return out
