"""PyG's FeatureStore and GraphStore over a DistGraph: values round-trip, layouts agree, writes and
refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import EdgeAttr, TensorAttr

from graphstore.compat.pyg import FeatureStore, GraphStore, stores


def test_feature_store_reads_the_stored_rows_under_pyg_names(homo_graph):
    g, new = homo_graph
    fs = FeatureStore(g)
    assert {(a.group_name, a.attr_name) for a in fs.get_all_tensor_attrs()} == {(None, "x"), (None, "y")}
    ids = torch.tensor([5, 0, 599, 5, 300])
    x = fs.get_tensor(group_name=None, attr_name="x", index=ids)
    assert torch.equal(x, torch.from_numpy(new["feat"][ids.numpy()]))
    assert fs.get_tensor_size(group_name=None, attr_name="x") == (600, 8)
    xs, ys = fs.multi_get_tensor([TensorAttr(None, "x", ids), TensorAttr(None, "y", ids)])
    assert torch.equal(xs, x)
    assert np.array_equal(ys.numpy(), new["label"][ids.numpy()])
    # A stored name that is not mapped is read under its own name; every row with index None.
    mask = fs.get_tensor(group_name=None, attr_name="train_mask", index=None)
    assert np.array_equal(mask.numpy(), new["train_mask"])
    # names= maps other PyG names, and only those are listed for the loaders.
    custom = FeatureStore(g, names={"features": "feat"})
    assert [(a.group_name, a.attr_name) for a in custom.get_all_tensor_attrs()] == [(None, "features")]
    with pytest.raises(KeyError, match="node type"):
        fs.get_tensor(group_name="paper", attr_name="x", index=ids)


def test_put_tensor_creates_writes_and_remove_deletes(homo_graph):
    g, _ = homo_graph
    fs = FeatureStore(g)
    rows = torch.arange(600 * 2, dtype=torch.float32).reshape(600, 2)
    assert fs.put_tensor(rows, group_name=None, attr_name="emb", index=None)
    assert (None, "emb") in {(a.group_name, a.attr_name) for a in fs.get_all_tensor_attrs()}
    ids = torch.tensor([3, 1])
    assert torch.equal(fs.get_tensor(group_name=None, attr_name="emb", index=ids), rows[ids])
    fs.put_tensor(torch.zeros(2, 2), group_name=None, attr_name="emb", index=ids)
    assert torch.equal(fs.get_tensor(group_name=None, attr_name="emb", index=ids), torch.zeros(2, 2))
    assert torch.equal(fs.get_tensor(group_name=None, attr_name="emb", index=torch.tensor([2])), rows[[2]])
    assert fs.remove_tensor(group_name=None, attr_name="emb", index=None)
    assert "emb" not in g.ndata
    assert not fs.remove_tensor(group_name=None, attr_name="emb", index=None)
    # Features loaded from the partition files are read-only.
    with pytest.raises(PermissionError, match="read-only"):
        fs.put_tensor(torch.zeros(1, 8), group_name=None, attr_name="x", index=torch.tensor([0]))
    with pytest.raises(KeyError, match="put the full tensor first"):
        fs.put_tensor(torch.zeros(1, 2), group_name=None, attr_name="missing", index=torch.tensor([0]))


def test_graph_store_layouts_hold_the_partitioned_edges(homo_graph):
    g, new = homo_graph
    fs, gs = stores(g)
    attrs = gs.get_all_edge_attrs()
    assert {(a.edge_type, a.layout.value, a.size) for a in attrs} == {
        (None, layout, (600, 600)) for layout in ("coo", "csc", "csr")
    }
    row, col = gs.get_edge_index(edge_type=None, layout="coo")
    assert np.array_equal(row.numpy(), new["src"]) and np.array_equal(col.numpy(), new["dst"])
    src_sorted, colptr = gs.get_edge_index(edge_type=None, layout="csc")
    dst_of = np.repeat(np.arange(600), np.diff(colptr.numpy()))
    assert sorted(zip(src_sorted.tolist(), dst_of.tolist(), strict=True)) == sorted(
        zip(new["src"].tolist(), new["dst"].tolist(), strict=True)
    )
    rowptr, dst_sorted = gs.get_edge_index(edge_type=None, layout="csr")
    src_of = np.repeat(np.arange(600), np.diff(rowptr.numpy()))
    assert sorted(zip(src_of.tolist(), dst_sorted.tolist(), strict=True)) == sorted(
        zip(new["src"].tolist(), new["dst"].tolist(), strict=True)
    )
    with pytest.raises(PermissionError, match="read-only"):
        gs.put_edge_index((row, col), edge_type=None, layout="coo", size=(600, 600))


def test_typed_stores_name_node_and_edge_types(typed_graph):
    g, new = typed_graph
    fs, gs = FeatureStore(g), GraphStore(g)
    assert {(a.group_name, a.attr_name) for a in fs.get_all_tensor_attrs()} == {
        ("paper", "x"),
        ("paper", "y"),
    }
    ids = torch.tensor([7, 2, 0])
    assert torch.equal(
        fs.get_tensor(group_name="paper", attr_name="x", index=ids),
        torch.from_numpy(new["nodes"]["paper"]["feat"][ids.numpy()]),
    )
    age = fs.get_tensor(group_name="author", attr_name="age", index=ids)
    assert np.array_equal(age.numpy(), new["nodes"]["author"]["age"][ids.numpy()])
    # Edge data under the edge type's group.
    cites = ("paper", "cites", "paper")
    weight = fs.get_tensor(group_name=cites, attr_name="weight", index=ids)
    assert np.array_equal(weight.numpy(), new["cites_weight"][ids.numpy()])
    assert fs.get_tensor_size(group_name=cites, attr_name="weight") == (300,)
    sizes = {a.edge_type: a.size for a in gs.get_all_edge_attrs()}
    assert set(sizes) == set(new["edges"])
    assert sizes[("author", "writes", "paper")] == (g.num_nodes("author"), g.num_nodes("paper"))
    for canonical, (src, dst) in new["edges"].items():
        row, col = gs.get_edge_index(EdgeAttr(canonical, "coo"))
        assert np.array_equal(row.numpy(), src) and np.array_equal(col.numpy(), dst), canonical
    with pytest.raises(KeyError):
        gs.get_edge_index(EdgeAttr(("paper", "nope", "paper"), "coo"))
