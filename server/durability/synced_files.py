"""Files that survive a crash: syncing files and folders, and writing a file atomically and synced.

A rename is only durable once the data it points at and the folder holding it are synced; the periodic
checkpoints, the write-ahead log and the checkpoint sets all go through these helpers.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def fsync_path(path: str | os.PathLike) -> None:
    """fsync one file or folder."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(folder: str | os.PathLike) -> None:
    """fsync every file and folder under ``folder`` (a rename that follows must not outrun the data)."""
    for dirpath, _dirnames, filenames in os.walk(folder):
        for name in filenames:
            fsync_path(os.path.join(dirpath, name))
        fsync_path(dirpath)


def write_synced(path: str | os.PathLike, data: bytes) -> None:
    """Write ``path`` atomically: a temporary file beside it, synced, renamed over it, the folder synced.

    Raises:
        OSError: the folder cannot be written (no temporary file is left behind).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_path(path.parent)
