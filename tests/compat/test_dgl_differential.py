"""The same calls on DGL 2.1 (in its own venv, as a subprocess; skipped without it) and on
graphstore.compat.dgl, compared:

- graph construction and transforms (``dgl.graph``, ``heterograph``, ``from_scipy``, ``add_self_loop``,
  ``remove_self_loop``, ``add_reverse_edges``, ``to_bidirected``, degrees): the same edges and types;
- ``partition_graph`` on the same graph: with one partition both keep every ID and give the same local
  graph (nodes, edges, ``NID`` / ``EID``, inner masks, type IDs); with several, both ID maps restore the
  input's node and edge data by original ID, and both books lay the IDs out the same way;
- a DGL partitioning read by graphstore (``load_partition_book`` on DGL's JSON, its tensor files) answers
  every book query as DGL's own book does.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch as th

import graphstore.compat.dgl as dgl
from graphstore.partition.dgl_format import read_dgl_tensors
from tests.utils.dgl_reference import require_dgl, run_dgl

pytestmark = pytest.mark.usefixtures("dgl_python")


@pytest.fixture(scope="module")
def dgl_python():
    return require_dgl()


def _arrays(tmp_path, seed=0):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 50, 200)
    dst = rng.integers(0, 50, 200)
    src[:5] = dst[:5]  # self-loops
    path = tmp_path / "in.npz"
    np.savez(path, src=src, dst=dst)
    return path, src, dst


CONSTRUCT = r"""
import sys, numpy as np, torch as th, dgl, scipy.sparse as sp
data = np.load(sys.argv[1]); src, dst = th.from_numpy(data["src"]), th.from_numpy(data["dst"])
g = dgl.graph((src, dst), num_nodes=60)
g.edata["w"] = th.arange(200, dtype=th.float32)
out = {"in_deg": g.in_degrees().numpy(), "out_deg": g.out_degrees().numpy()}
for name, h in (("loop", dgl.add_self_loop(g)), ("noloop", dgl.remove_self_loop(g)),
                ("rev", dgl.add_reverse_edges(g, copy_edata=True)), ("bi", dgl.to_bidirected(g))):
    u, v = h.edges()
    out[name + "_u"], out[name + "_v"] = u.numpy(), v.numpy()
    if "w" in h.edata:
        out[name + "_w"] = h.edata["w"].numpy()
m = sp.coo_matrix((np.ones(200), (data["src"], data["dst"])), shape=(60, 60))
u, v = dgl.from_scipy(m).edges()
out["scipy_u"], out["scipy_v"] = u.numpy(), v.numpy()
hg = dgl.heterograph({("b", "x", "a"): (src, dst), ("a", "y", "b"): (dst, src)}, {"b": 60, "a": 50})
out["ntypes"] = np.array(hg.ntypes); out["etypes"] = np.array([":".join(c) for c in hg.canonical_etypes])
np.savez(sys.argv[2], **out)
"""


def test_construction_and_transforms_match_dgl(tmp_path):
    path, src, dst = _arrays(tmp_path)
    run_dgl(CONSTRUCT, str(path), str(tmp_path / "dgl.npz"))
    ref = np.load(tmp_path / "dgl.npz")
    g = dgl.graph((th.from_numpy(src), th.from_numpy(dst)), num_nodes=60)
    g.edata["w"] = th.arange(200, dtype=th.float32)
    np.testing.assert_array_equal(g.in_degrees().numpy(), ref["in_deg"])
    np.testing.assert_array_equal(g.out_degrees().numpy(), ref["out_deg"])
    for name, h in (
        ("loop", dgl.add_self_loop(g)),
        ("noloop", dgl.remove_self_loop(g)),
        ("rev", dgl.add_reverse_edges(g, copy_edata=True)),
    ):
        u, v = h.edges()
        np.testing.assert_array_equal(u.numpy(), ref[name + "_u"], err_msg=name)
        np.testing.assert_array_equal(v.numpy(), ref[name + "_v"], err_msg=name)
        np.testing.assert_array_equal(h.edata["w"].numpy(), ref[name + "_w"], err_msg=name)
    u, v = dgl.to_bidirected(g).edges()  # the same simple graph; DGL leaves the order open
    assert set(zip(u.tolist(), v.tolist(), strict=True)) == set(
        zip(ref["bi_u"].tolist(), ref["bi_v"].tolist(), strict=True)
    )
    assert u.numel() == ref["bi_u"].size
    m = sp.coo_matrix((np.ones(200), (src, dst)), shape=(60, 60))
    u, v = dgl.from_scipy(m).edges()
    np.testing.assert_array_equal(u.numpy(), ref["scipy_u"])
    np.testing.assert_array_equal(v.numpy(), ref["scipy_v"])
    hg = dgl.heterograph({("b", "x", "a"): (src, dst), ("a", "y", "b"): (dst, src)}, {"b": 60, "a": 50})
    assert hg.ntypes == list(ref["ntypes"])
    assert [":".join(c) for c in hg.canonical_etypes] == list(ref["etypes"])


PARTITION = r"""
import sys, json, numpy as np, torch as th, dgl
data = np.load(sys.argv[1])
out_dir, num_parts, method = sys.argv[2], int(sys.argv[3]), sys.argv[4]
typed = sys.argv[5] == "1"
if typed:
    g = dgl.heterograph({("a", "r", "b"): (th.from_numpy(data["src"]) % 150, th.from_numpy(data["dst"])),
                         ("b", "s", "b"): (th.from_numpy(data["dst"]), th.from_numpy(data["src"]))},
                        {"a": 150, "b": 300})
    g.nodes["b"].data["feat"] = th.from_numpy(data["feat"])
    g.edges["s"].data["w"] = th.from_numpy(data["w"])
else:
    g = dgl.graph((th.from_numpy(data["src"]), th.from_numpy(data["dst"])), num_nodes=300)
    g.ndata["feat"] = th.from_numpy(data["feat"]); g.edata["w"] = th.from_numpy(data["w"])
nids, eids = dgl.distributed.partition_graph(
    g, "d", num_parts, out_dir, part_method=method, return_mapping=True
)
out = {}
if typed:
    for t, ids in nids.items(): out["nids/" + t] = ids.numpy()
    for c, ids in eids.items(): out["eids/" + ":".join(c)] = ids.numpy()
else:
    out["nids"], out["eids"] = nids.numpy(), eids.numpy()
config = out_dir + "/d.json"
n, e = g.num_nodes(), g.num_edges()
for k in range(num_parts):
    part_g, _, _, gpb, _, _, _ = dgl.distributed.load_partition(config, k, load_feats=False)
    u, v = part_g.edges()
    out[f"{k}/u"], out[f"{k}/v"] = u.numpy(), v.numpy()
    for key in ("_ID", "inner_node", "part_id", "_TYPE"):
        if key in part_g.ndata: out[f"{k}/n{key}"] = part_g.ndata[key].numpy()
    for key in ("_ID", "inner_edge", "_TYPE"):
        if key in part_g.edata: out[f"{k}/e{key}"] = part_g.edata[key].numpy()
    out[f"{k}/nid2partid"] = gpb.nid2partid(th.arange(n)).numpy()
    out[f"{k}/eid2partid"] = gpb.eid2partid(th.arange(e)).numpy()
    out[f"{k}/partid2nids"] = gpb.partid2nids(k).numpy()
    out[f"{k}/nid2localnid"] = gpb.nid2localnid(gpb.partid2nids(k), k).numpy()
    for kind, count, mapper in (("n", n, gpb.map_to_per_ntype), ("e", e, gpb.map_to_per_etype)):
        types, per_type = mapper(th.arange(count))
        out[f"{k}/{kind}type"], out[f"{k}/per_{kind}type"] = types.numpy(), per_type.numpy()
    out[f"{k}/ntype_offset"] = np.array(gpb.local_ntype_offset)
    out[f"{k}/etype_offset"] = np.array(gpb.local_etype_offset)
np.savez(out_dir + "/ref.npz", **out)
"""

CASES = [(1, "random", False), (1, "random", True), (2, "metis", False), (2, "random", True)]


def _graph_arrays(tmp_path):
    rng = np.random.default_rng(7)
    arrays = {
        "src": rng.integers(0, 300, 1500),
        "dst": rng.integers(0, 300, 1500),
        "feat": rng.standard_normal((300, 3)).astype(np.float32),
        "w": rng.standard_normal(1500).astype(np.float32),
    }
    np.savez(tmp_path / "g.npz", **arrays)
    return arrays


def _our_graph(a, typed):
    if typed:
        g = dgl.heterograph(
            {
                ("a", "r", "b"): (th.from_numpy(a["src"]) % 150, th.from_numpy(a["dst"])),
                ("b", "s", "b"): (th.from_numpy(a["dst"]), th.from_numpy(a["src"])),
            },
            {"a": 150, "b": 300},
        )
        g.nodes["b"].data["feat"] = th.from_numpy(a["feat"])
        g.edges["s"].data["w"] = th.from_numpy(a["w"])
        return g
    g = dgl.graph((th.from_numpy(a["src"]), th.from_numpy(a["dst"])), num_nodes=300)
    g.ndata["feat"] = th.from_numpy(a["feat"])
    g.edata["w"] = th.from_numpy(a["w"])
    return g


def _restore(rows_per_part, orig):
    out = np.empty_like(np.concatenate(rows_per_part))
    out[np.asarray(orig)] = np.concatenate(rows_per_part)
    return out


@pytest.mark.parametrize("num_parts, method, typed", CASES)
def test_partitioning_matches_dgl(tmp_path, num_parts, method, typed):
    a = _graph_arrays(tmp_path)
    dgl_dir = tmp_path / "dgl"
    run_dgl(PARTITION, str(tmp_path / "g.npz"), str(dgl_dir), str(num_parts), method, "1" if typed else "0")
    ref = np.load(dgl_dir / "ref.npz")
    g = _our_graph(a, typed)
    nids, eids = dgl.distributed.partition_graph(
        g, "d", num_parts, str(tmp_path / "ours"), part_method=method, return_mapping=True
    )
    ntype, etype_key = ("b", "b:s:b") if typed else ("_N", "_N:_E:_N")
    our_nids = (nids[ntype] if typed else nids).numpy()
    our_eids = (eids[("b", "s", "b")] if typed else eids).numpy()
    dgl_nids = ref[f"nids/{ntype}"] if typed else ref["nids"]
    dgl_eids = ref[f"eids/{etype_key}"] if typed else ref["eids"]
    if num_parts == 1:  # both keep every ID
        for ours, theirs in ((our_nids, dgl_nids), (our_eids, dgl_eids)):
            np.testing.assert_array_equal(ours, theirs)
            np.testing.assert_array_equal(ours, np.arange(ours.size))
    # Both maps restore the input's data by original ID: ours from our files, DGL's from its files.
    ours_feat, ours_w, theirs_feat, theirs_w = [], [], [], []
    for k in range(num_parts):
        _, node_feats, edge_feats, *_ = dgl.distributed.load_partition(str(tmp_path / "ours" / "d.json"), k)
        ours_feat.append(node_feats[f"{ntype}/feat"].numpy())
        ours_w.append(edge_feats[f"{etype_key}/w"].numpy())
        theirs_feat.append(read_dgl_tensors(str(dgl_dir / f"part{k}" / "node_feat.dgl"))[f"{ntype}/feat"][0])
        edge_data = read_dgl_tensors(str(dgl_dir / f"part{k}" / "edge_feat.dgl"))
        theirs_w.append(edge_data[f"{etype_key}/w"][0])
    np.testing.assert_array_equal(_restore(ours_feat, our_nids), a["feat"])
    np.testing.assert_array_equal(_restore(theirs_feat, dgl_nids), a["feat"])
    np.testing.assert_array_equal(_restore(ours_w, our_eids), a["w"])
    np.testing.assert_array_equal(_restore(theirs_w, dgl_eids), a["w"])
    n, e = g.num_nodes(), g.num_edges()
    for k in range(num_parts):
        # graphstore reading DGL's partitioning answers as DGL's own book.
        gpb = dgl.distributed.load_partition_book(str(dgl_dir / "d.json"), k)[0]
        np.testing.assert_array_equal(gpb.nid2partid(th.arange(n)).numpy(), ref[f"{k}/nid2partid"])
        np.testing.assert_array_equal(gpb.eid2partid(th.arange(e)).numpy(), ref[f"{k}/eid2partid"])
        np.testing.assert_array_equal(gpb.partid2nids(k).numpy(), ref[f"{k}/partid2nids"])
        np.testing.assert_array_equal(
            gpb.nid2localnid(gpb.partid2nids(k), k).numpy(), ref[f"{k}/nid2localnid"]
        )
        for kind, count in (("n", n), ("e", e)):
            mapper = gpb.map_to_per_ntype if kind == "n" else gpb.map_to_per_etype
            types, per_type = mapper(th.arange(count))
            np.testing.assert_array_equal(types.numpy(), ref[f"{k}/{kind}type"])
            np.testing.assert_array_equal(per_type.numpy(), ref[f"{k}/per_{kind}type"])
        assert gpb.local_ntype_offset == ref[f"{k}/ntype_offset"].tolist()
        assert gpb.local_etype_offset == ref[f"{k}/etype_offset"].tolist()
        # Our own book lays the IDs out as DGL's: per partition, each type one range, types in order.
        ours = dgl.distributed.load_partition_book(str(tmp_path / "ours" / "d.json"), k)[0]
        types, _ = ours.map_to_per_ntype(ours.partid2nids(k))
        assert bool((types[1:] >= types[:-1]).all())
        if num_parts == 1:  # the same IDs: the same local graph
            part_g = dgl.distributed.load_partition(str(tmp_path / "ours" / "d.json"), k)[0]
            _same_local_graph(part_g, ref, k)


def _same_local_graph(part_g, ref, k):
    u, v = part_g.edges()
    np.testing.assert_array_equal(part_g.ndata["_ID"].numpy(), ref[f"{k}/n_ID"])
    np.testing.assert_array_equal(part_g.edata["_ID"].numpy(), ref[f"{k}/e_ID"])
    np.testing.assert_array_equal(u.numpy(), ref[f"{k}/u"])
    np.testing.assert_array_equal(v.numpy(), ref[f"{k}/v"])
    np.testing.assert_array_equal(part_g.ndata["inner_node"].numpy(), ref[f"{k}/ninner_node"])
    np.testing.assert_array_equal(part_g.edata["inner_edge"].numpy(), ref[f"{k}/einner_edge"])
    if f"{k}/n_TYPE" in ref:
        np.testing.assert_array_equal(part_g.ndata["_TYPE"].numpy(), ref[f"{k}/n_TYPE"])
        np.testing.assert_array_equal(part_g.edata["_TYPE"].numpy(), ref[f"{k}/e_TYPE"])
