"""The calls of a remote partition that are not about rows or edges: barriers, checkpoints, restores,
shutdown (a base of :class:`~graphstore.client.transport.remote.RemotePartition`)."""

from __future__ import annotations

from graphstore.client.transport.barrier_poll import wait_at_barrier
from graphstore.client.transport.write_requests import checkpoint_request
from graphstore.protos import graphstore_pb2 as pb

# Checkpoints and restores move whole tensors; they get at least this deadline.
_BULK_DEADLINE_S = 600.0


class RemoteAdminCalls:
    """Barriers, checkpoints, restores and shutdown over :meth:`_call` (the subclass's retrying call),
    with ``_ids`` (request IDs), ``policy`` and ``list_tensors``."""

    def barrier(self, name: str, count: int, timeout_s: float, participant: str = "") -> int:
        """Wait until ``count`` participants reached barrier ``name`` on this server (polling: no server
        thread waits, see :mod:`~graphstore.client.transport.barrier_poll`).

        Raises:
            ValueError: bad count or timeout.
            TimeoutError: (BarrierTimeoutError) not everyone arrived within ``timeout_s``.
            ServerUnavailableError: the server did not answer.
        """
        return wait_at_barrier(
            lambda request: self._call("Barrier", request), name, count, timeout_s, participant
        )

    def checkpoint(
        self, path: str, names: list[str] | None = None, save_id: str | None = None
    ) -> tuple[list[str], int]:
        """Write tensors (all run-time tensors by default) under ``path`` on the server's host: straight
        into ``path``, or as this server's part of the cluster-wide save ``save_id`` (then
        :meth:`commit_checkpoint` or :meth:`abort_checkpoint`; ``server/durability/checkpoint_set.py``).

        Returns:
            ``(files written, rows written)``.
        """
        return self._checkpoint_phase(path, names, save_id, "write")

    def commit_checkpoint(self, path: str, save_id: str, names: list[str]) -> None:
        """Make the save ``save_id`` (every server wrote its part) the checkpoint of ``names`` at ``path``.

        Raises:
            FileNotFoundError: this server's part of the save is not there.
        """
        self._checkpoint_phase(path, names, save_id, "commit")

    def abort_checkpoint(self, path: str, save_id: str) -> None:
        """Remove the files of the unfinished save ``save_id`` under ``path``."""
        self._checkpoint_phase(path, None, save_id, "abort")

    def _checkpoint_phase(
        self, path: str, names: list[str] | None, save_id: str | None, phase: str
    ) -> tuple[list[str], int]:
        request = self._ids.stamp(checkpoint_request(path, names, save_id, phase))
        response = self._call("Checkpoint", request, timeout=max(self.policy.deadline_s, _BULK_DEADLINE_S))
        return list(response.files), response.rows

    def restore(self, path: str, names: list[str] | None = None) -> tuple[list[str], int]:
        """Restore tensors from a checkpoint folder on the server's host.

        Returns:
            ``(restored names, rows restored)``.

        Raises:
            FileNotFoundError: missing folder or tensor.
            ValueError: another graph's checkpoint or a scheme mismatch.
        """
        request = self._ids.stamp(pb.RestoreRequest(path=path))
        request.names[:] = list(names or [])
        response = self._call("Restore", request, timeout=max(self.policy.deadline_s, _BULK_DEADLINE_S))
        self.list_tensors()
        return list(response.names), response.rows

    def shutdown(self) -> None:
        """Ask the server to stop (it finishes the calls in flight, then exits).

        Raises:
            ServerUnavailableError: the server could not be reached.
        """
        self._call("Shutdown", pb.ShutdownRequest())
