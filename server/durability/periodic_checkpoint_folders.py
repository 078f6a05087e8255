"""Where a partition's periodic checkpoints live, and how to find and read the complete ones.

Layout (``DIR`` is the cluster's ``--checkpoint-dir``)::

    DIR/part-K/ckpt-00000007/manifest.json          what, when, how many updates it includes
    DIR/part-K/ckpt-00000007/tensors/<name>/...     server.checkpoint's layout (rows keyed by original IDs)
    DIR/part-K/ckpt-00000007/replay_window.json     the answers of the latest requests it holds
    DIR/part-K/wal/wal-00000008.log                 the write-ahead log since (durability: wal)

A ``ckpt-N`` folder with a manifest is complete: the writer
(:mod:`~graphstore.server.durability.periodic_checkpoint`) renames a checkpoint into place only once it is
written and fsync'ed.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

MANIFEST = "manifest.json"
TENSORS_FOLDER = "tensors"
WINDOW_FILE = "replay_window.json"
FORMAT = "graphstore-periodic-checkpoint-1"
_CKPT_RE = re.compile(r"^ckpt-(\d{8})$")


def checkpoint_name(seq: int) -> str:
    """The folder name of checkpoint number ``seq`` (``ckpt-00000007``)."""
    return f"ckpt-{seq:08d}"


def checkpoint_sequence(path: str | os.PathLike) -> int:
    """The number of the checkpoint in folder ``path`` (``ckpt-00000007`` -> 7).

    Raises:
        ValueError: ``path`` is not named like a checkpoint folder.
    """
    match = _CKPT_RE.match(Path(path).name)
    if match is None:
        raise ValueError(f"path: {str(path)!r} is not a ckpt-NNNNNNNN folder")
    return int(match.group(1))


def partition_folder(root: str | os.PathLike, part_id: int) -> Path:
    """``root/part-K``: where partition ``part_id`` keeps its checkpoints."""
    return Path(root) / f"part-{part_id}"


def list_checkpoints(root: str | os.PathLike, part_id: int) -> list[Path]:
    """Complete checkpoints of a partition (renamed folders with a manifest), oldest first."""
    folder = partition_folder(root, part_id)
    if not folder.is_dir():
        return []
    found = []
    for entry in folder.iterdir():
        match = _CKPT_RE.match(entry.name)
        if match and (entry / MANIFEST).is_file():
            found.append((int(match.group(1)), entry))
    return [path for _, path in sorted(found)]


def read_manifest(path: str | os.PathLike) -> dict:
    """A checkpoint's manifest.

    Raises:
        FileNotFoundError: no manifest.
        ValueError: not a periodic-checkpoint manifest.
    """
    manifest_path = Path(path) / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"checkpoint {str(path)!r} has no {MANIFEST}") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"checkpoint {str(path)!r}: unreadable {MANIFEST}: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"checkpoint {str(path)!r}: {MANIFEST} is not a {FORMAT} manifest")
    return manifest
