"""Which graph a system's partitions were made from: a stamp beside them, so a run reuses them safely.

The partition section writes each system's partitions and, once they are complete, a stamp
(``bench-source.json`` beside the partition config: the graph file's name, size and modification time,
the graph name, the partition count and method). A run without the partition section (``--sections
epoch``, ``--sections client``) reuses the partitions while the stamp is what this graph would give,
and otherwise makes them first, untimed, with the partition section's own commands
(``side_by_side.ensure_partitions``). Standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path

STAMP = "bench-source.json"


def source_stamp(graph: Path, graph_name: str, num_parts: int, method: str) -> dict:
    """What partitions made from the graph file ``graph`` are stamped with.

    Raises:
        FileNotFoundError: no such graph file.
    """
    info = Path(graph).stat()
    return {
        "graph": Path(graph).name,
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "graph_name": graph_name,
        "num_parts": num_parts,
        "method": method,
    }


def stamp_path(part_config: Path) -> Path:
    """The stamp file of the partitions whose config is ``part_config``."""
    return Path(part_config).parent / STAMP


def partitions_current(part_config: Path, stamp: dict) -> bool:
    """Whether the partitions at ``part_config`` exist and were made as ``stamp`` says.

    False when the config or the stamp is missing, the stamp is unreadable, or it names another
    graph file (name, size or modification time) or other partitioning settings.
    """
    if not Path(part_config).is_file():
        return False
    try:
        return json.loads(stamp_path(part_config).read_text()) == stamp
    except (OSError, ValueError):
        return False


def clear_stamp(part_config: Path) -> None:
    """Remove the stamp before partitions are (re)made, so that a run that dies half-way leaves none."""
    stamp_path(part_config).unlink(missing_ok=True)


def write_stamp(part_config: Path, stamp: dict) -> None:
    """Stamp complete partitions (after their partitioner exited successfully)."""
    path = stamp_path(part_config)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stamp, indent=1) + "\n")
