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

import ctypes
import functools
import platform
import sys

import numpy as np

from graphstore import dtypes
from graphstore.protos.codec import dtype_from_wire, little_endian, view_bytes
from graphstore.protos.wire import (
    WIRE_LEN,
    WIRE_VARINT,
    length_prefix,
    read_length_delimited,
    read_varint,
    skip_field,
    varint,
)


def pull_response_header(
    shape: tuple[int, ...], dtype: str, align: int = 0, start: int = 0, outer_field: int = 0
) -> bytes:
    """The bytes of a ``PullResponse`` that precede the row data, for rows of ``shape`` and ``dtype``.

    Without ``align``, ``header + data`` (``data`` the C-order little-endian bytes of the rows) is exactly
    what ``PullResponse(rows=Tensor(dtype=..., shape=shape, data=data)).SerializeToString()`` produces.
    With ``align``, a ``padding`` field (which readers ignore) goes first so that the data starts at a
    multiple of ``align`` when the header is placed at offset ``start`` of a buffer. With
    ``outer_field``, the response is itself field ``outer_field`` of an enclosing message (the call
    stream's ``CallResponse``): its key and length come first.
    """
    return _header(tuple(shape), dtype, align, start, outer_field)


@functools.lru_cache(maxsize=1024)
def _header(shape: tuple[int, ...], dtype: str, align: int, start: int, outer_field: int) -> bytes:
    """:func:`pull_response_header`, remembered: a loader asks for the same few shapes again and again."""
    tensor = _tensor_header(shape, dtype)
    if not align and not outer_field:
        return tensor
    nbytes = _data_bytes(shape, dtype)
    padding, prefix = b"", b""
    # The enclosing field's length prefix depends on the padding and the padding on where the prefix
    # ends: two rounds settle both (a third only when the prefix grew by a byte in the second).
    for _ in range(3):
        prefix = length_prefix(outer_field, len(padding) + len(tensor) + nbytes) if outer_field else b""
        if not align:
            break
        pad = (-(start + len(prefix) + 2 + len(tensor))) % align  # the padding field: 2 bytes + pad
        settled = b"\x12" + varint(pad) + bytes(pad)
        if settled == padding:
            break
        padding = settled
    return prefix + padding + tensor


def _data_bytes(shape: tuple[int, ...], dtype: str) -> int:
    nbytes = dtypes.info(dtype).storage.itemsize
    for d in shape:
        nbytes *= d
    return nbytes


@functools.lru_cache(maxsize=1024)
def _tensor_header(shape: tuple[int, ...], dtype: str) -> bytes:
    """Field 1 of PullResponse (the ``rows`` Tensor) up to where its data bytes begin."""
    info = dtypes.info(dtype)
    nbytes = _data_bytes(shape, dtype)
    tensor_head = bytearray()
    tensor_head += b"\x08" + varint(info.wire)  # field 1, varint
    if shape:
        packed = b"".join(varint(d) for d in shape)
        tensor_head += b"\x12" + varint(len(packed)) + packed  # field 2, packed
    if nbytes:
        tensor_head += b"\x1a" + varint(nbytes)  # field 3, bytes (payload follows)
    return b"\x0a" + varint(len(tensor_head) + nbytes) + bytes(tensor_head)


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


def pull_response_buffer(
    shape: tuple[int, ...], dtype: str, outer_field: int = 0
) -> tuple[bytes, np.ndarray] | None:
    """A serialized ``PullResponse`` for rows of ``shape`` and ``dtype`` whose row data is still to be
    written, and a writable array (storage dtype, ``shape``) over exactly those bytes.

    The caller must fill the whole array before the bytes are used (e.g. ``np.take(..., out=array)``);
    the result then reads like :func:`encode_pull_response` of the rows (plus an ignored ``padding``
    field that aligns the rows), without a copy of the payload. With ``outer_field``, the bytes are the
    response as field ``outer_field`` of an enclosing message (see :func:`pull_response_header`).

    Returns:
        ``(serialized response, rows array)``, or None where this interpreter does not allow it
        (then gather the rows and call :func:`encode_pull_response`).
    """
    if _FRESH_BYTES is None:
        return None
    fresh, payload_offset = _FRESH_BYTES
    # Large bytes objects come from malloc (16-byte aligned): align the rows inside the object, since
    # np.take into an unaligned destination gathers into a temporary and copies twice more.
    header = pull_response_header(shape, dtype, align=_ALIGN, start=payload_offset, outer_field=outer_field)
    storage = dtypes.info(dtype).storage
    buf, view = fresh(len(header) + _data_bytes(shape, dtype))
    view[: len(header)] = np.frombuffer(header, dtype=np.uint8)
    return buf, view[len(header) :].view(storage).reshape(shape)


def writable_rows(rows: np.ndarray) -> np.ndarray:
    """``rows`` writable, without a copy when they view a received answer's bytes.

    A decoded answer's rows are a read-only view into the ``bytes`` object gRPC received, which nothing
    but the rows refers to: handing its memory to a writable array saves copying the answer (0.3 ms a
    4 MB answer here). CPython allows it the same way :func:`pull_response_buffer` fills a fresh bytes
    object (the object is never hashed, and no one else sees it). Anything else that is read-only
    (a memory-mapped file, an answer on another interpreter) is copied.

    Args:
        rows: rows as :func:`decode_pull_response` gives them for a just-received answer.
    """
    if rows.flags.writeable:
        return rows
    if _FRESH_BYTES is None or not rows.flags.c_contiguous or not _views_received_bytes(rows):
        return rows.copy()
    memory = (ctypes.c_char * rows.nbytes).from_address(rows.__array_interface__["data"][0])
    memory.answer = rows  # keeps the received bytes alive as long as the writable array
    return np.frombuffer(memory, dtype=rows.dtype).reshape(rows.shape)


def _views_received_bytes(rows: np.ndarray) -> bool:
    base = rows
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, memoryview) and type(base.obj) is bytes


def encode_pull_response(rows: np.ndarray, dtype: str) -> bytes:
    """Serialize rows as a ``PullResponse`` (same bytes protobuf would produce).

    Args:
        rows: the gathered rows in storage form (C-contiguous is cheapest).
        dtype: canonical dtype name of ``rows``.
    """
    rows = little_endian(np.asarray(rows))
    if not rows.flags.c_contiguous:
        rows = rows.copy(order="C")  # (np.ascontiguousarray would turn a 0-d array into 1-d)
    return _tensor_header(tuple(rows.shape), dtype) + rows.reshape(-1).view(np.uint8).data


def decode_pull_response(buf, expected: tuple[tuple[int, ...], str] | None = None) -> tuple[np.ndarray, str]:
    """Read a serialized ``PullResponse`` and view its rows in place (no copy of the payload).

    Unknown fields are skipped, as any protobuf parser does.

    Args:
        buf: the bytes (or a view of them).
        expected: ``(shape, dtype)`` the rows should have: an answer laid out as this project's servers
            write it (an optional ``padding`` field, then the rows) is then recognized by comparing its
            header, not parsed; anything else is parsed.

    Returns:
        ``(rows, dtype_name)`` with ``rows`` a read-only view into ``buf``.

    Raises:
        ValueError: if the bytes are not a well-formed PullResponse.
    """
    view = memoryview(buf)
    if expected is not None:
        rows = _rows_as_expected(view, expected[0], expected[1])
        if rows is not None:
            return rows, expected[1]
    try:
        return _decode_pull_response(view)
    except ValueError as exc:
        raise ValueError(f"pull response: {exc}") from None


def _rows_as_expected(view: memoryview, shape: tuple[int, ...], dtype: str) -> np.ndarray | None:
    """The rows of an answer whose header is exactly the one rows of ``shape`` and ``dtype`` get
    (after an optional one-byte-length ``padding`` field); None when it is not."""
    pos = 0
    if len(view) >= 2 and view[0] == 0x12 and view[1] < 0x80:  # padding: field 2, length < 128
        pos = 2 + view[1]
    header = _tensor_header(tuple(shape), dtype)
    start = pos + len(header)
    if view[pos:start] != header or len(view) - start != _data_bytes(shape, dtype):
        return None
    return np.frombuffer(view[start:], dtype=dtypes.info(dtype).storage).reshape(shape)


def _decode_pull_response(view: memoryview) -> tuple[np.ndarray, str]:
    end = len(view)
    pos = 0
    tensor_span = (0, 0)
    while pos < end:
        key, pos = read_varint(view, pos, end)
        field, wire_type = key >> 3, key & 7
        if field == 1 and wire_type == WIRE_LEN:
            tensor_span, pos = read_length_delimited(view, pos, end, "rows field")
        else:
            pos = skip_field(view, wire_type, pos, end)
    pos, end = tensor_span
    wire_dtype = 0
    shape: list[int] = []
    data_span = (0, 0)
    while pos < end:
        key, pos = read_varint(view, pos, end)
        field, wire_type = key >> 3, key & 7
        if field == 1 and wire_type == WIRE_VARINT:
            wire_dtype, pos = read_varint(view, pos, end)
        elif field == 2 and wire_type == WIRE_LEN:
            (pos, stop), _ = read_length_delimited(view, pos, end, "shape")
            while pos < stop:
                dim, pos = read_varint(view, pos, stop)
                shape.append(dim)
        elif field == 2 and wire_type == WIRE_VARINT:
            dim, pos = read_varint(view, pos, end)
            shape.append(dim)
        elif field == 3 and wire_type == WIRE_LEN:
            data_span, pos = read_length_delimited(view, pos, end, "data")
        else:
            pos = skip_field(view, wire_type, pos, end)
    name = dtype_from_wire(wire_dtype, "rows.dtype")
    shape_t = tuple(d - (1 << 64) if d >= 1 << 63 else d for d in shape)
    return view_bytes(view[data_span[0] : data_span[1]], name, shape_t, "rows"), name


def pull_request(name: str, ids: np.ndarray) -> bytes:
    """The serialized ``PullRequest`` for the rows ``ids`` of tensor ``name``: what
    ``PullRequest(name=name, ids=Tensor(dtype=INT64, shape=[n], data=...))`` serializes to, written
    without building the message (the IDs are copied once)."""
    ids = little_endian(np.ascontiguousarray(ids, dtype=np.int64).reshape(-1))
    encoded_name = name.encode()
    tensor = _tensor_header((ids.size,), "int64")[1:]  # the Tensor's fields, after PullResponse's key
    return b"".join((length_prefix(1, len(encoded_name)), encoded_name, b"\x12", tensor, ids.data))
