"""Typed sampling on a typed graph, standalone and over 3 servers (RPC only / co-located): every sampled
edge is an original edge of its type with its ID, fanouts per type, weights and exclusion per type, bad
input, and typed blocks whose per-type IDs agree with the frontier."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch

from graphstore.client import api
from graphstore.client.block import to_block
from graphstore.client.constants import EID, NID
from graphstore.client.dist_graph import DistGraph
from graphstore.client.dist_tensor import DistTensor
from graphstore.client.sampling import sample_neighbors
from graphstore.launcher.local_servers import start_servers
from tests.client.test_dist_tensor import cluster_config, unique_name
from tests.utils.sampling import expected_sample_counts
from tests.utils.typed_graphs import CANONICAL_ETYPES, NUM_NODES, make_typed_partitions, relabeled_typed

NUM_PARTS = 3
MODES = ["standalone", "remote", "colocated"]
WRITES, CITES, AFFILIATED, HAS_TOPIC, REV_WRITES = CANONICAL_ETYPES
ALL_SEEDS = {t: torch.arange(n) for t, n in NUM_NODES.items()}


@pytest.fixture(scope="module")
def typed_files(tmp_path_factory):
    result, arrays = make_typed_partitions(tmp_path_factory.mktemp("typed"), NUM_PARTS, "metis")
    return result, relabeled_typed(result, arrays)


@pytest.fixture(scope="module")
def typed_cluster(typed_files, tmp_path_factory):
    group = start_servers(typed_files[0].config_path, NUM_PARTS, log_dir=tmp_path_factory.mktemp("logs"))
    yield group
    group.stop()


def open_graph(request, result, mode: str) -> DistGraph:
    api.exit_client()
    if mode != "standalone":
        group = request.getfixturevalue("typed_cluster")
        config = cluster_config(group, result.config_path, "off" if mode == "remote" else "on")
        config["graph_name"] = "typed"
        api.initialize(config)
    return DistGraph("typed", part_config=result.config_path)


@pytest.fixture(params=MODES)
def g(request, typed_files):
    try:
        yield open_graph(request, typed_files[0], request.param)
    finally:
        api.exit_client()


@pytest.fixture
def standalone(request, typed_files):
    try:
        yield open_graph(request, typed_files[0], "standalone")
    finally:
        api.exit_client()


def degrees(new, canonical, edge_dir: str, exclude=None) -> np.ndarray:
    """Per node of the seed type: its edges of ``canonical`` (in- or out-), without ``exclude``."""
    src, dst = new["edges"][canonical]
    keep = np.ones(src.size, dtype=bool) if exclude is None else ~np.isin(np.arange(src.size), exclude)
    ends, ntype = (dst, canonical[2]) if edge_dir == "in" else (src, canonical[0])
    return np.bincount(ends[keep], minlength=NUM_NODES[ntype])


def check_frontier(frontier, new, fanouts, edge_dir="in", replace=False, exclude=None):
    """Every edge is the original edge of its type with its ID; each seed got its fanout per type."""
    for canonical in CANONICAL_ETYPES:
        src, dst, eid = frontier.arrays(canonical)
        src_all, dst_all = new["edges"][canonical]
        np.testing.assert_array_equal(src_all[eid], src)
        np.testing.assert_array_equal(dst_all[eid], dst)
        excluded = None if exclude is None else exclude.get(canonical)
        if excluded is not None:
            assert not np.isin(eid, excluded).any()
        deg = degrees(new, canonical, edge_dir, excluded)
        center = dst if edge_dir == "in" else src
        got = np.bincount(center, minlength=deg.size)
        expected = expected_sample_counts(deg, fanouts[canonical], replace)
        np.testing.assert_array_equal(got, expected, err_msg=str(canonical))
        if not replace:
            assert np.unique(eid).size == eid.size


FANOUTS = {WRITES: 2, CITES: 3, AFFILIATED: 0, HAS_TOPIC: -1, REV_WRITES: 1}


@pytest.mark.parametrize("edge_dir", ["in", "out"])
def test_sampled_typed_edges_are_original_edges_with_fanout_per_type(g, typed_files, edge_dir):
    _, new = typed_files
    fanout = {"writes": 2, "paper:cites:paper": 3, AFFILIATED: 0, "has_topic": -1, "rev_writes": 1}
    for replace in (False, True):
        frontier = sample_neighbors(g, ALL_SEEDS, fanout, edge_dir=edge_dir, replace=replace, random_seed=3)
        check_frontier(frontier, new, FANOUTS, edge_dir, replace)
        assert frontier.num_edges(AFFILIATED) == 0
        again = sample_neighbors(g, ALL_SEEDS, fanout, edge_dir=edge_dir, replace=replace, random_seed=3)
        for canonical in CANONICAL_ETYPES:
            assert torch.equal(frontier.edata[EID][canonical], again.edata[EID][canonical])
    one = sample_neighbors(g, {"paper": [5, 7]}, 2)
    assert set(one.edata[EID]) == set(CANONICAL_ETYPES) and one.num_edges(AFFILIATED) == 0


def test_weighted_and_excluding_sampling_per_type(g, typed_files):
    _, new = typed_files
    num_cites = g.num_edges("cites")
    weights = (torch.arange(num_cites) % 3 != 0).float()  # a third of the cites edges never drawn
    name = unique_name("w")
    tensor = DistTensor(
        (num_cites,), torch.float32, name=name, part_policy=g.get_edge_partition_policy("cites")
    )
    tensor[torch.arange(num_cites)] = weights
    g.edges["cites"].data["w"] = tensor
    frontier = sample_neighbors(g, ALL_SEEDS, 2, prob={"cites": "w"}, random_seed=1)
    eid = frontier.arrays(CITES)[2]
    assert eid.size and (eid % 3 != 0).all()
    check_frontier(
        frontier, new, {c: 2 for c in CANONICAL_ETYPES}, exclude={CITES: np.arange(0, num_cites, 3)}
    )

    rng = np.random.default_rng(0)
    exclude = {WRITES: rng.choice(400, 200, replace=False), REV_WRITES: np.arange(0, 400, 2)}
    for edge_dir in ("in", "out"):
        frontier = sample_neighbors(
            g,
            ALL_SEEDS,
            2,
            edge_dir=edge_dir,
            exclude_edges={"writes": exclude[WRITES], REV_WRITES: exclude[REV_WRITES]},
        )
        check_frontier(frontier, new, {c: 2 for c in CANONICAL_ETYPES}, edge_dir, exclude=exclude)


def test_bad_typed_input_names_what_is_wrong(standalone):
    g = standalone
    with pytest.raises(
        KeyError, match=r"unknown or ambiguous edge types \['likes'\]; the graph has \['author:writes"
    ):
        sample_neighbors(g, {"paper": [0]}, {"likes": 2, "writes": 1})
    with pytest.raises(
        ValueError, match=r"no fanout for edge types \['paper:cites:paper', .*'paper:rev_writes:author'\]"
    ):
        sample_neighbors(g, {"paper": [0]}, {"writes": 2, "affiliated_with": 1})
    with pytest.raises(KeyError, match=r"unknown node type 'venue'; the graph has \['paper'"):
        sample_neighbors(g, {"venue": [0]}, 2)
    with pytest.raises(ValueError, match="must be {ntype: IDs}"):
        sample_neighbors(g, torch.tensor([0, 1]), 2)
    with pytest.raises(IndexError, match="topic"):
        sample_neighbors(g, {"topic": [2]}, 2)
    with pytest.raises(KeyError, match=r"edge types \['author:writes:paper', .*\] have no such edge data"):
        sample_neighbors(g, {"paper": [0]}, 2, prob="weight")
    only_cites = {c: 0 for c in CANONICAL_ETYPES} | {CITES: 2}
    assert sample_neighbors(g, {"paper": [0, 1, 2]}, only_cites, prob="weight").num_edges(CITES) >= 0
    with pytest.raises(ValueError, match="fanout must be -1"):
        sample_neighbors(g, {"paper": [0]}, -2)


def test_typed_blocks_keep_per_type_ids_consistent(standalone, typed_files):
    g = standalone
    _, new = typed_files
    seeds = {"paper": torch.tensor([9, 3, 60, 1]), "author": torch.tensor([70, 2])}
    frontier = sample_neighbors(g, seeds, 3, random_seed=0)
    block = to_block(frontier, seeds)
    assert block.srctypes == block.dsttypes == list(NUM_NODES) and block.canonical_etypes == CANONICAL_ETYPES
    for ntype in NUM_NODES:
        nids = block.srcnodes[ntype].data[NID]
        num_dst = block.num_dst_nodes(ntype)
        assert num_dst == len(seeds.get(ntype, []))
        assert torch.equal(nids[:num_dst], seeds.get(ntype, torch.empty(0, dtype=torch.int64)))
        assert torch.equal(block.dstdata[NID][ntype], nids[:num_dst])
        assert nids.unique().numel() == nids.numel() == block.num_src_nodes(ntype)
    for canonical in CANONICAL_ETYPES:
        src, dst = block.edges(etype=canonical)
        f_src, f_dst, f_eid = frontier.arrays(canonical)
        np.testing.assert_array_equal(block.srcdata[NID][canonical[0]][src].numpy(), f_src)
        np.testing.assert_array_equal(block.dstdata[NID][canonical[2]][dst].numpy(), f_dst)
        np.testing.assert_array_equal(block.edata[EID][canonical].numpy(), f_eid)
        np.testing.assert_array_equal(new["edges"][canonical][0][f_eid], f_src)
    # a relation's block is a one-type block over the typed block's frames
    writes = block["writes"]
    assert writes.srctypes == ["author"] and writes.dsttypes == ["paper"]
    assert writes.num_src_nodes() == block.num_src_nodes("author") and writes.num_dst_nodes() == 4
    assert writes.srcdata is block.srcnodes["author"].data and writes.dstdata is block.dstnodes["paper"].data
    writes.dstdata["h"] = torch.ones(4, 2)
    assert torch.equal(block.dstdata["h"]["paper"], torch.ones(4, 2))
    assert block[WRITES] is writes and torch.equal(writes.edata[EID], block.edata[EID][WRITES])
    assert writes.in_degrees().sum() == block.num_edges("writes")
    with pytest.raises(KeyError, match="several edge types"):
        block.edges()
    with pytest.raises(ValueError, match="not in dst_nodes"):
        to_block(frontier, {"paper": seeds["paper"]})


def test_typed_frontiers_and_blocks_leave_no_cyclic_garbage(standalone):
    """A batch's arrays go with its last reference, not at the next cyclic collection."""
    g = standalone
    seeds = {"paper": torch.arange(20), "author": torch.arange(5)}
    gc.collect()
    gc.disable()
    try:
        frontier = sample_neighbors(g, seeds, 3)
        frontier.edges(etype="writes")
        block = to_block(frontier, seeds)
        block["writes"].srcdata["h"] = torch.zeros(block.num_src_nodes("author"), 1)
        block.edata[EID], block.srcdata[NID]  # noqa: B018
        del frontier, block
        assert gc.collect() == 0
    finally:
        gc.enable()
