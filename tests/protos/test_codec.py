"""The wire codec: tensors round-trip in every dtype, malformed tensors are refused, and the hand-written
PullResponse encoder/decoder agree byte for byte with protobuf."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphstore import dtypes
from graphstore.protos import codec, pull_wire
from graphstore.protos import graphstore_pb2 as pb
from graphstore.types import PartitionMetadata, TensorScheme

DTYPES = sorted(dtypes.BY_NAME)


def _array(rng, dtype: str, shape):
    """Random bit patterns of ``dtype`` (0/1 for bool) in ``shape``."""
    storage = dtypes.info(dtype).storage
    if dtype == "bool":
        return rng.random(shape) < 0.5
    count = int(np.prod(shape, dtype=np.int64))
    return rng.integers(0, 256, size=count * storage.itemsize, dtype=np.uint8).view(storage).reshape(shape)


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_round_trips_through_a_message(dtype):
    rng = np.random.default_rng(0)
    for shape in [(5, 3), (0, 4), (7,), (2, 3, 4)]:
        array = _array(rng, dtype, shape)
        msg = pb.Tensor()
        codec.write_tensor(msg, array, dtype)
        parsed = pb.Tensor.FromString(msg.SerializeToString())
        back, name = codec.read_tensor(parsed, "x")
        assert name == dtype and back.shape == shape
        assert back.tobytes() == array.tobytes()
        assert not back.flags.writeable  # a zero-copy view


def test_read_tensor_refuses_malformed_messages():
    msg = pb.Tensor(dtype=pb.FLOAT32, data=b"\x00" * 12)
    msg.shape[:] = [2, 2]
    with pytest.raises(ValueError, match=r"x: shape \[2, 2\] of float32 needs 16 bytes, got 12"):
        codec.read_tensor(msg, "x")
    msg.shape[:] = [-3, -4]
    with pytest.raises(ValueError, match="negative dimension"):
        codec.read_tensor(msg, "x")
    with pytest.raises(ValueError, match="x.dtype: unsupported dtype enum value 0"):
        codec.read_tensor(pb.Tensor(data=b""), "x")
    with pytest.raises(ValueError, match="dtype must be int64"):
        codec.read_tensor(pb.Tensor(dtype=pb.FLOAT32), "x", dtype="int64")
    ids = pb.Tensor(dtype=pb.FLOAT64, data=b"\x00" * 8)
    ids.shape[:] = [1]
    with pytest.raises(ValueError, match="ids: IDs must be int64 or int32, got float64"):
        codec.read_ids(ids, "ids")
    ids = pb.Tensor(dtype=pb.INT32, data=np.array([5, -1], np.int32).tobytes())
    ids.shape[:] = [2]
    assert codec.read_ids(ids, "ids").tolist() == [5, -1]


def test_scheme_and_metadata_round_trip():
    scheme = TensorScheme("emb", "bfloat16", (10, 4), "edge", True, False, 3, True, "client-1")
    msg = pb.TensorScheme()
    codec.write_scheme(msg, scheme)
    assert codec.read_scheme(pb.TensorScheme.FromString(msg.SerializeToString())) == scheme
    meta = PartitionMetadata("g", 1, 2, 10, 30, (0, 5, 10), (0, 12, 30), (scheme,), "/x.json", "host", 1)
    msg = pb.MetadataResponse()
    codec.write_metadata(msg, meta)
    assert codec.read_metadata(pb.MetadataResponse.FromString(msg.SerializeToString())) == meta


@settings(max_examples=200, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES),
    shape=st.lists(st.integers(0, 6), min_size=0, max_size=4),
    seed=st.integers(0, 1000),
)
def test_pull_fast_path_matches_protobuf_bytes(dtype, shape, seed):
    array = _array(np.random.default_rng(seed), dtype, tuple(shape))
    msg = pb.PullResponse()
    codec.write_tensor(msg.rows, array, dtype)
    expected = msg.SerializeToString()
    fast = pull_wire.encode_pull_response(array, dtype)
    assert fast == expected
    rows, name = pull_wire.decode_pull_response(expected)
    assert name == dtype and rows.shape == tuple(shape)
    assert rows.tobytes() == array.tobytes()


def test_pull_decoder_skips_unknown_fields_and_refuses_truncation():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    data = pull_wire.encode_pull_response(array, "float32")
    unknown = b"\x10\x07" + b"\x1a\x02ab"  # field 2 varint, field 3 bytes: unknown to PullResponse
    rows, _ = pull_wire.decode_pull_response(unknown + data)
    np.testing.assert_array_equal(rows, array)
    for cut in (1, 5, len(data) - 1):
        with pytest.raises(ValueError):
            pull_wire.decode_pull_response(data[:cut])


def test_generated_stubs_are_up_to_date():
    result = subprocess.run(
        [sys.executable, "-m", "graphstore.protos.codegen", "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def test_stubs_import_as_package_modules():
    from graphstore.protos import graphstore_pb2_grpc

    assert graphstore_pb2_grpc.graphstore__pb2 is pb
    assert hasattr(graphstore_pb2_grpc, "PartitionServiceStub")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "bool", "int64"])
def test_pull_response_buffer_filled_in_place_equals_the_encoded_answer(dtype):
    rows = _array(np.random.default_rng(2), dtype, (37, 5))
    target = pull_wire.pull_response_buffer(rows.shape, dtype)
    if target is None:
        pytest.skip("this interpreter cannot fill bytes in place; the copying path is used")
    answer, view = target
    assert view.shape == rows.shape and view.dtype == dtypes.info(dtype).storage
    assert view.flags.aligned and view.flags.c_contiguous  # so np.take writes in place
    np.take(rows, np.arange(len(rows)), axis=0, out=view)
    assert isinstance(answer, bytes)
    decoded, name = pull_wire.decode_pull_response(answer)
    assert name == dtype and decoded.tobytes() == rows.tobytes()
    parsed = pb.PullResponse.FromString(answer)  # any protobuf reader: the same rows, padding ignored
    assert parsed.rows.data == rows.tobytes() and list(parsed.rows.shape) == [37, 5]
    assert set(parsed.padding) <= {0}
    unpadded = pb.PullResponse()
    unpadded.rows.CopyFrom(parsed.rows)
    assert unpadded.SerializeToString() == pull_wire.encode_pull_response(rows, dtype)
