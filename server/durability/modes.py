"""When an applied write may be answered: the durability modes of a partition server.

``durability`` in the cluster config's ``checkpoint`` section (``graphstore server --durability``):

- no checkpoint folder (:data:`NO_DURABILITY`): answers leave at once; a crash loses every run-time
  tensor;
- ``checkpoint`` (:class:`CheckpointDurability`): periodic checkpoints; an answer leaves once the
  checkpointer's loss bound allows it (:meth:`PeriodicCheckpointer.wait_saved
  <graphstore.server.durability.periodic_checkpoint.PeriodicCheckpointer.wait_saved>`), so a crash
  loses at most ``every_updates`` acknowledged updates, or those of ``every_s`` seconds;
- ``wal`` (:class:`WalDurability`): every write is appended to the write-ahead log
  (:mod:`~graphstore.server.durability.write_log`) before its answer leaves (and synced first with ``fsync``);
  a crash loses no acknowledged write.

The :class:`~graphstore.server.durability.write_path.WritePath` calls :meth:`Durability.admit` and
:meth:`Durability.record` under the write gate, and :meth:`Durability.wait` before answering.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from graphstore.server.durability.write_log import LogRecord, WriteLog
from graphstore.server.metrics import log_event

logger = logging.getLogger(__name__)


class UpdateCounter(Protocol):
    """What the durability modes need of the periodic checkpointer
    (:class:`~graphstore.server.durability.periodic_checkpoint.PeriodicCheckpointer`, which itself
    takes its snapshots through the write path that calls these modes)."""

    def note_update(self, count: int = 1) -> tuple[int, float]:
        """Count an applied update; returns the token :meth:`wait_saved` takes."""

    def wait_saved(self, token: tuple[int, float], timeout: float | None) -> None:
        """Return once the loss bound allows answering the update of ``token``."""

    def checkpoint_now(self, reason: str = "requested", force: bool = False) -> Any:
        """Take a checkpoint at once."""


class Durability:
    """No durability: every answer leaves at once (the base of the other modes)."""

    mode = "off"
    # Whether writes are applied one at a time (the log's order must be the order of application).
    ordered = False

    def admit(self) -> None:
        """Refuse a write before it is applied when the mode cannot make it durable.

        Raises:
            ConnectionAbortedError: the server takes no more writes (UNAVAILABLE).
        """

    def record(self, method: str, client: str, seq: int, raw: bytes, answer: bytes, update: bool) -> Any:
        """Note an applied write (called under the write gate).

        Args:
            method: the RPC method.
            client, seq: its request ID (empty client: none).
            raw: the encoded request.
            answer: the encoded answer.
            update: whether it changed the tensors.

        Returns:
            The token :meth:`wait` takes.
        """
        return None

    def wait(self, token: Any, timeout: float | None) -> None:
        """Return once the write of ``token`` may be answered (None: a write restored at start, or one
        that changed nothing: at once).

        Raises:
            ConnectionAbortedError: not within ``timeout`` (the client retries; its replay waits again).
        """

    def snapshot_started(self) -> int | None:
        """A checkpoint's snapshot begins (under the exclusive gate); returns the first write-ahead log
        segment it does not hold (None without a log)."""
        return None

    def snapshot_saved(self, wal_segment: int | None) -> None:
        """The checkpoint of :meth:`snapshot_started` is complete."""


NO_DURABILITY = Durability()


class CheckpointDurability(Durability):
    """Periodic checkpoints: answers wait for the checkpointer's loss bound.

    Args:
        checkpointer: the server's periodic checkpointer (counts updates, knows what is saved).
    """

    mode = "checkpoint"

    def __init__(self, checkpointer: UpdateCounter) -> None:
        self._checkpointer = checkpointer

    def record(self, method: str, client: str, seq: int, raw: bytes, answer: bytes, update: bool) -> Any:
        return self._checkpointer.note_update() if update else None

    def wait(self, token: Any, timeout: float | None) -> None:
        if token is not None:
            self._checkpointer.wait_saved(token, timeout)


_LOG_FAILED = object()


class WalDurability(Durability):
    """A write-ahead log: each write is appended (and with ``fsync`` synced) before it is answered.

    A write that cannot be appended (a full disk) was applied but is not in the log: it is never
    answered, and the server takes no further write until it is restarted (from its checkpoint and
    log, without that write). A Restore is answered only once a checkpoint holds it: replaying it from
    the log would read the checkpoint folder again, which a later save may have changed.

    Args:
        log: the server's write-ahead log.
        checkpointer: counts updates for the periodic checkpoints (which truncate the log).
    """

    mode = "wal"
    ordered = True

    def __init__(self, log: WriteLog, checkpointer: UpdateCounter) -> None:
        self.log = log
        self._checkpointer = checkpointer
        self._failed: OSError | None = None

    def _refuse(self) -> ConnectionAbortedError:
        return ConnectionAbortedError(
            f"write-ahead log {self.log.folder} failed ({self._failed}); this server takes no more writes "
            "until it is restarted"
        )

    def admit(self) -> None:
        if self._failed is not None:
            raise self._refuse()

    def record(self, method: str, client: str, seq: int, raw: bytes, answer: bytes, update: bool) -> Any:
        try:
            position = self.log.append(LogRecord(method, client, seq, raw, answer))
        except OSError as exc:
            self._fail(exc)
            return _LOG_FAILED
        if update:
            self._checkpointer.note_update()
        return position, method == "Restore"

    def wait(self, token: Any, timeout: float | None) -> None:
        if token is None:
            return  # restored from a checkpoint or the log: durable already
        if token is _LOG_FAILED:
            raise self._refuse()
        position, restore = token
        try:
            self.log.wait_durable(position)
        except OSError as exc:
            self._fail(exc)
            raise self._refuse() from None
        if restore:
            try:
                self._checkpointer.checkpoint_now("restore")
            except OSError as exc:
                raise ConnectionAbortedError(
                    f"the restore was applied but the checkpoint that must hold it failed ({exc}); retry"
                ) from None

    def _fail(self, exc: OSError) -> None:
        if self._failed is None:
            self._failed = exc
            log_event(logger, "write_log_failed", logging.ERROR, folder=self.log.folder, error=exc)

    def snapshot_started(self) -> int | None:
        return self.log.rotate()

    def snapshot_saved(self, wal_segment: int | None) -> None:
        if wal_segment is not None:
            self.log.remove_before(wal_segment)
