"""Where the tensors of a checkpoint folder live: the manifest of a cluster-wide save.

A cluster-wide save (``graphstore.client.checkpoint.save``) is one consistent set::

    PATH/manifest.json                 written last: {format, num_parts, tensors: {name: save ID}}
    PATH/save-<ID>/<tensor>/...        the shards every server wrote for save ID
    PATH/save-<ID>/parts/part-K.json   server K wrote its shards of the save completely

A folder without a manifest holds tensors directly (``PATH/<tensor>/meta.json``: one server's
checkpoint, e.g. a periodic checkpoint's ``tensors`` folder). The server writes and reads these sets
(``server/durability/checkpoint_set.py``); the client reads the manifest to check a checkpoint before
a restore.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = "graphstore-checkpoint-set-1"
SAVE_PREFIX = "save-"
PARTS_FOLDER = "parts"


def save_folder(path: str | os.PathLike, save_id: str) -> Path:
    """``PATH/save-<ID>``: where the shards of save ``save_id`` are written.

    Raises:
        ValueError: a save ID that cannot be a folder name.
    """
    if not save_id or not all(c.isalnum() or c in "-_" for c in save_id):
        raise ValueError(f"save_id: {save_id!r} must be letters, digits, '-' or '_'")
    return Path(path) / f"{SAVE_PREFIX}{save_id}"


def read_set_manifest(path: str | os.PathLike) -> dict | None:
    """The manifest of the checkpoint set at ``path``, or None when the folder has none.

    Raises:
        ValueError: an unreadable manifest, or one that is not a checkpoint set's.
    """
    manifest_path = Path(path) / MANIFEST_FILE
    try:
        manifest = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ValueError(f"path: {manifest_path} is unreadable: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"path: {manifest_path} is not a {MANIFEST_FORMAT} manifest")
    if not isinstance(manifest.get("tensors"), dict):
        raise ValueError(f"path: {manifest_path} names no tensors")
    return manifest


def tensor_root(path: str | os.PathLike, name: str) -> Path:
    """The folder holding ``<name>/meta.json`` of tensor ``name`` in the checkpoint at ``path``: its
    save's folder when ``path`` has a manifest naming it, else ``path`` itself.

    Raises:
        ValueError: an unreadable manifest.
    """
    manifest = read_set_manifest(path)
    if manifest is not None and name in manifest["tensors"]:
        return save_folder(path, str(manifest["tensors"][name]))
    return Path(path)
