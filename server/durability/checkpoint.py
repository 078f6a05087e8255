"""Checkpoints of run-time tensors and their optimizer state, keyed by original IDs.

Every server writes its own shard of each tensor into a folder on its host::

    PATH/<tensor>/meta.json                  graph name, dtype, global shape, policy, persistent, num_parts
    PATH/<tensor>/shard-K-of-N.json          this shard's row count, optimizer kind and state array names
    PATH/<tensor>/shard-K-of-N.ids.npy       int64 ORIGINAL node (or edge) IDs of the shard's rows
    PATH/<tensor>/shard-K-of-N.rows.npy      the rows (storage dtype; bfloat16 as uint16)
    PATH/<tensor>/shard-K-of-N.state.S.npy   optimizer state array S, one row per shard row

Because rows are keyed by the original IDs of the input graph (not the partition's relabeled IDs),
a restore reads the shards of *all* partitions that wrote the checkpoint and keeps the rows whose
original IDs this partition owns: a checkpoint restores into any partition count. Files are
written under a temporary name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from graphstore import dtypes
from graphstore.server.stored_tensor import StoredTensor
from graphstore.server.tensor_store import TensorStore

logger = logging.getLogger(__name__)

FORMAT = "graphstore-checkpoint-1"
_SHARD_RE = re.compile(r"^shard-(\d+)-of-(\d+)\.json$")


@dataclass(frozen=True)
class OptimizerHooks:
    """How the checkpoint reads and writes the optimizer state of a tensor.

    Attributes:
        kind: ``name -> optimizer kind`` or None when the tensor has no state.
        state_arrays: ``name -> {state name: array}`` with one row per local row.
        load_state_arrays: ``(name, arrays, kind)`` installs restored state.
    """

    kind: Callable[[str], str | None]
    state_arrays: Callable[[str], dict[str, np.ndarray]]
    load_state_arrays: Callable[[str, dict[str, np.ndarray], str], None]


def _atomic_save_npy(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as f:
        np.save(f, np.ascontiguousarray(array), allow_pickle=False)
    os.replace(tmp, path)


def _atomic_write_json(path: Path, obj: dict) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True))
    os.replace(tmp, path)


def _tensor_folder(root: Path, name: str) -> Path:
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\x00" in name:
        raise ValueError(f"names: tensor name {name!r} cannot be used as a checkpoint folder name")
    return root / name


def save_checkpoint(
    path: str,
    store: TensorStore,
    names: list[str],
    *,
    graph_name: str,
    num_parts: int,
    orig_ids: dict[str, np.ndarray],
    optimizer: OptimizerHooks | None,
) -> tuple[list[str], int]:
    """Write this partition's shard of each tensor in ``names`` under ``path``.

    Args:
        path: the checkpoint folder (created if missing).
        store: this partition's tensors.
        names: the tensors to write.
        graph_name: written into each tensor's meta.json and checked on restore.
        num_parts: partitions of the graph (each writes one shard).
        orig_ids: ``{"node": orig_nid, "edge": orig_eid}``, local order.
        optimizer: hooks to the optimizer state, or None to write rows only.

    Returns:
        ``(files written, rows written)``.

    Raises:
        KeyError: an unknown tensor.
        ValueError: a name that cannot be a folder name.
    """
    root = Path(path)
    part_id = store.part_id
    files: list[str] = []
    rows_written = 0
    tensors = [store.get(name) for name in names]  # KeyError before anything is written
    for tensor in tensors:
        folder = _tensor_folder(root, tensor.name)
        folder.mkdir(parents=True, exist_ok=True)
        stem = f"shard-{part_id}-of-{num_parts}"
        with store.reading(tensor.name):
            kind = optimizer.kind(tensor.name) if optimizer is not None else None
            state = optimizer.state_arrays(tensor.name) if optimizer is not None and kind else {}
            written = [folder / f"{stem}.ids.npy", folder / f"{stem}.rows.npy"]
            _atomic_save_npy(written[0], orig_ids[tensor.policy])
            _atomic_save_npy(written[1], tensor.data)
            for state_name, array in state.items():
                written.append(folder / f"{stem}.state.{state_name}.npy")
                _atomic_save_npy(written[-1], array)
            scheme = tensor.scheme()
        meta = {
            "format": FORMAT,
            "graph_name": graph_name,
            "name": tensor.name,
            "dtype": tensor.dtype,
            "shape": list(scheme.shape),
            "policy": tensor.policy,
            "persistent": tensor.persistent,
            "num_parts": num_parts,
        }
        _atomic_write_json(folder / "meta.json", meta)
        shard = {
            "part_id": part_id,
            "rows": int(len(tensor.data)),
            "optimizer": kind or "",
            "state": sorted(state),
        }
        _atomic_write_json(folder / f"{stem}.json", shard)
        files += [str(p) for p in written] + [str(folder / "meta.json"), str(folder / f"{stem}.json")]
        rows_written += len(tensor.data)
        logger.info(
            "checkpointed %r (%d rows, optimizer %s) to %s", tensor.name, len(tensor.data), kind, folder
        )
    return files, rows_written


def checkpoint_names(path: str) -> list[str]:
    """Names of the tensors stored under a checkpoint folder.

    Raises:
        FileNotFoundError: ``path`` is not a folder.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"path: checkpoint folder {path!r} does not exist")
    return sorted(p.name for p in root.iterdir() if (p / "meta.json").is_file())


def read_meta(path: str, name: str, graph_name: str) -> dict:
    """Read and check one tensor's meta.json.

    Raises:
        FileNotFoundError: the tensor is not in the checkpoint.
        ValueError: the checkpoint belongs to another graph or is not a graphstore checkpoint.
    """
    meta_path = _tensor_folder(Path(path), name) / "meta.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"names: checkpoint {path!r} has no tensor {name!r} ({meta_path} missing)")
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"path: {meta_path} is not a graphstore checkpoint meta file: {exc}") from None
    if meta.get("format") != FORMAT:
        raise ValueError(f"path: {meta_path} has format {meta.get('format')!r}, expected {FORMAT!r}")
    if meta.get("graph_name") != graph_name:
        raise ValueError(
            f"path: checkpoint {path!r} was written for graph {meta.get('graph_name')!r}, "
            f"this server holds graph {graph_name!r}"
        )
    return meta


def restore_tensor(
    path: str,
    meta: dict,
    local_orig_ids: np.ndarray,
) -> tuple[np.ndarray, str, dict[str, np.ndarray]]:
    """Assemble this partition's rows (and optimizer state) of one tensor from every shard.

    Args:
        path: the checkpoint folder.
        meta: the tensor's meta.json (see :func:`read_meta`).
        local_orig_ids: original IDs of this partition's local rows, in local order.

    Returns:
        ``(rows, optimizer kind or "", state arrays)`` in local order.

    Raises:
        FileNotFoundError: a shard is missing.
        ValueError: shards disagree, or the shards do not cover every local row.
    """
    folder = _tensor_folder(Path(path), meta["name"])
    num_parts = int(meta["num_parts"])
    storage = dtypes.info(meta["dtype"]).storage
    row_shape = tuple(meta["shape"][1:])
    n_local = len(local_orig_ids)
    rows = np.zeros((n_local, *row_shape), dtype=storage)
    covered = np.zeros(n_local, dtype=bool)
    sorter = np.argsort(local_orig_ids, kind="stable")
    sorted_orig = local_orig_ids[sorter]
    kind = ""
    state: dict[str, np.ndarray] = {}
    for k in range(num_parts):
        stem = f"shard-{k}-of-{num_parts}"
        shard_json = folder / f"{stem}.json"
        if not shard_json.is_file():
            raise FileNotFoundError(
                f"path: checkpoint of {meta['name']!r} is incomplete: {shard_json} is missing"
            )
        shard = json.loads(shard_json.read_text())
        ids = np.load(folder / f"{stem}.ids.npy", mmap_mode="r")
        pos = np.searchsorted(sorted_orig, ids)
        pos_clipped = np.minimum(pos, max(n_local - 1, 0))
        match = (pos < n_local) & (sorted_orig[pos_clipped] == ids) if n_local else np.zeros(len(ids), bool)
        if not match.any():
            continue
        local = sorter[pos_clipped[match]]
        shard_rows = np.load(folder / f"{stem}.rows.npy", mmap_mode="r")
        if shard_rows.dtype != storage or tuple(shard_rows.shape[1:]) != row_shape:
            raise ValueError(
                f"path: shard {stem} of {meta['name']!r} has rows {shard_rows.dtype} "
                f"{list(shard_rows.shape)}, "
                f"meta.json says {meta['dtype']} {meta['shape']}"
            )
        rows[local] = shard_rows[match]
        covered[local] = True
        shard_kind = shard.get("optimizer", "")
        if shard_kind:
            if kind and shard_kind != kind:
                raise ValueError(
                    f"path: shards of {meta['name']!r} hold {kind!r} and {shard_kind!r} optimizer state"
                )
            kind = shard_kind
            for state_name in shard.get("state", []):
                array = np.load(folder / f"{stem}.state.{state_name}.npy", mmap_mode="r")
                if state_name not in state:
                    # Rows from shards without state start at zero: the initial state of every optimizer.
                    state[state_name] = np.zeros((n_local, *array.shape[1:]), dtype=array.dtype)
                state[state_name][local] = array[match]
    if not covered.all():
        missing = int((~covered).sum())
        raise ValueError(
            f"path: checkpoint of {meta['name']!r} does not cover {missing} of this partition's "
            f"{n_local} rows (written for a different graph?)"
        )
    return rows, kind, state


def restore_checkpoint(
    path: str,
    store: TensorStore,
    names: list[str] | None,
    *,
    graph_name: str,
    orig_ids: dict[str, np.ndarray],
    optimizer: OptimizerHooks | None,
) -> tuple[list[str], int]:
    """Restore tensors written by :func:`save_checkpoint` (by any number of partitions).

    A tensor that does not exist is created (writable, with the checkpoint's scheme); an existing
    one must have the same dtype, shape and policy and gets its rows overwritten.

    Args:
        path: the checkpoint folder.
        store: this partition's tensors.
        names: tensors to restore; None or empty for all in the checkpoint.
        graph_name: must match the checkpoint's.
        orig_ids: ``{"node": orig_nid, "edge": orig_eid}``, local order.
        optimizer: hooks to install optimizer state, or None to skip it.

    Returns:
        ``(restored names, rows restored)``.

    Raises:
        FileNotFoundError: missing folder or tensor.
        ValueError: another graph's checkpoint, incomplete coverage, or a scheme mismatch.
        PermissionError: the existing tensor is read-only.
    """
    available = checkpoint_names(path)
    names = list(names) if names else available
    if not names:
        raise FileNotFoundError(f"path: checkpoint folder {path!r} holds no tensors")
    metas = [read_meta(path, name, graph_name) for name in names]  # validate everything first
    restored_rows = 0
    for meta in metas:
        name, policy = meta["name"], meta["policy"]
        shape = tuple(int(d) for d in meta["shape"])
        rows, kind, state = restore_tensor(path, meta, np.asarray(orig_ids[policy]))
        try:
            existing = store.get(name)
        except KeyError:
            existing = None
        if existing is None:
            id_range = store.id_range(policy)
            if shape[0] != id_range.total:
                raise ValueError(
                    f"path: checkpoint tensor {name!r} has {shape[0]} rows, "
                    f"the graph has {id_range.total} {policy}s"
                )
            if optimizer is not None:
                optimizer.load_state_arrays(name, state, kind)
            store.insert(
                StoredTensor(
                    name=name,
                    dtype=meta["dtype"],
                    policy=policy,
                    global_rows=id_range.total,
                    data=rows,
                    writable=True,
                    persistent=bool(meta.get("persistent", False)),
                )
            )
        else:
            scheme = existing.scheme()
            if scheme.dtype != meta["dtype"] or scheme.shape != shape or scheme.policy != policy:
                raise ValueError(
                    f"names: tensor {name!r} is {scheme.dtype} {list(scheme.shape)} ({scheme.policy}) here, "
                    f"the checkpoint has {meta['dtype']} {list(shape)} ({policy})"
                )
            with store.writing(name) as tensor:
                tensor.data[...] = rows
                if optimizer is not None:
                    optimizer.load_state_arrays(name, state, kind)
        restored_rows += len(rows)
        logger.info("restored %r (%d rows, optimizer %s) from %s", name, len(rows), kind or None, path)
    return names, restored_rows
