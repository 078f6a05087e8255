"""In-memory graphs as partitioner input (PyG ``Data`` / ``HeteroData`` with the real torch_geometric,
DGL graphs through a class with DGLGraph's interface) and renamed arrays: after partitioning, every
feature row and every edge read back through a standalone DistGraph is the input's, by original ID."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from graphstore.client import DistGraph, exit_client
from graphstore.launcher.cli import main
from graphstore.partition import graph_from_arrays, partition_graph
from graphstore.partition.input_adapters import graph_from_object, parse_name_map, rename_arrays
from tests.utils.dgl_like import DGLLikeGraph


def _random_edges(gen, num_src, num_dst, num_edges):
    return torch.randint(0, num_src, (num_edges,), generator=gen), torch.randint(
        0, num_dst, (num_edges,), generator=gen
    )


@pytest.fixture
def opened():
    """``open(result, name) -> DistGraph`` in standalone mode, closed after the test."""
    exit_client()
    yield lambda result, name: DistGraph(name, part_config=result.config_path)
    exit_client()


def _check_homogeneous(g, result, src, dst, node_arrays: dict, edge_arrays: dict):
    new_nids = torch.arange(g.num_nodes())
    orig = torch.from_numpy(result.orig_nid)
    for name, values in node_arrays.items():
        torch.testing.assert_close(g.ndata[name][new_nids], values[orig])
    new_eids = torch.arange(g.num_edges())
    orig_e = torch.from_numpy(result.orig_eid)
    got_src, got_dst = g.find_edges(new_eids)
    assert torch.equal(orig[got_src], src[orig_e]) and torch.equal(orig[got_dst], dst[orig_e])
    for name, values in edge_arrays.items():
        torch.testing.assert_close(g.edata[name][new_eids], values[orig_e])


def test_pyg_data_partitions_with_its_own_names(tmp_path, opened):
    pyg = pytest.importorskip("torch_geometric.data")
    gen = torch.Generator().manual_seed(0)
    src, dst = _random_edges(gen, 120, 120, 600)
    data = pyg.Data(
        x=torch.randn(120, 5, generator=gen),
        y=torch.randint(0, 3, (120,), generator=gen),
        edge_index=torch.stack([src, dst]),
        edge_attr=torch.randn(600, 2, generator=gen),
        train_mask=torch.rand(120, generator=gen) < 0.5,
    )
    result = partition_graph(
        data, "pyg", 2, str(tmp_path / "out"), part_method="metis", balance_ntypes="train_mask"
    )
    g = opened(result, "pyg")
    assert sorted(g.ndata) == ["train_mask", "x", "y"] and sorted(g.edata) == ["edge_attr"]
    _check_homogeneous(g, result, src, dst, {"x": data.x, "y": data.y}, {"edge_attr": data.edge_attr})
    assert sum(result.part_train_nodes) == int(data.train_mask.sum())
    assert abs(result.part_train_nodes[0] - result.part_train_nodes[1]) <= 6, "balance_ntypes='train_mask'"


def _typed_input(gen):
    edges = {
        ("author", "writes", "paper"): _random_edges(gen, 30, 50, 90),
        ("paper", "cites", "paper"): _random_edges(gen, 50, 50, 150),
    }
    feats = {"paper": torch.randn(50, 4, generator=gen), "author": torch.randn(30, 3, generator=gen)}
    labels = torch.randint(0, 4, (50,), generator=gen)
    weights = torch.rand(150, generator=gen)
    return edges, feats, labels, weights


def _check_typed(g, result, edges, feats, labels, weights):
    assert g.ntypes == ["paper", "author"] or g.ntypes == ["author", "paper"]
    for ntype, values in feats.items():
        ids = torch.arange(g.num_nodes(ntype))
        orig = torch.from_numpy(result.orig_nids_per_type[ntype])
        torch.testing.assert_close(g.nodes[ntype].data["x"][ids], values[orig])
    paper_orig = torch.from_numpy(result.orig_nids_per_type["paper"])
    torch.testing.assert_close(g.nodes["paper"].data["y"][torch.arange(50)], labels[paper_orig])
    for canonical, (src, dst) in edges.items():
        eids = torch.arange(g.num_edges(canonical))
        orig_e = torch.from_numpy(result.orig_eids_per_type[":".join(canonical)])
        got_src, got_dst = g.find_edges(eids, etype=canonical)
        src_orig = torch.from_numpy(result.orig_nids_per_type[canonical[0]])
        dst_orig = torch.from_numpy(result.orig_nids_per_type[canonical[2]])
        assert torch.equal(src_orig[got_src], src[orig_e]) and torch.equal(dst_orig[got_dst], dst[orig_e])
    cites = ("paper", "cites", "paper")
    orig_e = torch.from_numpy(result.orig_eids_per_type["paper:cites:paper"])
    torch.testing.assert_close(g.edges[cites].data["w"][torch.arange(150)], weights[orig_e])


def test_pyg_hetero_data_partitions_typed(tmp_path, opened):
    pyg = pytest.importorskip("torch_geometric.data")
    edges, feats, labels, weights = _typed_input(torch.Generator().manual_seed(1))
    data = pyg.HeteroData()
    for ntype, values in feats.items():
        data[ntype].x = values
    data["paper"].y = labels
    for canonical, (src, dst) in edges.items():
        data[canonical].edge_index = torch.stack([src, dst])
    data["paper", "cites", "paper"].w = weights
    result = partition_graph(data, "pyghetero", 2, str(tmp_path / "out"), part_method="random")
    _check_typed(opened(result, "pyghetero"), result, edges, feats, labels, weights)


def test_dgl_graph_interface_typed_and_homogeneous(tmp_path, opened):
    gen = torch.Generator().manual_seed(2)
    edges, feats, labels, weights = _typed_input(gen)
    typed = DGLLikeGraph(edges, {"paper": 50, "author": 30})
    for ntype, values in feats.items():
        typed.nodes[ntype].data["x"] = values
    typed.nodes["paper"].data["y"] = labels
    typed.nodes["paper"].data["_ID"] = torch.arange(50)  # DGL's own bookkeeping: left out
    typed.edges[("paper", "cites", "paper")].data["w"] = weights
    result = partition_graph(typed, "dgltyped", 2, str(tmp_path / "typed"), part_method="metis")
    _check_typed(opened(result, "dgltyped"), result, edges, feats, labels, weights)
    exit_client()

    src, dst = _random_edges(gen, 80, 80, 300)
    homo = DGLLikeGraph({("user", "follows", "user"): (src, dst)}, {"user": 80})
    homo.ndata["features"] = torch.randn(80, 6, generator=gen)
    homo.edata["weight"] = torch.rand(300, generator=gen)
    result = partition_graph(homo, "dglhomo", 2, str(tmp_path / "homo"), part_method="random")
    g = opened(result, "dglhomo")
    assert g.ntypes == ["_N"], "one node and one edge type: a homogeneous graph, as g.ndata works in DGL"
    _check_homogeneous(
        g, result, src, dst, {"features": homo.ndata["features"]}, {"weight": homo.edata["weight"]}
    )


def test_rename_arrays_all_types_or_one_and_errors():
    edges, feats, labels, _ = _typed_input(torch.Generator().manual_seed(3))
    typed = DGLLikeGraph(edges, {"paper": 50, "author": 30})
    for ntype, values in feats.items():
        typed.nodes[ntype].data["x"] = values
    graph = graph_from_object(typed)
    renamed = rename_arrays(graph, {"x": "feat"})
    assert all("feat" in arrays and "x" not in arrays for arrays in renamed.node_data.values())
    assert all("x" in arrays for arrays in graph.node_data.values()), "the input is left unchanged"
    one = rename_arrays(graph, {"paper/x": "feat"})
    assert "feat" in one.node_data["paper"] and "x" in one.node_data["author"]
    with pytest.raises(ValueError, match="node array 'nope'.*has \\['x'\\]"):
        rename_arrays(graph, {"nope": "feat"})
    homo = graph_from_arrays(
        {"src": np.array([0, 1]), "dst": np.array([1, 0]), "x": np.ones((2, 2)), "f": np.ones(2)}
    )
    with pytest.raises(ValueError, match="'f' already exists"):
        rename_arrays(homo, {"x": "f"})
    assert parse_name_map(" x=feat , y=label", "--ndata-map") == {"x": "feat", "y": "label"}
    with pytest.raises(ValueError, match="--edata-map: expected OLD=NEW"):
        parse_name_map("weight", "--edata-map")
    with pytest.raises(TypeError, match="cannot read a graph from"):
        graph_from_object(object())


def test_cli_renames_on_the_way_in(tmp_path, capsys):
    gen = np.random.default_rng(4)
    npz = tmp_path / "g.npz"
    np.savez(
        npz,
        src=gen.integers(0, 60, 200),
        dst=gen.integers(0, 60, 200),
        x=gen.random((60, 3), dtype=np.float32),
        y=gen.integers(0, 2, 60),
        edge_attr=gen.random(200, dtype=np.float32),
    )
    out = tmp_path / "parts"
    args = ["partition", "--graph", str(npz), "--name", "g", "--num-parts", "2", "--method", "random"]
    code = main(
        [*args, "--out", str(out), "--ndata-map", "x=feat,y=label", "--edata-map", "edge_attr=weight"]
    )
    assert code == 0
    config = json.loads((out / "g.json").read_text())
    assert sorted(config["node_feats"]["_N"]) == ["feat", "label"]
    assert sorted(config["edge_feats"]["_N:_E:_N"]) == ["weight"]
    capsys.readouterr()
    code = main([*args, "--out", str(tmp_path / "other"), "--ndata-map", "z=feat"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "'z'" in err[0] and "graphstore partition: error" in err[0]
