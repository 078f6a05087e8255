"""Writing the partition files: rows in their storage dtype, each partition's folder, the config, and
the output folder swapped into place only once everything is written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from graphstore.dtypes import float32_to_bfloat16_bits, info, name_of
from graphstore.partition.book import RangePartitionBook
from graphstore.partition.format import EDGE_FEAT_DIR, NODE_FEAT_DIR, feature_file
from graphstore.partition.graph import GraphData
from graphstore.partition.memory import release_pages
from graphstore.partition.relabel import Relabeling, csr_pieces
from graphstore.partition.types import FORMAT_VERSION, FORMAT_VERSION_IN_EID
from graphstore.types import GraphSchema, etype_key

HALF_FLOAT_DTYPES = ("float16", "bfloat16")
WRITE_CHUNK = 1 << 22  # ID rows per write() call


def storage_dtype_name(array: np.ndarray, name: str, feat_dtype: str | None) -> str:
    """Canonical dtype an input array is stored as.

    ``feat_dtype`` applies to floating feature matrices (two or more dimensions); one-dimensional
    float arrays (edge weights, sampling probabilities) keep their dtype.

    Raises:
        ValueError: the array's dtype is not one graphstore stores.
    """
    if array.dtype.kind == "f" and array.ndim >= 2 and feat_dtype is not None:
        return feat_dtype
    try:
        return name_of(array.dtype)
    except ValueError:
        raise ValueError(f"array {name!r} has dtype {array.dtype}, which graphstore cannot store") from None


def convert_rows(rows: np.ndarray, dtype_name: str) -> np.ndarray:
    """Rows converted to the storage form of ``dtype_name`` (bfloat16 as uint16 bits)."""
    if dtype_name == "bfloat16":
        return float32_to_bfloat16_bits(rows)
    return np.ascontiguousarray(rows, dtype=info(dtype_name).storage)


def write_npy(path: str, dtype: np.dtype, shape: tuple[int, ...], chunks: Iterable[np.ndarray]) -> None:
    """Write a ``.npy`` of ``dtype`` and ``shape`` from row chunks, converting each chunk to ``dtype``.

    The file is written with ``write()`` calls, not through a mapping, so the rows never count towards
    this process's resident memory beyond one chunk.

    Raises:
        RuntimeError: the chunks hold another number of rows than ``shape`` says.
    """
    dtype = np.dtype(dtype)
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)}
    written = 0
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        for chunk in chunks:
            np.ascontiguousarray(chunk, dtype=dtype).tofile(fh)
            written += chunk.shape[0]
    if written != shape[0]:
        raise RuntimeError(f"{path}: wrote {written} rows, expected {shape[0]}")


def _row_chunks(array: np.ndarray, chunk: int = WRITE_CHUNK) -> Iterator[np.ndarray]:
    return (array[start : start + chunk] for start in range(0, array.shape[0], chunk))


def _write_rows(path: str, source: np.ndarray, index: np.ndarray, dtype_name: str) -> None:
    """Write ``convert(source[index])`` to a .npy, a chunk of rows at a time, releasing the mapped pages
    of ``source`` each chunk touched."""
    row_bytes = max(1, int(np.prod(source.shape[1:], dtype=np.int64)) * source.dtype.itemsize)
    chunk = max(1, (64 << 20) // row_bytes)

    def rows() -> Iterator[np.ndarray]:
        for start in range(0, index.shape[0], chunk):
            picked = np.asarray(index[start : start + chunk])
            yield convert_rows(np.asarray(source[picked]), dtype_name)
            release_pages(source[int(picked.min()) : int(picked.max()) + 1])

    write_npy(path, info(dtype_name).storage, (int(index.shape[0]), *source.shape[1:]), rows())


def save_ids(path: str, array: np.ndarray) -> None:
    """Save an ID array as int64 (the on-disk format), whatever its width in memory, a chunk at a time
    (no whole int64 copy)."""
    write_npy(path, np.int64, array.shape, _row_chunks(array))


def check_output_folder(out_path: str, overwrite: bool) -> None:
    """Check that ``out_path`` can receive partition output (``overwrite``: also a non-empty folder).

    Raises:
        FileExistsError: it is a file, or a non-empty folder and not ``overwrite``.
    """
    if os.path.exists(out_path):
        if not os.path.isdir(out_path):
            raise FileExistsError(f"output path {out_path!r} exists and is not a folder")
        if os.listdir(out_path) and not overwrite:
            raise FileExistsError(
                f"output folder {out_path!r} exists and is not empty; pass overwrite=True (--overwrite)"
            )


@contextmanager
def staged_output_folder(out_path: str, write_over: bool = False) -> Iterator[str]:
    """A temporary folder beside ``out_path`` to write into; it replaces ``out_path`` when the block
    completes and is removed when the block raises, so a failure leaves no half-written output.

    Args:
        out_path: the output folder.
        write_over: replace only the entries written (``NAME.json``, ``partK/``) in an existing
            ``out_path`` and keep its other files (DGL's way), instead of replacing the whole folder.

    Yields:
        The temporary folder's path.
    """
    parent = os.path.dirname(os.path.abspath(out_path)) or "."
    os.makedirs(parent, exist_ok=True)
    tmp_dir = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(out_path))}.tmp-", dir=parent)
    os.chmod(tmp_dir, 0o755)  # mkdtemp's 0700 would hide the partitions from servers run as other users
    try:
        yield tmp_dir
        if write_over and os.path.isdir(out_path):
            _replace_entries(tmp_dir, out_path)
        else:
            replace_folder(tmp_dir, out_path)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise


def replace_folder(tmp_dir: str, out_path: str) -> None:
    """Move the finished ``tmp_dir`` to ``out_path``, replacing an existing folder there (the old one is
    renamed aside first, so ``out_path`` is never half-written)."""
    if os.path.isdir(out_path) and os.listdir(out_path):
        trash = tempfile.mkdtemp(
            prefix=f".{os.path.basename(os.path.abspath(out_path))}.old-", dir=os.path.dirname(tmp_dir)
        )
        os.rename(out_path, os.path.join(trash, "old"))
        os.rename(tmp_dir, out_path)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        if os.path.isdir(out_path):
            os.rmdir(out_path)
        os.rename(tmp_dir, out_path)


def _replace_entries(tmp_dir: str, out_path: str) -> None:
    """Move every entry of the finished ``tmp_dir`` into ``out_path``, replacing the same-named ones;
    the other entries of ``out_path`` stay."""
    trash = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(out_path))}.old-", dir=out_path)
    try:
        for name in sorted(os.listdir(tmp_dir)):
            target = os.path.join(out_path, name)
            if os.path.lexists(target):
                os.rename(target, os.path.join(trash, name))
            os.rename(os.path.join(tmp_dir, name), target)
    finally:
        shutil.rmtree(trash, ignore_errors=True)
    os.rmdir(tmp_dir)


def write_partitions(
    graph: GraphData,
    graph_name: str,
    num_parts: int,
    part_method: str,
    labels: Relabeling,
    dtype_names: dict[tuple[str, str, str], str],
    out_dir: str,
    extra: dict,
) -> dict:
    """Write every partition's folder (``partK/``) and the config ``graph_name.json`` into ``out_dir``.

    Args:
        graph: the input graph (its node and edge arrays are written in the new ID order).
        graph_name: the config file's name and the name recorded in it.
        num_parts: number of partitions.
        part_method: recorded in the config.
        labels: the new IDs (:func:`~graphstore.partition.relabel.relabel`).
        dtype_names: the storage dtype of each ``("node" | "edge", type, name)`` array.
        out_dir: an existing, empty folder.
        extra: more top-level config entries (statistics, balance settings).

    Returns:
        The config as written (:func:`write_config` rewrites it with more statistics).
    """
    schema = graph.schema
    node_in_offsets, edge_in_offsets = graph.node_offsets, graph.edge_offsets
    src_types = np.array([schema.ntype_id(c[0]) for c in schema.canonical_etypes], dtype=np.int64)
    dst_types = np.array([schema.ntype_id(c[2]) for c in schema.canonical_etypes], dtype=np.int64)
    num_etypes = len(schema.canonical_etypes)
    parts_meta = []
    for k in range(num_parts):
        ns, ne = int(labels.node_bounds[k]), int(labels.node_bounds[k + 1])
        es, ee = int(labels.edge_bounds[k]), int(labels.edge_bounds[k + 1])
        ntype_counts = labels.ntype_counts[k]
        ntype_offsets = np.concatenate(([0], np.cumsum(ntype_counts))).astype(np.int64)
        part_dir = os.path.join(out_dir, f"part{k}")
        os.makedirs(part_dir)
        in_pieces = csr_pieces(
            labels.new_dst[es:ee] - ns,
            labels.edge_type[es:ee],
            ntype_offsets[dst_types],
            ntype_counts[dst_types],
            num_etypes,
        )
        save_ids(os.path.join(part_dir, "in_indptr.npy"), np.concatenate(in_pieces))
        save_ids(os.path.join(part_dir, "in_src.npy"), labels.new_src[es:ee])
        if labels.position_eid is not None:
            save_ids(os.path.join(part_dir, "in_eid.npy"), labels.position_eid[es:ee] - es)
        out_eid = labels.out_eid[labels.out_bounds[k] : labels.out_bounds[k + 1]]
        out_types = labels.edge_type[out_eid] if num_etypes > 1 else labels.edge_type[: len(out_eid)]
        out_pieces = csr_pieces(
            labels.new_src[out_eid] - ns,
            out_types,
            ntype_offsets[src_types],
            ntype_counts[src_types],
            num_etypes,
        )
        save_ids(os.path.join(part_dir, "out_indptr.npy"), np.concatenate(out_pieces))
        save_ids(os.path.join(part_dir, "out_dst.npy"), labels.new_dst[out_eid])
        save_ids(os.path.join(part_dir, "out_eid.npy"), labels.edge_ids_at(out_eid))
        node_types = np.repeat(np.arange(len(schema.ntypes)), ntype_counts)
        orig_nid = labels.orig_nid[ns:ne] - node_in_offsets[node_types]
        orig_eid = labels.orig_eid[es:ee]
        if num_etypes > 1:  # per-type IDs: minus the type's first input position
            orig_eid = orig_eid - edge_in_offsets[labels.edge_type[es:ee]]
        save_ids(os.path.join(part_dir, "orig_nid.npy"), orig_nid)
        save_ids(os.path.join(part_dir, "orig_eid.npy"), orig_eid)
        for ntype, name, arr in graph.node_arrays():
            t = schema.ntype_id(ntype)
            rows = orig_nid[ntype_offsets[t] : ntype_offsets[t + 1]]
            path = _new_file(feature_file(part_dir, NODE_FEAT_DIR, schema, ntype, name))
            _write_rows(path, arr, rows, dtype_names[("node", ntype, name)])
        etype_offsets = np.concatenate(([0], np.cumsum(labels.etype_counts[k]))).astype(np.int64)
        for key, name, arr in graph.edge_arrays():
            e = schema.etype_id(key)
            rows = orig_eid[etype_offsets[e] : etype_offsets[e + 1]]
            path = _new_file(feature_file(part_dir, EDGE_FEAT_DIR, schema, key, name))
            _write_rows(path, arr, rows, dtype_names[("edge", key, name)])
        parts_meta.append(
            {"path": f"part{k}", "num_nodes": ne - ns, "num_edges": ee - es, "num_out_edges": len(out_eid)}
        )
    return write_partition_config(
        out_dir,
        graph_name=graph_name,
        part_method=part_method,
        book=partition_book(labels, schema),
        nodes_per_type=graph.nodes_per_type,
        edges_per_type=graph.edges_per_type,
        node_feats=_schemes(graph.node_arrays(), dtype_names, "node"),
        edge_feats=_schemes(graph.edge_arrays(), dtype_names, "edge"),
        parts=parts_meta,
        extra=extra,
        format_version=FORMAT_VERSION if labels.position_eid is None else FORMAT_VERSION_IN_EID,
    )


def partition_book(bounds, schema: GraphSchema) -> RangePartitionBook:
    """The partition book of a relabeling: ``bounds`` has ``node_bounds``, ``edge_bounds``,
    ``ntype_counts`` and ``etype_counts`` (the serial :class:`~graphstore.partition.relabel.Relabeling`
    or the parallel partitioner's labels)."""
    return RangePartitionBook(
        bounds.node_bounds,
        bounds.edge_bounds,
        schema=schema,
        ntype_counts=bounds.ntype_counts,
        etype_counts=bounds.etype_counts,
    )


def write_partition_config(
    out_dir: str,
    *,
    graph_name: str,
    part_method: str,
    book: RangePartitionBook,
    nodes_per_type: Sequence[int],
    edges_per_type: Sequence[int],
    node_feats: dict[str, dict[str, dict]],
    edge_feats: dict[str, dict[str, dict]],
    parts: list[dict],
    extra: dict,
    format_version: int = FORMAT_VERSION,
) -> dict:
    """Build the partition config (``graph_name.json``, docs/partition-format.md) and write it into
    ``out_dir``: the one place the serial and the parallel partitioner make it.

    Args:
        out_dir: the output folder.
        graph_name: the config file's name and the name recorded in it.
        part_method: recorded in the config.
        book: the partition book (its schema names the types; its ranges give the node and edge maps).
        nodes_per_type, edges_per_type: the input's counts, in type-ID order.
        node_feats, edge_feats: ``{type: {name: {"dtype": str, "shape": [row shape]}}}``.
        parts: one ``{"path", "num_nodes", "num_edges", "num_out_edges"}`` entry per partition.
        extra: more top-level entries (statistics, balance settings).
        format_version: the format the partitions are written in (``FORMAT_VERSION_IN_EID`` when they
            hold ``in_eid.npy``).

    Returns:
        The config as written.
    """
    schema = book.schema
    config = {
        "format_version": format_version,
        "graph_name": graph_name,
        "num_nodes": int(sum(nodes_per_type)),
        "num_edges": int(sum(edges_per_type)),
        "num_parts": book.num_partitions(),
        "part_method": part_method,
        "halo_hops": 1,
        "ntypes": {ntype: t for t, ntype in enumerate(schema.ntypes)},
        "etypes": {etype_key(c): e for e, c in enumerate(schema.canonical_etypes)},
        "node_map": book.node_map(),
        "edge_map": book.edge_map(),
        "num_nodes_per_type": {t: int(n) for t, n in zip(schema.ntypes, nodes_per_type, strict=True)},
        "num_edges_per_type": {
            etype_key(c): int(n) for c, n in zip(schema.canonical_etypes, edges_per_type, strict=True)
        },
        "node_feats": node_feats,
        "edge_feats": edge_feats,
        "parts": parts,
        **extra,
    }
    write_config(out_dir, config)
    return config


def write_config(out_dir: str, config: dict) -> str:
    """Write (or rewrite) ``out_dir/<graph_name>.json``; returns its path."""
    path = os.path.join(out_dir, f"{config['graph_name']}.json")
    with open(path, "w") as fh:
        json.dump(config, fh, indent=1)
    return path


def _new_file(path: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def _schemes(arrays, dtype_names, kind: str) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for type_key, name, arr in arrays:
        out.setdefault(type_key, {})[name] = {
            "dtype": dtype_names[(kind, type_key, name)],
            "shape": list(arr.shape[1:]),
        }
    return out
