"""Trainers started by torchrun against servers started by ``graphstore servers``, on loopback.

The training script is unchanged: ``initialize()`` finds the cluster in ``GRAPHSTORE_CONFIG`` and the
trainer group in torchrun's variables. The same training under ``graphstore launch`` gives the same
losses and accuracy; a trainer started before its servers waits for them and says so; a torchrun
restart after a trainer crash rejoins the same servers and finds what the first attempt left there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.launcher.helpers import (
    CLI,
    REPO,
    TRAINER_SCRIPT,
    LaunchRun,
    clean_env,
    end_process_group,
    free_ports,
    kill_pids,
    pid_alive,
    start_logged,
    wait_gone,
    write_cluster,
)
from tests.utils.wait import wait_until

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
TRAIN_DIST = str(REPO / "examples" / "train_dist.py")
# Small and deterministic: no prefetch thread, so every run draws the same batches.
TRAIN_ARGS = ["--graph-name", "testgraph", "--epochs", "2", "--batch-size", "64", "--fanouts", "5,5"]
TRAIN_ARGS += ["--hidden", "16", "--prefetch", "0", "--seed", "3", "--save-model", ""]


def start_torchrun(args: list[str], log_path: Path, env: dict[str, str], max_restarts: int = 0):
    """``torchrun --nnodes 1 --nproc-per-node 2`` with a c10d rendezvous on a free loopback port."""
    (port,) = free_ports(1)
    command = [
        *TORCHRUN,
        "--nnodes",
        "1",
        "--nproc-per-node",
        "2",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--max-restarts",
        str(max_restarts),
        *args,
    ]
    return start_logged(command, log_path, env)


def start_servers(cluster: Path, log_path: Path) -> LaunchRun:
    return LaunchRun(["--config", str(cluster)], log_path, env=clean_env(), subcommand="servers")


def stop_servers(cluster: Path, servers: LaunchRun) -> None:
    """``graphstore stop``: every server exits, then ``graphstore servers`` exits 0."""
    stop = subprocess.run(
        [*CLI, "stop", "--config", str(cluster)], capture_output=True, text=True, timeout=60
    )
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert servers.wait(60) == 0, servers.output
    assert "every server has stopped" in servers.output
    assert wait_gone(servers.child_pids()) == []


def test_torchrun_trains_like_launch_and_waits_for_late_servers(small_graph, tmp_path, launcher):
    part_config, _ = small_graph
    launched = tmp_path / "launch"
    launched.mkdir()
    cluster = write_cluster(launched, part_config, free_ports(2), trainers_per_host=2)
    run = launcher(
        [
            "--config",
            str(cluster),
            "--",
            sys.executable,
            TRAIN_DIST,
            *TRAIN_ARGS,
            "--metrics-json",
            str(tmp_path / "launch.json"),
        ],
        env=clean_env(),
    )
    assert run.wait(240) == 0, run.output

    elastic = tmp_path / "torchrun"
    elastic.mkdir()
    cluster = write_cluster(elastic, part_config, free_ports(2))
    log = tmp_path / "torchrun.log"
    trainers = start_torchrun(
        [TRAIN_DIST, *TRAIN_ARGS, "--metrics-json", str(tmp_path / "torchrun.json")],
        log,
        clean_env(GRAPHSTORE_CONFIG=str(cluster)),
    )
    servers = None
    try:
        # The trainers start first: they wait for the servers (bounded by connect_timeout_s) and say so.
        wait_until(
            lambda: "waiting for the server at" in log.read_text(),
            120,
            "the trainers' waiting line",
            alive=trainers,
        )
        servers = start_servers(cluster, tmp_path / "servers.log")
        assert trainers.wait(timeout=240) == 0, log.read_text()
        stop_servers(cluster, servers)
    finally:
        end_process_group(trainers)
        if servers is not None:
            servers.close()

    under_launch = json.loads((tmp_path / "launch.json").read_text())
    under_torchrun = json.loads((tmp_path / "torchrun.json").read_text())
    for results in (under_launch, under_torchrun):
        assert results["mode"] == "distributed" and results["world_size"] == 2
    assert under_torchrun["test_acc"] == under_launch["test_acc"]
    losses = [epoch["batch_losses_rank0"] for epoch in under_torchrun["epochs"]]
    assert losses == [epoch["batch_losses_rank0"] for epoch in under_launch["epochs"]] and losses[0]
    assert f"test accuracy: {under_torchrun['test_acc']:.4f}" in log.read_text()


def test_torchrun_restart_rejoins_the_same_servers(small_graph, tmp_path):
    part_config, _ = small_graph
    cluster = write_cluster(tmp_path, part_config, free_ports(2))
    servers = start_servers(cluster, tmp_path / "servers.log")
    out = tmp_path / "out"
    trainers = None
    try:
        wait_until(
            lambda: "serving partitions 0, 1" in servers.output, 120, "the servers", alive=servers.proc
        )
        server_pids = servers.child_pids()
        log = tmp_path / "torchrun.log"
        trainers = start_torchrun(
            [TRAINER_SCRIPT, "--mode", "resume", "--out", str(out), "--fail-rank", "1"],
            log,
            clean_env(GRAPHSTORE_CONFIG=str(cluster)),
            max_restarts=1,
        )
        assert trainers.wait(timeout=240) == 0, log.read_text()
        output = log.read_text()
        assert "trainer 1 failing on purpose in attempt 0" in output
        results = [json.loads((out / f"resume-{rank}.json").read_text()) for rank in (0, 1)]
        # The second attempt found the slots the first one wrote: the same servers, still up.
        assert [(r["attempt"], r["found"]) for r in results] == [(1, 1), (1, 1)]
        assert servers.proc.poll() is None and all(pid_alive(pid) for pid in server_pids)
        assert servers.child_pids() == server_pids, servers.output
        stop_servers(cluster, servers)
    finally:
        if trainers is not None:
            end_process_group(trainers)
        pids = servers.child_pids()
        servers.close()
        kill_pids(pids)
