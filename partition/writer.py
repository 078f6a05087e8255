"""Writing the partition files: rows in their storage dtype, each partition's folder, the config, and
the output folder swapped into place only once everything is written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from graphstore.dtypes import float32_to_bfloat16_bits, info, name_of
from graphstore.partition.format import EDGE_FEAT_DIR, NODE_FEAT_DIR
from graphstore.partition.graph import GraphData
from graphstore.partition.relabel import Relabeling
from graphstore.partition.types import DEFAULT_ETYPE, DEFAULT_NTYPE, FORMAT_VERSION

HALF_FLOAT_DTYPES = ("float16", "bfloat16")


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


def _write_rows(path: str, source: np.ndarray, index: np.ndarray, dtype_name: str) -> None:
    """Write ``convert(source[index])`` to a .npy, in chunks of rows."""
    shape = (int(index.shape[0]), *source.shape[1:])
    out = np.lib.format.open_memmap(path, mode="w+", dtype=info(dtype_name).storage, shape=shape)
    row_bytes = max(1, int(np.prod(source.shape[1:], dtype=np.int64)) * source.dtype.itemsize)
    chunk = max(1, (64 << 20) // row_bytes)
    for start in range(0, shape[0], chunk):
        out[start : start + chunk] = convert_rows(
            np.asarray(source[index[start : start + chunk]]), dtype_name
        )
    out.flush()
    del out


def _save(path: str, array: np.ndarray) -> None:
    np.save(path, np.ascontiguousarray(array))


def check_output_folder(out_path: str, overwrite: bool) -> None:
    """Check that ``out_path`` can receive partition output.

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
def staged_output_folder(out_path: str) -> Iterator[str]:
    """A temporary folder beside ``out_path`` to write into; it replaces ``out_path`` when the block
    completes and is removed when the block raises, so a failure leaves no half-written output.

    Yields:
        The temporary folder's path.
    """
    parent = os.path.dirname(os.path.abspath(out_path)) or "."
    os.makedirs(parent, exist_ok=True)
    tmp_dir = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(out_path))}.tmp-", dir=parent)
    os.chmod(tmp_dir, 0o755)  # mkdtemp's 0700 would hide the partitions from servers run as other users
    try:
        yield tmp_dir
        _replace_folder(tmp_dir, out_path)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise


def _replace_folder(tmp_dir: str, out_path: str) -> None:
    """Move the finished ``tmp_dir`` to ``out_path``, replacing an existing folder there."""
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


def write_partitions(
    graph: GraphData,
    graph_name: str,
    num_parts: int,
    part_method: str,
    labels: Relabeling,
    dtype_names: dict[tuple[str, str], str],
    out_dir: str,
    extra: dict,
) -> None:
    """Write every partition's folder (``partK/``) and the config ``graph_name.json`` into ``out_dir``.

    Args:
        graph: the input graph (its node and edge arrays are written in the new ID order).
        graph_name: the config file's name and the name recorded in it.
        num_parts: number of partitions.
        part_method: recorded in the config.
        labels: the new IDs (:func:`~graphstore.partition.relabel.relabel`).
        dtype_names: the storage dtype of each ``("node" | "edge", name)`` array.
        out_dir: an existing, empty folder.
        extra: more top-level config entries (statistics, balance settings).
    """
    parts_meta = []
    for k in range(num_parts):
        ns, ne = int(labels.node_bounds[k]), int(labels.node_bounds[k + 1])
        es, ee = int(labels.edge_bounds[k]), int(labels.edge_bounds[k + 1])
        os_, oe = int(labels.out_indptr[ns]), int(labels.out_indptr[ne])
        part_dir = os.path.join(out_dir, f"part{k}")
        os.makedirs(os.path.join(part_dir, NODE_FEAT_DIR))
        os.makedirs(os.path.join(part_dir, EDGE_FEAT_DIR))
        _save(os.path.join(part_dir, "in_indptr.npy"), labels.in_indptr[ns : ne + 1] - labels.in_indptr[ns])
        _save(os.path.join(part_dir, "in_src.npy"), labels.new_src[es:ee])
        _save(
            os.path.join(part_dir, "out_indptr.npy"), labels.out_indptr[ns : ne + 1] - labels.out_indptr[ns]
        )
        out_eid = labels.out_eid[os_:oe]
        _save(os.path.join(part_dir, "out_dst.npy"), labels.new_dst[out_eid])
        _save(os.path.join(part_dir, "out_eid.npy"), out_eid)
        _save(os.path.join(part_dir, "orig_nid.npy"), labels.orig_nid[ns:ne])
        _save(os.path.join(part_dir, "orig_eid.npy"), labels.orig_eid[es:ee])
        for name, arr in graph.node_data.items():
            path = os.path.join(part_dir, NODE_FEAT_DIR, f"{name}.npy")
            _write_rows(path, arr, labels.orig_nid[ns:ne], dtype_names[("node", name)])
        for name, arr in graph.edge_data.items():
            path = os.path.join(part_dir, EDGE_FEAT_DIR, f"{name}.npy")
            _write_rows(path, arr, labels.orig_eid[es:ee], dtype_names[("edge", name)])
        parts_meta.append(
            {"path": f"part{k}", "num_nodes": ne - ns, "num_edges": ee - es, "num_out_edges": oe - os_}
        )
    config = {
        "format_version": FORMAT_VERSION,
        "graph_name": graph_name,
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "num_parts": num_parts,
        "part_method": part_method,
        "halo_hops": 1,
        "ntypes": {DEFAULT_NTYPE: 0},
        "etypes": {DEFAULT_ETYPE: 0},
        "node_map": {DEFAULT_NTYPE: _ranges(labels.node_bounds)},
        "edge_map": {DEFAULT_ETYPE: _ranges(labels.edge_bounds)},
        "node_feats": {
            name: {"dtype": dtype_names[("node", name)], "shape": list(arr.shape[1:])}
            for name, arr in graph.node_data.items()
        },
        "edge_feats": {
            name: {"dtype": dtype_names[("edge", name)], "shape": list(arr.shape[1:])}
            for name, arr in graph.edge_data.items()
        },
        "parts": parts_meta,
        **extra,
    }
    with open(os.path.join(out_dir, f"{graph_name}.json"), "w") as fh:
        json.dump(config, fh, indent=1)


def _ranges(bounds: np.ndarray) -> list[list[int]]:
    return [[int(bounds[k]), int(bounds[k + 1])] for k in range(bounds.size - 1)]
