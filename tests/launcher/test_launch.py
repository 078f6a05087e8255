"""``graphstore launch`` end to end on loopback: real servers, real trainers, real teardown."""

from __future__ import annotations

import json
import shlex
import signal
import socket
import sys

import pytest
import yaml

from graphstore.errors import ConfigError
from graphstore.launcher.hosts import is_local_host
from graphstore.launcher.remote_exec import remote_argv
from tests.launcher.helpers import (
    TRAINER_SCRIPT,
    free_ports,
    read_pid_files,
    wait_for_pid_files,
    wait_gone,
    write_cluster,
)

PY = sys.executable


def trainer(*args: str) -> list[str]:
    return ["--", PY, TRAINER_SCRIPT, *args]


def assert_all_gone(run, extra_pids=()) -> None:
    pids = run.child_pids() + list(extra_pids)
    assert pids, run.output
    assert wait_gone(pids) == [], f"processes left after launch: {pids}\n{run.output}"


def test_two_servers_two_trainers_train_and_exit_zero(small_graph, tmp_path, launcher):
    part_config, expected_feat = small_graph
    config = write_cluster(tmp_path, part_config, free_ports(2), trainers_per_host=2)
    out = tmp_path / "out"
    run = launcher(["--config", str(config), *trainer("--out", str(out), "--expect-feat", expected_feat)])
    assert run.wait() == 0, run.output

    results = [json.loads((out / f"result-{rank}.json").read_text()) for rank in range(2)]
    for rank, result in enumerate(results):
        env = result["env"]
        assert env["RANK"] == env["LOCAL_RANK"] == str(rank)
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "2"
        assert env["MASTER_ADDR"] == "127.0.0.1" and int(env["MASTER_PORT"]) > 0
        assert env["GRAPHSTORE_CONFIG"] == str(config.resolve())
        assert env["PYTHONUNBUFFERED"] == "1"
        assert result["num_nodes"] == 400 and result["features_checked"] > 0
        assert result["steps"] == 3
    assert results[0]["env"]["MASTER_PORT"] == results[1]["env"]["MASTER_PORT"]

    output = run.output
    for label in ("server-0", "server-1", "trainer-0", "trainer-1"):
        assert f"[{label}] " in output, output
    assert "[launch] all 2 trainers finished" in output
    assert_all_gone(run)

    # Ports are released: the same config launches again right away.
    again = launcher(["--config", str(config), "--num-trainers", "1", "--", PY, "-c", "print('second run')"])
    assert again.wait() == 0, again.output
    assert "[trainer-0] second run" in again.output
    assert "trainer-1" not in again.output
    assert_all_gone(again)


def test_trainer_exit_code_becomes_launch_exit_code(small_graph, tmp_path, launcher):
    part_config, _ = small_graph
    config = write_cluster(tmp_path, part_config, free_ports(2), trainers_per_host=2)
    out = tmp_path / "pids"
    run = launcher(
        [
            "--config",
            str(config),
            "--grace-period",
            "5",
            *trainer("--mode", "fail", "--out", str(out), "--exit-code", "3"),
        ]
    )
    assert run.wait() == 3, run.output
    assert "failing on purpose" in run.output
    assert "trainer-1 (pid" in run.output and "exited with code 3" in run.output
    pids = read_pid_files(out)
    assert len(pids) == 4, pids  # both trainers and their grandchildren
    assert_all_gone(run, pids.values())


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_launch_tears_everything_down(small_graph, tmp_path, launcher, signum):
    part_config, _ = small_graph
    config = write_cluster(tmp_path, part_config, free_ports(2), trainers_per_host=2)
    out = tmp_path / "pids"
    run = launcher(["--config", str(config), *trainer("--mode", "sleep", "--out", str(out))])
    pids = wait_for_pid_files(out, 4, alive=run.proc)
    run.send(signum)
    assert run.wait() == 128 + signum, run.output
    assert f"received {signal.Signals(signum).name}" in run.output
    assert_all_gone(run, pids.values())


def test_server_that_cannot_start_fails_fast_with_its_stderr(small_graph, tmp_path, launcher):
    part_config, _ = small_graph
    ports = free_ports(2)
    config = write_cluster(tmp_path, part_config, ports)
    data = yaml.safe_load(config.read_text())
    data["servers"][1]["bind_host"] = "192.0.2.1"  # TEST-NET-1: not an address of this machine
    config.write_text(yaml.safe_dump(data))
    run = launcher(["--config", str(config), "--", PY, "-c", "print('never runs')"])
    code = run.wait()
    assert code != 0, run.output
    assert "server-1 exited with code" in run.output and "before serving" in run.output
    assert "never runs" not in run.output
    assert_all_gone(run)


def test_port_in_use_is_reported(small_graph, tmp_path, launcher):
    part_config, _ = small_graph
    ports = free_ports(2)
    config = write_cluster(tmp_path, part_config, ports)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", ports[0]))
        busy.listen()
        run = launcher(["--config", str(config), "--", PY, "-c", "pass"])
        assert run.wait() == 1, run.output
    assert f"127.0.0.1:{ports[0]} is already in use" in run.output


def test_remote_exec_path_and_connect_timeout(small_graph, tmp_path, launcher):
    """Servers whose exec_host is not this machine start through the template; a server that never
    serves hits the connect timeout."""
    part_config, _ = small_graph
    ports = free_ports(2)
    config = write_cluster(tmp_path, part_config, ports)
    data = yaml.safe_load(config.read_text())
    for server in data["servers"]:
        server["exec_host"] = "far-away-host"
    config.write_text(yaml.safe_dump(data))

    # A template that runs the command here, proving {host} and {command} substitution end to end.
    template = "env GRAPHSTORE_TEST_EXEC_HOST={host} {command}"
    run = launcher(["--config", str(config), "--remote-exec", template, "--", PY, "-c", "print('remote ok')"])
    assert run.wait() == 0, run.output
    assert "started server-0 on far-away-host" in run.output
    assert "env GRAPHSTORE_TEST_EXEC_HOST=far-away-host" in run.output
    assert "[trainer-0] remote ok" in run.output
    assert_all_gone(run)

    # A "remote" command that never serves: launch gives up after --connect-timeout.
    sleeper = f"{shlex.quote(PY)} -c 'import time, sys; time.sleep(600)' {{host}} {{command}}"
    run = launcher(
        ["--config", str(config), "--remote-exec", sleeper, "--connect-timeout", "1", "--grace-period", "2"]
        + ["--", PY, "-c", "pass"]
    )
    assert run.wait() == 1, run.output
    assert "not SERVING within connect_timeout_s = 1 s" in run.output
    assert_all_gone(run)


def test_bad_arguments_exit_2_with_a_message(small_graph, tmp_path, launcher):
    part_config, _ = small_graph
    config = write_cluster(tmp_path, part_config, free_ports(3))  # 3 servers, 2 partitions
    run = launcher(["--config", str(config), "--", PY, "-c", "pass"])
    assert run.wait() == 2
    assert "field 'servers' lists 3 servers" in run.output
    config = write_cluster(tmp_path, part_config, free_ports(2))
    run = launcher(["--config", str(config)])
    assert run.wait() == 2 and "no trainer command" in run.output
    run = launcher(["--config", str(config), "--remote-exec", "ssh {host}", "--", PY, "-c", "pass"])
    assert run.wait() == 2 and "'--remote-exec'" in run.output


def test_remote_argv_quoting():
    command = ["python", "-m", "graphstore.launcher.cli", "server", "--part-config", "/data/my graph/g.json"]
    # A standalone {command} word: one argument per word, each shell-quoted (for ssh's remote shell).
    argv = remote_argv("ssh -o BatchMode=yes {host} {command}", "node-1", command)
    assert argv[:4] == ["ssh", "-o", "BatchMode=yes", "node-1"]
    assert argv[4:] == command[:-1] + ["'/data/my graph/g.json'"]
    assert shlex.split(" ".join(argv[4:])) == command  # what the remote shell reads back
    # Ordinary words pass through unchanged to tools that exec their arguments.
    plain = ["python", "-u", "script.py", "--port", "50051"]
    assert remote_argv("ip netns exec {host} {command}", "ns-a", plain) == [
        "ip",
        "netns",
        "exec",
        "ns-a",
        *plain,
    ]
    # Inside a longer word, {command} is the whole command line, quoted once.
    argv = remote_argv("ssh {host} 'cd /work && {command}'", "node-2", command)
    assert argv[2] == "cd /work && " + shlex.join(command)
    with pytest.raises(ConfigError):
        remote_argv("ssh {host}", "node", command)


def test_is_local_host():
    assert is_local_host("localhost") and is_local_host("127.0.0.1") and is_local_host("::1")
    assert is_local_host(socket.gethostname())
    assert is_local_host("0.0.0.0")
    assert not is_local_host("192.0.2.1")  # TEST-NET-1
    assert not is_local_host("some-other-machine")
