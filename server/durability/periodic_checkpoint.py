"""Periodic, atomic checkpoints of one partition server.

A server started with ``--checkpoint-dir DIR`` (and ``--checkpoint-every-s`` and/or
``--checkpoint-every-updates``) writes every writable tensor it holds (run-time tensors such as
embeddings, and partition features loaded with ``--writable-features``), with the sparse optimizer
state beside the rows, into ``DIR/part-K/ckpt-N`` (the layout is in
:mod:`~graphstore.server.durability.periodic_checkpoint_folders`; a restarted server reads it back with
:mod:`~graphstore.server.durability.periodic_restore`).

Each checkpoint is written into a hidden temporary folder (``.tmp-ckpt-...``), its files and folders
are fsync'ed, and only then is it renamed to ``ckpt-N``: a reader, or a server restarting after a
crash in the middle of a write, sees either a complete checkpoint or none. The newest ``keep``
checkpoints are kept (``keep + 1`` for a moment when a crash falls between a rename and the removal
of the oldest; the next start removes it).

An *update* is one Push, PushGrad, Init that created a tensor, Delete that deleted one, or Restore.
On a server, writes are held back while a checkpoint's tensors are read (the write gate of
:mod:`~graphstore.server.durability.write_path`), so a checkpoint holds exactly the updates applied before it
started (the manifest's ``updates``), and the replay window saved beside them holds exactly their
answers. A server that dies loses the updates after its latest complete checkpoint, and no more than
the loss bound allows: the answer of an update waits (:meth:`PeriodicCheckpointer.wait_saved`) until
it is at most the ``every_updates``-th update after the latest complete checkpoint, and was applied
less than ``every_s`` seconds after the first update that checkpoint does not hold.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
import uuid
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from graphstore.server.durability.periodic_checkpoint_folders import (
    FORMAT,
    MANIFEST,
    TENSORS_FOLDER,
    WINDOW_FILE,
    checkpoint_name,
    checkpoint_sequence,
    list_checkpoints,
    partition_folder,
)
from graphstore.server.durability.synced_files import fsync_path, fsync_tree
from graphstore.server.durability.write_path import WritePath
from graphstore.server.metrics import ServerMetrics, log_event

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
        self._updates = 0  # updates applied so far (monotonic)
        self._checkpointed_updates = 0  # self._updates when the last checkpoint started
        self._saved_updates = 0  # self._updates when the latest complete checkpoint started
        self._first_unsaved_at: float | None = None  # when the first update not saved was applied
        self._first_since_snapshot_at: float | None = None  # ... the first since the last snapshot
        self._write_path: WritePath | None = None
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

    @property
    def unsaved_updates(self) -> int:
        """Updates the latest complete checkpoint does not hold."""
        with self._cond:
            return self._updates - self._saved_updates

    def use_write_path(self, write_path: WritePath) -> None:
        """Take each checkpoint under ``write_path``'s exclusive gate, with its replay window (and the
        write-ahead log rotated at that point)."""
        self._write_path = write_path

    def note_update(self, count: int = 1) -> tuple[int, float]:
        """Count applied updates (the write path calls it for each successful write).

        Returns:
            The token of :meth:`wait_saved`: the last update's number and when it was applied.
        """
        with self._cond:
            now = time.monotonic()
            self._updates += count
            if self._first_unsaved_at is None:
                self._first_unsaved_at = now
            if self._first_since_snapshot_at is None:
                self._first_since_snapshot_at = now
            every = self.policy.every_updates
            if every is not None and self._updates - self._checkpointed_updates >= every:
                self._cond.notify_all()
            return self._updates, now

    def wait_saved(self, token: tuple[int, float], timeout: float | None) -> None:
        """Block until the update of ``token`` may be answered under the loss bound: it is at most the
        ``every_updates``-th after the latest complete checkpoint and was applied within ``every_s``
        of the first update that checkpoint lacks (no bound without a running background thread).

        Raises:
            ConnectionAbortedError: still not within ``timeout`` seconds (checkpoints late or failing;
                the client retries and its replay waits again).
        """
        number, applied_at = token
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._within_bound(number, applied_at):
                remaining = None if end is None else end - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise ConnectionAbortedError(
                        f"update {number} was applied but its answer waits for a periodic checkpoint "
                        f"(every_updates={self.policy.every_updates}, every_s={self.policy.every_s}; "
                        f"the latest complete one holds {self._saved_updates} updates); retry"
                    )
                self._cond.wait(remaining)

    def _within_bound(self, number: int, applied_at: float) -> bool:
        if number <= self._saved_updates or self._thread is None:
            return True
        every_updates, every_s = self.policy.every_updates, self.policy.every_s
        if every_updates is not None and number > self._saved_updates + every_updates:
            return False
        first = self._first_unsaved_at
        return every_s is None or first is None or applied_at < first + every_s

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

    def checkpoint_now(self, reason: str = "requested", force: bool = False) -> Path | None:
        """Write a checkpoint now (serialized with the periodic ones).

        Args:
            reason: logged with the event (periodic, shutdown, ...).
            force: write one even when nothing changed since the last.

        Returns:
            The new ``ckpt-N`` folder, or None when nothing changed since the last checkpoint.

        Raises:
            OSError: the folder cannot be written (the metrics count the failure).
        """
        with self._write_lock:
            with self._cond:
                if self._updates == self._checkpointed_updates and self._seq > 0 and not force:
                    return None
            started = time.monotonic()
            try:
                path, names, rows, updates = self._write()
            except BaseException:
                if self._metrics is not None:
                    self._metrics.checkpoints.labels("failed").inc()
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

    def _snapshot_taken(self) -> tuple[int, int]:
        """Note a snapshot's start: ``(updates it holds, the previous checkpointed count)``."""
        with self._cond:
            updates, previous = self._updates, self._checkpointed_updates
            self._checkpointed_updates = updates
            self._first_since_snapshot_at = None
            self._last_time = time.monotonic()
        return updates, previous

    def _saved(self, updates: int) -> None:
        with self._cond:
            if updates > self._saved_updates:
                self._saved_updates = updates
                self._first_unsaved_at = self._first_since_snapshot_at if self._updates > updates else None
            self._cond.notify_all()

    def _write(self) -> tuple[Path, list[str], int, int]:
        """Write the next checkpoint under the write gate; ``(folder, tensors, rows, updates held)``."""
        write_path = self._write_path
        with write_path.snapshot() if write_path is not None else nullcontext() as snapshot:
            updates, previous = self._snapshot_taken()
            try:
                final, names, rows = self._write_folder(updates, snapshot)
            except BaseException:
                with self._cond:
                    self._checkpointed_updates = previous  # still due: the updates are not saved
                raise
        self._saved(updates)
        if snapshot is not None:
            write_path.snapshot_saved(snapshot)
        return final, names, rows, updates

    def _write_folder(self, updates: int, snapshot) -> tuple[Path, list[str], int]:
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
                "wal_segment": snapshot.wal_segment if snapshot is not None else None,
                "started_at": started_at,
                "completed_at": time.time(),
            }
            if snapshot is not None:
                (tmp / WINDOW_FILE).write_bytes(snapshot.window)
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
            fsync_tree(tmp)
            final = self.folder / checkpoint_name(seq)
            os.rename(tmp, final)
            fsync_path(self.folder)
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
            with self._cond:
                self._thread = None  # no loss bound any more: the last checkpoint follows
                self._cond.notify_all()
        if not final_checkpoint:
            return None
        return self.checkpoint_now("shutdown")
