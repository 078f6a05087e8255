"""Slurm: srun's variables mapped to torchrun's, the job's cluster YAML, and the sbatch example run
under a real Slurm when one answers here (``deploy/slurm/local-cluster.sh`` starts a one-host one)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from graphstore.config import load_cluster_config, parse_cluster_config
from graphstore.launcher.hosts import servers_of_host
from graphstore.launcher.slurm import (
    cluster_for_nodes,
    expand_hostlist,
    expand_tasks_per_node,
    torch_env_from_slurm,
)
from tests.launcher.helpers import CLI, REPO, free_ports, pid_alive, wait_gone
from tests.utils.wait import wait_until

SBATCH = REPO / "deploy" / "slurm" / "graphstore.sbatch"
# Task 5 of a 2-node step with 4 tasks on the first node and 2 on the second: the second node's 2nd task.
SRUN_TASK = {
    "SLURM_JOB_ID": "4242",
    "SLURM_PROCID": "5",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "1",
    "SLURM_NTASKS": "6",
    "SLURM_STEP_NODELIST": "gpu[07-08]",
    "SLURM_JOB_NODELIST": "gpu[07-08]",
    "SLURM_STEP_TASKS_PER_NODE": "4,2",
    "SLURM_TASKS_PER_NODE": "4,2",
}


def test_expand_hostlist():
    assert expand_hostlist("vm") == ["vm"]
    assert expand_hostlist("node[01-03,07],gpu-a1") == ["node01", "node02", "node03", "node07", "gpu-a1"]
    assert expand_hostlist("rack[1-2]-n[8-9]") == ["rack1-n8", "rack1-n9", "rack2-n8", "rack2-n9"]
    assert expand_hostlist("n[098-101]") == ["n098", "n099", "n100", "n101"]
    for bad in ("node[1-3", "node1]", "node[3-1]", "node[a-b]"):
        with pytest.raises(ValueError, match="host list"):
            expand_hostlist(bad)


def test_expand_tasks_per_node():
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert expand_tasks_per_node("8") == [8]
    with pytest.raises(ValueError, match="bad item"):
        expand_tasks_per_node("2(3)")


def test_torch_env_from_an_srun_task():
    assert torch_env_from_slurm(SRUN_TASK) == {
        "RANK": "5",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "6",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "1",
        "MASTER_ADDR": "gpu07",  # rank 0 runs on the step's first node
        "MASTER_PORT": str(20000 + 4242 % 10000),
    }
    # A step on part of the job: the step's values win over the job's; the user's MASTER_* too.
    step = {**SRUN_TASK, "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "1", "SLURM_NODEID": "0"}
    step.update(SLURM_STEP_NODELIST="gpu08", SLURM_STEP_TASKS_PER_NODE="2", MASTER_PORT="31000")
    env = torch_env_from_slurm(step)
    assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["MASTER_ADDR"], env["MASTER_PORT"]) == (
        "2",
        "2",
        "gpu08",
        "31000",
    )
    missing = {k: v for k, v in SRUN_TASK.items() if k != "SLURM_PROCID"}
    with pytest.raises(ValueError, match="SLURM_PROCID is not set: run this inside an srun task"):
        torch_env_from_slurm(missing)
    with pytest.raises(ValueError, match="SLURM_PROCID=6 is outside the step's 6 tasks"):
        torch_env_from_slurm({**SRUN_TASK, "SLURM_PROCID": "6"})


def test_cluster_for_nodes_places_partitions_round_robin():
    template = {"graph_name": "g", "rpc": {"connect_timeout_s": 300}}
    mapping = cluster_for_nodes(template, ["n1", "n2"], num_parts=3, port=50051)
    assert mapping["rpc"] == {"connect_timeout_s": 300} and mapping["graph_name"] == "g"
    config = parse_cluster_config(mapping, ".", check_files=False)
    assert [(s.host, s.port, s.bind_host) for s in config.servers] == [
        ("n1", 50051, "0.0.0.0"),
        ("n2", 50051, "0.0.0.0"),
        ("n1", 50052, "0.0.0.0"),
    ]
    # What `graphstore servers` selects on node n1 under srun (SLURMD_NODENAME=n1).
    assert [s.part_id for s in servers_of_host(config.servers, aliases=("n1",))] == [0, 2]
    with pytest.raises(ValueError, match="must not list 'servers'"):
        cluster_for_nodes(mapping, ["n1"], 3, 50051)
    with pytest.raises(ValueError, match="not valid TCP ports"):
        cluster_for_nodes(template, ["n1"], 3, 65535)


def test_slurm_exec_runs_the_command_with_the_mapped_variables():
    names = ("RANK", "MASTER_ADDR", "LOCAL_WORLD_SIZE")
    script = f"import os, json; print(json.dumps({{k: os.environ[k] for k in {names!r}}}))"
    env = {**os.environ, **SRUN_TASK}
    result = subprocess.run(
        [*CLI, "slurm", "exec", "--", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == '{"RANK": "5", "MASTER_ADDR": "gpu07", "LOCAL_WORLD_SIZE": "2"}'


def test_slurm_config_writes_a_checked_cluster_yaml(tmp_path, small_graph):
    part_config, _ = small_graph
    template = tmp_path / "template.yaml"
    template.write_text(yaml.safe_dump({"graph_name": "testgraph", "part_config": part_config}))
    out = tmp_path / "job" / "cluster.yaml"
    result = subprocess.run(
        [*CLI, "slurm", "config", "--template", str(template), "--out", str(out), "--nodelist", "n[1-2]"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"wrote {out}: 2 servers (0@n1:50051, 1@n2:50051)"
    config = load_cluster_config(out)
    assert config.part_config == part_config and config.num_parts == 2


# ----- under a real Slurm ---------------------------------------------------------------------------


def _slurm_answers() -> bool:
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return False
    try:
        states = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return states.returncode == 0 and bool(re.search(r"^(idle|mixed)", states.stdout, re.M))


needs_slurm = pytest.mark.skipif(
    not _slurm_answers(), reason="no Slurm answers here (deploy/slurm/local-cluster.sh starts one)"
)
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED")


class SlurmJob:
    """``deploy/slurm/graphstore.sbatch`` submitted on one node with 2 trainers; cancelled when left."""

    def __init__(self, tmp_path: Path, part_config: str, command: list[str]):
        template = tmp_path / "template.yaml"
        template.write_text(
            yaml.safe_dump(
                {"graph_name": "testgraph", "part_config": part_config, "rpc": {"connect_timeout_s": 120}}
            )
        )
        self.output = tmp_path / "job.out"
        env = dict(os.environ)
        env.update(
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            GRAPHSTORE_TEMPLATE=str(template),
            GRAPHSTORE_CLUSTER=str(tmp_path / "cluster.yaml"),
            GRAPHSTORE_PORT=str(free_ports(1)[0]),
        )
        submit = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "--job-name",
                f"gs-test-{uuid.uuid4().hex[:6]}",
                "--nodes",
                "1",
                "--ntasks-per-node",
                "2",
                "--output",
                str(self.output),
                "--chdir",
                str(REPO),
                str(SBATCH),
                *command,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert submit.returncode == 0, submit.stderr
        self.job_id = submit.stdout.strip().split(";")[0]

    def state(self) -> tuple[str, str]:
        """``(JobState, ExitCode)`` from scontrol."""
        shown = subprocess.run(["scontrol", "show", "job", self.job_id], capture_output=True, text=True)
        state = re.search(r"JobState=(\w+)", shown.stdout)
        code = re.search(r"\bExitCode=(\S+)", shown.stdout)
        return (state.group(1) if state else "UNKNOWN", code.group(1) if code else "")

    def wait(self, timeout_s: float = 300.0) -> tuple[str, str]:
        return wait_until(
            lambda: self.state() if self.state()[0] in TERMINAL else None,
            timeout_s,
            f"Slurm job {self.job_id} to end",
            interval_s=0.5,
        )

    def log(self) -> str:
        return self.output.read_text() if self.output.exists() else ""

    def server_pids(self) -> list[int]:
        return [int(pid) for pid in re.findall(r"started server-\d+ locally \(pid (\d+)\)", self.log())]

    def cancel(self) -> None:
        subprocess.run(["scancel", self.job_id], capture_output=True, timeout=30)


@needs_slurm
def test_sbatch_example_trains_and_stops_its_servers(tmp_path, small_graph):
    part_config, _ = small_graph
    train = [
        sys.executable,
        "examples/train_dist.py",
        "--graph-name",
        "testgraph",
        "--epochs",
        "2",
        "--batch-size",
        "64",
        "--fanouts",
        "5,5",
        "--hidden",
        "16",
        "--save-model",
        "",
    ]
    job = SlurmJob(tmp_path, part_config, train)
    try:
        state, exit_code = job.wait()
        log = job.log()
        assert (state, exit_code) == ("COMPLETED", "0:0"), log
        assert re.search(r"^test accuracy: \d\.\d{4}$", log, re.M), log
        assert "2 trainer(s), distributed" in log and "[servers] every server has stopped" in log
        assert wait_gone(job.server_pids()) == []
    finally:
        job.cancel()


@needs_slurm
def test_cancelled_job_leaves_no_server_behind(tmp_path, small_graph):
    part_config, _ = small_graph
    job = SlurmJob(tmp_path, part_config, [sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        wait_until(lambda: "serving partitions 0, 1" in job.log(), 180, "the job's servers")
        pids = job.server_pids()
        assert len(pids) == 2 and all(pid_alive(pid) for pid in pids)
        job.cancel()
        assert job.wait()[0] == "CANCELLED"
        assert wait_gone(pids, timeout_s=30) == [], job.log()
    finally:
        job.cancel()
