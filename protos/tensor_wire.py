"""``Tensor`` fields written and read by hand, and answers laid out in one fresh buffer.

The answers whose size scales with training (pulled rows, sampled edges and the rows carried with them)
are written without message objects: protobuf would copy each array into the message, then into the
serialized bytes, and gRPC once more. Here the server lays the whole answer out in one ``bytes`` object
(:func:`fresh_message`) whose headers are written and whose arrays are left to be filled in place (rows
gathered straight into it), and the client views each array inside the received bytes
(:func:`read_tensor`), then takes over that memory instead of copying it (:func:`writable_rows`). Any
protobuf parser reads the same bytes as the proto's messages::

    Tensor = field 1 (dtype) varint, field 2 (shape) packed varints, field 3 (data) bytes
"""

from __future__ import annotations

import ctypes
import functools
import platform
import sys
from collections.abc import Sequence

import numpy as np

from graphstore import dtypes
from graphstore.protos.codec import dtype_from_wire, view_bytes
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

# Arrays filled in place start at a multiple of this inside their answer (numpy gathers into an aligned
# destination directly; into an unaligned one it gathers into a temporary and copies).
ALIGN = 16


def data_bytes(shape: tuple[int, ...], dtype: str) -> int:
    """Bytes of an array of ``shape`` and ``dtype`` in storage form."""
    nbytes = dtypes.info(dtype).storage.itemsize
    for d in shape:
        nbytes *= d
    return nbytes


@functools.lru_cache(maxsize=1024)
def tensor_header(field: int, shape: tuple[int, ...], dtype: str) -> bytes:
    """A ``Tensor`` as field ``field`` of its message, up to where its data bytes begin."""
    info = dtypes.info(dtype)
    nbytes = data_bytes(shape, dtype)
    head = bytearray()
    head += b"\x08" + varint(info.wire)  # field 1, varint
    if shape:
        packed = b"".join(varint(d) for d in shape)
        head += b"\x12" + varint(len(packed)) + packed  # field 2, packed
    if nbytes:
        head += b"\x1a" + varint(nbytes)  # field 3, bytes (payload follows)
    return length_prefix(field, len(head) + nbytes) + bytes(head)


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


FRESH_BYTES = _fresh_bytes_writer()


class Slot:
    """An array of a fresh message left to be filled: its field's header is written, its data is not."""

    __slots__ = ("dtype", "field", "nbytes", "shape")

    def __init__(self, field: int, shape: tuple[int, ...], dtype: str) -> None:
        self.field = field
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype
        self.nbytes = data_bytes(self.shape, dtype)


class Group:
    """A nested message as field ``field`` of its parent: its own parts, and the number of its ``padding``
    field (a bytes field every reader skips) that aligns its slots."""

    __slots__ = ("field", "padding_field", "parts")

    def __init__(self, field: int, parts: Sequence, padding_field: int) -> None:
        self.field = field
        self.parts = list(parts)
        self.padding_field = padding_field


Part = bytes | Slot | Group


def fresh_message(
    parts: Sequence[Part], padding_field: int, outer_field: int = 0
) -> tuple[bytes, list[np.ndarray]] | None:
    """A serialized message made of ``parts`` in order, with every :class:`Slot`'s data still to be
    written, and a writable array (the slot's storage dtype and shape) over each slot's data, in order.

    A slot of 64 bytes or more starts at a multiple of :data:`ALIGN`: a ``padding`` field of its message
    (``padding_field`` at the top, a :class:`Group`'s own inside it) goes right before it. With
    ``outer_field`` the message is itself field ``outer_field`` of an enclosing message (the call
    stream's answer).

    Args:
        parts: literal field bytes (a field's key, length and content), slots and nested groups.
        padding_field: the top message's padding field number.
        outer_field: the enclosing message's field number (0: none).

    Returns:
        ``(bytes, slot arrays)``; None where the interpreter does not allow it (then build the message
        with its arrays and copy).
    """
    if FRESH_BYTES is None:
        return None
    fresh, payload_offset = FRESH_BYTES
    top = Group(outer_field, parts, padding_field)
    pads: dict[int, bytes] = {}
    # A padding depends on where its slot starts, and every length prefix before it on the paddings
    # inside: a few rounds settle them (a length changes size only at a varint boundary).
    for _ in range(6):
        settled: dict[int, bytes] = {}
        _place(top, payload_offset, pads, settled, outer=bool(outer_field))
        if settled == pads:
            break
        pads = settled
    size = _size(top, pads, outer=bool(outer_field))
    buf, view = fresh(size)
    arrays: list[np.ndarray] = []
    end = _write(top, view, 0, pads, arrays, outer=bool(outer_field))
    if end != size:
        raise RuntimeError(f"fresh_message: wrote {end} of {size} bytes")  # a layout bug, not an input
    return buf, arrays


def _slot_literal(slot: Slot, pad: bytes) -> bytes:
    return pad + tensor_header(slot.field, slot.shape, slot.dtype)


def _content_size(group: Group, pads: dict[int, bytes]) -> int:
    total = 0
    for part in group.parts:
        if isinstance(part, bytes):
            total += len(part)
        elif isinstance(part, Slot):
            total += len(_slot_literal(part, pads.get(id(part), b""))) + part.nbytes
        else:
            total += _size(part, pads, outer=True)
    return total


def _size(group: Group, pads: dict[int, bytes], outer: bool) -> int:
    content = _content_size(group, pads)
    return len(length_prefix(group.field, content)) + content if outer else content


def _place(group: Group, offset: int, pads: dict[int, bytes], settled: dict[int, bytes], outer: bool) -> int:
    """Walk ``group`` from ``offset`` with the current ``pads``, recording in ``settled`` the padding each
    slot needs there; returns the offset after it."""
    if outer:
        offset += len(length_prefix(group.field, _content_size(group, pads)))
    for part in group.parts:
        if isinstance(part, bytes):
            offset += len(part)
        elif isinstance(part, Slot):
            header = tensor_header(part.field, part.shape, part.dtype)
            pad = b""
            if part.nbytes >= 64:
                gap = (-(offset + 2 + len(header))) % ALIGN  # the padding field: 2 bytes + gap
                pad = key(group.padding_field, WIRE_LEN) + varint(gap) + bytes(gap)
            settled[id(part)] = pad
            offset += len(pad) + len(header) + part.nbytes
        else:
            offset = _place(part, offset, pads, settled, outer=True)
    return offset


def _write(
    group: Group, view: np.ndarray, pos: int, pads: dict[int, bytes], arrays: list, outer: bool
) -> int:
    if outer:
        prefix = length_prefix(group.field, _content_size(group, pads))
        view[pos : pos + len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
        pos += len(prefix)
    for part in group.parts:
        if isinstance(part, Group):
            pos = _write(part, view, pos, pads, arrays, outer=True)
            continue
        literal = part if isinstance(part, bytes) else _slot_literal(part, pads.get(id(part), b""))
        view[pos : pos + len(literal)] = np.frombuffer(literal, dtype=np.uint8)
        pos += len(literal)
        if isinstance(part, Slot):
            storage = dtypes.info(part.dtype).storage
            arrays.append(view[pos : pos + part.nbytes].view(storage).reshape(part.shape))
            pos += part.nbytes
    return pos


def read_tensor(view: memoryview, arg: str) -> tuple[np.ndarray, str]:
    """``(array, dtype name)`` of a serialized ``Tensor``: a read-only view of its data inside ``view``.

    Raises:
        ValueError: malformed bytes, or data that does not match the dtype and shape (``arg`` named).
    """
    pos, end = 0, len(view)
    wire_dtype = 0
    shape: list[int] = []
    data_span = (0, 0)
    while pos < end:
        field_key, pos = read_varint(view, pos, end)
        field, wire_type = field_key >> 3, field_key & 7
        if field == 1 and wire_type == WIRE_VARINT:
            wire_dtype, pos = read_varint(view, pos, end)
        elif field == 2 and wire_type == WIRE_LEN:
            (pos, stop), _ = read_length_delimited(view, pos, end, f"{arg}.shape")
            while pos < stop:
                dim, pos = read_varint(view, pos, stop)
                shape.append(dim)
        elif field == 2 and wire_type == WIRE_VARINT:
            dim, pos = read_varint(view, pos, end)
            shape.append(dim)
        elif field == 3 and wire_type == WIRE_LEN:
            data_span, pos = read_length_delimited(view, pos, end, f"{arg}.data")
        else:
            pos = skip_field(view, wire_type, pos, end)
    name = dtype_from_wire(wire_dtype, f"{arg}.dtype")
    shape_t = tuple(d - (1 << 64) if d >= 1 << 63 else d for d in shape)
    return view_bytes(view[data_span[0] : data_span[1]], name, shape_t, arg), name


def writable_rows(rows: np.ndarray) -> np.ndarray:
    """``rows`` writable, without a copy when they view a received answer's bytes.

    A decoded answer's arrays are read-only views into the ``bytes`` object gRPC received, which nothing
    but those views refers to: handing its memory to a writable array saves copying the answer (0.3 ms
    for a 4 MB answer here). CPython allows it the same way :func:`fresh_message` fills a fresh bytes
    object (the object is never hashed, and no one else sees it). Anything else that is read-only
    (a memory-mapped file, an answer on another interpreter) is copied.

    Args:
        rows: an array as :func:`read_tensor` gives it for a just-received answer.
    """
    if rows.flags.writeable:
        return rows
    if FRESH_BYTES is None or not rows.flags.c_contiguous or not _views_received_bytes(rows):
        return rows.copy()
    memory = (ctypes.c_char * rows.nbytes).from_address(rows.__array_interface__["data"][0])
    memory.answer = rows  # keeps the received bytes alive as long as the writable array
    return np.frombuffer(memory, dtype=rows.dtype).reshape(rows.shape)


def _views_received_bytes(rows: np.ndarray) -> bool:
    base = rows
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, memoryview) and type(base.obj) is bytes
