"""``graphstore servers``: which servers of a cluster YAML a host runs, and how they live and end."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys

import pytest

from graphstore.config import load_cluster_config, parse_cluster_config
from graphstore.launcher.control import SERVING, probe_health
from graphstore.launcher.hosts import servers_of_host
from graphstore.launcher.process_commands import server_command
from tests.launcher.helpers import CLI, LaunchRun, free_ports, kill_pids, pid_alive, wait_gone, write_cluster
from tests.utils.wait import wait_until


def _servers(*entries: dict):
    return parse_cluster_config({"servers": list(entries)}, ".", check_files=False).servers


def test_servers_of_host_by_name_short_name_index_and_this_machine():
    servers = _servers(
        {"host": "server-0.server", "port": 50051, "part_id": 0},
        {"host": "node-b", "port": 50051, "part_id": 2},
        {"host": "node-b", "port": 50052, "part_id": 1},
        {"host": "127.0.0.1", "port": 50053, "part_id": 3},
    )
    assert [s.part_id for s in servers_of_host(servers, hostname="node-b")] == [1, 2]
    # A pod's host name is the first label of its stable DNS name.
    assert [s.part_id for s in servers_of_host(servers, hostname="server-0")] == [0]
    assert [s.part_id for s in servers_of_host(servers, hostname="server-0.server")] == [0]
    assert [s.part_id for s in servers_of_host(servers, host_index=1)] == [1, 2]
    assert [s.part_id for s in servers_of_host(servers)] == [3]
    with pytest.raises(ValueError, match="node-c.*server-0.server, node-b, 127.0.0.1"):
        servers_of_host(servers, hostname="node-c")
    with pytest.raises(ValueError, match="host index 3 is out of range"):
        servers_of_host(servers, host_index=3)


def test_dry_run_prints_what_launch_would_run_for_this_host(tmp_path, small_graph):
    part_config, _ = small_graph
    cluster = write_cluster(
        tmp_path,
        part_config,
        [50061, 50062],
        checkpoint={"path": str(tmp_path / "ckpt"), "every_s": 30},
        metrics_port=9400,
    )
    result = subprocess.run(
        [*CLI, "servers", "--config", str(cluster), "--host-index", "0", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    config = load_cluster_config(cluster)
    expected = [server_command(config, server, sys.executable) for server in config.servers]
    assert [shlex.split(line) for line in result.stdout.splitlines()] == expected
    assert "--metrics-port" in expected[1] and "9401" in expected[1] and "--checkpoint-dir" in expected[0]


def test_a_failed_server_restarts_and_sigterm_stops_everything(tmp_path, small_graph):
    part_config, _ = small_graph
    cluster = write_cluster(tmp_path, part_config, free_ports(2), restart="on-failure", max_restarts=2)
    run = LaunchRun(["--config", str(cluster)], tmp_path / "servers.log", subcommand="servers")
    pids = []
    try:
        wait_until(lambda: "serving partitions 0, 1" in run.output, 120, "the servers", alive=run.proc)
        pids = run.child_pids()
        os.kill(pids[1], signal.SIGKILL)
        wait_until(lambda: "event=server_restart part_id=1" in run.output, 60, "the restart", alive=run.proc)
        address = load_cluster_config(cluster).servers[1].address
        wait_until(
            lambda: probe_health(address, timeout_s=1.0) == SERVING, 60, "server-1 again", alive=run.proc
        )
        pids = run.child_pids()
        assert len(pids) == 3 and pid_alive(pids[0]) and pid_alive(pids[2])
        run.send(signal.SIGTERM)
        assert run.wait(60) == 0, run.output
        assert wait_gone(pids) == [], run.output
    finally:
        pids += run.child_pids()
        run.close()
        kill_pids(pids)


def test_servers_end_when_the_command_is_killed(tmp_path, small_graph):
    """What a batch system's SIGKILL (or the OOM killer) does to ``graphstore servers``: no orphan."""
    part_config, _ = small_graph
    cluster = write_cluster(tmp_path, part_config, free_ports(2))
    run = LaunchRun(["--config", str(cluster)], tmp_path / "servers.log", subcommand="servers")
    pids = []
    try:
        wait_until(lambda: "serving partitions 0, 1" in run.output, 120, "the servers", alive=run.proc)
        pids = run.child_pids()
        assert len(pids) == 2 and all(pid_alive(pid) for pid in pids)
        os.kill(run.proc.pid, signal.SIGKILL)
        run.proc.wait(30)
        left = wait_gone(pids, timeout_s=30)
        assert left == [], f"servers outlived graphstore servers: {[_describe(pid) for pid in left]}"
    finally:
        run.close()
        kill_pids(pids)


def _describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read().replace(b"\0", b" ").decode()
        with open(f"/proc/{pid}/status") as handle:
            status = [line.strip() for line in handle if line.startswith(("State", "PPid", "Threads"))]
    except OSError:
        return f"{pid}: gone"
    return f"{pid}: {cmdline} {status}"


def test_no_server_for_this_host_is_one_line_and_exit_2(tmp_path):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("servers:\n  - {host: node-x, port: 50051, part_id: 0}\n")
    result = subprocess.run(
        [*CLI, "servers", "--config", str(cluster), "--dry-run"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert re.fullmatch(
        r"graphstore servers: error: no server of the config runs on this machine; .*\n", result.stderr
    )
