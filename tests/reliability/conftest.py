"""Fixtures of the reliability tests: one small partitioned graph, a throw-away CA, and server
processes that are always ended."""

from __future__ import annotations

import numpy as np
import pytest

from tests.launcher.conftest import launcher  # noqa: F401  (the launch-runs fixture, shared)
from tests.reliability.helpers import make_certs, openssl_available, stop_all

NUM_NODES = 600
NUM_PARTS = 2


@pytest.fixture(scope="session")
def graph(tmp_path_factory):
    """``(part_config, graph arrays, feat in global ID order)``: a 600-node graph in 2 partitions."""
    from tests.utils.graphs import make_partitioned_graph

    folder = tmp_path_factory.mktemp("reliability-graph")
    part_config, arrays = make_partitioned_graph(folder, num_nodes=NUM_NODES, num_parts=NUM_PARTS, feat_dim=8)
    feat_by_global = arrays["feat"][arrays["orig_nid"]]
    np.save(folder / "feat_by_global_id.npy", feat_by_global)
    return part_config, arrays, feat_by_global


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    """A CA and a certificate for 127.0.0.1 made at run time with the ``openssl`` command."""
    if not openssl_available():
        pytest.skip("needs the openssl command line to make a test CA")
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def servers():
    """A list a test appends its :class:`ServerProc` objects to; every one is ended at teardown."""
    started: list = []
    yield started
    stop_all(started)
