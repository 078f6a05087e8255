"""Fixtures shared by the client tests that run trainer processes: a small 2-partition graph and 2 real
servers for it (one of each per test module), and the end of the trainers' forkserver after each
module."""

from __future__ import annotations

import pytest

from graphstore.launcher.local_servers import start_servers
from tests.client.optim_helpers import stop_forkserver
from tests.utils.graphs import make_partitioned_graph


@pytest.fixture(scope="module", autouse=True)
def _end_forkserver():
    """Stop the forkserver ``run_trainers`` started (a no-op when the module started none)."""
    yield
    stop_forkserver()


@pytest.fixture(scope="module")
def small_graph(tmp_path_factory):
    """``(partition config path, graph arrays)`` of a 300-node graph in 2 partitions."""
    return make_partitioned_graph(tmp_path_factory.mktemp("optim-graph"), num_nodes=300, num_parts=2)


@pytest.fixture(scope="module")
def two_servers(small_graph, tmp_path_factory):
    """One server per partition of ``small_graph``, stopped after the module."""
    group = start_servers(small_graph[0], 2, log_dir=tmp_path_factory.mktemp("optim-servers"))
    yield group
    group.stop()
