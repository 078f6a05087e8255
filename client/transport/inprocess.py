"""The in-process transport: a partition loaded in this process, behind the same interface as a server.

Standalone mode (every partition in-process, no network) and co-located reads (a trainer reading its
own host's partition from the mapped files) both open partitions here. This is the one module of the
client that reaches into the server package: the object it returns is the server's own
:class:`~graphstore.server.partition_server.PartitionServer`, so the two transports share one
implementation of every operation.
"""

from __future__ import annotations

from graphstore.partition.types import PartitionData
from graphstore.server.durability.checkpoint_root import NamedCheckpoints
from graphstore.server.partition_server import PartitionServer
from graphstore.types import PartitionAPI

# In-process reads in a trainer gather on the calling thread: the loader threads are already the
# trainer's parallelism, and a spare core belongs to the model training beside them. (A partition
# server, whose idle cores serve nobody else, splits large gathers across threads.)
TRAINER_GATHER_THREADS = 1


class InProcessPartition(PartitionServer):
    """A :class:`PartitionServer` whose checkpoint calls take checkpoint *names* under its checkpoint
    root, as a server's Checkpoint and Restore calls do (the same resolution, the same errors).
    """

    def _named(self) -> NamedCheckpoints:
        return NamedCheckpoints(self.checkpoint_root, super())

    def checkpoint(self, path: str, names: list[str] | None = None, save_id: str | None = None):
        """Write tensors under the checkpoint called ``path`` (relative to the checkpoint root)."""
        self._writes_allowed("checkpoint")
        return self._named().checkpoint(path, names, save_id)

    def commit_checkpoint(self, path: str, save_id: str, names: list[str]) -> None:
        """Commit save ``save_id`` of the checkpoint called ``path``."""
        self._writes_allowed("checkpoint")
        self._named().commit(path, save_id, names)

    def abort_checkpoint(self, path: str, save_id: str) -> None:
        """Drop the unfinished save ``save_id`` of the checkpoint called ``path``."""
        self._writes_allowed("checkpoint")
        self._named().abort(path, save_id)

    def restore(self, path: str, names: list[str] | None = None):
        """Restore tensors from the checkpoint called ``path`` (relative to the checkpoint root)."""
        self._writes_allowed("restore")
        return self._named().restore(path, names)


def open_in_process(data: PartitionData, *, read_only: bool = False) -> PartitionAPI:
    """A partition answered in this process.

    Args:
        data: the loaded (memory-mapped) partition.
        read_only: a view of the partition's read-only data and structure beside a running server
            (co-located reads); writes and new tensors go to the server. False for standalone mode,
            where this object is the partition's only owner.

    Returns:
        An object implementing :class:`graphstore.types.PartitionAPI`, plus ``pull_into(name, ids,
        out)``, which gathers rows straight into a caller's array.
    """
    return InProcessPartition(data, read_only_view=read_only, gather_threads=TRAINER_GATHER_THREADS)
