"""Graphs in memory as DGL partition scripts and DGL's tests build them: ``dgl.graph`` (a function, while
``graphstore.compat.dgl.graph`` stays importable), ``heterograph``, ``from_scipy``, ``rand_graph``, the
graph's members, ``save_graphs`` / ``load_graphs``, ``dgl.backend`` and ``dgl.data``."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch as th

import graphstore.compat.dgl as dgl
from graphstore.compat.dgl.graph import DGLGraph


def test_graph_is_the_constructor_and_the_types_module_still_imports():
    g = dgl.graph(([0, 1, 2, 2], [1, 2, 0, 3]))
    assert isinstance(g, DGLGraph) and isinstance(g, dgl.DGLGraph)
    assert g.num_nodes() == 4 and g.num_edges() == 4 and g.idtype == th.int64
    assert g.ntypes == ["_N"] and g.canonical_etypes == [("_N", "_E", "_N")] and g.is_homogeneous
    g32 = dgl.graph((th.tensor([0, 1], dtype=th.int32), th.tensor([1, 2], dtype=th.int32)), num_nodes=5)
    assert g32.idtype == th.int32 and g32.num_nodes() == 5 and g32.edges()[0].dtype == th.int32
    with pytest.raises(ValueError, match="in \\[0, 2\\)"):
        dgl.graph(([0, 3], [1, 1]), num_nodes=2)


def test_members_dgls_tests_use():
    g = dgl.graph(([0, 0, 1, 2, 2], [1, 2, 2, 0, 0]), num_nodes=4)
    assert th.equal(g.nodes(), th.arange(4))
    src, dst, eid = g.edges(form="all")
    assert th.equal(eid, th.arange(5))
    u, v = g.edges(order="srcdst")
    assert u.tolist() == [0, 0, 1, 2, 2] and v.tolist() == [1, 2, 2, 0, 0]
    assert g.in_degrees().tolist() == [2, 1, 2, 0] and g.out_degrees(2) == 2
    assert g.find_edges(th.tensor([3, 1]))[0].tolist() == [2, 0]
    assert g.in_edges(0, form="eid").tolist() == [3, 4]
    assert g.out_edges(th.tensor([0]), form="all")[2].tolist() == [0, 1]
    assert g.edge_ids(th.tensor([1, 2]), th.tensor([2, 0])).tolist() == [2, 3]
    assert g.has_edges_between(th.tensor([0, 3]), th.tensor([1, 0])).tolist() == [True, False]
    indptr, indices, eids = g.adj().csc()
    assert indptr.tolist() == [0, 2, 3, 5, 5] and indices.tolist() == [2, 2, 0, 0, 1]
    assert eids.tolist() == [3, 4, 0, 1, 2]
    assert "coo" in g.formats()["created"] and g.formats(["csc"]).formats()["created"] == ["csc"]
    g.ndata["x"] = th.ones(4, 2)
    with pytest.raises(ValueError, match="expected 4 rows"):
        g.ndata["bad"] = th.ones(3)
    with g.local_scope():
        g.update_all(dgl.function.copy_u("x", "m"), dgl.function.sum("m", "h"))
        assert g.ndata["h"][:, 0].tolist() == [2.0, 1.0, 2.0, 0.0]
    assert "h" not in g.ndata


def test_heterograph_sorts_types_as_dgl_and_keeps_data_per_type():
    hg = dgl.heterograph(
        {
            ("n2", "r1", "n1"): ([0], [1]),
            ("n1", "r1", "n2"): ([0, 1], [1, 0]),
            ("n1", "r2", "n3"): ([0], [0]),
        },
        {"n3": 2, "n1": 3, "n2": 2},
    )
    assert hg.ntypes == ["n1", "n2", "n3"]
    assert hg.canonical_etypes == [("n1", "r1", "n2"), ("n1", "r2", "n3"), ("n2", "r1", "n1")]
    assert hg.get_etype_id(("n2", "r1", "n1")) == 2 and hg.get_ntype_id("n3") == 2
    assert hg.num_nodes() == 7 and hg.num_edges(("n1", "r1", "n2")) == 2 and hg.num_edges("r2") == 1
    hg.nodes["n1"].data["f"] = th.zeros(3)
    hg.edges[("n1", "r1", "n2")].data["w"] = th.ones(2)
    assert set(hg.ndata["f"]) == {"n1"} and hg.edges["r2"].data == {}
    with pytest.raises(KeyError):
        hg.num_edges("r1")  # ambiguous


def test_transforms_and_generators():
    gen_a = dgl.rand_graph(50, 400)
    th.manual_seed(3)
    a = dgl.rand_graph(50, 400).edges()
    th.manual_seed(3)
    b = dgl.rand_graph(50, 400).edges()
    assert th.equal(a[0], b[0]) and th.equal(a[1], b[1])  # torch's seed repeats it
    keys = a[0] * 50 + a[1]
    assert keys.unique().numel() == 400 and gen_a.num_edges() == 400
    bip = dgl.rand_bipartite("u", "e", "v", 10, 20, 30)
    assert bip.canonical_etypes == [("u", "e", "v")] and bip.num_nodes("v") == 20
    m = sp.random(30, 30, density=0.1, format="csr", random_state=0)
    g = dgl.from_scipy(m, eweight_name="w")
    coo = m.tocoo()
    assert g.edges()[0].tolist() == coo.row.tolist() and th.allclose(g.edata["w"], th.from_numpy(coo.data))
    g = dgl.graph(([0, 1, 1], [1, 1, 2]), num_nodes=3)
    g.edata["w"] = th.tensor([1.0, 2.0, 3.0])
    loops = dgl.add_self_loop(g, fill_data="sum")
    assert loops.edges()[0].tolist() == [0, 1, 1, 0, 1, 2] and loops.edata["w"].tolist() == [1, 2, 3, 0, 3, 3]
    assert dgl.remove_self_loop(g).edata["w"].tolist() == [1.0, 3.0]
    assert dgl.add_reverse_edges(g).edges()[0].tolist() == [0, 1, 1, 1, 2]
    bi = dgl.to_bidirected(g)
    assert list(zip(*(t.tolist() for t in bi.edges()), strict=True)) == [
        (0, 1),
        (1, 0),
        (1, 1),
        (1, 2),
        (2, 1),
    ]
    with pytest.raises(ValueError, match="same"):
        dgl.to_bidirected(dgl.heterograph({("a", "x", "b"): ([0], [0])}))


def test_save_and_load_graphs(tmp_path):
    g = dgl.graph(([0, 1], [1, 2]), idtype=th.int32)
    g.ndata["x"] = th.arange(3)
    hg = dgl.heterograph({("a", "x", "b"): ([0, 1], [0, 0])})
    hg.edges["x"].data["w"] = th.ones(2)
    dgl.save_graphs(str(tmp_path / "gs.bin"), [g, hg], {"y": th.tensor([1, 2])})
    (g2, hg2), labels = dgl.load_graphs(str(tmp_path / "gs.bin"))
    assert (
        g2.idtype == th.int32
        and th.equal(g2.ndata["x"], g.ndata["x"])
        and th.equal(labels["y"], th.tensor([1, 2]))
    )
    assert hg2.canonical_etypes == [("a", "x", "b")] and th.equal(hg2.edges["x"].data["w"], th.ones(2))
    assert len(dgl.load_graphs(str(tmp_path / "gs.bin"), [1])[0]) == 1
    (tmp_path / "graph.dgl").write_bytes((0xDD2E4FF046B4A13F).to_bytes(8, "little") + b"\0" * 8)
    with pytest.raises(ValueError, match="DGL's binary graph format"):
        dgl.load_graphs(str(tmp_path / "graph.dgl"))


def test_backend_and_data_import_as_dgls_tests_use_them():
    F = dgl.backend
    assert F.backend_name == "pytorch" and F.int64 is th.int64
    x = F.tensor([[1, 2], [3, 4]])
    assert F.asnumpy(F.gather_row(x, F.tensor([1]))).tolist() == [[3, 4]]
    assert F.as_scalar(F.sum(F.boolean_mask(F.arange(0, 4), F.tensor([1, 0, 1, 0])), 0)) == 2
    assert F.nonzero_1d(F.tensor([0, 3, 0, 1])).tolist() == [1, 3]
    assert np.array_equal(F.asnumpy(F.floor_div(F.tensor([5, 7]), 2)), [2, 3])
    with pytest.raises(NotImplementedError, match="RedditDataset"):
        dgl.data.RedditDataset()
    from graphstore.compat.dgl.data import CitationGraphDataset, WN18Dataset  # noqa: F401 - importable
