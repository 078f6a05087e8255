"""The restore a restarted server runs: its partition's newest readable periodic checkpoint.

``--restore-latest`` restores the newest complete checkpoint of this partition before serving (an
older one if the newest cannot be read); with none, the server starts empty as usual.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from pathlib import Path

from graphstore.server.durability.periodic_checkpoint_folders import (
    TENSORS_FOLDER,
    list_checkpoints,
    partition_folder,
    read_manifest,
)
from graphstore.server.metrics import log_event

logger = logging.getLogger(__name__)


def _single_shard_view(tensors_dir: Path, view: Path, part_id: int, num_parts: int) -> None:
    """Present one partition's shards as a one-shard checkpoint (symlinks + a patched meta.json).

    ``server.checkpoint.restore_checkpoint`` reads the shards of every partition that wrote a
    checkpoint; a periodic checkpoint holds this partition's shard only, whose rows are exactly the
    rows this partition owns, so it restores as the only shard of a one-partition checkpoint.
    """
    stem = f"shard-{part_id}-of-{num_parts}"
    for tensor_dir in tensors_dir.iterdir():
        meta_path = tensor_dir / "meta.json"
        if not meta_path.is_file():
            continue
        target = view / tensor_dir.name
        target.mkdir()
        meta = json.loads(meta_path.read_text())
        meta["num_parts"] = 1
        (target / "meta.json").write_text(json.dumps(meta))
        for file in tensor_dir.iterdir():
            if file.name.startswith(stem + "."):
                (target / ("shard-0-of-1" + file.name[len(stem) :])).symlink_to(file.resolve())


def restore_checkpoint_folder(partition, path: str | os.PathLike) -> tuple[list[str], int]:
    """Restore one periodic checkpoint (written by this partition) into ``partition``.

    Args:
        partition: the :class:`~graphstore.server.partition_server.PartitionServer`.
        path: a ``ckpt-N`` folder.

    Returns:
        ``(restored tensor names, rows restored)``.

    Raises:
        FileNotFoundError: a missing manifest or file.
        ValueError: a checkpoint of another graph or partition, or unreadable content.
    """
    path = Path(path)
    manifest = read_manifest(path)
    meta = partition.metadata()
    for key, expected in (
        ("graph_name", meta.graph_name),
        ("part_id", meta.part_id),
        ("num_parts", meta.num_parts),
    ):
        if manifest.get(key) != expected:
            raise ValueError(
                f"checkpoint {str(path)!r} was written with {key}={manifest.get(key)!r}, "
                f"this server has {key}={expected!r}"
            )
    if not manifest.get("tensors"):
        return [], 0
    view = path.parent / f".view-{uuid.uuid4().hex}"
    view.mkdir()
    try:
        _single_shard_view(path / TENSORS_FOLDER, view, meta.part_id, meta.num_parts)
        return partition.restore(str(view), list(manifest["tensors"]))
    finally:
        shutil.rmtree(view, ignore_errors=True)


def restore_latest(partition, root: str | os.PathLike) -> tuple[Path, list[str], int] | None:
    """Restore the newest readable periodic checkpoint of ``partition`` under ``root``.

    A checkpoint that fails to restore is logged and the next older one is tried.

    Returns:
        ``(checkpoint folder, restored names, rows)``, or None when there is no checkpoint.

    Raises:
        ValueError: checkpoints exist but none could be restored (the message names the last error).
    """
    candidates = list_checkpoints(root, partition.part_id)
    last_error: Exception | None = None
    for path in reversed(candidates):
        try:
            names, rows = restore_checkpoint_folder(partition, path)
        except (OSError, ValueError, KeyError) as exc:
            last_error = exc
            log_event(logger, "checkpoint_unreadable", logging.WARNING, path=path, error=exc)
            continue
        return path, names, rows
    if last_error is not None:
        raise ValueError(
            f"checkpoint_dir: none of the {len(candidates)} checkpoints under "
            f"{str(partition_folder(root, partition.part_id))!r} could be restored; last error: {last_error}"
        )
    return None
