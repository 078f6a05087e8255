"""Checkpoints of DistEmbeddings and their sparse optimizer state, written by the servers.

``save(name, embeddings, optimizer)`` asks every partition server to write its shard of each
embedding, with the optimizer state it holds beside the rows, in the folder ``name`` under its
checkpoint root **on the server's own host** (``graphstore server --checkpoint-root``,
``checkpoint.root`` in the cluster config; default ``checkpoints/`` beside the partition config;
standalone mode uses the same default). A name is relative (``"epoch-3"``, ``"runs/a/best"``):
absolute paths and ``..`` are refused, so a client cannot make a server write or read anywhere
else. Rows are keyed by the original node (or edge) IDs of the input graph. ``load(name,
embeddings, optimizer)`` asks every server to read the shards of *all* partitions that wrote the
checkpoint and keep the rows it owns. So a checkpoint restores into a fresh cluster (every server
restarted), into another number of trainers (the state lives on the servers), and into the same
graph partitioned another way (another partition count).

A save is one consistent set: every server writes its part under a save ID shared by all of them
(``NAME/save-<ID>`` under its root), and only once every part is written is ``NAME/manifest.json``
switched to it (written last, by each server on its host); a save that fails on any server is removed
from every server, leaving the checkpoint already called ``NAME`` whole. A load refuses a set with a
part missing and names it (``server/durability/checkpoint_set.py``).

Multi-host clusters: each server reads and writes under its own root. Loading needs every shard on
every server host: put the root on a shared file system (NFS, a mounted bucket) or copy all
``ROOT/name/<tensor>/shard-*`` files to every server host before calling :func:`load` (docs/optim.md).

With a ``torch.distributed`` process group both calls are collective: every trainer calls them, the
trainers wait for each other (so every earlier step has been applied), rank 0 talks to the servers,
and every rank returns rank 0's result or raises its error.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import torch.distributed as dist

from graphstore.checkpoint_layout import tensor_root
from graphstore.client.context import get_context
from graphstore.client.device import group_device
from graphstore.client.dist_embedding import DistEmbedding
from graphstore.client.dist_tensor import DistTensor
from graphstore.types import OptimizerConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckpointInfo:
    """What a save or load did.

    Attributes:
        path: the checkpoint's name (relative to the servers' checkpoint root).
        names: the embeddings written or restored.
        rows: rows written or restored, summed over the servers.
        files: files the servers wrote (save only).
    """

    path: str
    names: tuple[str, ...]
    rows: int
    files: tuple[str, ...] = field(default_factory=tuple)


def save(path: str | os.PathLike, embeddings, optimizer=None) -> CheckpointInfo:
    """Write ``embeddings`` (rows keyed by original IDs) and their optimizer state as checkpoint ``path``.

    Args:
        path: the checkpoint's name, relative to the servers' checkpoint root.
        embeddings: a DistEmbedding (or DistTensor) or a list of them.
        optimizer: the sparse optimizer training them (its embeddings are saved too). The servers
            write the optimizer state they hold beside every saved embedding.

    Returns:
        What was written.

    Raises:
        TypeError / ValueError: bad arguments, an absolute name or one with ``..`` (nothing written).
        PermissionError, graphstore.errors.StorageFullError: the servers' file system refused.
        KeyError: an embedding that no longer exists on the servers.
        OSError / graphstore.errors.ServerError: a server failed to write (a full disk, a read-only
            folder): no server keeps any file of this save, and the checkpoint at ``path`` is the previous.
    """
    path_str = _checkpoint_name(path)
    names = _names_of(embeddings, optimizer)
    ctx = get_context()

    def run() -> CheckpointInfo:
        save_id = uuid.uuid4().hex
        parts = range(ctx.num_parts)
        try:
            results = ctx.run_parallel(
                [lambda p=p: ctx.partition(p).checkpoint(path_str, names, save_id) for p in parts]
            )
        except BaseException:
            _abort(ctx, path_str, save_id)
            raise
        ctx.run_parallel(
            [lambda p=p: ctx.partition(p).commit_checkpoint(path_str, save_id, names) for p in parts]
        )
        files = tuple(f for written, _ in results for f in written)
        return CheckpointInfo(path_str, tuple(names), sum(rows for _, rows in results), files)

    return _collective(run)


def load(path: str | os.PathLike, embeddings, optimizer=None) -> CheckpointInfo:
    """Restore ``embeddings`` and their optimizer state from a checkpoint written by :func:`save`.

    The embeddings must exist on the cluster (created with the same name, shape and dtype); their rows
    are overwritten, and the servers install the optimizer state the checkpoint holds. Gradients
    recorded before the load are dropped.

    Args:
        path: the checkpoint's name, relative to the servers' checkpoint root.
        embeddings: a DistEmbedding (or DistTensor) or a list of them.
        optimizer: the sparse optimizer that continues the training. When the checkpoint folder is
            readable here, its state kind is checked against this optimizer before anything changes.

    Returns:
        What was restored.

    Raises:
        FileNotFoundError: the folder (or an embedding in it) does not exist on a server.
        ValueError: a checkpoint of another graph, another shape or dtype, or optimizer state of
            another kind than ``optimizer``.
        graphstore.errors.ServerError: a server failed to read.
    """
    path_str = _checkpoint_name(path)
    names = _names_of(embeddings, optimizer)
    ctx = get_context()

    def run() -> CheckpointInfo:
        if optimizer is not None:
            root = ctx.partition(0).metadata().checkpoint_root
            folder = os.path.join(root, path_str) if root else ""
            _check_local_optimizer_kind(folder, names, optimizer.config.kind, ctx.graph_name)
        calls = [lambda p=p: ctx.partition(p).restore(path_str, names) for p in range(ctx.num_parts)]
        results = ctx.run_parallel(calls)
        return CheckpointInfo(path_str, tuple(names), sum(rows for _, rows in results))

    info = _collective(run)
    for emb in _as_list(embeddings):
        reset = getattr(emb, "reset_trace", None)
        if reset is not None:
            reset()
    if optimizer is not None:
        optimizer.zero_grad()
    return info


# ----- helpers ---------------------------------------------------------------------------------


def _abort(ctx, path: str, save_id: str) -> None:
    """Remove the failed save's files from every server (a server that cannot be reached is logged; its
    files are not named by any manifest and the next committed save removes none of the set's)."""
    for part_id in range(ctx.num_parts):
        try:
            ctx.partition(part_id).abort_checkpoint(path, save_id)
        except Exception as exc:  # noqa: BLE001 - the save's own error is what the caller gets
            logger.warning("could not remove save %s from partition %d's server: %s", save_id, part_id, exc)


def _checkpoint_name(path) -> str:
    """The checkpoint name as sent to the servers (they check it against their root too)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    path_str = os.fspath(path)
    if not path_str:
        raise ValueError("path is empty")
    if os.path.isabs(path_str):
        raise ValueError(
            f"path {path_str!r} is absolute: name the checkpoint relative to the servers' checkpoint root "
            "(graphstore server --checkpoint-root / checkpoint.root in the cluster config)"
        )
    return path_str


def _as_list(embeddings) -> list:
    if isinstance(embeddings, (list, tuple)):
        return list(embeddings)
    return [embeddings]


def _names_of(embeddings, optimizer) -> list[str]:
    """Names to save or load: the embeddings' plus the optimizer's, each once, in order."""
    items = _as_list(embeddings)
    # A graphstore sparse optimizer (client/optim/, which imports this module for its save / load) is
    # recognised by its checked config and its parameters.
    if optimizer is not None and not (
        isinstance(getattr(optimizer, "config", None), OptimizerConfig) and hasattr(optimizer, "params")
    ):
        raise TypeError(f"optimizer must be a graphstore sparse optimizer, got {type(optimizer).__name__}")
    names: list[str] = []
    for item in items:
        if not isinstance(item, (DistEmbedding, DistTensor)):
            raise TypeError(
                f"embeddings must be DistEmbedding or DistTensor objects, got {type(item).__name__}"
            )
        if item.name not in names:
            names.append(item.name)
    if optimizer is not None:
        names += [emb.name for emb in optimizer.params if emb.name not in names]
    if not names:
        raise ValueError("embeddings is empty: nothing to save or load")
    return names


def _check_local_optimizer_kind(path: str, names: list[str], kind: str, graph_name: str) -> None:
    """When the checkpoint is readable from here, refuse state of another optimizer kind up front."""
    root = Path(path)
    if not path or not root.is_dir():
        return  # the servers decide (they may see another file system)
    for name in names:
        try:
            folder = tensor_root(root, name) / name
            meta = json.loads((folder / "meta.json").read_text())
            shards = [
                json.loads(p.read_text()) for p in folder.glob(f"shard-*-of-{int(meta['num_parts'])}.json")
            ]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if meta.get("graph_name") not in (None, graph_name):
            raise ValueError(
                f"path: checkpoint {path!r} was written for graph {meta.get('graph_name')!r}, "
                f"this cluster serves {graph_name!r}; nothing was restored"
            )
        kinds = {s.get("optimizer", "") for s in shards} - {""}
        if kinds and kinds != {kind}:
            raise ValueError(
                f"checkpoint {path!r} holds {sorted(kinds)} optimizer state for {name!r}, but the optimizer "
                f"is {kind!r}; nothing was restored"
            )


def _collective(run):
    """Run ``run`` once for the trainer group: barrier, rank 0 runs it, everyone gets its outcome."""
    if not (dist.is_available() and dist.is_initialized()):
        return run()
    dist.barrier()
    outcome: list = [None]
    if dist.get_rank() == 0:
        try:
            outcome[0] = ("ok", run())
        except Exception as exc:  # noqa: BLE001 - every rank raises it below
            outcome[0] = ("error", _portable(exc))
            local_error = exc
        else:
            local_error = None
    else:
        local_error = None
    dist.broadcast_object_list(outcome, src=0, device=group_device())
    status, value = outcome[0]
    if status == "ok":
        return value
    if local_error is not None:
        raise local_error
    raise value


def _portable(exc: Exception) -> Exception:
    """``exc`` if it survives pickling, else a RuntimeError carrying its message."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(exc).__name__}: {exc}")
