"""The write-ahead log of one partition server (``durability: wal``).

Every applied mutating request is appended, as one record, to the current segment of the log before its
answer leaves the server; with ``fsync`` the segment is also synced first (one ``fsync`` covers every
record appended so far, so concurrent writers share it). A restarted server restores its newest
checkpoint and replays the records of the segments written after it (:func:`read_records`), which
rebuilds both the tensors and the replay window.

Layout (``DIR`` is the server's checkpoint folder, ``DIR/part-K``)::

    DIR/wal/wal-00000003.log     records appended since checkpoint N started (the manifest names 3)

A record is ``<u32 payload length><u32 crc32 of the payload>`` and the payload: the method name, the
request ID, the encoded request and the encoded answer. A record cut short by a crash (a short or
mismatching last record of a segment) was never acknowledged and is ignored; a damaged record followed by
others is an error. A checkpoint starts a new segment (:meth:`WriteLog.rotate`) and, once it is complete,
removes the segments it holds (:meth:`WriteLog.remove_before`).
"""

from __future__ import annotations

import os
import re
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from graphstore.server.durability.synced_files import fsync_path

WAL_FOLDER = "wal"
_SEGMENT_RE = re.compile(r"^wal-(\d{8})\.log$")
_HEADER = struct.Struct("<II")
_STRING = struct.Struct("<H")
_BLOB = struct.Struct("<I")
_SEQ = struct.Struct("<Q")


@dataclass(frozen=True)
class LogRecord:
    """One applied request.

    Attributes:
        method: the RPC method (``Push``, ``PushGrad``, ...).
        client, seq: its request ID (empty client: a request without one).
        request: the encoded request.
        answer: the encoded answer it got.
    """

    method: str
    client: str
    seq: int
    request: bytes
    answer: bytes

    def encode(self) -> bytes:
        """The record as it is written: header and payload."""
        method = self.method.encode()
        client = self.client.encode()
        payload = b"".join(
            (
                _STRING.pack(len(method)),
                method,
                _STRING.pack(len(client)),
                client,
                _SEQ.pack(self.seq),
                _BLOB.pack(len(self.request)),
                self.request,
                _BLOB.pack(len(self.answer)),
                self.answer,
            )
        )
        return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload

    @classmethod
    def decode(cls, payload: bytes) -> LogRecord:
        """Parse a payload written by :meth:`encode`.

        Raises:
            ValueError: not a record's payload.
        """
        reader = _Reader(payload)
        try:
            method = reader.field(_STRING).decode()
            client = reader.field(_STRING).decode()
            (seq,) = reader.unpack(_SEQ)
            request = reader.field(_BLOB)
            answer = reader.field(_BLOB)
        except (struct.error, UnicodeDecodeError) as exc:
            raise ValueError(f"malformed record: {exc}") from None
        if reader.offset != len(payload):
            raise ValueError(f"malformed record: {len(payload) - reader.offset} stray bytes")
        return cls(method, client, seq, request, answer)


class _Reader:
    """Reads length-prefixed fields from a payload in order."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.offset = 0

    def unpack(self, layout: struct.Struct) -> tuple:
        values = layout.unpack_from(self.data, self.offset)
        self.offset += layout.size
        return values

    def field(self, length: struct.Struct) -> bytes:
        (n,) = self.unpack(length)
        value = self.data[self.offset : self.offset + n]
        if len(value) != n:
            raise struct.error(f"a field of {n} bytes runs past the end")
        self.offset += n
        return bytes(value)


def segment_name(number: int) -> str:
    """The file name of segment ``number`` (``wal-00000003.log``)."""
    return f"wal-{number:08d}.log"


def list_segments(folder: str | os.PathLike) -> list[tuple[int, Path]]:
    """``(number, path)`` of the log segments under ``folder/wal``, oldest first."""
    wal = Path(folder) / WAL_FOLDER
    if not wal.is_dir():
        return []
    found = []
    for entry in wal.iterdir():
        match = _SEGMENT_RE.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry))
    return sorted(found)


def _segment_records(path: Path) -> Iterator[LogRecord]:
    data = path.read_bytes()
    offset = 0
    while offset < len(data):
        if offset + _HEADER.size > len(data):
            return  # a header cut short by a crash: never acknowledged
        length, crc = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        payload = data[start : start + length]
        last = start + length >= len(data)
        if len(payload) < length or zlib.crc32(payload) != crc:
            if last:
                return  # the record being written when the server died
            raise ValueError(f"write-ahead log {path}: damaged record at byte {offset} (followed by others)")
        yield LogRecord.decode(payload)
        offset = start + length


def read_records(folder: str | os.PathLike, from_segment: int) -> Iterator[LogRecord]:
    """The records of segments ``from_segment`` and later under ``folder/wal``, in the order written.

    Raises:
        ValueError: a damaged record in the middle of a segment, or a gap in the segment numbers after
            ``from_segment`` (a segment that the restored checkpoint needs is gone).
    """
    segments = [(n, p) for n, p in list_segments(folder) if n >= from_segment]
    numbers = [n for n, _ in segments]
    if segments and numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        raise ValueError(f"write-ahead log under {folder}: segments {numbers} have a gap")
    if segments and numbers[0] != from_segment and from_segment > 0:
        raise ValueError(
            f"write-ahead log under {folder}: segment {from_segment} (the first one the restored "
            f"checkpoint needs) is gone; the oldest left is {numbers[0]}"
        )
    for _, path in segments:
        yield from _segment_records(path)


class WriteLog:
    """Appends records to the newest segment of a server's write-ahead log.

    Args:
        folder: the server's checkpoint folder (``DIR/part-K``); the log lives in ``folder/wal``.
        fsync: sync the segment before an answer leaves (survives a power loss, not only a crash).
        first_segment: the number of the segment to start; None: one past the newest existing segment.

    Raises:
        OSError: the folder cannot be written.
    """

    def __init__(self, folder: str | os.PathLike, fsync: bool, first_segment: int | None = None) -> None:
        self.folder = Path(folder) / WAL_FOLDER
        self.folder.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        existing = list_segments(folder)
        if first_segment is None:
            first_segment = existing[-1][0] + 1 if existing else 1
        self._append_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._appended = 0  # bytes appended since this object opened (all segments)
        self._synced = 0
        self._fd = -1
        self.segment = 0
        self._open(first_segment)

    def _open(self, number: int) -> None:
        path = self.folder / segment_name(number)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        fsync_path(self.folder)
        self.segment = number

    def append(self, record: LogRecord) -> int:
        """Append one record (written to the operating system, synced by :meth:`wait_durable`).

        Returns:
            The log position just after the record.

        Raises:
            OSError: the write failed (a full disk): the log is now behind the state.
        """
        data = record.encode()
        with self._append_lock:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            self._appended += len(data)
            return self._appended

    def wait_durable(self, position: int) -> None:
        """Return once the log is synced up to ``position`` (at once without ``fsync``).

        Raises:
            OSError: the sync failed.
        """
        if not self.fsync:
            return
        with self._sync_lock:
            if self._synced >= position:
                return
            with self._append_lock:
                target = self._appended
                fd = self._fd
            os.fsync(fd)
            self._synced = max(self._synced, target)

    def rotate(self) -> int:
        """Close the current segment (synced) and start the next; call with no append in flight.

        Returns:
            The new segment's number: a checkpoint taken now holds every record of the older ones.
        """
        with self._sync_lock, self._append_lock:
            os.fsync(self._fd)
            self._synced = self._appended
            os.close(self._fd)
            self._open(self.segment + 1)
        return self.segment

    def remove_before(self, number: int) -> list[Path]:
        """Delete the segments numbered below ``number`` (a complete checkpoint holds them).

        Returns:
            The files removed.
        """
        removed = []
        for n, path in list_segments(self.folder.parent):
            if n < number:
                path.unlink(missing_ok=True)
                removed.append(path)
        if removed:
            fsync_path(self.folder)
        return removed

    def size_bytes(self) -> int:
        """Bytes in the log's segments now."""
        return sum(path.stat().st_size for _, path in list_segments(self.folder.parent))

    def close(self) -> None:
        """Sync and close the current segment."""
        with self._sync_lock, self._append_lock:
            if self._fd >= 0:
                os.fsync(self._fd)
                os.close(self._fd)
                self._fd = -1
