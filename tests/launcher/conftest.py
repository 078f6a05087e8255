"""Fixtures of the launcher tests: a small partitioned graph, launch runs and server processes that are
always ended."""

from __future__ import annotations

import numpy as np
import pytest

from tests.launcher.helpers import (
    LaunchRun,
    end_process_group,
    free_ports,
    start_server_process,
    wait_serving,
    write_cluster,
)


@pytest.fixture(scope="session")
def small_graph(tmp_path_factory):
    """``(part_config, expected_feat_npy)``: a 400-node graph in 2 partitions; its features by global ID."""
    from tests.utils.graphs import make_partitioned_graph

    folder = tmp_path_factory.mktemp("launcher-graph")
    part_config, graph = make_partitioned_graph(folder, num_nodes=400, num_parts=2, feat_dim=8)
    expected = folder / "feat_by_global_id.npy"
    np.save(expected, graph["feat"][graph["orig_nid"]])
    return part_config, str(expected)


@pytest.fixture
def launcher(tmp_path):
    """Start ``graphstore launch`` runs; each is ended (with every child it reported) at teardown."""
    runs: list[LaunchRun] = []

    def start(args: list[str], env: dict | None = None, prefix: tuple[str, ...] = ()) -> LaunchRun:
        run = LaunchRun(args, tmp_path / f"launch-{len(runs)}.log", env=env, prefix=prefix)
        runs.append(run)
        return run

    yield start
    for run in runs:
        run.close()


@pytest.fixture
def running_servers(small_graph, tmp_path):
    """Two ``graphstore server`` processes for ``small_graph``: ``(cluster_yaml, addresses, procs)``."""
    part_config, _ = small_graph
    ports = free_ports(2)
    procs = [
        start_server_process(part_config, k, port, tmp_path / f"server-{k}.log")
        for k, port in enumerate(ports)
    ]
    try:
        addresses = [f"127.0.0.1:{port}" for port in ports]
        wait_serving(addresses, procs)
        yield write_cluster(tmp_path, part_config, ports), addresses, procs
    finally:
        for proc in procs:
            end_process_group(proc)
