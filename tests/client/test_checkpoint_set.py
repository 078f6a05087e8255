"""A checkpoint is one consistent set: a save that fails (a full disk, a read-only folder, one server
failing after the others wrote) leaves no file of it anywhere and the previous checkpoint whole; a
restore refuses a set with a part missing or a part of another save, naming it; saves of different
tensors into one folder keep each other's."""

from __future__ import annotations

import errno
import subprocess
import uuid
from pathlib import Path

import numpy as np
import pytest
import torch

from graphstore.client import checkpoint
from graphstore.client.api import exit_client
from graphstore.client.dist_embedding import DistEmbedding
from graphstore.client.dist_graph import DistGraph
from tests.utils.graphs import make_partitioned_graph

NUM_NODES = 300


@pytest.fixture(scope="module")
def part_config(tmp_path_factory):
    config, _ = make_partitioned_graph(tmp_path_factory.mktemp("ckpt-set"), num_nodes=NUM_NODES, num_parts=2)
    return config


@pytest.fixture
def standalone(part_config):
    exit_client()
    yield DistGraph("testgraph", part_config=part_config)
    exit_client()


@pytest.fixture
def ck(part_config) -> tuple[str, Path]:
    """A fresh checkpoint name and its folder under the standalone partitions' checkpoint root
    (``checkpoints/`` beside the partition config)."""
    name = f"ck-{uuid.uuid4().hex[:8]}"
    return name, Path(part_config).parent / "checkpoints" / name


@pytest.fixture
def small_disk(ck):
    """A checkpoint whose folder is a 1 MiB tmpfs (root only; the injected-fault test covers other
    machines): ``(name, folder)``."""
    name, folder = ck
    folder.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    yield name, folder
    subprocess.run(["umount", "-l", str(folder)], check=True)


def _embedding(name: str, dim: int, value: float) -> DistEmbedding:
    emb = DistEmbedding(NUM_NODES, dim, name=name)
    emb.weight[torch.arange(NUM_NODES)] = torch.full((NUM_NODES, dim), value)
    return emb


def _rows(emb) -> np.ndarray:
    return emb.weight[torch.arange(NUM_NODES)].numpy()


def _listing(folder: Path) -> list[str]:
    return sorted(
        str(p.relative_to(folder)) for p in folder.rglob("*") if "/" not in str(p.relative_to(folder))
    )


def _assert_only_the_first_save(folder: Path, first: checkpoint.CheckpointInfo, emb) -> None:
    """Only the first save is in ``folder``, no temporary file is left, and it still loads."""
    saves = [p.name for p in folder.iterdir() if p.name.startswith("save-")]
    assert len(saves) == 1, _listing(folder)
    assert not [p for p in folder.rglob("*") if p.name.endswith(".tmp")], "a temporary file was left"
    emb.weight[torch.arange(NUM_NODES)] = torch.zeros((NUM_NODES, emb.embedding_dim))
    checkpoint.load(first.path, [emb])
    np.testing.assert_array_equal(_rows(emb), 1.0)


def test_a_save_that_fills_the_disk_leaves_no_file_and_the_previous_checkpoint_whole(standalone, small_disk):
    name, folder = small_disk
    small = _embedding("small", 4, 1.0)
    first = checkpoint.save(name, [small])
    big = _embedding("big", 1024, 2.0)  # 1.2 MB of rows: more than the disk holds
    with pytest.raises(OSError):  # StorageFullError (an OSError): the disk is full
        checkpoint.save(name, [small, big])
    _assert_only_the_first_save(folder, first, small)


def test_a_save_into_a_folder_turned_read_only_fails_and_keeps_the_previous(standalone, small_disk):
    name, folder = small_disk
    small = _embedding("small_ro", 4, 1.0)
    first = checkpoint.save(name, [small])
    small.weight[torch.arange(NUM_NODES)] = torch.full((NUM_NODES, 4), 5.0)
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    with pytest.raises(PermissionError, match="read-only"):
        checkpoint.save(name, [small])
    _assert_only_the_first_save(folder, first, small)


def test_a_save_failing_on_one_server_after_the_other_wrote_removes_every_part(standalone, ck, monkeypatch):
    from graphstore.server.durability import checkpoint as server_checkpoint

    name, folder = ck
    emb = _embedding("partial", 4, 1.0)
    first = checkpoint.save(name, [emb])
    real_save = server_checkpoint._atomic_save_npy

    def full_disk_on_partition_1(path, array):
        if "shard-1-of-2" in path.name:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real_save(path, array)

    monkeypatch.setattr(server_checkpoint, "_atomic_save_npy", full_disk_on_partition_1)
    emb.weight[torch.arange(NUM_NODES)] = torch.full((NUM_NODES, 4), 7.0)
    with pytest.raises(OSError, match="full"):
        checkpoint.save(name, [emb])
    _assert_only_the_first_save(folder, first, emb)


def test_a_restore_refuses_a_set_with_a_part_missing_or_mixed_naming_it(standalone, ck):
    name, folder = ck
    emb = _embedding("whole", 4, 1.0)
    checkpoint.save(name, [emb])
    (save,) = folder.glob("save-*")
    part = save / "parts" / "part-1.json"
    text = part.read_text()
    part.unlink()
    with pytest.raises(FileNotFoundError, match=r"lacks the parts of partitions \[1\] of 2"):
        checkpoint.load(name, [emb])
    part.write_text(text.replace(save.name[len("save-") :], "another"))
    with pytest.raises(ValueError, match="mixes saves: part 1"):
        checkpoint.load(name, [emb])
    (folder / "manifest.json").unlink()
    with pytest.raises(FileNotFoundError, match="never completed"):
        checkpoint.load(name, [emb])
    np.testing.assert_array_equal(_rows(emb), 1.0)


def test_saves_of_different_tensors_into_one_folder_keep_each_other(standalone, ck):
    name, folder = ck
    a, b = _embedding("a", 2, 1.0), _embedding("b", 2, 2.0)
    checkpoint.save(name, [a])
    checkpoint.save(name, [b])
    a.weight[torch.arange(NUM_NODES)] = torch.full((NUM_NODES, 2), 3.0)
    checkpoint.save(name, [a])  # replaces a's save; b's stays
    assert len(list(folder.glob("save-*"))) == 2
    for emb in (a, b):
        emb.weight[torch.arange(NUM_NODES)] = torch.zeros((NUM_NODES, 2))
    checkpoint.load(name, [a, b])
    np.testing.assert_array_equal(_rows(a), 3.0)
    np.testing.assert_array_equal(_rows(b), 2.0)
