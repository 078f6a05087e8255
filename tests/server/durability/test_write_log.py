"""The write-ahead log: records come back in the order written, across segments; a record cut short by
a crash is ignored, a damaged one in the middle is an error; rotation and removal keep what a checkpoint
does not hold, and a segment a checkpoint needs that is gone is named."""

from __future__ import annotations

import pytest

from graphstore.server.durability.write_log import LogRecord, WriteLog, list_segments, read_records


def _record(i: int) -> LogRecord:
    return LogRecord("Push", "client-a", i, b"request %d" % i, b"answer %d" % i)


@pytest.mark.parametrize("fsync", [False, True])
def test_records_come_back_in_order_across_segments(tmp_path, fsync):
    log = WriteLog(tmp_path, fsync)
    positions = [log.append(_record(i)) for i in range(3)]
    log.wait_durable(positions[-1])
    second = log.rotate()
    log.append(_record(3))
    log.close()
    assert [n for n, _ in list_segments(tmp_path)] == [1, 2] and second == 2
    assert list(read_records(tmp_path, 1)) == [_record(i) for i in range(4)]
    assert list(read_records(tmp_path, 2)) == [_record(3)]
    # A new log starts a new segment after the newest.
    assert WriteLog(tmp_path, False).segment == 3


def test_a_record_cut_short_is_ignored_and_a_damaged_one_in_the_middle_is_an_error(tmp_path):
    log = WriteLog(tmp_path, False)
    for i in range(3):
        log.append(_record(i))
    log.close()
    (_, path) = list_segments(tmp_path)[0]
    data = path.read_bytes()
    path.write_bytes(data[:-4])  # the last record half written when the server died
    assert list(read_records(tmp_path, 1)) == [_record(0), _record(1)]
    damaged = bytearray(data)
    damaged[12] ^= 0xFF  # inside the first record
    path.write_bytes(bytes(damaged))
    with pytest.raises(ValueError, match="damaged record at byte 0"):
        list(read_records(tmp_path, 1))


def test_removal_keeps_the_segments_a_checkpoint_needs_and_a_missing_one_is_named(tmp_path):
    log = WriteLog(tmp_path, False)
    log.append(_record(0))
    kept_from = log.rotate()
    log.append(_record(1))
    log.remove_before(kept_from)
    assert [n for n, _ in list_segments(tmp_path)] == [2]
    assert list(read_records(tmp_path, 2)) == [_record(1)]
    with pytest.raises(ValueError, match="segment 1 .* is gone"):
        list(read_records(tmp_path, 1))
    log.close()


def test_a_record_round_trips_and_garbage_is_refused():
    record = LogRecord("Init", "", 0, b"", b"\x00" * 10)
    assert LogRecord.decode(record.encode()[8:]) == record
    with pytest.raises(ValueError, match="malformed"):
        LogRecord.decode(b"\x05\x00ab")
