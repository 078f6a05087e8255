"""The write path of mutating requests: applied once per request ID, a failed apply leaves the ID free,
writes wait while a checkpoint's snapshot is taken, and with a write-ahead log every write is logged with
its answer; a write the log cannot take is never answered and never applied again."""

from __future__ import annotations

import threading

import pytest

from graphstore.protos import graphstore_pb2 as pb
from graphstore.server.durability.modes import WalDurability
from graphstore.server.durability.write_log import read_records
from graphstore.server.durability.write_path import WritePath


class _Counter:
    """Stands in for the periodic checkpointer: counts updates."""

    def __init__(self) -> None:
        self.updates = 0

    def note_update(self, count: int = 1):
        self.updates += count
        return self.updates, 0.0


def _push(seq: int, client: str = "c") -> pb.PushRequest:
    request = pb.PushRequest(name="t")
    request.request_id.client = client
    request.request_id.seq = seq
    return request


def _apply_counting(applied: list):
    def apply():
        applied.append(1)
        return pb.PushResponse(version=len(applied))

    return apply


def test_a_request_id_is_applied_once_and_replays_get_the_first_answer():
    path = WritePath()
    applied: list = []
    request = _push(1)
    first = path.run("Push", request, request.SerializeToString(), _apply_counting(applied))
    again = path.run("Push", request, request.SerializeToString(), _apply_counting(applied))
    assert first == again == pb.PushResponse(version=1).SerializeToString()
    assert len(applied) == 1 and path.replays == 1
    # Without a request ID nothing is remembered.
    bare = pb.PushRequest(name="t")
    for _ in range(2):
        path.run("Push", bare, bare.SerializeToString(), _apply_counting(applied))
    assert len(applied) == 3


def test_a_failed_apply_leaves_the_request_free_for_a_retry():
    path = WritePath()
    request = _push(1)

    def fail():
        raise ValueError("rows: bad")

    with pytest.raises(ValueError, match="bad"):
        path.run("Push", request, b"", fail)
    applied: list = []
    path.run("Push", request, b"", _apply_counting(applied))
    assert len(applied) == 1


def test_writes_wait_while_a_snapshot_is_taken():
    path = WritePath()
    applied: list = []
    started = threading.Event()

    def write():
        started.set()
        path.run("Push", _push(1), b"", _apply_counting(applied))

    with path.snapshot() as snapshot:
        thread = threading.Thread(target=write)
        thread.start()
        started.wait(10)
        thread.join(0.2)
        assert thread.is_alive() and not applied  # held back by the snapshot
        assert snapshot.wal_segment is None
    thread.join(10)
    assert applied == [1]


def test_with_a_write_ahead_log_every_write_is_logged_with_its_answer(tmp_path):
    counter = _Counter()
    durability = WalDurability(_wal(tmp_path), counter)
    path = WritePath(durability=durability)
    applied: list = []
    for seq in (1, 2):
        request = _push(seq)
        path.run("Push", request, request.SerializeToString(), _apply_counting(applied))
    records = list(read_records(tmp_path, 1))
    assert [(r.method, r.client, r.seq) for r in records] == [("Push", "c", 1), ("Push", "c", 2)]
    assert records[1].answer == pb.PushResponse(version=2).SerializeToString()
    assert pb.PushRequest.FromString(records[0].request) == _push(1)
    assert counter.updates == 2
    with path.snapshot() as snapshot:
        assert snapshot.wal_segment == 2  # a checkpoint now holds segment 1
    path.snapshot_saved(snapshot)
    assert list(read_records(tmp_path, 2)) == []


def test_a_write_the_log_cannot_take_is_never_answered_nor_applied_again(tmp_path):
    log = _wal(tmp_path)
    path = WritePath(durability=WalDurability(log, _Counter()))

    def full_disk(record):
        raise OSError(28, "No space left on device")

    log.append = full_disk
    applied: list = []
    with pytest.raises(ConnectionAbortedError, match="No space left"):
        path.run("Push", _push(1), b"", _apply_counting(applied))
    with pytest.raises(ConnectionAbortedError, match="takes no more writes"):
        path.run("Push", _push(1), b"", _apply_counting(applied))  # the retry: not applied twice
    with pytest.raises(ConnectionAbortedError, match="takes no more writes"):
        path.run("Push", _push(2), b"", _apply_counting(applied))  # nor anything new
    assert applied == [1]


def _wal(folder):
    from graphstore.server.durability.write_log import WriteLog

    return WriteLog(folder, fsync=False)
