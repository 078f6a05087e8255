"""The pull answer's wire bytes, written and read by hand: the fast path for pulled rows.

The pull response is the one message whose size scales with every training step, so
:func:`encode_pull_response` / :func:`decode_pull_response` produce and read the exact protobuf wire
format of ``PullResponse`` without building a message: the server gathers the rows straight into the
outgoing buffer (:func:`pull_response_buffer`), and the client views the rows inside the received
buffer. Any protobuf parser reads the same bytes as a ``PullResponse``::

    PullResponse = field 1 (rows), length-delimited: a Tensor; field 2 (padding) bytes, ignored
    Tensor       = field 1 (dtype) varint, field 2 (shape) packed varints, field 3 (data) bytes
"""

from __future__ import annotations

import numpy as np

from graphstore import dtypes
from graphstore.protos.codec import little_endian
from graphstore.protos.tensor_wire import (
    Slot,
    data_bytes,
    fresh_message,
    read_tensor,
    tensor_header,
    writable_rows,
)
from graphstore.protos.wire import WIRE_LEN, length_prefix, read_length_delimited, read_varint, skip_field

__all__ = [
    "decode_pull_response",
    "encode_pull_response",
    "pull_request",
    "pull_response_buffer",
    "writable_rows",
]

_ROWS_FIELD = 1
_PADDING_FIELD = 2


def pull_response_buffer(
    shape: tuple[int, ...], dtype: str, outer_field: int = 0
) -> tuple[bytes, np.ndarray] | None:
    """A serialized ``PullResponse`` for rows of ``shape`` and ``dtype`` whose row data is still to be
    written, and a writable array (storage dtype, ``shape``) over exactly those bytes.

    The caller must fill the whole array before the bytes are used (e.g. ``np.take(..., out=array)``);
    the result then reads like :func:`encode_pull_response` of the rows (plus an ignored ``padding``
    field that aligns the rows), without a copy of the payload. With ``outer_field``, the bytes are the
    response as field ``outer_field`` of an enclosing message (the call stream's ``CallResponse``).

    Returns:
        ``(serialized response, rows array)``, or None where this interpreter does not allow it
        (then gather the rows and call :func:`encode_pull_response`).
    """
    built = fresh_message([Slot(_ROWS_FIELD, shape, dtype)], _PADDING_FIELD, outer_field)
    if built is None:
        return None
    answer, (rows,) = built
    return answer, rows


def encode_pull_response(rows: np.ndarray, dtype: str) -> bytes:
    """Serialize rows as a ``PullResponse`` (same bytes protobuf would produce).

    Args:
        rows: the gathered rows in storage form (C-contiguous is cheapest).
        dtype: canonical dtype name of ``rows``.
    """
    rows = little_endian(np.asarray(rows))
    if not rows.flags.c_contiguous:
        rows = rows.copy(order="C")  # (np.ascontiguousarray would turn a 0-d array into 1-d)
    return tensor_header(_ROWS_FIELD, tuple(rows.shape), dtype) + rows.reshape(-1).view(np.uint8).data


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
        rows = _rows_as_expected(view, tuple(expected[0]), expected[1])
        if rows is not None:
            return rows, expected[1]
    try:
        pos, end = 0, len(view)
        span = (0, 0)
        while pos < end:
            field_key, pos = read_varint(view, pos, end)
            field, wire_type = field_key >> 3, field_key & 7
            if field == _ROWS_FIELD and wire_type == WIRE_LEN:
                span, pos = read_length_delimited(view, pos, end, "rows field")
            else:
                pos = skip_field(view, wire_type, pos, end)
        return read_tensor(view[span[0] : span[1]], "rows")
    except ValueError as exc:
        raise ValueError(f"pull response: {exc}") from None


def _rows_as_expected(view: memoryview, shape: tuple[int, ...], dtype: str) -> np.ndarray | None:
    """The rows of an answer whose header is exactly the one rows of ``shape`` and ``dtype`` get
    (after an optional one-byte-length ``padding`` field); None when it is not."""
    pos = 0
    if len(view) >= 2 and view[0] == 0x12 and view[1] < 0x80:  # padding: field 2, length < 128
        pos = 2 + view[1]
    header = tensor_header(_ROWS_FIELD, shape, dtype)
    start = pos + len(header)
    if view[pos:start] != header or len(view) - start != data_bytes(shape, dtype):
        return None
    return np.frombuffer(view[start:], dtype=dtypes.info(dtype).storage).reshape(shape)


def pull_request(name: str, ids: np.ndarray) -> bytes:
    """The serialized ``PullRequest`` for the rows ``ids`` of tensor ``name``: what
    ``PullRequest(name=name, ids=Tensor(dtype=INT64, shape=[n], data=...))`` serializes to, written
    without building the message (the IDs are copied once)."""
    ids = little_endian(np.ascontiguousarray(ids, dtype=np.int64).reshape(-1))
    encoded_name = name.encode()
    ids_field = tensor_header(2, (ids.size,), "int64")
    return b"".join((length_prefix(1, len(encoded_name)), encoded_name, ids_field, ids.data))
