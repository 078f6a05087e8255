"""What a kill -9 loses in each durability mode, measured on server processes: with ``wal`` no acknowledged
write is lost (the log is replayed on top of the newest checkpoint, and truncated by each checkpoint);
with ``checkpoint`` at most ``every_updates`` acknowledged writes, or those of ``every_s`` seconds, are
lost, and what is kept is a prefix of the history; in both modes the replay window survives the restart,
so a request sent again after the restart is answered, not applied twice; a restore before the crash is
not replayed from a folder a later save changed. A SIGTERM whose last checkpoint fails exits non-zero and
logs what was not saved."""

from __future__ import annotations

import signal
import time
import uuid

import numpy as np
import pytest

from graphstore.rpc import RpcPolicy
from graphstore.server.durability.periodic_checkpoint_folders import list_checkpoints, partition_folder
from graphstore.server.durability.write_log import list_segments
from graphstore.types import OptimizerConfig
from tests.reliability.helpers import kill9, restart, start_with_tensors, wait_started

ADAGRAD = OptimizerConfig("adagrad", lr=0.1)
ONE_STEP = 1.0 - 0.1
WRITES = 40
# Retries that ride out a restart.
RIDE_OUT = RpcPolicy(deadline_s=10, max_retries=12, backoff_initial_s=0.05, backoff_max_s=1.0)


def _start(graph, servers, tmp_path, args):
    return start_with_tensors(graph[0], servers, tmp_path, args, RIDE_OUT)


def _write_numbered(client, owned, count: int) -> None:
    """Write ``count`` acknowledged updates: update ``i`` adds 1 to row ``owned[i]`` (and to no other)."""
    for i in range(count):
        client.push("seq", owned[i : i + 1], np.ones((1, 1), np.float32), op="add")


def test_wal_kill9_loses_no_acknowledged_write(graph, servers, tmp_path):
    part_config, _, _ = graph
    ckpt = tmp_path / "ckpt"
    args = [
        "--checkpoint-dir",
        str(ckpt),
        "--checkpoint-every-updates",
        "10",
        "--durability",
        "wal",
        "--fsync",
    ]
    server, client, owned = _start(graph, servers, tmp_path, args)
    step = client.prepare_push_grad("emb", owned[:2], np.ones((2, 2), np.float32), ADAGRAD)
    step()
    _write_numbered(client, owned, WRITES)
    # Each checkpoint truncated the log: at most the segment since the newest and the one being written.
    assert len(list_segments(partition_folder(ckpt, 0))) <= 2
    kill9(server)

    restart(server, part_config, ("--restore-latest",))
    wait_started(server)
    assert "event=write_log_replayed" in server.log()
    values = client.pull("seq", owned[:WRITES])[:, 0]
    np.testing.assert_array_equal(values, np.ones(WRITES, np.float32))  # none lost, none twice
    replays = client.stats().counters["replayed_writes"]
    step()  # sent again after the restart: answered from the window rebuilt from checkpoint + log
    assert client.stats().counters["replayed_writes"] == replays + 1
    np.testing.assert_allclose(client.pull("emb", owned[:2]), ONE_STEP, rtol=1e-6)
    client.close()


def test_checkpoint_mode_kill9_loses_at_most_every_updates_writes(graph, servers, tmp_path):
    part_config, _, _ = graph
    ckpt = tmp_path / "ckpt"
    every = 5
    args = ["--checkpoint-dir", str(ckpt), "--checkpoint-every-updates", str(every)]
    server, client, owned = _start(graph, servers, tmp_path, args)
    step = client.prepare_push_grad("emb", owned[:2], np.ones((2, 2), np.float32), ADAGRAD)
    step()
    _write_numbered(client, owned, WRITES)
    kill9(server)
    assert list_checkpoints(ckpt, 0)

    restart(server, part_config, ("--restore-latest",))
    wait_started(server)
    values = client.pull("seq", owned[:WRITES])[:, 0]
    kept = int(np.count_nonzero(values))
    np.testing.assert_array_equal(values[:kept], np.ones(kept, np.float32))  # a prefix, none twice
    assert not values[kept:].any()
    # 2 Inits + 1 step + 40 writes were acknowledged; the loss bound allows at most `every` to be lost.
    assert WRITES - kept <= every, (kept, WRITES)
    step()  # the step is in the checkpoint, and so is its answer: not applied twice
    np.testing.assert_allclose(client.pull("emb", owned[:2]), ONE_STEP, rtol=1e-6)
    client.close()


def test_checkpoint_mode_kill9_loses_at_most_every_s_seconds_of_writes(graph, servers, tmp_path):
    part_config, _, _ = graph
    ckpt = tmp_path / "ckpt"
    every_s = 0.05
    args = ["--checkpoint-dir", str(ckpt), "--checkpoint-every-s", str(every_s)]
    server, client, owned = _start(graph, servers, tmp_path, args)
    # Write for several checkpoint periods: update i adds 1 to row i % rows, so the rows' sums tell how
    # many updates a restored state holds and that they are the first ones. Keep when each write was
    # sent and when it was answered.
    rows = owned.size
    sent, acked = [], []
    deadline = time.monotonic() + 40 * every_s
    while time.monotonic() < deadline:
        row = len(sent) % rows
        sent.append(time.monotonic())
        client.push("seq", owned[row : row + 1], np.ones((1, 1), np.float32), op="add")
        acked.append(time.monotonic())
    writes = len(sent)
    kill9(server)
    assert list_checkpoints(ckpt, 0)

    restart(server, part_config, ("--restore-latest",))
    wait_started(server)
    values = client.pull("seq", owned)[:, 0]
    kept = int(values.sum())
    prefix = np.bincount(np.arange(kept) % rows, minlength=rows).astype(np.float32)
    np.testing.assert_array_equal(values, prefix)  # the first `kept` updates, none twice
    assert 0 < kept <= writes
    if kept < writes:
        # The lost writes were all applied within every_s of the first of them: the last was sent
        # (so applied after) less than every_s after the first was answered (so applied before).
        assert sent[writes - 1] - acked[kept] < every_s, (kept, writes, sent[writes - 1] - acked[kept])
    client.close()


def test_sigterm_whose_last_checkpoint_fails_exits_non_zero_naming_what_was_not_saved(
    graph, servers, tmp_path
):
    ckpt = tmp_path / "ckpt"
    server, client, owned = _start(graph, servers, tmp_path, ["--checkpoint-dir", str(ckpt)])
    client.push("seq", owned[:1], np.ones((1, 1), np.float32))
    client.close()
    folder = partition_folder(ckpt, 0)
    for child in folder.iterdir():
        child.rmdir() if child.is_dir() else child.unlink()
    folder.rmdir()
    folder.write_text("not a folder: the last checkpoint cannot be written")
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(60) == 1
    log = server.log()
    assert "event=final_checkpoint_failed part_id=0" in log
    assert "unsaved_tensors=emb,seq" in log and "unsaved_updates=3" in log


@pytest.mark.parametrize("durability", ["checkpoint", "wal"])
def test_a_server_that_restarts_in_the_same_mode_answers_old_requests_from_its_window(
    graph, servers, tmp_path, durability
):
    part_config, _, _ = graph
    ckpt = tmp_path / "ckpt"
    args = ["--checkpoint-dir", str(ckpt), "--durability", durability]
    server, client, owned = _start(graph, servers, tmp_path, args)
    step = client.prepare_push_grad("emb", owned[:1], np.ones((1, 2), np.float32), ADAGRAD)
    step()
    server.proc.send_signal(signal.SIGTERM)  # a clean stop: the last checkpoint holds everything
    assert server.proc.wait(60) == 0
    restart(server, part_config, ("--restore-latest",))
    wait_started(server)
    step()
    np.testing.assert_allclose(client.pull("emb", owned[:1]), ONE_STEP, rtol=1e-6)
    client.close()


def test_wal_a_restore_before_a_crash_is_not_replayed_from_files_a_later_save_changed(
    graph, servers, tmp_path
):
    from graphstore.client.transport import RemotePartition
    from tests.reliability.helpers import free_ports, start_server

    part_config, _, _ = graph
    args = ["--checkpoint-dir", str(tmp_path / "ckpt"), "--durability", "wal"]
    for k, port in enumerate(free_ports(2)):
        servers.append(start_server(part_config, k, port, tmp_path, args))
    for server in servers:
        wait_started(server)
    clients = [RemotePartition(server.address, k, RIDE_OUT) for k, server in enumerate(servers)]
    for client in clients:
        client.init_tensor("emb", (600, 1), "float32", "node")
    row = np.arange(*clients[0].metadata().node_bounds[:2])[:1]
    folder = f"saved-{uuid.uuid4().hex[:8]}"  # a name under the servers' checkpoint root

    def save(save_id: str) -> None:
        for client in clients:
            client.checkpoint(folder, ["emb"], save_id)
        for client in clients:
            client.commit_checkpoint(folder, save_id, ["emb"])

    def add_one() -> None:
        clients[0].push("emb", row, np.ones((1, 1), np.float32), op="add")

    save("a")  # row = 0
    add_one()
    clients[0].restore(folder, ["emb"])  # row = 0 again
    add_one()  # 1
    save("b")  # the folder now holds row = 1
    add_one()  # 2
    kill9(servers[0])
    restart(servers[0], part_config, ("--restore-latest",))
    wait_started(servers[0])
    # Replaying the restore from the folder would give 1 + 1 + 1 = 3.
    np.testing.assert_array_equal(clients[0].pull("emb", row), [[2.0]])
    for client in clients:
        client.close()
