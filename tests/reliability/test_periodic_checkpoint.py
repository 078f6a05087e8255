"""Periodic checkpoints in-process: atomic folders, the newest ``keep`` kept, restore of the newest readable
one (an older one when the newest is damaged), triggers by update count and by time."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphstore.partition import load_partition
from graphstore.server.durability.periodic_checkpoint import CheckpointPolicy, PeriodicCheckpointer
from graphstore.server.durability.periodic_checkpoint_folders import list_checkpoints, read_manifest
from graphstore.server.durability.periodic_restore import restore_checkpoint_folder, restore_latest
from graphstore.server.partition_server import PartitionServer
from graphstore.types import InitSpec, OptimizerConfig
from tests.utils.wait import stays_false, wait_until

ADAGRAD = OptimizerConfig("adagrad", lr=0.1)


def _server(part_config: str, part_id: int = 0) -> PartitionServer:
    return PartitionServer(load_partition(part_config, part_id))


def _owned(server: PartitionServer) -> np.ndarray:
    meta = server.metadata()
    return np.arange(meta.node_bounds[server.part_id], meta.node_bounds[server.part_id + 1])


def test_checkpoints_are_complete_folders_and_only_the_newest_are_kept(graph, tmp_path):
    part_config, _, _ = graph
    server = _server(part_config)
    ids = _owned(server)
    server.init_tensor("emb", (600, 3), "float32", "node", init=InitSpec("constant", 1.0))
    keeper = PeriodicCheckpointer(server, CheckpointPolicy(str(tmp_path), keep=2))
    written = []
    for step in range(4):
        server.push("emb", ids[:1], np.full((1, 3), step, np.float32))
        keeper.note_update()
        written.append(keeper.checkpoint_now())
    assert keeper.checkpoint_now() is None  # nothing changed since the last one
    kept = list_checkpoints(tmp_path, 0)
    assert kept == written[-2:] and [p.name for p in kept] == ["ckpt-00000003", "ckpt-00000004"]
    manifest = read_manifest(kept[-1])
    assert manifest["tensors"] == ["emb"] and manifest["updates"] == 4 and manifest["part_id"] == 0
    assert not list((tmp_path / "part-0").glob(".tmp-*"))

    # A write cut short (a crash between mkdir and rename) leaves a hidden folder: never restored,
    # removed when the next checkpointer starts, and numbering goes on after the newest complete one.
    (tmp_path / "part-0" / ".tmp-ckpt-00000005-deadbeef" / "tensors").mkdir(parents=True)
    fresh = _server(part_config)
    restored = restore_latest(fresh, tmp_path)
    assert restored is not None and restored[0] == kept[-1] and restored[1] == ["emb"]
    np.testing.assert_array_equal(fresh.pull("emb", ids[:1]), np.full((1, 3), 3, np.float32))
    np.testing.assert_array_equal(fresh.pull("emb", ids[1:5]), np.ones((4, 3), np.float32))
    again = PeriodicCheckpointer(fresh, CheckpointPolicy(str(tmp_path), keep=2))
    assert not list((tmp_path / "part-0").glob(".tmp-*"))
    fresh.push("emb", ids[:1], np.full((1, 3), 9, np.float32))
    again.note_update()
    assert again.checkpoint_now().name == "ckpt-00000005"


def test_restore_brings_back_rows_and_optimizer_state(graph, tmp_path):
    part_config, _, _ = graph
    server = _server(part_config, 1)
    ids = _owned(server)[:4]
    server.init_tensor("emb", (600, 2), "float32", "node", init=InitSpec("constant", 1.0))
    server.push_grad("emb", ids, np.ones((4, 2), np.float32), ADAGRAD)
    keeper = PeriodicCheckpointer(server, CheckpointPolicy(str(tmp_path)))
    keeper.note_update(2)
    path = keeper.checkpoint_now()

    fresh = _server(part_config, 1)
    assert restore_checkpoint_folder(fresh, path) == (["emb"], len(_owned(fresh)))
    np.testing.assert_array_equal(fresh.pull("emb", ids), server.pull("emb", ids))
    # The Adagrad sums came back too: the next step is the one the original server takes.
    for target in (server, fresh):
        target.push_grad("emb", ids, np.ones((4, 2), np.float32), ADAGRAD)
    np.testing.assert_array_equal(fresh.pull("emb", ids), server.pull("emb", ids))
    expected = 1.0 - 0.1 * (1.0 + 1.0 / np.sqrt(2.0))
    np.testing.assert_allclose(fresh.pull("emb", ids), expected, rtol=1e-6)

    # Another partition's checkpoint is refused by name.
    other = _server(part_config, 0)
    with pytest.raises(ValueError, match="part_id"):
        restore_checkpoint_folder(other, path)


def test_a_damaged_newest_checkpoint_falls_back_to_the_previous(graph, tmp_path):
    part_config, _, _ = graph
    server = _server(part_config)
    ids = _owned(server)[:2]
    server.init_tensor("h", (600, 1), "float32", "node")
    keeper = PeriodicCheckpointer(server, CheckpointPolicy(str(tmp_path), keep=3))
    for value in (5.0, 6.0):
        server.push("h", ids, np.full((2, 1), value, np.float32))
        keeper.note_update()
        newest = keeper.checkpoint_now()
    next(newest.glob("tensors/h/shard-*.rows.npy")).write_bytes(b"not an array")
    fresh = _server(part_config)
    path, names, _ = restore_latest(fresh, tmp_path)
    assert path.name == "ckpt-00000001" and names == ["h"]
    np.testing.assert_array_equal(fresh.pull("h", ids), np.full((2, 1), 5.0, np.float32))
    assert restore_latest(_server(part_config), tmp_path / "elsewhere") is None


def test_empty_server_checkpoint_restores_nothing(graph, tmp_path):
    part_config, _, _ = graph
    server = _server(part_config)
    path = PeriodicCheckpointer(server, CheckpointPolicy(str(tmp_path))).checkpoint_now()
    assert json.loads((path / "manifest.json").read_text())["tensors"] == []
    fresh = _server(part_config)
    assert restore_latest(fresh, tmp_path) == (path, [], 0)
    assert [s.name for s in fresh.list_tensors() if not s.from_partition] == []


def test_background_thread_checkpoints_by_update_count_and_by_time(graph, tmp_path):
    part_config, _, _ = graph
    server = _server(part_config)
    ids = _owned(server)
    server.init_tensor("c", (600, 1), "float32", "node")
    by_count = PeriodicCheckpointer(server, CheckpointPolicy(str(tmp_path / "count"), every_updates=3))
    by_count.start()
    try:
        for i in range(2):
            server.push("c", ids[i : i + 1], np.ones((1, 1), np.float32))
            by_count.note_update()
        stays_false(lambda: list_checkpoints(tmp_path / "count", 0), 0.3, "a checkpoint after 2 of 3 updates")
        by_count.note_update()
        wait_until(lambda: len(list_checkpoints(tmp_path / "count", 0)) == 1, 30, "the checkpoint by count")
        assert read_manifest(list_checkpoints(tmp_path / "count", 0)[0])["updates"] == 3
    finally:
        by_count.stop(final_checkpoint=False)

    by_time = PeriodicCheckpointer(server, CheckpointPolicy(str(tmp_path / "time"), every_s=0.2))
    by_time.start()
    try:
        stays_false(lambda: list_checkpoints(tmp_path / "time", 0), 0.5, "a checkpoint with nothing changed")
        by_time.note_update()
        wait_until(lambda: len(list_checkpoints(tmp_path / "time", 0)) == 1, 30, "the checkpoint by time")
    finally:
        by_time.note_update()
        last = by_time.stop(final_checkpoint=True)  # the shutdown checkpoint holds the last update
    assert last is not None and read_manifest(last)["updates"] == 2


def test_policy_values_are_checked():
    for bad, match in (
        (CheckpointPolicy(""), "checkpoint_dir"),
        (CheckpointPolicy("x", every_s=0), "checkpoint_every_s"),
        (CheckpointPolicy("x", every_updates=0), "checkpoint_every_updates"),
        (CheckpointPolicy("x", keep=0), "checkpoint_keep"),
    ):
        with pytest.raises(ValueError, match=match):
            bad.validate()


def test_answers_wait_until_the_loss_bound_holds(graph, tmp_path):
    from graphstore.server.durability.modes import CheckpointDurability
    from graphstore.server.durability.write_path import WritePath

    part_config, _, _ = graph
    keeper = PeriodicCheckpointer(_server(part_config), CheckpointPolicy(str(tmp_path), every_updates=3))
    path = WritePath(durability=CheckpointDurability(keeper))
    keeper.use_write_path(path)
    keeper.start()
    try:
        with path.snapshot():  # holds the due checkpoint back (writes wait for a snapshot, and it for them)
            tokens = [keeper.note_update() for _ in range(4)]
            keeper.wait_saved(tokens[2], timeout=0)  # the 3rd update after the latest checkpoint: answered
            with pytest.raises(ConnectionAbortedError, match="update 4 was applied but its answer waits"):
                keeper.wait_saved(tokens[3], timeout=0.05)
        keeper.wait_saved(tokens[3], timeout=30)  # the checkpoint holding all 4 completed
        assert read_manifest(list_checkpoints(tmp_path, 0)[-1])["updates"] == 4
    finally:
        keeper.stop(final_checkpoint=False)
