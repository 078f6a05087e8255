"""bench/dgl/partition_stamp.py: a run without the partition section reuses partitions only of its graph."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def stamps(bench_dgl):
    return bench_dgl("partition_stamp")


def _partitions(folder: Path) -> Path:
    folder.mkdir(parents=True)
    config = folder / "bench.json"
    config.write_text("{}")
    return config


def test_stamped_partitions_are_current_for_their_graph_only(stamps, tmp_path):
    graph = tmp_path / "graph-200000-seed0-train0.55.npz"
    graph.write_bytes(b"x" * 100)
    config = _partitions(tmp_path / "parts" / "graphstore")
    stamp = stamps.source_stamp(graph, "bench", 2, "metis")
    assert stamp["graph"] == graph.name and stamp["size"] == 100
    assert not stamps.partitions_current(config, stamp)  # made, but never stamped (a run died)
    stamps.write_stamp(config, stamp)
    assert stamps.partitions_current(config, stamp)
    # Another graph file: another name (another train-frac), or the same name rewritten.
    other = tmp_path / "graph-200000-seed0-train0.1.npz"
    other.write_bytes(b"x" * 100)
    assert not stamps.partitions_current(config, stamps.source_stamp(other, "bench", 2, "metis"))
    graph.write_bytes(b"y" * 120)
    assert not stamps.partitions_current(config, stamps.source_stamp(graph, "bench", 2, "metis"))
    # Other partitioning settings.
    assert not stamps.partitions_current(config, {**stamp, "num_parts": 4})


def test_missing_cleared_or_damaged_stamps_and_configs_mean_partition_again(stamps, tmp_path):
    graph = tmp_path / "graph.npz"
    graph.write_bytes(b"x" * 10)
    stamp = stamps.source_stamp(graph, "bench", 2, "metis")
    config = _partitions(tmp_path / "parts" / "dgl")
    stamps.write_stamp(config, stamp)
    stamps.clear_stamp(config)  # what the partition section does before its partitioner runs
    assert not stamps.stamp_path(config).exists() and not stamps.partitions_current(config, stamp)
    stamps.clear_stamp(config)  # nothing to remove: no error
    stamps.write_stamp(config, stamp)
    stamps.stamp_path(config).write_text("{not json")
    assert not stamps.partitions_current(config, stamp)
    stamps.write_stamp(config, stamp)
    config.unlink()  # a stamp without its partitions
    assert not stamps.partitions_current(config, stamp)
    with pytest.raises(FileNotFoundError):
        stamps.source_stamp(tmp_path / "absent.npz", "bench", 2, "metis")


def test_the_stamp_follows_the_files_modification_time(stamps, tmp_path):
    graph = tmp_path / "graph.npz"
    graph.write_bytes(b"x" * 10)
    config = _partitions(tmp_path / "parts")
    stamps.write_stamp(config, stamps.source_stamp(graph, "bench", 2, "metis"))
    info = graph.stat()
    os.utime(graph, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))  # regenerated, same size
    assert not stamps.partitions_current(config, stamps.source_stamp(graph, "bench", 2, "metis"))
