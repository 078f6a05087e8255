"""The hand-written wire bytes read as the proto's messages: call stream framing, pull requests and answers,
the decoder's fast path, and received rows made writable without a copy."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

from graphstore.protos import call_wire, codec, pull_wire
from graphstore.protos import graphstore_pb2 as pb


def _ids(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**40, n)


@pytest.mark.parametrize("n", [0, 1, 1000])
def test_pull_request_bytes_equal_the_message(n):
    ids = _ids(n)
    message = pb.PullRequest(name="feat/ü")
    codec.write_ids(message.ids, ids)
    assert pull_wire.pull_request("feat/ü", ids) == message.SerializeToString()


@pytest.mark.parametrize("method", sorted(call_wire.CALL_FIELDS))
@pytest.mark.parametrize("timeout_s", [None, 0.25, 30.0])
def test_call_request_parses_as_the_proto_and_reads_back(method, timeout_s):
    inner = pb.PullRequest(name="x").SerializeToString() if method == "Pull" else b""
    framed = call_wire.call_request(method, inner, timeout_s)
    parsed = pb.CallRequest.FromString(framed)
    field = parsed.DESCRIPTOR.oneofs_by_name["call"].fields[call_wire.CALL_FIELDS[method] - 1]
    assert parsed.WhichOneof("call") == field.name
    assert parsed.timeout_us == (int(timeout_s * 1e6) if timeout_s else 0)
    read_method, request, read_timeout = call_wire.read_call_request(framed)
    assert read_method == method and bytes(request) == inner
    assert read_timeout == (pytest.approx(timeout_s) if timeout_s else None)


def test_a_call_request_with_no_call_is_refused():
    with pytest.raises(ValueError, match="carry none of the calls"):
        call_wire.read_call_request(b"\x78\x05")  # only a timeout
    with pytest.raises(ValueError):
        call_wire.read_call_request(b"\x0a\x10ab")  # a pull request cut short


def test_call_answers_and_errors_parse_as_call_responses():
    degrees = pb.DegreesResponse()
    codec.write_ids(degrees.degrees, np.arange(5))
    framed = call_wire.call_answer("Degrees", degrees.SerializeToString())
    assert pb.CallResponse.FromString(framed).degrees == degrees
    field, payload = call_wire.read_call_answer(framed)
    assert field == call_wire.CALL_FIELDS["Degrees"]
    assert pb.DegreesResponse.FromString(payload) == degrees

    error = call_wire.call_error(5, "KeyError", "Pull: no tensor named 'x'")
    assert pb.CallResponse.FromString(error).error == pb.CallError(
        code=5, kind="KeyError", message="Pull: no tensor named 'x'"
    )
    assert call_wire.read_call_answer(error)[0] == call_wire.ERROR_FIELD
    with pytest.raises(ValueError, match="no answer"):
        call_wire.read_call_answer(b"")


@pytest.mark.parametrize("rows", [0, 1, 3, 1000, 40_000])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64"])
def test_a_pull_answer_built_in_place_for_the_stream_is_a_call_response(rows, dtype):
    storage = np.dtype(np.uint16) if dtype == "bfloat16" else np.dtype(dtype)
    values = (np.arange(rows * 5) % 251).astype(storage).reshape(rows, 5)
    answer, target = pull_wire.pull_response_buffer((rows, 5), dtype, outer_field=1)
    target[...] = values
    assert target.ctypes.data % 16 == 0 or target.nbytes < 64  # gathered into an aligned destination
    parsed = pb.CallResponse.FromString(answer)
    assert parsed.WhichOneof("answer") == "pull"
    field, payload = call_wire.read_call_answer(answer)
    decoded, name = pull_wire.decode_pull_response(payload)
    assert field == 1 and name == dtype
    np.testing.assert_array_equal(decoded, values)


def test_the_decoders_fast_path_reads_the_servers_layout_and_parses_anything_else():
    values = np.arange(40, dtype=np.float32).reshape(8, 5)
    answer, target = pull_wire.pull_response_buffer((8, 5), "float32")
    target[...] = values
    rows, _ = pull_wire.decode_pull_response(answer, ((8, 5), "float32"))
    np.testing.assert_array_equal(rows, values)
    # Protobuf's own serialization of the same rows (no padding) and an unexpected shape both parse.
    plain = pb.PullResponse()
    codec.write_tensor(plain.rows, values)
    for expected in (((8, 5), "float32"), ((4, 10), "float32"), None):
        rows, name = pull_wire.decode_pull_response(plain.SerializeToString(), expected)
        assert name == "float32"
        np.testing.assert_array_equal(rows, values)


def test_received_rows_become_writable_without_a_copy_and_other_read_only_rows_are_copied(tmp_path):
    values = np.arange(60, dtype=np.float32).reshape(12, 5)
    received = bytes(pull_wire.encode_pull_response(values, "float32"))
    rows, _ = pull_wire.decode_pull_response(received, ((12, 5), "float32"))
    assert not rows.flags.writeable
    writable = pull_wire.writable_rows(rows[2:9])
    assert writable.flags.writeable
    assert np.shares_memory(writable, rows)
    del rows, received
    writable[0] = -1  # the answer's memory outlives the names that referred to it
    np.testing.assert_array_equal(writable[1:], values[3:9])

    path = tmp_path / "rows.bin"
    path.write_bytes(values.tobytes())
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        mapped_rows = np.frombuffer(mapped, dtype=np.float32).reshape(12, 5)
        copied = pull_wire.writable_rows(mapped_rows)
        assert copied.flags.writeable and not np.shares_memory(copied, mapped_rows)
        del mapped_rows
        np.testing.assert_array_equal(copied, values)
