"""A server killed with SIGKILL: every kind of trainer call fails within its bounded time with an error
naming the server (pulls, sampling, a prefetching loader's threads, an optimizer step, a barrier);
``graphstore launch`` tears down and exits non-zero, or with ``restart: on-failure`` restarts the server
from its latest checkpoint while the trainers go on."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from graphstore.errors import ServerUnavailableError
from tests.launcher.helpers import TRAINER_SCRIPT, wait_for_pid_files
from tests.reliability.helpers import (
    cluster_dict,
    free_ports,
    kill9,
    pid_alive,
    progress,
    start_server,
    wait_gone,
    wait_started,
    write_yaml,
)
from tests.utils.barriers import barrier_has_waiters, dist_graph_barrier_name
from tests.utils.threads import run_in_threads
from tests.utils.wait import wait_until

TRAIN_SCRIPT = str(Path(__file__).with_name("train_script.py"))
FAST_RPC = {"deadline_s": 3, "max_retries": 2, "backoff_initial_s": 0.05, "connect_timeout_s": 20}


@pytest.fixture
def client_of(graph, servers, tmp_path, monkeypatch):
    """Two servers and this process connected to them as rank 0 of a 2-trainer group (the second
    trainer never comes, so a barrier waits); the context is closed at teardown."""
    from graphstore.client.api import exit_client, initialize

    part_config, _, _ = graph
    ports = free_ports(2)
    for k, port in enumerate(ports):
        servers.append(start_server(part_config, k, port, tmp_path))
    for server in servers:
        wait_started(server)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    ctx = initialize(cluster_dict(part_config, ports, rpc=FAST_RPC, local_read="off"))
    yield ctx
    exit_client()


def test_every_call_to_a_killed_server_fails_in_bounded_time_naming_it(client_of, servers, graph):
    from graphstore.client.dataloader import DistNodeDataLoader
    from graphstore.client.dist_embedding import DistEmbedding
    from graphstore.client.dist_graph import DistGraph
    from graphstore.client.optim import SparseAdagrad
    from graphstore.client.samplers import NeighborSampler
    from graphstore.client.sampling import sample_neighbors

    ctx = client_of
    victim = servers[0]  # partition 0: also where barriers are kept
    g = DistGraph("testgraph")
    owned = torch.arange(ctx.book.node_bounds[0], ctx.book.node_bounds[1])
    everywhere = torch.arange(0, g.num_nodes(), 7)
    emb = DistEmbedding(g.num_nodes(), 4, name="fault_emb")
    opt = SparseAdagrad([emb], lr=0.1)
    loader = DistNodeDataLoader(
        g, owned, NeighborSampler([3, 3]), batch_size=16, prefetch=4, load_labels=None, equal_batches=False
    )
    batches = iter(loader)
    next(batches)  # the loader threads are running and ahead
    assert g.ndata["feat"][everywhere].shape[0] == len(everywhere)

    # A barrier whose other participant never comes is waiting on the victim when it dies.
    outcome: dict[str, BaseException | None] = {}

    def barrier() -> None:
        try:
            g.barrier(timeout_s=60)
            outcome["barrier"] = None
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertions
            outcome["barrier"] = exc

    waiter = threading.Thread(target=barrier)
    waiter.start()
    barrier_name = dist_graph_barrier_name(
        "testgraph", os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")
    )
    wait_until(lambda: barrier_has_waiters(ctx.partition(0).barrier, barrier_name), 60, "the barrier waiting")
    kill9(victim)

    def step() -> None:
        (emb(owned[:8]) ** 2).sum().backward()
        opt.step()

    calls = {
        "pull": lambda: g.ndata["feat"][everywhere],
        "sample": lambda: sample_neighbors(g, owned[:20], 3),
        "loader": lambda: [next(batches) for _ in range(len(loader))],
        "optimizer step": step,
        "find_edges": lambda: g.find_edges(
            torch.arange(ctx.book.edge_bounds[0], ctx.book.edge_bounds[0] + 5)
        ),
    }

    def fails_naming_the_victim(name: str, call) -> None:
        with pytest.raises(ServerUnavailableError) as exc:
            call()
        assert exc.value.server == victim.address, (name, exc.value)
        assert victim.address in str(exc.value)

    for name, call in calls.items():
        # Each call gives up (a liveness deadline far above the calls' own bound, not a speed claim).
        run_in_threads(fails_naming_the_victim, [(name, call)], timeout=120)
    waiter.join(timeout=120)
    assert not waiter.is_alive(), "the barrier did not return after its server died"
    error = outcome["barrier"]
    assert isinstance(error, ServerUnavailableError) and error.server == victim.address, error
    loader.close()
    # The other partition is untouched: its rows still come back.
    other = torch.arange(ctx.book.node_bounds[1], ctx.book.node_bounds[1] + 5)
    np.testing.assert_array_equal(g.ndata["feat"][other].numpy(), graph[2][other.numpy()])


def test_barrier_names_its_participant_count_and_times_out(client_of):
    from graphstore.client.dist_graph import DistGraph
    from graphstore.errors import BarrierTimeoutError

    g = DistGraph("testgraph")
    with pytest.raises(BarrierTimeoutError, match=r"only 1 of 2 participants arrived within timeout_s=0.5"):
        g.barrier(timeout_s=0.5)
    # The server keeps serving, and the same barrier can be used again.
    with pytest.raises(TimeoutError, match="1 of 2"):
        g.barrier(timeout_s=0.2)


def test_launch_exits_nonzero_when_a_server_is_killed(graph, tmp_path, launcher):
    part_config, _, _ = graph
    config = write_yaml(tmp_path / "c.yaml", cluster_dict(part_config, free_ports(2), trainers_per_host=2))
    out = tmp_path / "pids"
    run = launcher(
        ["--config", str(config), "--grace-period", "5", "--"]
        + [sys.executable, TRAINER_SCRIPT, "--mode", "sleep", "--out", str(out)]
    )
    pids = wait_for_pid_files(out, 4, alive=run.proc)
    server_pid = int(re.search(r"started server-1 locally \(pid (\d+)\)", run.output).group(1))
    os.kill(server_pid, signal.SIGKILL)
    assert run.wait(timeout_s=60) == 128 + signal.SIGKILL, run.output
    assert f"server-1 (pid {server_pid}) exited with code 137: stopping the rest" in run.output
    assert wait_gone(list(pids.values()) + run.child_pids()) == []


def test_launch_restarts_a_killed_server_from_its_checkpoint_and_training_goes_on(graph, tmp_path, launcher):
    part_config, _, _ = graph
    ckpt = tmp_path / "ckpt"
    config = write_yaml(
        tmp_path / "restart.yaml",
        cluster_dict(
            part_config,
            free_ports(2),
            trainers_per_host=2,
            restart="on-failure",
            max_restarts=2,
            checkpoint={"path": str(ckpt), "every_s": 0.2, "every_updates": 20},
            rpc={"deadline_s": 10, "max_retries": 12, "backoff_initial_s": 0.05, "backoff_max_s": 2.0},
        ),
    )
    out = tmp_path / "out"
    # The trainers stop before step 10 until the server has been killed, so they train on through
    # its restart (and not, say, finish first).
    run = launcher(
        ["--config", str(config), "--grace-period", "5", "--"]
        + [sys.executable, TRAIN_SCRIPT, "--out", str(out), "--steps", "40"]
        + ["--pause-at", "10", "--resume-file", str(out / "resume")]
    )
    wait_until(lambda: progress(out) >= 10, 120, "the trainers at their pause", alive=run.proc)
    wait_until(
        lambda: list((ckpt / "part-1").glob("ckpt-*/manifest.json")), 60, "a checkpoint of partition 1"
    )
    old_pid = int(re.search(r"started server-1 locally \(pid (\d+)\)", run.output).group(1))
    os.kill(old_pid, signal.SIGKILL)
    (out / "resume").write_text("")
    assert run.wait(timeout_s=180) == 0, run.output
    output = run.output
    assert f"event=server_restart part_id=1 old_pid={old_pid} exit_code=137 restart=1/2" in output
    assert "restore=latest_checkpoint" in output and "--restore-latest" in output
    assert "event=restored part_id=1 path=" in output
    assert not pid_alive(old_pid)
    for rank in range(2):
        result = json.loads((out / f"result-{rank}.json").read_text())
        assert result["steps"] == 40 and result["finite"]
        assert result["pid_start"] == result["pid_end"]  # the same trainer process went on
    assert wait_gone(run.child_pids()) == []
