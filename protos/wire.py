"""Protobuf wire-format pieces written and read by hand, for the answers built without a message object.

The pull answer (:mod:`.pull_wire`) and the call stream's framing (:mod:`.call_wire`) write the exact
bytes protobuf would produce around payloads that are already bytes (gathered rows, a serialized inner
message), so that no message object has to copy them; any protobuf parser reads the result. Only the
wire types those messages use are needed: varints, 64/32-bit scalars (skipped) and length-delimited
fields.
"""

from __future__ import annotations

WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_I32 = 0, 1, 2, 5


def varint(value: int) -> bytes:
    """Protobuf varint of an int (negative int64 values as their 10-byte two's complement)."""
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


def key(field: int, wire_type: int) -> bytes:
    """The key (field number and wire type) that starts a field."""
    return varint((field << 3) | wire_type)


def length_prefix(field: int, length: int) -> bytes:
    """What precedes a length-delimited field's ``length`` payload bytes."""
    return key(field, WIRE_LEN) + varint(length)


def read_varint(buf, pos: int, end: int) -> tuple[int, int]:
    """``(value, position after it)`` of the varint at ``pos``.

    Raises:
        ValueError: a varint running past ``end`` or longer than 10 bytes.
    """
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def read_length_delimited(buf, pos: int, end: int, what: str) -> tuple[tuple[int, int], int]:
    """``((start, stop) of a length-delimited payload, position after it)``; ``pos`` is at its length.

    Raises:
        ValueError: a payload running past ``end`` (``what`` names it).
    """
    length, pos = read_varint(buf, pos, end)
    if pos + length > end:
        raise ValueError(f"truncated {what}")
    return (pos, pos + length), pos + length


def skip_field(buf, wire_type: int, pos: int, end: int) -> int:
    """The position after the payload of a field of ``wire_type`` starting at ``pos``.

    Raises:
        ValueError: an unsupported wire type, or a field running past ``end``.
    """
    if wire_type == WIRE_VARINT:
        return read_varint(buf, pos, end)[1]
    if wire_type == WIRE_I64:
        pos += 8
    elif wire_type == WIRE_I32:
        pos += 4
    elif wire_type == WIRE_LEN:
        length, pos = read_varint(buf, pos, end)
        pos += length
    else:
        raise ValueError(f"unsupported wire type {wire_type}")
    if pos > end:
        raise ValueError("truncated field")
    return pos
