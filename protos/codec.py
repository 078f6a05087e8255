"""Tensor <-> protobuf conversion for the wire protocol, plus the fast path for pulled rows.

A tensor travels as ``graphstore.Tensor``: dtype enum + shape + raw little-endian bytes
(bfloat16 as its uint16 bit pattern, see :mod:`graphstore.dtypes`).

Two rules keep large tensors cheap (DESIGN.md, "Measured on this machine"):

- Encoding assigns the bytes field *in place* (``msg.rows.data = b``); building a message by
  passing a sub-message to a constructor copies it again and was ~40x slower for 4 MB.
- Decoding never copies the payload: ``np.frombuffer`` views the bytes object. The views are
  read-only; callers that need to write copy.

The pull response is the one message whose size scales with every training step, so it also has
a hand-written encoder/decoder (:func:`encode_pull_response` / :func:`decode_pull_response`) that
produces and reads the exact protobuf wire format of ``PullResponse`` without building a message:
the server gathers the rows straight into the outgoing buffer, and the client views the rows
inside the received buffer. Any protobuf parser reads the same bytes as a ``PullResponse``.
"""

from __future__ import annotations

import numpy as np

from graphstore import dtypes
from graphstore.protos import graphstore_pb2 as pb
from graphstore.types import (
    EDGE,
    NODE,
    PartitionMetadata,
    ServerStats,
    TensorScheme,
)

# Shapes larger than this many dimensions are refused (row tensors are at most a few dims).
MAX_NDIM = 8

_POLICY_TO_WIRE = {NODE: pb.NODE, EDGE: pb.EDGE}
_WIRE_TO_POLICY = {v: k for k, v in _POLICY_TO_WIRE.items()}
_EDGE_DIR_TO_WIRE = {"in": pb.IN, "out": pb.OUT}
_WIRE_TO_EDGE_DIR = {v: k for k, v in _EDGE_DIR_TO_WIRE.items()}
_OP_TO_WIRE = {"assign": pb.ASSIGN, "add": pb.ADD}
_WIRE_TO_OP = {v: k for k, v in _OP_TO_WIRE.items()}


def dtype_to_wire(name: str) -> int:
    """The ``graphstore.DType`` enum value of a canonical dtype name.

    Raises:
        ValueError: for an unsupported dtype name.
    """
    return dtypes.info(name).wire


def dtype_from_wire(value: int, arg: str = "dtype") -> str:
    """The canonical dtype name of a ``graphstore.DType`` enum value.

    Raises:
        ValueError: for DTYPE_UNSPECIFIED or an unknown value; the message names ``arg``.
    """
    try:
        return dtypes.BY_WIRE[value].name
    except KeyError:
        raise ValueError(f"{arg}: unsupported dtype enum value {value}") from None


def policy_to_wire(policy: str) -> int:
    """``"node"`` / ``"edge"`` -> ``graphstore.Policy``.

    Raises:
        ValueError: for any other policy.
    """
    try:
        return _POLICY_TO_WIRE[policy]
    except KeyError:
        raise ValueError(f"policy must be 'node' or 'edge', got {policy!r}") from None


def policy_from_wire(value: int) -> str:
    """``graphstore.Policy`` -> ``"node"`` / ``"edge"``.

    Raises:
        ValueError: for POLICY_UNSPECIFIED or an unknown value.
    """
    try:
        return _WIRE_TO_POLICY[value]
    except KeyError:
        raise ValueError(f"policy: unsupported enum value {value}; expected NODE or EDGE") from None


def edge_dir_to_wire(edge_dir: str) -> int:
    """``"in"`` / ``"out"`` -> ``graphstore.EdgeDir``.

    Raises:
        ValueError: for any other direction.
    """
    try:
        return _EDGE_DIR_TO_WIRE[edge_dir]
    except KeyError:
        raise ValueError(f"edge_dir must be 'in' or 'out', got {edge_dir!r}") from None


def edge_dir_from_wire(value: int) -> str:
    """``graphstore.EdgeDir`` -> ``"in"`` / ``"out"``.

    Raises:
        ValueError: for an unknown enum value.
    """
    try:
        return _WIRE_TO_EDGE_DIR[value]
    except KeyError:
        raise ValueError(f"edge_dir: unsupported enum value {value}") from None


def op_to_wire(op: str) -> int:
    """``"assign"`` / ``"add"`` -> ``graphstore.PushOp``.

    Raises:
        ValueError: for any other op.
    """
    try:
        return _OP_TO_WIRE[op]
    except KeyError:
        raise ValueError(f"op must be 'assign' or 'add', got {op!r}") from None


def op_from_wire(value: int) -> str:
    """``graphstore.PushOp`` -> ``"assign"`` / ``"add"``.

    Raises:
        ValueError: for an unknown enum value.
    """
    try:
        return _WIRE_TO_OP[value]
    except KeyError:
        raise ValueError(f"op: unsupported enum value {value}") from None


def _little_endian(array: np.ndarray) -> np.ndarray:
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and np.little_endian is False):
        return array.astype(array.dtype.newbyteorder("<"))
    return array


def write_tensor(msg: pb.Tensor, array: np.ndarray, dtype: str | None = None) -> None:
    """Fill ``msg`` in place with ``array`` (storage form) as dtype + shape + bytes.

    Args:
        msg: the ``graphstore.Tensor`` field to fill (e.g. ``response.rows``).
        array: the values; bfloat16 as its uint16 storage.
        dtype: canonical dtype name; defaults to the name of ``array.dtype``. Needed for bfloat16.

    Raises:
        ValueError: if the dtype is not supported or does not match the array's storage.
    """
    array = np.asarray(array)
    name = dtype if dtype is not None else dtypes.name_of(array.dtype)
    info = dtypes.info(name)
    if array.dtype.itemsize != info.storage.itemsize or array.dtype.kind != info.storage.kind:
        array = array.astype(info.storage)
    array = _little_endian(array)
    msg.dtype = info.wire
    msg.shape[:] = array.shape
    msg.data = np.ascontiguousarray(array).tobytes()


def read_tensor(
    msg: pb.Tensor,
    arg: str,
    *,
    dtype: str | None = None,
    ndim: int | None = None,
) -> tuple[np.ndarray, str]:
    """View a ``graphstore.Tensor`` as a read-only numpy array (no copy).

    Args:
        msg: the received tensor message.
        arg: the argument's name, used in error messages (e.g. ``"ids"``).
        dtype: if given, the dtype the tensor must have.
        ndim: if given, the number of dimensions the tensor must have.

    Returns:
        ``(array, dtype_name)``; bfloat16 arrays are uint16 bit patterns.

    Raises:
        ValueError: unknown dtype, a dtype or ndim other than required, negative dimensions, or
            a byte count that does not match the shape. The message names ``arg`` and the value.
    """
    name = dtype_from_wire(msg.dtype, f"{arg}.dtype")
    if dtype is not None and name != dtype:
        raise ValueError(f"{arg}: dtype must be {dtype}, got {name}")
    shape = tuple(msg.shape)
    return view_bytes(msg.data, name, shape, arg, ndim=ndim), name


def view_bytes(data, dtype: str, shape: tuple[int, ...], arg: str, *, ndim: int | None = None) -> np.ndarray:
    """View raw little-endian bytes as a read-only array of ``dtype`` and ``shape``, after checking that
    the byte count matches.

    Raises:
        ValueError: the shape has the wrong ndim, a negative or absurd dimension, or does not match
            the number of bytes. The message names ``arg``.
    """
    if ndim is not None and len(shape) != ndim:
        raise ValueError(f"{arg}: expected a {ndim}-d tensor, got shape {list(shape)}")
    if len(shape) > MAX_NDIM:
        raise ValueError(f"{arg}: at most {MAX_NDIM} dimensions are supported, got shape {list(shape)}")
    if any(d < 0 for d in shape):
        raise ValueError(f"{arg}: negative dimension in shape {list(shape)}")
    info = dtypes.info(dtype)
    count = 1
    for d in shape:
        count *= d
    expected = count * info.storage.itemsize
    if expected != len(data):
        raise ValueError(
            f"{arg}: shape {list(shape)} of {dtype} needs {expected} bytes, got {len(data)} bytes"
        )
    return np.frombuffer(data, dtype=info.storage).reshape(shape)


def read_ids(msg: pb.Tensor, arg: str) -> np.ndarray:
    """Decode a 1-d tensor of IDs as int64 (int32 is widened; other dtypes are refused).

    Raises:
        ValueError: not 1-d, not an integer tensor of int64/int32, or malformed bytes.
    """
    name = dtype_from_wire(msg.dtype, f"{arg}.dtype")
    if name not in ("int64", "int32"):
        raise ValueError(f"{arg}: IDs must be int64 or int32, got {name}")
    array = view_bytes(msg.data, name, tuple(msg.shape), arg, ndim=1)
    return array.astype(np.int64) if name == "int32" else array


def write_ids(msg: pb.Tensor, ids: np.ndarray) -> None:
    """Fill ``msg`` with a 1-d int64 ID tensor."""
    write_tensor(msg, np.ascontiguousarray(ids, dtype=np.int64).reshape(-1), "int64")


# ----------------------------------------------------------------------------------------------
# Schemes, metadata and stats
# ----------------------------------------------------------------------------------------------


def write_scheme(msg: pb.TensorScheme, scheme: TensorScheme) -> None:
    """Fill a ``graphstore.TensorScheme`` message in place."""
    msg.name = scheme.name
    msg.dtype = dtype_to_wire(scheme.dtype)
    msg.shape[:] = scheme.shape
    msg.policy = policy_to_wire(scheme.policy)
    msg.persistent = scheme.persistent
    msg.writable = scheme.writable
    msg.version = scheme.version
    msg.from_partition = scheme.from_partition
    msg.owner = scheme.owner


def read_scheme(msg: pb.TensorScheme) -> TensorScheme:
    """Build a :class:`TensorScheme` from its message.

    Raises:
        ValueError: unknown dtype or policy.
    """
    return TensorScheme(
        name=msg.name,
        dtype=dtype_from_wire(msg.dtype, "scheme.dtype"),
        shape=tuple(int(d) for d in msg.shape),
        policy=policy_from_wire(msg.policy),
        persistent=msg.persistent,
        writable=msg.writable,
        version=msg.version,
        from_partition=msg.from_partition,
        owner=msg.owner,
    )


def write_metadata(msg: pb.MetadataResponse, meta: PartitionMetadata) -> None:
    """Fill a ``MetadataResponse`` in place."""
    msg.graph_name = meta.graph_name
    msg.part_id = meta.part_id
    msg.num_parts = meta.num_parts
    msg.num_nodes = meta.num_nodes
    msg.num_edges = meta.num_edges
    msg.node_bounds[:] = meta.node_bounds
    msg.edge_bounds[:] = meta.edge_bounds
    for scheme in meta.tensors:
        write_scheme(msg.tensors.add(), scheme)
    msg.part_config = meta.part_config
    msg.hostname = meta.hostname
    msg.format_version = meta.format_version


def read_metadata(msg: pb.MetadataResponse) -> PartitionMetadata:
    """Build :class:`PartitionMetadata` from a ``MetadataResponse``."""
    return PartitionMetadata(
        graph_name=msg.graph_name,
        part_id=msg.part_id,
        num_parts=msg.num_parts,
        num_nodes=msg.num_nodes,
        num_edges=msg.num_edges,
        node_bounds=tuple(msg.node_bounds),
        edge_bounds=tuple(msg.edge_bounds),
        tensors=tuple(read_scheme(s) for s in msg.tensors),
        part_config=msg.part_config,
        hostname=msg.hostname,
        format_version=msg.format_version,
    )


def write_stats(msg: pb.StatsResponse, stats: ServerStats) -> None:
    """Fill a ``StatsResponse`` in place."""
    msg.part_id = stats.part_id
    msg.uptime_s = stats.uptime_s
    msg.rss_bytes = stats.rss_bytes
    msg.rss_anon_bytes = stats.rss_anon_bytes
    for scheme in stats.tensors:
        write_scheme(msg.tensors.add(), scheme)
    for key, value in stats.counters.items():
        msg.counters[key] = value
    msg.address = stats.address


def read_stats(msg: pb.StatsResponse) -> ServerStats:
    """Build :class:`ServerStats` from a ``StatsResponse``."""
    return ServerStats(
        part_id=msg.part_id,
        uptime_s=msg.uptime_s,
        rss_bytes=msg.rss_bytes,
        rss_anon_bytes=msg.rss_anon_bytes,
        tensors=tuple(read_scheme(s) for s in msg.tensors),
        counters=dict(msg.counters),
        address=msg.address,
    )


# ----------------------------------------------------------------------------------------------
# The pull-response fast path: the protobuf wire format of PullResponse, written and read by hand.
#
#   PullResponse = field 1 (rows), length-delimited: a Tensor
#   Tensor       = field 1 (dtype) varint, field 2 (shape) packed varints, field 3 (data) bytes
# ----------------------------------------------------------------------------------------------

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
    rows = _little_endian(np.asarray(rows))
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
            length, pos = _read_varint(view, pos, end)
            if pos + length > end:
                raise ValueError("truncated rows field in pull response")
            tensor_span = (pos, pos + length)
            pos += length
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
            length, pos = _read_varint(view, pos, end)
            stop = pos + length
            if stop > end:
                raise ValueError("truncated shape in pull response")
            while pos < stop:
                dim, pos = _read_varint(view, pos, stop)
                shape.append(dim)
        elif field == 2 and wire_type == _WIRE_VARINT:
            dim, pos = _read_varint(view, pos, end)
            shape.append(dim)
        elif field == 3 and wire_type == _WIRE_LEN:
            length, pos = _read_varint(view, pos, end)
            if pos + length > end:
                raise ValueError("truncated data in pull response")
            data_span = (pos, pos + length)
            pos += length
        else:
            pos = _skip_field(view, wire_type, pos, end)
    name = dtype_from_wire(wire_dtype, "rows.dtype")
    shape_t = tuple(d - (1 << 64) if d >= 1 << 63 else d for d in shape)
    return view_bytes(view[data_span[0] : data_span[1]], name, shape_t, "rows"), name
