"""Partition validation: a damaged partition gives one line naming the file and the problem, from
``graphstore validate`` and from ``graphstore server`` (no traceback), before anything is served."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from graphstore.partition import load_partition
from graphstore.partition.validate import (
    PartitionFormatError,
    check_id_range,
    check_indptr,
    check_partition_data,
    check_partition_files,
    load_validated_partition,
)
from tests.utils.graphs import make_partitioned_graph

CLI = [sys.executable, "-m", "graphstore.launcher.cli"]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    folder = tmp_path_factory.mktemp("validate")
    config, _ = make_partitioned_graph(folder / "g", num_nodes=300, num_parts=2)
    return config


@pytest.fixture
def damaged(pristine, tmp_path):
    """A copy of the partitioned graph that a test may break."""
    from pathlib import Path

    target = tmp_path / "copy"
    shutil.copytree(Path(pristine).parent, target)
    return str(target / Path(pristine).name), target / "part0"


def test_a_valid_partition_passes(pristine):
    for part_id in (0, 1):
        data = load_validated_partition(pristine, part_id)
        assert data.num_local_nodes > 0
    result = subprocess.run([*CLI, "validate", pristine], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.count("ok: partition") == 2


def test_indptr_rules():
    check_indptr(np.array([0, 2, 2, 5]), 3, 0, 5, "x")
    with pytest.raises(PartitionFormatError, match="x: decreases at position 2 \\(2 -> 1\\)"):
        check_indptr(np.array([0, 2, 1, 5]), 3, 0, 5, "x")
    with pytest.raises(PartitionFormatError, match="starts at 1"):
        check_indptr(np.array([1, 2, 3, 5]), 3, 0, 5, "x")
    with pytest.raises(PartitionFormatError, match="ends at 5, expected 6"):
        check_indptr(np.array([0, 2, 3, 5]), 3, 0, 6, "x")
    with pytest.raises(PartitionFormatError, match="has 3 entries, expected 4"):
        check_indptr(np.array([0, 2, 5]), 3, 0, 5, "x")
    with pytest.raises(PartitionFormatError, match="int32\\[4\\], expected 1-D int64"):
        check_indptr(np.array([0, 2, 3, 5], dtype=np.int32), 3, 0, 5, "x")
    with pytest.raises(PartitionFormatError, match="entry 1 is node ID 10, outside \\[0, 10\\)"):
        check_id_range(np.array([3, 10, -1]), 0, 10, "y", "node ID")


def _break(path, change) -> None:
    array = np.load(path)
    np.save(path, change(array.copy()))


@pytest.mark.parametrize(
    ("what", "damage", "message"),
    [
        ("in_indptr", lambda a: a[::-1], "in_indptr.npy: starts at"),
        ("in_src", lambda a: a + 10**6, "in_src.npy: entry 0 is node ID"),
        ("out_eid", lambda a: a - 10**6, "out_eid.npy: entry 0 is edge ID"),
        ("orig_nid", lambda a: a.astype(np.int32), "orig_nid.npy: is int32"),
    ],
)
def test_damaged_arrays_are_named(damaged, what, damage, message):
    config, part0 = damaged
    _break(part0 / f"{what}.npy", damage)
    with pytest.raises(PartitionFormatError, match=message):
        check_partition_data(load_partition(config, 0))
    load_validated_partition(config, 1)  # the other partition is fine


def test_a_truncated_file_is_named_before_it_is_mapped(damaged):
    config, part0 = damaged
    path = part0 / "in_src.npy"
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(PartitionFormatError, match="in_src.npy: truncated: the header promises"):
        check_partition_files(config, 0)
    (part0 / "out_dst.npy").write_bytes(b"not numpy")
    with pytest.raises(PartitionFormatError, match="in_src.npy: truncated"):
        load_validated_partition(config, 0)


def test_cli_and_server_print_one_line_without_traceback(damaged):
    config, part0 = damaged
    _break(part0 / "in_indptr.npy", lambda a: np.concatenate([a[:1], a[1:][::-1]]))
    for argv in ([*CLI, "validate", config], [*CLI, "server", "--part-config", config, "--part-id", "0"]):
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2, result.stderr
        lines = [line for line in result.stderr.splitlines() if "error" in line]
        assert len(lines) == 1 and "in_indptr.npy: decreases at position" in lines[0]
        assert "Traceback" not in result.stderr


def test_typed_partitions_validate_and_a_broken_edge_type_piece_is_named(tmp_path):
    from graphstore.partition import load_partition
    from tests.utils.typed_graphs import make_typed_partitions

    result, _ = make_typed_partitions(tmp_path, 2, "random")
    for part_id in range(2):
        check_partition_data(load_partition(result.config_path, part_id))
    data = load_partition(result.config_path, 1)
    data.in_indptr = np.array(data.in_indptr)  # a writable copy
    cites = data.in_indptr_of(data.schema.etype_id("cites"))
    cites[1] = cites[2] + 1  # the cites piece now decreases
    expected = r"in_indptr.npy \(edge type paper:cites:paper\): decreases"
    with pytest.raises(PartitionFormatError, match=expected):
        check_partition_data(data)
