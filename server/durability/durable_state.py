"""A starting server's write path: its durability mode, the replay window of the checkpoint it restored,
and (``durability: wal``) the write-ahead log replayed on top of that checkpoint.

:class:`~graphstore.server.main.RunningServer` opens it after loading and restoring the partition and
replays the log (:meth:`DurableState.replay`) through the servicer before it serves. In ``wal`` mode a
server that restored nothing writes a checkpoint at once, so that its log always starts at a
checkpoint of its own state (never at one of an earlier run).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from graphstore.server.durability.modes import NO_DURABILITY, CheckpointDurability, Durability, WalDurability
from graphstore.server.durability.periodic_checkpoint import PeriodicCheckpointer
from graphstore.server.durability.periodic_checkpoint_folders import WINDOW_FILE, read_manifest
from graphstore.server.durability.replay_window import ReplayWindow
from graphstore.server.durability.write_log import WriteLog, read_records
from graphstore.server.durability.write_path import WritePath
from graphstore.server.metrics import log_event

logger = logging.getLogger(__name__)


class DurableState:
    """The write path of a starting server (see the module docstring).

    Args:
        checkpointer: the periodic checkpointer, or None without a checkpoint folder.
        mode: ``"checkpoint"`` or ``"wal"`` (ignored without a checkpointer).
        fsync: sync the write-ahead log before answering (``wal``).
        restored: the periodic checkpoint the server restored, or None.

    Raises:
        ValueError: an unreadable replay window in the restored checkpoint.
        OSError: the log folder cannot be written.
    """

    def __init__(
        self, checkpointer: PeriodicCheckpointer | None, mode: str, fsync: bool, restored: Path | None
    ) -> None:
        self._checkpointer = checkpointer
        self._restored = restored
        window = ReplayWindow()
        if restored is not None and (restored / WINDOW_FILE).is_file():
            window.load((restored / WINDOW_FILE).read_bytes())
        self._log: WriteLog | None = None
        durability: Durability = NO_DURABILITY
        if checkpointer is not None and mode == "wal":
            self._log = WriteLog(checkpointer.folder, fsync)
            durability = WalDurability(self._log, checkpointer)
        elif checkpointer is not None:
            durability = CheckpointDurability(checkpointer)
        self.write_path = WritePath(window, durability)
        if checkpointer is not None:
            checkpointer.use_write_path(self.write_path)

    def replay(self, apply_logged: Callable[[str, bytes], None]) -> int:
        """Apply the write-ahead log written after the restored checkpoint (``wal`` mode only).

        Args:
            apply_logged: ``(method, encoded request)`` applies one logged request again (the
                servicer's :meth:`~graphstore.server.servicer.PartitionServicer.apply_logged`).

        Returns:
            The records replayed.

        Raises:
            ValueError: a damaged log, a segment the checkpoint needs that is gone, or a logged request
                that fails again.
        """
        if self._log is None or self._checkpointer is None:
            return 0
        segment = read_manifest(self._restored).get("wal_segment") if self._restored is not None else None
        replayed = 0
        if segment is not None:
            for record in read_records(self._checkpointer.folder, segment):
                if record.method != "Checkpoint":  # a checkpoint's files are not state to apply again
                    try:
                        apply_logged(record.method, record.request)
                    except Exception as exc:
                        raise ValueError(
                            f"write-ahead log: {record.method} request {record.seq} of client "
                            f"{record.client!r} failed when applied again: {exc}"
                        ) from exc
                if record.client:
                    self.write_path.window.record(record.client, record.seq, record.answer)
                replayed += 1
            log_event(
                logger,
                "write_log_replayed",
                part_id=self._checkpointer.partition.part_id,
                checkpoint=self._restored,
                from_segment=segment,
                records=replayed,
            )
        else:
            # No checkpoint of this run's log to start from: begin one now.
            self._checkpointer.checkpoint_now("start", force=True)
        return replayed

    def close(self) -> None:
        """Close the write-ahead log (after the last checkpoint)."""
        if self._log is not None:
            self._log.close()
