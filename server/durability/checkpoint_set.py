"""Cluster-wide checkpoints as one consistent set: a save ID shared by every server, a manifest written last.

``graphstore.client.checkpoint.save`` gives every server the same save ID and runs three phases (the
layout is in :mod:`graphstore.checkpoint_layout`):

1. :func:`write_part`: each server writes its shards into ``PATH/save-<ID>``, syncs them, and only then
   writes its part marker ``parts/part-K.json``. A server that fails removes the files of its part
   (the client then aborts the save everywhere): no partial file stays, and the checkpoint already at
   ``PATH`` is not touched.
2. :func:`commit` (every server wrote its part): ``PATH/manifest.json`` is rewritten (temporary file,
   sync, rename) so that the saved tensors point at the new save; the save folders that no tensor
   points at any more are removed. Until the rename, a reader sees the previous set whole.
   :func:`abort` (some server failed): the save's folder is removed.
3. A restore reads the manifest (:func:`restore_roots`) and refuses a set with a part missing, or a
   part written for another save, naming what is missing; a folder of save folders without a
   manifest is a save that never completed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from graphstore.checkpoint_layout import (
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    PARTS_FOLDER,
    SAVE_PREFIX,
    read_set_manifest,
    save_folder,
)
from graphstore.server.durability.synced_files import fsync_path, write_synced

_LOCK_FILE = ".manifest.lock"


def write_part(
    path: str,
    save_id: str,
    part_id: int,
    num_parts: int,
    names: list[str],
    write: Callable[[str], tuple[list[str], int]],
) -> tuple[list[str], int]:
    """Write this server's part of save ``save_id`` under ``path``.

    Args:
        path: the checkpoint folder.
        save_id: the save's ID (shared by every server).
        part_id, num_parts: this partition and the partition count.
        names: the tensors saved.
        write: ``write(folder) -> (files, rows)`` writes the shards into ``folder``
            (:func:`graphstore.server.durability.checkpoint.save_checkpoint`).

    Returns:
        ``(files written, rows written)``.

    Raises:
        OSError: the folder cannot be written (this part's files are removed).
        ValueError: a bad save ID.
    """
    folder = save_folder(path, save_id)
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        files, rows = write(str(folder))
        for file in files:
            fsync_path(Path(file))
        for parent in sorted({Path(file).parent for file in files}):
            fsync_path(parent)
        parts = folder / PARTS_FOLDER
        parts.mkdir(exist_ok=True)
        marker = {"save_id": save_id, "part_id": part_id, "num_parts": num_parts, "tensors": sorted(names)}
        write_synced(parts / f"part-{part_id}.json", json.dumps(marker, sort_keys=True).encode())
    except BaseException:
        _remove_part(folder, part_id, num_parts, created)
        raise
    return files, rows


def _remove_part(folder: Path, part_id: int, num_parts: int, created: bool) -> None:
    """Remove what part ``part_id`` wrote of a save, and, when this part created the save's folder, the
    folders left empty; other parts' files (finished or still being written beside this one, in
    standalone mode in the same folder) are the client's abort to remove."""
    stem = f"shard-{part_id}-of-{num_parts}"
    for pattern in (f"*/{stem}.*", f"*/.{stem}.*", f"{PARTS_FOLDER}/part-{part_id}.json"):
        for file in folder.glob(pattern):
            file.unlink(missing_ok=True)
    if created:
        # rmdir, not rmtree: a folder another part is writing into is not empty and stays.
        for sub in [p for p in folder.glob("*") if p.is_dir()] + [folder]:
            with contextlib.suppress(OSError):
                sub.rmdir()


@contextmanager
def _manifest_lock(path: Path):
    """Serialize commits to one folder (the servers of a shared file system commit together)."""
    with open(path / _LOCK_FILE, "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def commit(path: str, save_id: str, part_id: int, num_parts: int, names: list[str]) -> list[str]:
    """Point ``names`` at save ``save_id`` in ``path``'s manifest, and remove the saves no longer used.

    Returns:
        The save folders removed.

    Raises:
        FileNotFoundError: this server's part of the save is missing.
    """
    root = Path(path)
    folder = save_folder(root, save_id)
    if not (folder / PARTS_FOLDER / f"part-{part_id}.json").is_file():
        raise FileNotFoundError(
            f"path: save {save_id} has no part of partition {part_id} under {folder} (was it written?)"
        )
    with _manifest_lock(root):
        previous = read_set_manifest(root) or {"tensors": {}}
        tensors = dict(previous["tensors"])
        tensors.update({name: save_id for name in names})
        manifest = {"format": MANIFEST_FORMAT, "num_parts": num_parts, "tensors": tensors}
        if tensors != previous["tensors"] or previous.get("num_parts") != num_parts:
            write_synced(root / MANIFEST_FILE, json.dumps(manifest, indent=1, sort_keys=True).encode())
        unused = set(previous["tensors"].values()) - set(tensors.values())
        removed = []
        for old in sorted(unused):
            shutil.rmtree(save_folder(root, old), ignore_errors=True)
            removed.append(str(save_folder(root, old)))
    return removed


def abort(path: str, save_id: str) -> None:
    """Remove the files of save ``save_id`` (not committed) under ``path``."""
    shutil.rmtree(save_folder(path, save_id), ignore_errors=True)


def restore_roots(path: str, names: list[str] | None) -> list[tuple[str, list[str] | None]]:
    """Where to restore ``names`` from: ``[(folder, names in it)]``.

    A folder without a manifest is a single checkpoint (``[(path, names)]``).

    Raises:
        FileNotFoundError: a tensor the manifest does not name, a part of a save missing, or save
            folders without a manifest (a save that never completed); the message names what is missing.
        ValueError: a part written for another save or another partition count (a mixed set).
    """
    root = Path(path)
    manifest = read_set_manifest(root)
    if manifest is None:
        pending = sorted(p.name for p in root.glob(f"{SAVE_PREFIX}*")) if root.is_dir() else []
        if pending and not any((p / "meta.json").is_file() for p in root.iterdir()):
            raise FileNotFoundError(
                f"path: checkpoint {path!r} is incomplete: {pending} never completed "
                f"({MANIFEST_FILE} missing)"
            )
        return [(path, names)]
    saved = manifest["tensors"]
    wanted = list(names) if names else sorted(saved)
    missing = [name for name in wanted if name not in saved]
    if missing:
        raise FileNotFoundError(
            f"names: checkpoint {path!r} has no tensor {missing} (it holds {sorted(saved)})"
        )
    groups: dict[str, list[str]] = {}
    for name in wanted:
        groups.setdefault(str(saved[name]), []).append(name)
    for save_id in groups:
        _check_parts(root, save_id, int(manifest["num_parts"]))
    return [(str(save_folder(root, save_id)), group) for save_id, group in groups.items()]


def _check_parts(root: Path, save_id: str, num_parts: int) -> None:
    parts = save_folder(root, save_id) / PARTS_FOLDER
    missing = [k for k in range(num_parts) if not (parts / f"part-{k}.json").is_file()]
    if missing:
        raise FileNotFoundError(
            f"path: checkpoint {str(root)!r} is incomplete: save {save_id} lacks the parts of partitions "
            f"{missing} of {num_parts} ({parts}/part-K.json missing)"
        )
    for k in range(num_parts):
        marker = json.loads((parts / f"part-{k}.json").read_text())
        if marker.get("save_id") != save_id or marker.get("num_parts") != num_parts:
            raise ValueError(
                f"path: checkpoint {str(root)!r} mixes saves: part {k} in save {save_id} was written for "
                f"save {marker.get('save_id')} of {marker.get('num_parts')} partitions"
            )
