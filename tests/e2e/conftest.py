"""Fixtures of the end-to-end tests: a generated graph partitioned with the real command line, and
runners for ``graphstore launch`` and standalone example runs that always end their processes."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.launcher.helpers import (
    CLI,
    REPO,
    LaunchRun,
    clean_env,
    free_ports,
    kill_pids,
    wait_gone,
    write_cluster,
)
from tests.utils.graphs import make_partitioned_graph, relabeled

GRAPH_NAME = "e2e"
NUM_CLASSES = 4
EXAMPLES = REPO / "examples"


def run_cli(args: list[str], timeout_s: float = 120.0) -> subprocess.CompletedProcess:
    """A ``graphstore`` subcommand; fails the test with its output when it exits non-zero."""
    proc = subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout_s, cwd=str(REPO), env=clean_env()
    )
    assert proc.returncode == 0, f"graphstore {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}"
    return proc


@pytest.fixture(scope="session")
def e2e_graph(tmp_path_factory) -> str:
    """The demo's first two steps on a small graph: ``graphstore generate`` then ``graphstore partition``
    into 2 METIS partitions. Returns the partition config path."""
    folder = tmp_path_factory.mktemp("e2e-graph")
    npz = folder / "graph.npz"
    run_cli(
        [
            "generate",
            "--num-nodes",
            "3000",
            "--avg-degree",
            "8",
            "--feat-dim",
            "16",
            "--num-classes",
            str(NUM_CLASSES),
            "--seed",
            "0",
            "--out",
            str(npz),
        ]
    )
    run_cli(
        [
            "partition",
            "--graph",
            str(npz),
            "--name",
            GRAPH_NAME,
            "--num-parts",
            "2",
            "--method",
            "metis",
            "--out",
            str(folder / "parts"),
        ]
    )
    config = folder / "parts" / f"{GRAPH_NAME}.json"
    assert config.is_file()
    return str(config)


@pytest.fixture
def launch_job(tmp_path):
    """``launch_job(part_config, command, num_trainers=2) -> (exit code, output, cluster_yaml)``: a
    2-server cluster on free loopback ports running the trainers (``command`` is a list, or a callable
    that gets the cluster YAML's path and returns the list); every process it started is gone after."""
    runs: list[LaunchRun] = []

    def launch(part_config: str, command, num_trainers: int = 2, timeout_s: float = 240.0):
        folder = tmp_path / f"launch-{len(runs)}"
        folder.mkdir()
        cluster = write_cluster(
            folder, part_config, free_ports(2), graph_name=GRAPH_NAME, trainers_per_host=num_trainers
        )
        if callable(command):
            command = command(cluster)
        run = LaunchRun(["--config", str(cluster), "--", *command], folder / "launch.log", env=clean_env())
        runs.append(run)
        code = run.wait(timeout_s)
        leftovers = wait_gone(run.child_pids(), timeout_s=15)
        assert not leftovers, f"processes {leftovers} outlived launch; output:\n{run.output}"
        return code, run.output, cluster

    yield launch
    for run in runs:
        pids = run.child_pids()
        run.close()
        kill_pids(pids)


def example_command(script: str, *args: str) -> list[str]:
    return [sys.executable, str(EXAMPLES / script), *args]


def run_standalone(script: str, *args: str, timeout_s: float = 240.0, env: dict | None = None) -> str:
    """Run an example in standalone mode (no servers, no cluster variables but those in ``env``);
    returns its output."""
    proc = subprocess.run(
        example_command(script, *args),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=str(REPO),
        env={**clean_env(), **(env or {})},
        stdin=subprocess.DEVNULL,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{output}"
    return output


def assert_same_first_epoch(standalone_json: Path, distributed_json: Path) -> tuple[dict, dict]:
    """The metrics of a standalone and a distributed run: their modes, and identical first-epoch batch
    losses (more than one batch). Returns both results."""
    import json

    standalone = json.loads(standalone_json.read_text())
    distributed = json.loads(distributed_json.read_text())
    assert standalone["mode"] == "standalone" and distributed["mode"] == "distributed"
    losses_a = standalone["epochs"][0]["batch_losses_rank0"]
    losses_b = distributed["epochs"][0]["batch_losses_rank0"]
    assert len(losses_a) > 1
    assert losses_a == losses_b
    return standalone, distributed


def short_run_args(part_config: str, metrics_json: Path) -> list[str]:
    """The flags of a short example run on the e2e graph: 2 epochs of small batches, figures written to
    ``metrics_json``, no model file."""
    return [
        "--graph-name",
        GRAPH_NAME,
        "--part-config",
        part_config,
        "--epochs",
        "2",
        "--batch-size",
        "256",
        "--fanouts",
        "5,5",
        "--metrics-json",
        str(metrics_json),
        "--save-model",
        "",
    ]


def last_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def result_path(tmp_path: Path, name: str) -> str:
    return str(tmp_path / name)


@dataclass
class CompatGraph:
    """A standalone DistGraph opened through the DGL compatibility namespace."""

    graph: object  # graphstore.compat.dgl.distributed.DistGraph
    ref: dict  # the graph's arrays in partitioned IDs (what DistGraph serves)
    config: str  # the partition config path


@pytest.fixture(scope="session")
def compat_files(tmp_path_factory) -> tuple[str, dict]:
    """A 600-node graph in 2 partitions: ``(partition config path, arrays in partitioned IDs)``."""
    folder = tmp_path_factory.mktemp("compat-graph")
    config, graph = make_partitioned_graph(folder, num_nodes=600, num_parts=2, feat_dim=8, method="random")
    return config, relabeled(graph)


@pytest.fixture
def compat_graph(compat_files):
    """``dgl.distributed.DistGraph("testgraph", part_config=...)`` (standalone), closed after the test."""
    import graphstore.compat.dgl as dgl

    config, ref = compat_files
    dgl.distributed.exit_client()
    yield CompatGraph(dgl.distributed.DistGraph("testgraph", part_config=config), ref, config)
    dgl.distributed.exit_client()
