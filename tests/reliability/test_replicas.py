"""Read replicas: a partition served by its owner and a read replica keeps answering reads when one of
them is SIGKILLed in the middle of sampling, a pull or an optimizer step (the call moves to the other
server at once); a replica that comes back rejoins; the last server of a partition lost gives the
bounded wait and an error naming every server; a read replica refuses writes; ``graphstore launch``
starts the replicas and restarts a killed one while training goes on."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from graphstore.errors import ServerUnavailableError
from tests.reliability.helpers import (
    cluster_dict,
    free_ports,
    kill9,
    pid_alive,
    progress,
    restart,
    run_cli,
    start_server,
    wait_gone,
    wait_started,
    write_yaml,
)
from tests.utils.wait import wait_until

# A read that fails over must not wait for a retry budget: keep the budget long (a stall would show).
RPC = {
    "deadline_s": 3,
    "max_retries": 3,
    "backoff_initial_s": 0.05,
    "backoff_max_s": 0.5,
    "connect_timeout_s": 30,
}
# The longest a read may take while one server of its partition dies (moving on is immediate; this
# only leaves room for a loaded 2-core machine).
FAILOVER_BOUND_S = 1.0


def _probe_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("graphstore-replica-probe")]


@pytest.fixture
def replicated(graph, servers, tmp_path, monkeypatch):
    """Two partitions, each with its owner and one read replica, and this process connected to them
    (rank 0 of 1, nothing read from the files); yields ``(ctx, {(part, replica): ServerProc})``."""
    from graphstore.client.api import exit_client, initialize

    part_config, _, _ = graph
    ports = free_ports(4)
    procs = {}
    entries = []
    for replica in range(2):
        for part in range(2):
            port = ports[replica * 2 + part]
            log_dir = tmp_path / f"r{replica}"
            log_dir.mkdir(exist_ok=True)
            args = ("--read-replica",) if replica else ()
            procs[(part, replica)] = start_server(part_config, part, port, log_dir, args)
            servers.append(procs[(part, replica)])
            entries.append({"host": "127.0.0.1", "port": port, "part_id": part})
    for server in procs.values():
        wait_started(server)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    config = cluster_dict(part_config, [], rpc=RPC, local_read="off")
    config["servers"] = entries
    ctx = initialize(config)
    yield ctx, procs
    exit_client()
    assert _probe_threads() == []  # nothing of the client left running


def _timed_calls(call, stop: threading.Event, durations: list[float]) -> None:
    while not stop.is_set():
        started = time.monotonic()
        call()
        durations.append(time.monotonic() - started)


def _run_through_kill(call, victim, min_calls: int = 20) -> list[float]:
    """Run ``call`` in a loop on a thread, SIGKILL ``victim`` once it made ``min_calls`` calls, and go
    on for as many calls again; returns every call's duration (a failed call fails the test)."""
    stop = threading.Event()
    durations: list[float] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            _timed_calls(call, stop, durations)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        wait_until(lambda: len(durations) >= min_calls or errors, 60, "calls before the kill")
        kill9(victim)
        killed_at = len(durations)
        wait_until(lambda: len(durations) >= killed_at + min_calls or errors, 60, "calls after the kill")
    finally:
        stop.set()
        thread.join(60)
    assert not thread.is_alive()
    if errors:
        raise errors[0]
    return durations


def _state(ctx, part: int, address: str) -> dict:
    return next(s for s in ctx.partition(part).replica_states() if s["address"] == address)


def test_sampling_goes_on_when_a_read_replica_dies_and_it_rejoins(replicated, graph):
    from graphstore.client.dist_graph import DistGraph
    from graphstore.client.sampling import sample_neighbors

    ctx, procs = replicated
    part_config, _, _ = graph
    g = DistGraph("testgraph")
    seeds = torch.arange(ctx.book.node_bounds[0], ctx.book.node_bounds[0] + 40)

    def sample() -> None:
        frontier = sample_neighbors(g, seeds, 3)
        _, dst = frontier.edges()
        assert frontier.num_edges() > 0 and bool(torch.isin(dst, seeds).all())

    victim = procs[(0, 1)]
    durations = _run_through_kill(sample, victim)
    assert max(durations) < FAILOVER_BOUND_S, max(durations)
    state = _state(ctx, 0, victim.address)
    assert state["state"] == "down" and state["failures"] >= 1 and state["role"] == "read_replica"
    assert _state(ctx, 0, procs[(0, 0)].address)["state"] == "live"
    served_before = state["served"]

    restart(victim, part_config)  # the replica comes back on its port
    wait_started(victim)
    wait_until(lambda: _state(ctx, 0, victim.address)["state"] == "live", 30, "the replica rejoining")
    for _ in range(10):
        sample()
    assert _state(ctx, 0, victim.address)["served"] > served_before


def test_pulls_go_on_when_the_owner_dies(replicated, graph):
    from graphstore.client.dist_graph import DistGraph

    ctx, procs = replicated
    _, _, feat_by_global = graph
    g = DistGraph("testgraph")
    ids = torch.arange(0, g.num_nodes(), 3)

    def pull() -> None:
        np.testing.assert_array_equal(g.ndata["feat"][ids].numpy(), feat_by_global[ids.numpy()])

    owner = procs[(1, 0)]
    durations = _run_through_kill(pull, owner)
    assert max(durations) < FAILOVER_BOUND_S, max(durations)
    assert _state(ctx, 1, owner.address)["state"] == "down"
    # Degrees and find_edges of the partition whose owner is gone come from its replica too.
    nodes = torch.arange(ctx.book.node_bounds[1], ctx.book.node_bounds[1] + 5)
    assert g.in_degrees(nodes).shape == (5,)
    eids = torch.arange(ctx.book.edge_bounds[1], ctx.book.edge_bounds[1] + 5)
    assert g.find_edges(eids)[0].shape == (5,)


def test_optimizer_steps_go_on_when_a_read_replica_dies(replicated, graph):
    """Training steps (feature pulls and sampling spread over the replicas, embedding pulls and
    Adagrad pushes to the owners) through the loss of partition 0's replica give exactly the embedding
    of the same steps without a loss."""
    from graphstore.client.dist_embedding import DistEmbedding
    from graphstore.client.dist_graph import DistGraph
    from graphstore.client.optim import SparseAdagrad
    from graphstore.client.sampling import sample_neighbors
    from graphstore.types import InitSpec

    ctx, procs = replicated
    g = DistGraph("testgraph")
    n = g.num_nodes()
    init = InitSpec("uniform", -0.1, 0.1, seed=5)
    reference = DistEmbedding(n, 4, name="ref_emb", init_func=init)
    trained = DistEmbedding(n, 4, name="killed_emb", init_func=init)
    steps = 30

    def step(emb, opt, index: int) -> None:
        seeds = torch.from_numpy(np.random.default_rng(index).choice(n, 24, replace=False))
        _, dst = sample_neighbors(g, seeds, 2).edges()  # a read of each partition's servers
        assert bool(torch.isin(dst, seeds).all())
        nodes = torch.unique(seeds)
        target = g.ndata["feat"][nodes][:, :4]
        loss = ((emb(nodes) - target) ** 2).sum()
        loss.backward()
        opt.step()

    opt_ref = SparseAdagrad([reference], lr=0.05)
    for index in range(steps):
        step(reference, opt_ref, index)

    opt = SparseAdagrad([trained], lr=0.05)
    counter = iter(range(steps))
    done: list[int] = []

    def next_step() -> None:
        index = next(counter, None)
        if index is None:
            time.sleep(0.01)
            return
        step(trained, opt, index)
        done.append(index)

    durations = _run_through_kill(next_step, procs[(0, 1)], min_calls=10)
    for index in counter:  # the steps left after the kill
        step(trained, opt, index)
        done.append(index)
    assert done == list(range(steps))
    assert max(durations) < 5 * FAILOVER_BOUND_S, max(durations)
    all_ids = torch.arange(n)
    np.testing.assert_array_equal(trained.weight[all_ids].numpy(), reference.weight[all_ids].numpy())


def test_the_last_server_of_a_partition_lost_gives_the_bounded_wait_and_names_them(replicated):
    from graphstore.client.dist_graph import DistGraph

    ctx, procs = replicated
    g = DistGraph("testgraph")
    ids = torch.arange(ctx.book.node_bounds[0], ctx.book.node_bounds[0] + 10)
    g.ndata["feat"][ids]
    for replica in range(2):
        kill9(procs[(0, replica)])
    budget = ctx.partition(0).max_call_time_s
    started = time.monotonic()
    with pytest.raises(ServerUnavailableError) as exc:
        g.ndata["feat"][ids]
    waited = time.monotonic() - started
    for replica in range(2):
        assert procs[(0, replica)].address in str(exc.value)
    assert "partition 0: none of its 2 servers answered Pull" in str(exc.value)
    # It waited for a restart as a partition of one server does, and not much longer.
    assert 0.5 * budget <= waited <= budget + 3.0, (waited, budget)
    # Partition 1 still answers.
    other = torch.arange(ctx.book.node_bounds[1], ctx.book.node_bounds[1] + 5)
    assert g.ndata["feat"][other].shape[0] == 5


def test_a_read_replica_refuses_writes_and_reports_its_role(replicated):
    from graphstore.client.transport import RemotePartition

    ctx, procs = replicated
    with RemotePartition(procs[(0, 1)].address, 0) as replica:
        assert replica.metadata().read_replica and replica.stats().read_replica
        with pytest.raises(PermissionError, match="read-only view"):
            replica.init_tensor("x", (ctx.book.node_bounds[-1], 2), "float32", "node")
    with RemotePartition(procs[(0, 0)].address, 0) as owner:
        assert not owner.metadata().read_replica


def test_launch_starts_the_replicas_and_training_goes_on_through_a_killed_one(graph, tmp_path, launcher):
    """``graphstore launch`` with two servers per partition: a read replica SIGKILLed mid-training is
    restarted (no checkpoint to restore); the same trainers finish every step; ``graphstore status``
    shows each server's role and the calls it answered."""
    part_config, _, _ = graph
    train = str(Path(__file__).with_name("train_script.py"))
    ports = free_ports(4)
    config = cluster_dict(
        part_config,
        [],
        trainers_per_host=2,
        restart="on-failure",
        checkpoint={"path": str(tmp_path / "ckpt"), "durability": "wal"},
        local_read="off",
        rpc={"deadline_s": 10, "max_retries": 12, "backoff_initial_s": 0.05, "backoff_max_s": 0.5},
    )
    config["servers"] = [{"host": "127.0.0.1", "port": p, "part_id": k % 2} for k, p in enumerate(ports)]
    cluster = write_yaml(tmp_path / "replicas.yaml", config)
    out = tmp_path / "out"
    run = launcher(
        ["--config", str(cluster), "--grace-period", "5", "--"]
        + [sys.executable, train, "--out", str(out), "--steps", "24"]
        + ["--pause-at", "8", "--resume-file", str(out / "resume"), "--hold-file", str(out / "hold")]
    )
    wait_until(lambda: progress(out) >= 8, 120, "the trainers at their pause", alive=run.proc)
    pid = int(re.search(r"started server-1\.r1 locally \(pid (\d+)\)", run.output).group(1))
    assert "--read-replica" in run.output
    os.kill(pid, signal.SIGKILL)
    (out / "resume").write_text("")
    wait_until(lambda: progress(out) >= 24, 120, "the trainers' last step", alive=run.proc)
    serving = re.compile(r"server-1\.r1 at \S+ is SERVING")
    wait_until(lambda: len(serving.findall(run.output)) >= 2, 60, "the replica's restart", alive=run.proc)
    status = run_cli("status", "--config", str(cluster))
    assert "graph testgraph, 2 partitions, 2 read replicas" in status.stdout, status.stdout
    assert re.search(
        r"^server 1\.r1 +127\.0\.0\.1:\d+ +SERVING +partition 1 +read_replica", status.stdout, re.M
    )
    assert re.search(r"^server 0 +127\.0\.0\.1:\d+ +SERVING +partition 0 +owner", status.stdout, re.M)
    assert re.search(r"calls served: .*SampleNeighbors \d+", status.stdout)
    (out / "hold").write_text("")
    assert run.wait(timeout_s=120) == 0, run.output
    assert f"event=server_restart part_id=1 replica=1 old_pid={pid} exit_code=137" in run.output
    assert not pid_alive(pid)
    for rank in range(2):
        result = json.loads((out / f"result-{rank}.json").read_text())
        assert result["steps"] == 24 and result["finite"] and result["pid_start"] == result["pid_end"]
    assert wait_gone(run.child_pids()) == []


def test_the_metrics_name_each_servers_role():
    from prometheus_client import generate_latest

    from graphstore.server.metrics import ServerMetrics

    replica = generate_latest(ServerMetrics(1, read_replica=True).registry).decode()
    owner = generate_latest(ServerMetrics(1).registry).decode()
    assert 'graphstore_server_info{part_id="1",role="read_replica"} 1.0' in replica
    assert 'graphstore_server_info{part_id="1",role="owner"} 1.0' in owner
