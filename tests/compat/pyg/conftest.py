"""Fixtures of the PyG backend tests: a generated graph and a typed graph in 2 partitions (one of each per
module), opened standalone per test (the context closed after it), with their arrays in the partitioned
IDs the servers serve."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch_geometric")

from graphstore.client.context import set_context  # noqa: E402
from graphstore.client.dist_graph import DistGraph  # noqa: E402
from tests.utils.graphs import make_partitioned_graph, relabeled  # noqa: E402
from tests.utils.typed_graphs import make_typed_partitions, relabeled_typed  # noqa: E402


@pytest.fixture(scope="module")
def homo_files(tmp_path_factory):
    """``(partition config, arrays in partitioned IDs)`` of a 600-node graph in 2 partitions."""
    config, graph = make_partitioned_graph(
        tmp_path_factory.mktemp("pyg-homo"), num_nodes=600, num_parts=2, feat_dim=8, method="metis"
    )
    return config, relabeled(graph)


@pytest.fixture
def homo_graph(homo_files):
    """``(standalone DistGraph, arrays)``."""
    config, new = homo_files
    g = DistGraph("testgraph", part_config=config)
    yield g, new
    set_context(None).close()


@pytest.fixture(scope="module")
def typed_files(tmp_path_factory):
    """``(partition config, {"edges", "nodes", "cites_weight"})`` of the typed test graph in 2 partitions."""
    result, arrays = make_typed_partitions(tmp_path_factory.mktemp("pyg-typed"), num_parts=2)
    new = relabeled_typed(result, arrays)
    orig = result.orig_eids_per_type["paper:cites:paper"]
    new["cites_weight"] = np.asarray(arrays["edge/paper:cites:paper/weight"])[orig]
    return result.config_path, new


@pytest.fixture
def typed_graph(typed_files):
    """``(standalone DistGraph, relabeled arrays)``."""
    config, new = typed_files
    g = DistGraph("typed", part_config=config)
    yield g, new
    set_context(None).close()
