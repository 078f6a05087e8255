"""Fixtures shared by the client tests: a small 2-partition graph and 2 real servers for it (one of each
per test module) for the tests that run trainer processes, the end of the trainers' forkserver after
each module, a 3-partition graph opened in standalone mode for the loader and cache tests, and a
process that sees 2 (faked) GPUs with no device bound."""

from __future__ import annotations

import pytest
import torch

from graphstore.client.context import set_context
from graphstore.client.device import unbind_device
from graphstore.client.dist_graph import DistGraph
from graphstore.launcher.local_servers import start_servers
from tests.client.optim_helpers import stop_forkserver
from tests.utils.graphs import make_partitioned_graph, relabeled

# The loader and cache tests' graph: nodes, partitions, feature width (float32).
LOADER_GRAPH_NODES = 900
LOADER_GRAPH_PARTS = 3
LOADER_GRAPH_FEAT_DIM = 16


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


@pytest.fixture(scope="module")
def loader_graph_files(tmp_path_factory):
    """``(partition config path, graph arrays in partitioned IDs)`` of the loader tests' graph."""
    config, graph = make_partitioned_graph(
        tmp_path_factory.mktemp("loader-graph"),
        num_nodes=LOADER_GRAPH_NODES,
        num_parts=LOADER_GRAPH_PARTS,
        feat_dim=LOADER_GRAPH_FEAT_DIM,
    )
    return config, relabeled(graph)


@pytest.fixture
def standalone_graph(loader_graph_files):
    """``(DistGraph in standalone mode, graph arrays)``; the context is closed after the test."""
    config, new = loader_graph_files
    g = DistGraph("testgraph", part_config=config)
    yield g, new
    set_context(None).close()


@pytest.fixture
def unbound_device():
    """No trainer device bound before or after the test."""
    unbind_device()
    yield
    unbind_device()


@pytest.fixture
def two_gpus(monkeypatch):
    """A process that sees 2 GPUs (CUDA faked: nothing touches a device); returns the devices made
    current."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    made_current = []
    monkeypatch.setattr(torch.cuda, "set_device", made_current.append)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    return made_current
