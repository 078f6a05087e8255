"""The chunked input format: a graph split into ``.npy`` chunks that no single process has to hold.

Modelled on DGL's chunked graph format (``metadata.json`` with ``node_type``, ``num_nodes_per_chunk``,
``edge_type``, ``num_edges_per_chunk``, ``edges``, ``node_data``, ``edge_data``; see
docs/partition-format.md). Edge chunks are int64 ``[n, 2]`` arrays of per-type (source, destination)
IDs; feature chunks hold consecutive rows of one node or edge array of one type. Edge data chunks follow
the edge chunks of their type (same row counts); node data chunks follow ``num_nodes_per_chunk``.

:func:`read_metadata` parses and checks the metadata; :func:`check_chunk_files` checks every file's
header against it (missing file, wrong dtype, wrong shape), naming the file; :func:`write_chunks`
converts a :class:`~graphstore.partition.graph.GraphData` (npz, edge list or typed npz, memory-mapped)
into chunks, a chunk at a time.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np

from graphstore.dtypes import info, name_of
from graphstore.partition.graph import GraphData
from graphstore.partition.memory import release_pages
from graphstore.partition.writer import check_output_folder, staged_output_folder, storage_dtype_name
from graphstore.types import etype_key

METADATA = "metadata.json"
CHUNK_FORMAT_VERSION = 1


@dataclass
class ChunkedGraph:
    """A chunked graph's metadata, paths resolved against its folder.

    Attributes:
        root: the folder holding ``metadata.json``.
        graph_name: the name recorded in the metadata.
        ntypes: node types, in type-ID order.
        nodes_per_chunk: per node type, the node count of each chunk (its sum is the type's count).
        etypes: canonical edge types as ``"src:etype:dst"``, in type-ID order.
        edges_per_chunk: per edge type, the edge count of each chunk.
        edge_files: per edge type, its chunk files (int64 ``[n, 2]``).
        node_data: ``{ntype: {name: {"files": [...], "dtype": str, "shape": [...]}}}``.
        edge_data: ``{"src:etype:dst": {name: {...}}}`` likewise.
    """

    root: str
    graph_name: str
    ntypes: list[str]
    nodes_per_chunk: list[list[int]]
    etypes: list[str]
    edges_per_chunk: list[list[int]]
    edge_files: list[list[str]]
    node_data: dict[str, dict[str, dict]] = field(default_factory=dict)
    edge_data: dict[str, dict[str, dict]] = field(default_factory=dict)

    @property
    def nodes_per_type(self) -> list[int]:
        return [int(sum(c)) for c in self.nodes_per_chunk]

    @property
    def edges_per_type(self) -> list[int]:
        return [int(sum(c)) for c in self.edges_per_chunk]

    @property
    def node_offsets(self) -> np.ndarray:
        """int64 [T + 1]: where each node type starts in the homogeneous (type-major) ID space."""
        return np.concatenate(([0], np.cumsum(self.nodes_per_type))).astype(np.int64)

    def endpoint_types(self) -> tuple[np.ndarray, np.ndarray]:
        """Per edge type, the type IDs of its source and destination node types."""
        src = [self.ntypes.index(k.split(":")[0]) for k in self.etypes]
        dst = [self.ntypes.index(k.split(":")[2]) for k in self.etypes]
        return np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)


def _bad(path: str, what: str) -> ValueError:
    return ValueError(f"chunked graph {path!r}: {what}")


def read_metadata(root: str) -> ChunkedGraph:
    """Read and check ``root/metadata.json`` (the files themselves: :func:`check_chunk_files`).

    Raises:
        FileNotFoundError: ``root`` or its metadata is missing.
        ValueError: the metadata is malformed (the message names the field).
    """
    path = os.path.join(root, METADATA)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"chunked graph metadata {path!r} not found")
    try:
        with open(path) as fh:
            meta = json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _bad(path, f"not valid json: {exc}") from None
    for key in (
        "graph_name",
        "node_type",
        "num_nodes_per_chunk",
        "edge_type",
        "num_edges_per_chunk",
        "edges",
    ):
        if key not in meta:
            raise _bad(path, f"lacks field {key!r}")
    ntypes, etypes = list(meta["node_type"]), list(meta["edge_type"])
    if len(meta["num_nodes_per_chunk"]) != len(ntypes):
        raise _bad(path, f"num_nodes_per_chunk has {len(meta['num_nodes_per_chunk'])} entries for {ntypes}")
    if len(meta["num_edges_per_chunk"]) != len(etypes):
        raise _bad(path, f"num_edges_per_chunk has {len(meta['num_edges_per_chunk'])} entries for {etypes}")
    for key in etypes:
        parts = key.split(":")
        if len(parts) != 3 or parts[0] not in ntypes or parts[2] not in ntypes:
            raise _bad(path, f"edge_type {key!r} is not 'src:etype:dst' over node types {ntypes}")
        if key not in meta["edges"]:
            raise _bad(path, f"edges lacks edge type {key!r}")
    edge_files = []
    for e, key in enumerate(etypes):
        files = meta["edges"][key].get("data", [])
        if len(files) != len(meta["num_edges_per_chunk"][e]):
            raise _bad(
                path,
                f"edges[{key!r}] lists {len(files)} files for {len(meta['num_edges_per_chunk'][e])} chunks",
            )
        edge_files.append([os.path.join(root, f) for f in files])
    graph = ChunkedGraph(
        root=root,
        graph_name=str(meta["graph_name"]),
        ntypes=ntypes,
        nodes_per_chunk=[[int(n) for n in c] for c in meta["num_nodes_per_chunk"]],
        etypes=etypes,
        edges_per_chunk=[[int(n) for n in c] for c in meta["num_edges_per_chunk"]],
        edge_files=edge_files,
    )
    for section, types, counts, target in (
        ("node_data", ntypes, graph.nodes_per_chunk, graph.node_data),
        ("edge_data", etypes, graph.edges_per_chunk, graph.edge_data),
    ):
        for type_key, arrays in meta.get(section, {}).items():
            if type_key not in types:
                raise _bad(path, f"{section} names unknown type {type_key!r}")
            for name, spec in arrays.items():
                files = spec.get("data", [])
                if len(files) != len(counts[types.index(type_key)]):
                    raise _bad(
                        path,
                        f"{section}[{type_key!r}][{name!r}] lists {len(files)} files, expected "
                        f"{len(counts[types.index(type_key)])} (one per chunk)",
                    )
                target.setdefault(type_key, {})[name] = {
                    "files": [os.path.join(root, f) for f in files],
                    "dtype": spec.get("dtype"),
                    "shape": list(spec.get("shape", [])),
                }
    return graph


def _header(path: str) -> tuple[tuple[int, ...], np.dtype]:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"chunk file {path!r} not found")
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise ValueError(f"chunk file {path!r} is not a readable .npy: {exc}") from None
    return arr.shape, arr.dtype


def check_chunk_files(graph: ChunkedGraph) -> None:
    """Check that every chunk file exists and has the dtype and shape the metadata promises.

    Only headers are read (the arrays are memory-mapped, not loaded).

    Raises:
        FileNotFoundError: a chunk file is missing (named).
        ValueError: a chunk file's dtype or shape disagrees with the metadata (named, with both).
    """
    for e, key in enumerate(graph.etypes):
        for path, rows in zip(graph.edge_files[e], graph.edges_per_chunk[e], strict=True):
            shape, dtype = _header(path)
            if shape != (rows, 2) or dtype.kind not in "iu":
                raise ValueError(
                    f"chunk file {path!r} of edge type {key!r} is {dtype}{list(shape)}, "
                    f"expected integer [{rows}, 2]"
                )
    for section, types, counts, data in (
        ("node", graph.ntypes, graph.nodes_per_chunk, graph.node_data),
        ("edge", graph.etypes, graph.edges_per_chunk, graph.edge_data),
    ):
        for type_key, arrays in data.items():
            rows_of = counts[types.index(type_key)]
            for name, spec in arrays.items():
                for path, rows in zip(spec["files"], rows_of, strict=True):
                    shape, dtype = _header(path)
                    want = (rows, *spec["shape"])
                    if shape != want or (spec["dtype"] and name_of(dtype) != spec["dtype"]):
                        raise ValueError(
                            f"chunk file {path!r} ({section} array {type_key}/{name}) is "
                            f"{dtype}{list(shape)}, "
                            f"expected {spec['dtype']}{list(want)}"
                        )


def chunk_bounds(total: int, num_chunks: int) -> np.ndarray:
    """``num_chunks + 1`` even boundaries over ``total`` rows (DGL's chunk sizes)."""
    return np.array([total * i // num_chunks for i in range(num_chunks + 1)], dtype=np.int64)


def read_rows(files: list[str], counts: list[int], start: int, end: int) -> np.ndarray:
    """Rows ``[start, end)`` of the array that the chunk ``files`` (of ``counts`` rows) hold in order.

    Only the chunks overlapping the range are opened (memory-mapped) and their pages released after.
    """
    bounds = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    pieces = []
    first = max(int(np.searchsorted(bounds, start, side="right")) - 1, 0)
    for i in range(first, len(files)):
        if bounds[i] >= end:
            break
        arr = np.load(files[i], mmap_mode="r", allow_pickle=False)
        lo, hi = max(start, bounds[i]) - bounds[i], min(end, bounds[i + 1]) - bounds[i]
        if hi > lo:
            view = arr[lo:hi]
            pieces.append(np.array(view))
            release_pages(view)
    if not pieces:
        return np.empty((0,), dtype=np.int64)
    return np.concatenate(pieces)


def _save_rows(path: str, rows: np.ndarray) -> None:
    np.save(path, np.ascontiguousarray(rows), allow_pickle=False)
    release_pages(rows)


def write_chunks(
    graph: GraphData, out: str, num_chunks: int, graph_name: str, overwrite: bool = False
) -> str:
    """Write ``graph`` as a chunked graph into ``out``, one chunk of one array at a time.

    Args:
        graph: the input (its arrays may be memory-mapped: only one chunk is read at a time).
        out: output folder; absent or empty unless ``overwrite``. Written beside and renamed at the end.
        num_chunks: chunks per node type, per edge type and per array (>= 1; fewer rows than chunks
            give empty chunks).
        graph_name: recorded in the metadata.
        overwrite: replace an existing folder.

    Returns:
        The path of ``metadata.json``.

    Raises:
        ValueError: ``num_chunks`` < 1 or an array dtype graphstore does not store.
        FileExistsError: ``out`` is not empty, without ``overwrite``.
    """

    if isinstance(num_chunks, bool) or not isinstance(num_chunks, int) or num_chunks < 1:
        raise ValueError(f"num_chunks must be an int >= 1, got {num_chunks!r}")
    check_output_folder(out, overwrite)
    schema = graph.schema
    ntypes = list(schema.ntypes)
    etypes = [etype_key(c) for c in schema.canonical_etypes]
    offsets, edge_offsets = graph.node_offsets, graph.edge_offsets
    meta: dict = {
        "format_version": CHUNK_FORMAT_VERSION,
        "graph_name": graph_name,
        "node_type": ntypes,
        "num_nodes_per_chunk": [],
        "edge_type": etypes,
        "num_edges_per_chunk": [],
        "edges": {},
        "node_data": {},
        "edge_data": {},
    }
    with staged_output_folder(out) as tmp:
        for t, ntype in enumerate(ntypes):
            bounds = chunk_bounds(graph.nodes_per_type[t], num_chunks)
            meta["num_nodes_per_chunk"].append(np.diff(bounds).tolist())
            for name, arr in graph.node_data.get(ntype, {}).items():
                files = _write_array(tmp, f"node_data/{ntype}/{name}", arr, bounds)
                meta["node_data"].setdefault(ntype, {})[name] = {
                    "format": {"name": "numpy"},
                    "data": files,
                    "dtype": storage_dtype_name(arr, name, None),
                    "shape": list(arr.shape[1:]),
                }
        for e, key in enumerate(etypes):
            src_t, dst_t = ntypes.index(key.split(":")[0]), ntypes.index(key.split(":")[2])
            bounds = chunk_bounds(graph.edges_per_type[e], num_chunks)
            meta["num_edges_per_chunk"].append(np.diff(bounds).tolist())
            files = []
            os.makedirs(os.path.join(tmp, "edges", key), exist_ok=True)
            for i in range(num_chunks):
                lo, hi = edge_offsets[e] + bounds[i], edge_offsets[e] + bounds[i + 1]
                pair = np.empty((hi - lo, 2), dtype=np.int64)
                pair[:, 0] = np.asarray(graph.src[lo:hi]) - offsets[src_t]
                pair[:, 1] = np.asarray(graph.dst[lo:hi]) - offsets[dst_t]
                release_pages(graph.src[lo:hi], graph.dst[lo:hi])
                rel = f"edges/{key}/chunk-{i}.npy"
                np.save(os.path.join(tmp, rel), pair, allow_pickle=False)
                files.append(rel)
            meta["edges"][key] = {"format": {"name": "numpy"}, "data": files}
            for name, arr in graph.edge_data.get(key, {}).items():
                files = _write_array(tmp, f"edge_data/{key}/{name}", arr, bounds)
                meta["edge_data"].setdefault(key, {})[name] = {
                    "format": {"name": "numpy"},
                    "data": files,
                    "dtype": storage_dtype_name(arr, name, None),
                    "shape": list(arr.shape[1:]),
                }
        with open(os.path.join(tmp, METADATA), "w") as fh:
            json.dump(meta, fh, indent=1)
    return os.path.join(out, METADATA)


def _write_array(tmp: str, rel_dir: str, arr: np.ndarray, bounds: np.ndarray) -> list[str]:
    os.makedirs(os.path.join(tmp, rel_dir), exist_ok=True)
    files = []
    for i in range(len(bounds) - 1):
        rel = f"{rel_dir}/chunk-{i}.npy"
        _save_rows(os.path.join(tmp, rel), arr[bounds[i] : bounds[i + 1]])
        files.append(rel)
    return files


def storage_of(dtype_name: str) -> np.dtype:
    """The on-disk numpy dtype of a canonical dtype name."""
    return np.dtype(info(dtype_name).storage)
