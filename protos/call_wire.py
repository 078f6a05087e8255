"""The call stream's messages (``CallRequest`` / ``CallResponse`` of ``graphstore.proto``) around the calls'
own bytes.

A message of the ``Call`` stream is one call: the method's request as field ``N`` of a ``CallRequest``
(``CALL_FIELDS`` gives ``N``), answered by its response as field ``N`` of a ``CallResponse``, or by a
``CallError`` (field 15). Both are framed here by hand: a key and a length go in front of bytes that
exist already (a serialized request, an answer whose rows were gathered in place), so no message object
copies them, and any protobuf parser reads the same bytes as the messages of the proto.
"""

from __future__ import annotations

from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos.wire import (
    WIRE_LEN,
    WIRE_VARINT,
    key,
    length_prefix,
    read_length_delimited,
    read_varint,
    skip_field,
    varint,
)

# The methods a call stream carries, and their field number in CallRequest and CallResponse.
CALL_FIELDS: dict[str, int] = {
    "Pull": 1,
    "SampleNeighbors": 2,
    "FindEdges": 3,
    "InSubgraph": 4,
    "Degrees": 5,
    "Push": 6,
    "PushGrad": 7,
    "List": 8,
}
# The details of a server's refusal of one more stream (it holds its maximum): clients send unary calls.
STREAM_LIMIT_MESSAGE = "call streams: this server holds its maximum of open streams; send unary calls"
ERROR_FIELD = 15
TIMEOUT_FIELD = 15
_METHODS_BY_FIELD = {field: method for method, field in CALL_FIELDS.items()}
_TIMEOUT_KEY = key(TIMEOUT_FIELD, WIRE_VARINT)


def call_request(method: str, request: bytes, timeout_s: float | None) -> bytes:
    """A ``CallRequest`` carrying one call of ``method`` (its serialized ``request``).

    Args:
        method: a method of :data:`CALL_FIELDS`.
        request: the method's serialized request.
        timeout_s: the call's remaining deadline (None or 0: none).

    Raises:
        KeyError: a method the stream does not carry.
    """
    timeout = _TIMEOUT_KEY + varint(max(1, int(timeout_s * 1e6))) if timeout_s else b""
    return b"".join((length_prefix(CALL_FIELDS[method], len(request)), request, timeout))


def read_call_request(raw) -> tuple[str, memoryview, float | None]:
    """``(method, its request's bytes (a view of raw), timeout in seconds or None)`` of a ``CallRequest``.

    Raises:
        ValueError: bytes that are not a CallRequest carrying one known call.
    """
    view = memoryview(raw)
    end = len(view)
    pos = 0
    method, span, timeout_us = None, (0, 0), 0
    while pos < end:
        field_key, pos = read_varint(view, pos, end)
        field, wire_type = field_key >> 3, field_key & 7
        if field in _METHODS_BY_FIELD and wire_type == WIRE_LEN:
            method = _METHODS_BY_FIELD[field]
            span, pos = read_length_delimited(view, pos, end, f"{method} request")
        elif field == TIMEOUT_FIELD and wire_type == WIRE_VARINT:
            timeout_us, pos = read_varint(view, pos, end)
        else:
            pos = skip_field(view, wire_type, pos, end)
    if method is None:
        raise ValueError(f"call request: {len(view)} bytes carry none of the calls {sorted(CALL_FIELDS)}")
    return method, view[span[0] : span[1]], timeout_us / 1e6 if timeout_us else None


def call_answer(method: str, response: bytes) -> bytes:
    """A ``CallResponse`` carrying ``method``'s serialized ``response``."""
    return length_prefix(CALL_FIELDS[method], len(response)) + response


def call_error(code: int, kind: str, message: str) -> bytes:
    """A ``CallResponse`` carrying a refusal: gRPC status ``code`` (its number), the error's type name
    and its message."""
    error = pb.CallError(code=code, kind=kind, message=message).SerializeToString()
    return length_prefix(ERROR_FIELD, len(error)) + error


def read_call_answer(raw) -> tuple[int, memoryview]:
    """``(field, payload view)`` of a ``CallResponse``: the answering method's field number and its
    response's bytes, or :data:`ERROR_FIELD` and a ``CallError``'s bytes.

    Raises:
        ValueError: bytes that are not a CallResponse with an answer.
    """
    view = memoryview(raw)
    end = len(view)
    pos = 0
    while pos < end:
        field_key, pos = read_varint(view, pos, end)
        field, wire_type = field_key >> 3, field_key & 7
        if wire_type == WIRE_LEN and (field in _METHODS_BY_FIELD or field == ERROR_FIELD):
            (start, stop), pos = read_length_delimited(view, pos, end, "call answer")
            return field, view[start:stop]
        pos = skip_field(view, wire_type, pos, end)
    raise ValueError(f"call answer: {len(view)} bytes carry no answer")
