"""A server killed with SIGKILL and restarted with ``--restore-latest``: what a client was told is saved
before the last complete checkpoint started is all there, in order, with the optimizer state; what came
after may be lost, exactly as ``docs/reliability.md`` says; the same client object goes on after the
restart (its calls retry with backoff while the server is down)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from graphstore.client.transport import RemotePartition
from graphstore.errors import ServerUnavailableError
from graphstore.rpc import RpcPolicy
from graphstore.server.durability.periodic_checkpoint_folders import list_checkpoints, read_manifest
from graphstore.types import InitSpec, OptimizerConfig
from tests.reliability.helpers import (
    free_ports,
    kill9,
    restart,
    start_server,
    start_with_tensors,
    wait_started,
)
from tests.utils.wait import wait_until

LR = 0.1
ADAGRAD = OptimizerConfig("adagrad", lr=LR)
STEPS = 90
GRAD_ROWS = 6
# Retries long enough to ride out a restart (about 20 s of backoff in all).
RIDE_OUT = RpcPolicy(deadline_s=10, max_retries=12, backoff_initial_s=0.05, backoff_max_s=2.0)


def _adagrad_ones(steps: int) -> float:
    """A row started at 1.0 after ``steps`` Adagrad steps with gradient 1: G_t = t."""
    return 1.0 - LR * float(np.sum(1.0 / np.sqrt(np.arange(1, steps + 1, dtype=np.float64))))


def test_sigkill_then_restore_latest_loses_only_updates_after_the_last_checkpoint(graph, servers, tmp_path):
    part_config, _, _ = graph
    ckpt = tmp_path / "ckpt"
    args = ["--checkpoint-dir", str(ckpt), "--checkpoint-every-updates", "7", "--checkpoint-keep", "2"]
    server, client, owned = start_with_tensors(part_config, servers, tmp_path, args, RIDE_OUT)
    meta = client.metadata()

    seq_acked: list[float] = []  # seq_acked[i]: when row owned[i] = i + 1 was acknowledged
    grad_acked: list[tuple[int, float]] = []  # (row index, ack time) of each gradient step
    for i in range(STEPS):
        client.push("seq", owned[i : i + 1], np.full((1, 1), i + 1, np.float32))
        seq_acked.append(time.time())
        if i % 3 == 0:
            row = (i // 3) % GRAD_ROWS
            client.push_grad("emb", owned[row : row + 1], np.ones((1, 2), np.float32), ADAGRAD)
            grad_acked.append((row, time.time()))
        if i == STEPS - 20:
            wait_until(lambda: list_checkpoints(ckpt, 0), 60, "a checkpoint to land mid-run")
    client.init_tensor("late", (meta.num_nodes, 1), "float32", "node", init=InitSpec("constant", 7.0))
    kill9(server)

    newest = list_checkpoints(ckpt, 0)[-1]
    manifest = read_manifest(newest)
    assert len(list_checkpoints(ckpt, 0)) <= 3  # keep=2, one more when killed between rename and prune
    restart(server, part_config, ("--restore-latest",))
    wait_started(server)
    assert f"event=restored part_id=0 path={newest}" in server.log()

    # Rows: a prefix of the pushes, in order, holding every push acknowledged before the checkpoint began.
    values = client.pull("seq", owned[:STEPS])[:, 0]
    kept = int(np.count_nonzero(values))
    np.testing.assert_array_equal(values[:kept], np.arange(1, kept + 1, dtype=np.float32))
    assert not values[kept:].any()
    saved_before = sum(t < manifest["started_at"] for t in seq_acked)
    assert saved_before <= kept <= STEPS
    assert saved_before >= 1

    # Embedding rows: each holds a whole number of Adagrad steps, at least those acknowledged before the
    # checkpoint began, and the restored state continues the sequence exactly.
    emb = client.pull("emb", owned[:GRAD_ROWS])
    for row in range(GRAD_ROWS):
        sent = sum(1 for r, _ in grad_acked if r == row)
        before = sum(1 for r, t in grad_acked if r == row and t < manifest["started_at"])
        matches = [c for c in range(sent + 1) if np.allclose(emb[row], _adagrad_ones(c), rtol=0, atol=1e-6)]
        assert len(matches) == 1 and matches[0] >= before, (row, emb[row], sent, before)
        client.push_grad("emb", owned[row : row + 1], np.ones((1, 2), np.float32), ADAGRAD)
        np.testing.assert_allclose(
            client.pull("emb", owned[row : row + 1])[0], _adagrad_ones(matches[0] + 1), rtol=0, atol=1e-6
        )

    # A tensor created after the newest checkpoint did not survive; one inside it did.
    if "late" in manifest["tensors"]:
        np.testing.assert_array_equal(client.pull("late", owned[:3]), np.full((3, 1), 7.0, np.float32))
    else:
        with pytest.raises(KeyError, match="late"):
            client.pull("late", owned[:3])

    # The same client goes on writing where the restored rows end.
    client.push("seq", owned[kept : kept + 5], np.arange(kept + 1, kept + 6, dtype=np.float32)[:, None])
    np.testing.assert_array_equal(
        client.pull("seq", owned[: kept + 5])[:, 0], np.arange(1, kept + 6, dtype=np.float32)
    )
    client.close()


def test_calls_in_flight_ride_out_a_restart(graph, servers, tmp_path):
    """A client keeps calling while its server is killed and restarted: its calls wait (retrying with
    backoff) and succeed once the server is back; none fails and none hangs."""
    part_config, _, feat = graph
    (port,) = free_ports(1)
    server = start_server(part_config, 0, port, tmp_path)
    servers.append(server)
    wait_started(server)
    client = RemotePartition(server.address, 0, RIDE_OUT)
    meta = client.metadata()
    ids = np.arange(meta.node_bounds[0], meta.node_bounds[0] + 50)
    results: list = []
    calls_started = [0]  # results holds one entry per finished call
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            calls_started[0] += 1
            try:
                rows = client.pull("feat", ids)
                results.append(bool(np.array_equal(rows, feat[ids])))
            except ServerUnavailableError as exc:  # pragma: no cover - reported below
                results.append(exc)
                return

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        wait_until(lambda: len(results) >= 3, 60, "reads before the kill")
        kill9(server)
        # A call unfinished now is in flight while the server is down: it can only end by the restart.
        wait_until(lambda: calls_started[0] > len(results), 60, "a read in flight while the server is down")
        restart(server, part_config)
        wait_started(server)
        before = len(results)
        wait_until(
            lambda: len(results) >= before + 20 or not thread.is_alive(), 60, "20 reads after the restart"
        )
    finally:
        stop.set()
        thread.join(timeout=RIDE_OUT.deadline_s * 3)
    assert not thread.is_alive()
    assert results and all(r is True for r in results), [r for r in results if r is not True][:3]
    assert len(results) >= before + 20
    client.close()
