"""Input graphs for the partitioner: an in-memory :class:`GraphData`, loaded from ``.npz`` or an edge list.

An input ``.npz`` holds ``src`` and ``dst`` (integer arrays of length E), optionally ``num_nodes``
(a scalar), and any number of node arrays (first dimension N: ``feat``, ``label``, ``train_mask``...)
and edge arrays (first dimension E). Whether an array belongs to the nodes or the edges is decided
by its length; when N == E it is taken as a node array. N is ``num_nodes`` when given, else the
length of the node arrays, else ``max(src, dst) + 1``.

Members of an uncompressed ``.npz`` (what ``np.savez`` and ``graphstore generate`` write) are
memory-mapped instead of read, so a graph larger than RAM's comfort zone costs only what is touched.

An edge list is a text file with one ``src dst`` pair per line, separated by whitespace or a comma;
lines starting with ``#`` or ``%`` are comments; an optional third column becomes the edge array
``weight`` (float32).
"""

from __future__ import annotations

import os
import struct
import zipfile
from dataclasses import dataclass, field

import numpy as np

EDGE_LIST_SUFFIXES = (".txt", ".csv", ".tsv", ".el", ".edges", ".edgelist")


@dataclass
class GraphData:
    """A homogeneous directed graph with node and edge arrays.

    Attributes:
        num_nodes: number of nodes N.
        src, dst: int64 arrays of length E (edge ``i`` goes ``src[i] -> dst[i]``).
        node_data: arrays whose first dimension is N, by name.
        edge_data: arrays whose first dimension is E, by name.
    """

    num_nodes: int
    src: np.ndarray
    dst: np.ndarray
    node_data: dict[str, np.ndarray] = field(default_factory=dict)
    edge_data: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def num_edges(self) -> int:
        return int(self.src.shape[0])

    def validate(self) -> None:
        """Check lengths, dtypes and ID ranges.

        Raises:
            ValueError: naming the array and the offending value.
        """
        validate_graph(self)


def _check_id_array(name: str, arr: np.ndarray) -> np.ndarray:
    arr = np.asarray(arr)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integer node IDs, got dtype {arr.dtype}")
    return arr


def validate_graph(graph: GraphData) -> None:
    """Validate a :class:`GraphData` (see :meth:`GraphData.validate`).

    Raises:
        ValueError: arrays of mismatched length, non-integer IDs, IDs < 0 or >= num_nodes, num_nodes < 1.
    """
    if int(graph.num_nodes) < 1:
        raise ValueError(f"num_nodes must be >= 1, got {graph.num_nodes}")
    _check_id_array("src", graph.src)
    _check_id_array("dst", graph.dst)
    if graph.src.shape[0] != graph.dst.shape[0]:
        raise ValueError(f"src and dst differ in length: {graph.src.shape[0]} != {graph.dst.shape[0]}")
    for name, ids in (("src", graph.src), ("dst", graph.dst)):
        if ids.size == 0:
            continue
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0:
            raise ValueError(f"{name} has node ID {lo} < 0")
        if hi >= graph.num_nodes:
            raise ValueError(f"{name} has node ID {hi} >= num_nodes={graph.num_nodes}")
    for name, arr in graph.node_data.items():
        if arr.ndim == 0 or arr.shape[0] != graph.num_nodes:
            raise ValueError(f"node array {name!r} has shape {arr.shape}; expected {graph.num_nodes} rows")
    for name, arr in graph.edge_data.items():
        if arr.ndim == 0 or arr.shape[0] != graph.num_edges:
            raise ValueError(f"edge array {name!r} has shape {arr.shape}; expected {graph.num_edges} rows")
    clash = set(graph.node_data) & set(graph.edge_data)
    if clash:
        raise ValueError(f"names used for both node and edge arrays: {sorted(clash)}")


def graph_from_arrays(arrays: dict[str, np.ndarray], num_nodes: int | None = None) -> GraphData:
    """Build a :class:`GraphData` from a dict shaped like an input ``.npz``.

    Args:
        arrays: ``src``, ``dst``, optional ``num_nodes``, and node / edge arrays by name.
        num_nodes: overrides ``arrays['num_nodes']`` and the inferred count.

    Returns:
        The validated graph.

    Raises:
        ValueError: missing ``src``/``dst``, or an array whose length is neither N nor E.
    """
    missing = [k for k in ("src", "dst") if k not in arrays]
    if missing:
        raise ValueError(f"graph is missing required arrays {missing}; has {sorted(arrays)}")
    src = _check_id_array("src", arrays["src"])
    dst = _check_id_array("dst", arrays["dst"])
    if src.shape[0] != dst.shape[0]:
        raise ValueError(f"src and dst differ in length: {src.shape[0]} != {dst.shape[0]}")
    num_edges = src.shape[0]
    others = {k: np.asarray(v) for k, v in arrays.items() if k not in ("src", "dst", "num_nodes")}
    for name, arr in others.items():
        if arr.ndim == 0:
            raise ValueError(f"array {name!r} is a scalar; node and edge arrays need one row per node/edge")
    if num_nodes is None and "num_nodes" in arrays:
        num_nodes = int(np.asarray(arrays["num_nodes"]).reshape(()))
    if num_nodes is None:
        lengths = {a.shape[0] for a in others.values() if a.shape[0] != num_edges}
        if len(lengths) > 1:
            raise ValueError(
                f"arrays have mismatched lengths {sorted(lengths)}: each must have num_edges={num_edges} "
                f"rows or the same number of node rows"
            )
        if lengths:
            num_nodes = lengths.pop()
            hi = max(int(src.max()) if src.size else -1, int(dst.max()) if dst.size else -1)
            if hi >= num_nodes:
                short = sorted(k for k, a in others.items() if a.shape[0] == num_nodes)
                raise ValueError(
                    f"node arrays {short} have {num_nodes} rows, but src/dst hold node ID {hi}: "
                    f"array {short[0]!r} has {num_nodes} rows; expected one per node (>= {hi + 1})"
                )
        else:
            hi = max(int(src.max()) if src.size else -1, int(dst.max()) if dst.size else -1)
            num_nodes = max(hi + 1, 1)
    num_nodes = int(num_nodes)
    node_data: dict[str, np.ndarray] = {}
    edge_data: dict[str, np.ndarray] = {}
    for name, arr in others.items():
        if arr.shape[0] == num_nodes:
            node_data[name] = arr
        elif arr.shape[0] == num_edges:
            edge_data[name] = arr
        else:
            raise ValueError(
                f"array {name!r} has {arr.shape[0]} rows; "
                f"expected num_nodes={num_nodes} or num_edges={num_edges}"
            )
    graph = GraphData(num_nodes=num_nodes, src=src, dst=dst, node_data=node_data, edge_data=edge_data)
    validate_graph(graph)
    return graph


def _npz_member_offset(fh, info: zipfile.ZipInfo) -> int:
    """Byte offset of a stored zip member's data (after its local file header)."""
    fh.seek(info.header_offset)
    header = fh.read(30)
    if header[:4] != b"PK\x03\x04":
        raise ValueError(f"corrupt zip local header for member {info.filename!r}")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_len + extra_len


def load_npz(path: str, mmap: bool = True) -> dict[str, np.ndarray]:
    """Read every array of an ``.npz``; uncompressed members are memory-mapped read-only when ``mmap``.

    Args:
        path: the ``.npz`` file.
        mmap: map stored (uncompressed) members instead of reading them.

    Returns:
        Arrays by member name (without ``.npy``).

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if it is not a readable ``.npz``.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"graph file {path!r} not found")
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{path!r} is not a valid .npz file: {exc}") from None
    arrays: dict[str, np.ndarray] = {}
    with zf, open(path, "rb") as fh:
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                continue
            name = info.filename[: -len(".npy")]
            if mmap and info.compress_type == zipfile.ZIP_STORED:
                offset = _npz_member_offset(fh, info)
                fh.seek(offset)
                version = np.lib.format.read_magic(fh)
                read_header = (
                    np.lib.format.read_array_header_1_0
                    if version == (1, 0)
                    else np.lib.format.read_array_header_2_0
                )
                shape, fortran, dtype = read_header(fh)
                if not fortran and not dtype.hasobject:
                    if int(np.prod(shape)) == 0:
                        arrays[name] = np.zeros(shape, dtype=dtype)
                    else:
                        arrays[name] = np.memmap(path, dtype=dtype, mode="r", offset=fh.tell(), shape=shape)
                    continue
            with zf.open(info) as member:
                arrays[name] = np.lib.format.read_array(member, allow_pickle=False)
    return arrays


def load_edge_list(path: str, num_nodes: int | None = None) -> GraphData:
    """Read a text edge list (see the module docstring for the format).

    Args:
        path: the text file.
        num_nodes: node count; default ``max ID + 1``.

    Returns:
        The validated graph.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: for unparsable lines, fewer than two columns, or bad IDs.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"edge list {path!r} not found")
    delimiter = None
    with open(path) as fh:
        for line in fh:
            stripped = line.strip()
            if stripped and stripped[0] not in "#%":
                delimiter = "," if "," in stripped else None
                break
    try:
        table = np.loadtxt(path, comments=("#", "%"), delimiter=delimiter, ndmin=2, dtype=np.float64)
    except ValueError as exc:
        raise ValueError(f"cannot parse edge list {path!r}: {exc}") from None
    if table.size == 0:
        table = table.reshape(0, 2)
    if table.shape[1] < 2:
        raise ValueError(f"edge list {path!r} needs at least two columns (src dst), got {table.shape[1]}")
    ids = table[:, :2]
    if np.any(ids != np.floor(ids)):
        row = int(np.argwhere(ids != np.floor(ids))[0, 0])
        raise ValueError(
            f"edge list {path!r} line {row + 1} (data row): non-integer node ID {ids[row].tolist()}"
        )
    arrays: dict[str, np.ndarray] = {"src": ids[:, 0].astype(np.int64), "dst": ids[:, 1].astype(np.int64)}
    if table.shape[1] >= 3:
        arrays["weight"] = table[:, 2].astype(np.float32)
    if num_nodes is None:
        num_nodes = int(ids.max()) + 1 if ids.size else 1
        if ids.size and ids.min() < 0:
            raise ValueError(f"edge list {path!r} has node ID {int(ids.min())} < 0")
    return graph_from_arrays(arrays, num_nodes=num_nodes)


def load_graph(path: str, num_nodes: int | None = None, mmap: bool = True) -> GraphData:
    """Load an input graph from a ``.npz`` or an edge-list text file (chosen by suffix).

    Args:
        path: ``.npz`` or text edge list.
        num_nodes: node count override.
        mmap: memory-map uncompressed ``.npz`` members.

    Returns:
        The validated :class:`GraphData`.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file or its arrays are invalid.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"graph file {path!r} not found")
    if path.endswith(".npz"):
        return graph_from_arrays(load_npz(path, mmap=mmap), num_nodes=num_nodes)
    return load_edge_list(path, num_nodes=num_nodes)
