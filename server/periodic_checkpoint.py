"""Periodic, atomic checkpoints of one partition server.

A server started with ``--checkpoint-dir DIR`` (and ``--checkpoint-every-s`` and/or
``--checkpoint-every-updates``) writes every writable tensor it holds (run-time tensors such as
embeddings, and partition features loaded with ``--writable-features``), with the sparse optimizer
state beside the rows, into ``DIR/part-K/ckpt-N`` (the layout is in
:mod:`~graphstore.server.periodic_checkpoint_folders`; a restarted server reads it back with
:mod:`~graphstore.server.periodic_restore`).

Each checkpoint is written into a hidden temporary folder (``.tmp-ckpt-...``), its files and folders
are fsync'ed, and only then is it renamed to ``ckpt-N``: a reader, or a server restarting after a
crash in the middle of a write, sees either a complete checkpoint or none. The newest ``keep``
checkpoints are kept (``keep + 1`` for a moment when a crash falls between a rename and the removal
of the oldest; the next start removes it).

An *update* is one Push, PushGrad, Init that created a tensor, Delete that deleted one, or Restore.
A checkpoint includes every update that was answered before it started (the manifest's
``updates``) and possibly some that arrived while it was written (each tensor is read under its
lock, so each tensor's rows are consistent). A server that dies loses exactly the updates after its
latest complete checkpoint: at most ``every_updates`` updates, or ``every_s`` seconds of them.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from graphstore.server.metrics import ServerMetrics, log_event
from graphstore.server.periodic_checkpoint_folders import (
    FORMAT,
    MANIFEST,
    TENSORS_FOLDER,
    checkpoint_name,
    checkpoint_sequence,
    list_checkpoints,
    partition_folder,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckpointPolicy:
    """When and where a server checkpoints itself.

    Attributes:
        root: the checkpoint folder shared by the cluster's servers (each writes ``root/part-K``).
        every_s: checkpoint when this many seconds passed since the last one and something changed.
        every_updates: checkpoint after this many updates.
        keep: how many complete checkpoints to keep (>= 1).
    """

    root: str
    every_s: float | None = None
    every_updates: int | None = None
    keep: int = 3

    def validate(self) -> None:
        """Check the values.

        Raises:
            ValueError: naming the field and its value.
        """
        if not self.root:
            raise ValueError("checkpoint_dir: a periodic checkpoint needs a folder")
        if self.every_s is not None and not 0 < self.every_s <= 86400 * 7:
            raise ValueError(f"checkpoint_every_s must be in (0, 604800], got {self.every_s}")
        if self.every_updates is not None and self.every_updates < 1:
            raise ValueError(f"checkpoint_every_updates must be >= 1, got {self.every_updates}")
        if self.keep < 1:
            raise ValueError(f"checkpoint_keep must be >= 1, got {self.keep}")


def _fsync_tree(folder: Path) -> None:
    """fsync every file and folder under ``folder`` (the rename that follows must not outrun the data)."""
    for dirpath, _dirnames, filenames in os.walk(folder):
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(dirpath))


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PeriodicCheckpointer:
    """Writes checkpoints of a partition every ``every_s`` seconds and/or ``every_updates`` updates.

    Args:
        partition: the :class:`~graphstore.server.partition_server.PartitionServer`.
        policy: when and where.
        metrics: counters of written / failed checkpoints, if metrics are on.
    """

    def __init__(self, partition, policy: CheckpointPolicy, metrics: ServerMetrics | None = None) -> None:
        policy.validate()
        self.partition = partition
        self.policy = policy
        self.folder = partition_folder(policy.root, partition.part_id)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._metrics = metrics
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()
        self._updates = 0  # updates answered so far (monotonic)
        self._checkpointed_updates = 0  # self._updates when the last checkpoint started
        self._last_time = time.monotonic()
        self._stopping = False
        self._thread: threading.Thread | None = None
        existing = list_checkpoints(policy.root, partition.part_id)
        self._seq = checkpoint_sequence(existing[-1]) if existing else 0
        for stale in self.folder.glob(".tmp-ckpt-*"):
            shutil.rmtree(stale, ignore_errors=True)  # a write cut short by a crash
        for stale in self.folder.glob(".view-*"):
            shutil.rmtree(stale, ignore_errors=True)
        self._prune()  # a crash between a rename and its prune leaves one checkpoint too many

    @property
    def updates(self) -> int:
        """Updates counted so far."""
        with self._cond:
            return self._updates

    def note_update(self, count: int = 1) -> None:
        """Count answered updates (called by the servicer after each successful write)."""
        with self._cond:
            self._updates += count
            every = self.policy.every_updates
            if every is not None and self._updates - self._checkpointed_updates >= every:
                self._cond.notify_all()

    def start(self) -> None:
        """Start the background thread (a no-op without ``every_s`` and ``every_updates``)."""
        if self.policy.every_s is None and self.policy.every_updates is None:
            return
        self._thread = threading.Thread(target=self._run, name="graphstore-checkpoint", daemon=True)
        self._thread.start()

    def _due(self) -> bool:
        pending = self._updates - self._checkpointed_updates
        if pending <= 0:
            return False
        if self.policy.every_updates is not None and pending >= self.policy.every_updates:
            return True
        return self.policy.every_s is not None and time.monotonic() - self._last_time >= self.policy.every_s

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not self._due():
                    wait = 1.0
                    if self.policy.every_s is not None:
                        wait = max(0.01, min(wait, self._last_time + self.policy.every_s - time.monotonic()))
                    self._cond.wait(wait)
                if self._stopping:
                    return
            try:
                self.checkpoint_now("periodic")
            except Exception as exc:  # noqa: BLE001 - a failed checkpoint must not end the server
                log_event(
                    logger, "checkpoint_failed", logging.ERROR, part_id=self.partition.part_id, error=exc
                )
                with self._cond:
                    # Retry after a pause instead of spinning on a full disk.
                    self._cond.wait(min(self.policy.every_s or 5.0, 5.0))

    def checkpoint_now(self, reason: str = "requested") -> Path | None:
        """Write a checkpoint now (serialized with the periodic ones).

        Args:
            reason: logged with the event (periodic, shutdown, ...).

        Returns:
            The new ``ckpt-N`` folder, or None when nothing changed since the last checkpoint.

        Raises:
            OSError: the folder cannot be written (the metrics count the failure).
        """
        with self._write_lock:
            with self._cond:
                updates = self._updates
                if updates == self._checkpointed_updates and self._seq > 0:
                    return None
                previous = self._checkpointed_updates
                self._checkpointed_updates = updates
                self._last_time = time.monotonic()
            started = time.monotonic()
            try:
                path, names, rows = self._write(updates)
            except BaseException:
                if self._metrics is not None:
                    self._metrics.checkpoints.labels("failed").inc()
                with self._cond:
                    self._checkpointed_updates = previous  # still due: the updates are not saved
                raise
            seconds = time.monotonic() - started
            if self._metrics is not None:
                self._metrics.checkpoints.labels("written").inc()
                self._metrics.checkpoint_seconds.observe(seconds)
            log_event(
                logger,
                "checkpoint_written",
                part_id=self.partition.part_id,
                path=path,
                reason=reason,
                tensors=len(names),
                rows=rows,
                updates=updates,
                seconds=seconds,
            )
            self._prune()
            return path

    def _write(self, updates: int) -> tuple[Path, list[str], int]:
        seq = self._seq + 1
        tmp = self.folder / f".tmp-ckpt-{seq:08d}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            started_at = time.time()
            names: list[str] = []
            rows = 0
            for attempt in range(3):
                names = sorted(s.name for s in self.partition.list_tensors() if s.writable)
                if not names:
                    break
                try:
                    _, rows = self.partition.checkpoint(str(tmp / TENSORS_FOLDER), names)
                    break
                except KeyError:
                    # A tensor was deleted between listing and writing: list again.
                    shutil.rmtree(tmp / TENSORS_FOLDER, ignore_errors=True)
                    if attempt == 2:
                        raise
            meta = self.partition.metadata()
            manifest = {
                "format": FORMAT,
                "graph_name": meta.graph_name,
                "part_id": meta.part_id,
                "num_parts": meta.num_parts,
                "seq": seq,
                "tensors": names,
                "rows": int(rows),
                "updates": updates,
                "started_at": started_at,
                "completed_at": time.time(),
            }
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
            _fsync_tree(tmp)
            final = self.folder / checkpoint_name(seq)
            os.rename(tmp, final)
            _fsync_dir(self.folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._seq = seq
        return final, names, int(rows)

    def _prune(self) -> None:
        complete = list_checkpoints(self.policy.root, self.partition.part_id)
        for old in complete[: max(0, len(complete) - self.policy.keep)]:
            shutil.rmtree(old, ignore_errors=True)

    def stop(self, final_checkpoint: bool = True) -> Path | None:
        """Stop the background thread; write a last checkpoint when asked and something changed.

        Returns:
            The last checkpoint written here, or None.
        """
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if not final_checkpoint:
            return None
        return self.checkpoint_now("shutdown")
