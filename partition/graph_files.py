"""Input graph files for the partitioner: an ``.npz`` of arrays (see :mod:`graphstore.partition.graph` for
what they hold) or a text edge list, read into a :class:`~graphstore.partition.graph.GraphData`.

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

import numpy as np

from graphstore.partition.array_input import graph_from_arrays
from graphstore.partition.graph import GraphData

EDGE_LIST_SUFFIXES = (".txt", ".csv", ".tsv", ".el", ".edges", ".edgelist")


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
