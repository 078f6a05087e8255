"""Tensor <-> protobuf conversion for the wire protocol: enums, tensors, IDs, schemes, metadata, stats.

A tensor travels as ``graphstore.Tensor``: dtype enum + shape + raw little-endian bytes
(bfloat16 as its uint16 bit pattern, see :mod:`graphstore.dtypes`).

Two rules keep large tensors cheap (DESIGN.md, "Measured on this machine"):

- Encoding assigns the bytes field *in place* (``msg.rows.data = b``); building a message by
  passing a sub-message to a constructor copies it again and was ~40x slower for 4 MB.
- Decoding never copies the payload: ``np.frombuffer`` views the bytes object. The views are
  read-only; callers that need to write copy.

The pull response, the one message whose size scales with every training step, has its own
hand-written encoder/decoder in :mod:`graphstore.protos.pull_wire`.
"""

from __future__ import annotations

import numpy as np

from graphstore import dtypes
from graphstore.protos import graphstore_pb2 as pb
from graphstore.types import (
    DEFAULT_CANONICAL_ETYPE,
    DEFAULT_NTYPE,
    EDGE,
    NODE,
    GraphSchema,
    PartitionMetadata,
    ServerStats,
    TensorScheme,
    etype_key,
)

# Shapes larger than this many dimensions are refused (row tensors are at most a few dims).
MAX_NDIM = 8


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


class WireEnum:
    """A two-way mapping between the API's names of one concept and the values of its protobuf enum.

    Args:
        arg: the argument's name in error messages (``"policy"``).
        to_wire: API name -> enum value; its keys are the accepted names, in the order messages list them.
        unknown_hint: appended to the message of an unknown enum value (e.g. what is expected).
    """

    def __init__(self, arg: str, to_wire: dict[str, int], unknown_hint: str = "") -> None:
        self._arg = arg
        self._to_wire = dict(to_wire)
        self._from_wire = {value: name for name, value in self._to_wire.items()}
        self._unknown_hint = unknown_hint

    def to_wire(self, name: str) -> int:
        """The enum value of an API name.

        Raises:
            ValueError: for any other name; the message lists the accepted ones.
        """
        try:
            return self._to_wire[name]
        except KeyError:
            accepted = " or ".join(repr(key) for key in self._to_wire)
            raise ValueError(f"{self._arg} must be {accepted}, got {name!r}") from None

    def from_wire(self, value: int) -> str:
        """The API name of an enum value.

        Raises:
            ValueError: for the unspecified or an unknown value.
        """
        try:
            return self._from_wire[value]
        except KeyError:
            raise ValueError(f"{self._arg}: unsupported enum value {value}{self._unknown_hint}") from None


_POLICY = WireEnum("policy", {NODE: pb.NODE, EDGE: pb.EDGE}, unknown_hint="; expected NODE or EDGE")
_EDGE_DIR = WireEnum("edge_dir", {"in": pb.IN, "out": pb.OUT})
_PUSH_OP = WireEnum("op", {"assign": pb.ASSIGN, "add": pb.ADD})

# ``"node"`` / ``"edge"`` <-> ``graphstore.Policy``


def policy_to_wire(policy: str) -> tuple[int, str]:
    """A policy string as its wire pair ``(Policy enum, type)``: ``"node:paper"`` -> ``(NODE, "paper")``.

    Raises:
        ValueError: a policy whose kind is not node or edge.
    """
    kind, _, type_key = policy.partition(":")
    return _POLICY.to_wire(kind), type_key


def policy_from_wire(value: int, type_key: str = "") -> str:
    """The policy string of a wire pair (see :func:`policy_to_wire`).

    Raises:
        ValueError: an unknown enum value.
    """
    kind = _POLICY.from_wire(value)
    return f"{kind}:{type_key}" if type_key else kind


# ``"in"`` / ``"out"`` <-> ``graphstore.EdgeDir``
edge_dir_to_wire = _EDGE_DIR.to_wire
edge_dir_from_wire = _EDGE_DIR.from_wire
# ``"assign"`` / ``"add"`` <-> ``graphstore.PushOp``
op_to_wire = _PUSH_OP.to_wire
op_from_wire = _PUSH_OP.from_wire


def little_endian(array: np.ndarray) -> np.ndarray:
    """``array`` with little-endian items (converted only when it is big-endian)."""
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
    array = little_endian(array)
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
    msg.policy, msg.type = policy_to_wire(scheme.policy)
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
        policy=policy_from_wire(msg.policy, msg.type),
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
    msg.ntypes[:] = meta.schema.ntypes
    msg.canonical_etypes[:] = [etype_key(c) for c in meta.schema.canonical_etypes]
    msg.ntype_counts[:] = meta.ntype_counts
    msg.etype_counts[:] = meta.etype_counts
    msg.checkpoint_root = meta.checkpoint_root
    msg.read_replica = meta.read_replica


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
        schema=GraphSchema(
            tuple(msg.ntypes) or (DEFAULT_NTYPE,),
            tuple(tuple(key.split(":")) for key in msg.canonical_etypes) or (DEFAULT_CANONICAL_ETYPE,),
        ),
        ntype_counts=tuple(msg.ntype_counts),
        etype_counts=tuple(msg.etype_counts),
        checkpoint_root=msg.checkpoint_root,
        read_replica=msg.read_replica,
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
    msg.read_replica = stats.read_replica


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
        read_replica=msg.read_replica,
    )
