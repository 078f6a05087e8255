"""The pull answer's wire bytes, written and read by hand: the fast path for pulled rows.

The pull response is the one message whose size scales with every training step, so
:func:`encode_pull_response` / :func:`decode_pull_response` produce and read the exact protobuf wire
format of ``PullResponse`` without building a message: the server gathers the rows straight into the
outgoing buffer (:func:`pull_response_buffer`), and the client views the rows inside the received
buffer. Any protobuf parser reads the same bytes as a ``PullResponse``::

    PullResponse = field 1 (rows), length-delimited: a Tensor
    Tensor       = field 1 (dtype) varint, field 2 (shape) packed varints, field 3 (data) bytes
"""

from __future__ import annotations

import numpy as np

from graphstore import dtypes
from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos.codec import dtype_from_wire, little_endian, view_bytes, write_ids

_WIRE_VARINT, _WIRE_I64, _WIRE_LEN, _WIRE_I32 = 0, 1, 2, 5


def _varint(value: int) -> bytes:
    """Protobuf varint of a non-negative int (int64 fields encode negatives as 10-byte two's complement)."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(buf, pos: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise ValueError("truncated varint in pull response")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes in pull response")


def _read_length_delimited(buf, pos: int, end: int, what: str) -> tuple[tuple[int, int], int]:
    """``((start, stop) of a length-delimited payload, position after it)``; ``pos`` is at its length."""
    length, pos = _read_varint(buf, pos, end)
    if pos + length > end:
        raise ValueError(f"truncated {what} in pull response")
    return (pos, pos + length), pos + length


def _skip_field(buf, wire_type: int, pos: int, end: int) -> int:
    if wire_type == _WIRE_VARINT:
        return _read_varint(buf, pos, end)[1]
    if wire_type == _WIRE_I64:
        pos += 8
    elif wire_type == _WIRE_I32:
        pos += 4
    elif wire_type == _WIRE_LEN:
        length, pos = _read_varint(buf, pos, end)
        pos += length
    else:
        raise ValueError(f"unsupported wire type {wire_type} in pull response")
    if pos > end:
        raise ValueError("truncated field in pull response")
    return pos


def pull_response_header(shape: tuple[int, ...], dtype: str, align: int = 0, start: int = 0) -> bytes:
    """The bytes of a ``PullResponse`` that precede the row data, for rows of ``shape`` and ``dtype``.

    Without ``align``, ``header + data`` (``data`` the C-order little-endian bytes of the rows) is exactly
    what ``PullResponse(rows=Tensor(dtype=..., shape=shape, data=data)).SerializeToString()`` produces.
    With ``align``, a ``padding`` field (which readers ignore) goes first so that the data starts at a
    multiple of ``align`` when the header is placed at offset ``start`` of a buffer.
    """
    tensor = _tensor_header(shape, dtype)
    if not align:
        return tensor
    pad = (-(start + len(tensor) + 2)) % align  # the padding field costs 2 bytes + its payload
    return b"\x12" + _varint(pad) + bytes(pad) + tensor


def _tensor_header(shape: tuple[int, ...], dtype: str) -> bytes:
    """Field 1 of PullResponse (the ``rows`` Tensor) up to where its data bytes begin."""
    info = dtypes.info(dtype)
    nbytes = info.storage.itemsize
    for d in shape:
        nbytes *= d
    tensor_head = bytearray()
    tensor_head += b"\x08" + _varint(info.wire)  # field 1, varint
    if shape:
        packed = b"".join(_varint(d) for d in shape)
        tensor_head += b"\x12" + _varint(len(packed)) + packed  # field 2, packed
    if nbytes:
        tensor_head += b"\x1a" + _varint(nbytes)  # field 3, bytes (payload follows)
    return b"\x0a" + _varint(len(tensor_head) + nbytes) + bytes(tensor_head)


def _fresh_bytes_writer():
    """``(fresh, payload_offset)``: ``fresh(n) -> (bytes, writable uint8 view of its n bytes)`` and where
    the payload starts inside a bytes object; None where unsupported.

    grpcio sends only ``bytes`` objects, so an answer assembled in any other buffer costs one more
    copy of the whole payload. CPython's C API allows filling a bytes object right after creating it
    uninitialized (``PyBytes_FromStringAndSize(NULL, n)``), before anything else can see it; the rows
    are gathered straight into it. This relies on CPython's bytes layout (the payload starts
    ``sys.getsizeof(b"") - 1`` bytes into the object), so it is self-tested here and unused anywhere
    the test fails (other interpreters, big-endian hosts), where the copying path serves instead.
    """
    import ctypes
    import platform
    import sys

    if platform.python_implementation() != "CPython" or sys.byteorder != "little":
        return None
    try:
        new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
        new_bytes.restype = ctypes.py_object
        new_bytes.argtypes = [ctypes.c_char_p, ctypes.c_ssize_t]
    except AttributeError:
        return None
    payload_offset = sys.getsizeof(b"") - 1

    def fresh(n: int) -> tuple[bytes, np.ndarray]:
        buf = new_bytes(None, n)
        view = np.frombuffer((ctypes.c_char * n).from_address(id(buf) + payload_offset), dtype=np.uint8)
        return buf, view

    probe, view = fresh(8)
    view[:] = np.frombuffer(b"graphsto", dtype=np.uint8)
    return (fresh, payload_offset) if probe == b"graphsto" else None


_FRESH_BYTES = _fresh_bytes_writer()
_ALIGN = 16


def pull_response_buffer(shape: tuple[int, ...], dtype: str) -> tuple[bytes, np.ndarray] | None:
    """A serialized ``PullResponse`` for rows of ``shape`` and ``dtype`` whose row data is still to be
    written, and a writable array (storage dtype, ``shape``) over exactly those bytes.

    The caller must fill the whole array before the bytes are used (e.g. ``np.take(..., out=array)``);
    the result then reads like :func:`encode_pull_response` of the rows (plus an ignored ``padding``
    field that aligns the rows), without a copy of the payload.

    Returns:
        ``(serialized response, rows array)``, or None where this interpreter does not allow it
        (then gather the rows and call :func:`encode_pull_response`).
    """
    if _FRESH_BYTES is None:
        return None
    fresh, payload_offset = _FRESH_BYTES
    # Large bytes objects come from malloc (16-byte aligned): align the rows inside the object, since
    # np.take into an unaligned destination gathers into a temporary and copies twice more.
    header = pull_response_header(shape, dtype, align=_ALIGN, start=payload_offset)
    storage = dtypes.info(dtype).storage
    nbytes = storage.itemsize
    for d in shape:
        nbytes *= d
    buf, view = fresh(len(header) + nbytes)
    view[: len(header)] = np.frombuffer(header, dtype=np.uint8)
    return buf, view[len(header) :].view(storage).reshape(shape)


def encode_pull_response(rows: np.ndarray, dtype: str) -> bytes:
    """Serialize rows as a ``PullResponse`` (same bytes protobuf would produce).

    Args:
        rows: the gathered rows in storage form (C-contiguous is cheapest).
        dtype: canonical dtype name of ``rows``.
    """
    rows = little_endian(np.asarray(rows))
    if not rows.flags.c_contiguous:
        rows = rows.copy(order="C")  # (np.ascontiguousarray would turn a 0-d array into 1-d)
    return _tensor_header(rows.shape, dtype) + rows.reshape(-1).view(np.uint8).data


def decode_pull_response(buf: bytes) -> tuple[np.ndarray, str]:
    """Read a serialized ``PullResponse`` and view its rows in place (no copy of the payload).

    Unknown fields are skipped, as any protobuf parser does.

    Returns:
        ``(rows, dtype_name)`` with ``rows`` a read-only view into ``buf``.

    Raises:
        ValueError: if the bytes are not a well-formed PullResponse.
    """
    view = memoryview(buf)
    end = len(view)
    pos = 0
    tensor_span = (0, 0)
    while pos < end:
        key, pos = _read_varint(view, pos, end)
        field, wire_type = key >> 3, key & 7
        if field == 1 and wire_type == _WIRE_LEN:
            tensor_span, pos = _read_length_delimited(view, pos, end, "rows field")
        else:
            pos = _skip_field(view, wire_type, pos, end)
    pos, end = tensor_span
    wire_dtype = 0
    shape: list[int] = []
    data_span = (0, 0)
    while pos < end:
        key, pos = _read_varint(view, pos, end)
        field, wire_type = key >> 3, key & 7
        if field == 1 and wire_type == _WIRE_VARINT:
            wire_dtype, pos = _read_varint(view, pos, end)
        elif field == 2 and wire_type == _WIRE_LEN:
            (pos, stop), _ = _read_length_delimited(view, pos, end, "shape")
            while pos < stop:
                dim, pos = _read_varint(view, pos, stop)
                shape.append(dim)
        elif field == 2 and wire_type == _WIRE_VARINT:
            dim, pos = _read_varint(view, pos, end)
            shape.append(dim)
        elif field == 3 and wire_type == _WIRE_LEN:
            data_span, pos = _read_length_delimited(view, pos, end, "data")
        else:
            pos = _skip_field(view, wire_type, pos, end)
    name = dtype_from_wire(wire_dtype, "rows.dtype")
    shape_t = tuple(d - (1 << 64) if d >= 1 << 63 else d for d in shape)
    return view_bytes(view[data_span[0] : data_span[1]], name, shape_t, "rows"), name


def pull_request(name: str, ids: np.ndarray) -> pb.PullRequest:
    """The request for the rows ``ids`` of tensor ``name`` (IDs packed as the codec writes them)."""
    request = pb.PullRequest(name=name)
    write_ids(request.ids, ids)
    return request
