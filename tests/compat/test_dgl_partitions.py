"""What DGL's own partition tests check, on graphstore's ``dgl.distributed`` (graphs built with the compat
namespace's ``dgl.graph`` / ``dgl.heterograph``):

- ``load_partition``'s graph is DGL's local graph: inner nodes first with contiguous global IDs, halo
  nodes after, every in-edge of the inner nodes, ``NID`` / ``EID`` / ``inner_node`` / ``inner_edge`` (and
  ``NTYPE`` / ``ETYPE`` when typed) in DGL's dtypes; message passing on it gives the inner nodes the
  full graph's result;
- the partition book agrees with it (``partid2nids``, ``nid2localnid``, ``map_to_per_ntype``, metadata);
- ``return_mapping`` maps the new IDs back: node and edge data and edges by original ID are the input's;
- DGL's options: the same data name on nodes and edges, GraphBolt's ``store_*`` options, writing over a
  non-empty folder, ``num_hops=2`` (the local graph's halo), one partition keeping every ID;
- ``load_partition_book`` reads DGL's own JSON (DGL's type order, offsets) and refuses DGL's older
  per-ID maps with a TypeError.
"""

from __future__ import annotations

import json

import pytest
import torch as th

import graphstore.compat.dgl as dgl
from graphstore.compat.dgl import function as fn
from graphstore.compat.dgl.distributed.graph_partition_book import _etype_tuple_to_str
from graphstore.compat.dgl.distributed.partition import (
    RESERVED_FIELD_DTYPE,
    _get_inner_edge_mask,
    _get_inner_node_mask,
)


def random_graph(num_nodes=600, num_edges=3000, seed=0):
    gen = th.Generator().manual_seed(seed)
    g = dgl.graph(
        (
            th.randint(0, num_nodes, (num_edges,), generator=gen),
            th.randint(0, num_nodes, (num_edges,), generator=gen),
        ),
        num_nodes=num_nodes,
    )
    g.ndata["labels"] = th.arange(num_nodes)
    g.ndata["feats"] = th.randn(num_nodes, 4, generator=gen)
    g.edata["feats"] = th.randn(num_edges, 3, generator=gen)
    return g


def random_hetero(seed=0):
    gen = th.Generator().manual_seed(seed)
    num_nodes = {"n1": 300, "n2": 310, "n3": 320}
    edges = {}
    for etype, count in ((("n1", "r1", "n2"), 900), (("n2", "r1", "n1"), 800), (("n1", "r2", "n3"), 700)):
        src_type, _, dst_type = etype
        edges[etype] = (
            th.randint(0, num_nodes[src_type], (count,), generator=gen),
            th.randint(0, num_nodes[dst_type], (count,), generator=gen),
        )
    hg = dgl.heterograph(edges, num_nodes)
    hg.nodes["n1"].data["labels"] = th.arange(300)
    hg.edges[("n1", "r1", "n2")].data["labels"] = th.arange(900)
    return hg


def check_reserved_dtypes(part_g):
    for key, dtype in RESERVED_FIELD_DTYPE.items():
        for frame in (part_g.ndata, part_g.edata):
            if key in frame:
                assert frame[key].dtype == dtype, key


@pytest.mark.parametrize("part_method", ["metis", "random"])
@pytest.mark.parametrize("num_parts", [1, 3])
def test_homogeneous_partitions_are_dgls_local_graphs(tmp_path, part_method, num_parts):
    g = random_graph()
    g.update_all(fn.copy_u("feats", "msg"), fn.sum("msg", "h"))
    g.update_all(fn.copy_e("feats", "msg"), fn.sum("msg", "eh"))
    config = str(tmp_path / "test.json")
    orig_nids, orig_eids = dgl.distributed.partition_graph(
        g, "test", num_parts, str(tmp_path), part_method=part_method, return_mapping=True
    )
    labels, edge_rows = [], []
    for i in range(num_parts):
        part_g, node_feats, edge_feats, gpb, _, _, _ = dgl.distributed.load_partition(config, i)
        check_reserved_dtypes(part_g)
        assert gpb.num_partitions() == num_parts
        assert gpb._num_nodes() == g.num_nodes() and gpb._num_edges() == g.num_edges()  # DGL's private counts
        meta = gpb.metadata()[i]
        inner = part_g.ndata["inner_node"] == 1
        assert th.equal(th.nonzero(inner).reshape(-1), th.arange(meta["num_nodes"]))  # inner nodes first
        nids = part_g.ndata[dgl.NID][inner]
        assert th.equal(nids, gpb.partid2nids(i))
        assert th.equal(gpb.nid2localnid(nids, i), th.arange(nids.numel()))
        eids = part_g.edata[dgl.EID][part_g.edata["inner_edge"] == 1]
        assert th.equal(eids, gpb.partid2eids(i)) and eids.numel() == meta["num_edges"]
        # Edges map back to the input's by original ID.
        src, dst = part_g.edges()
        orig_src = orig_nids[part_g.ndata[dgl.NID][src]]
        orig_dst = orig_nids[part_g.ndata[dgl.NID][dst]]
        expected_src, expected_dst = g.find_edges(orig_eids[part_g.edata[dgl.EID]])
        assert th.equal(orig_src, expected_src) and th.equal(orig_dst, expected_dst)
        # Message passing on the partition gives its inner nodes the full graph's result.
        part_g.ndata["feats"] = g.ndata["feats"][orig_nids[part_g.ndata[dgl.NID]]]
        part_g.edata["feats"] = g.edata["feats"][orig_eids[part_g.edata[dgl.EID]]]
        part_g.update_all(fn.copy_u("feats", "msg"), fn.sum("msg", "h"))
        part_g.update_all(fn.copy_e("feats", "msg"), fn.sum("msg", "eh"))
        th.testing.assert_close(part_g.ndata["h"][inner], g.ndata["h"][orig_nids[nids]])
        th.testing.assert_close(part_g.ndata["eh"][inner], g.ndata["eh"][orig_nids[nids]])
        # Features are the input's rows, in local order.
        th.testing.assert_close(node_feats["_N/feats"], g.ndata["feats"][orig_nids[nids]])
        th.testing.assert_close(edge_feats["_N:_E:_N/feats"], g.edata["feats"][orig_eids[eids]])
        labels.append(node_feats["_N/labels"])
        edge_rows.append(edge_feats["_N:_E:_N/feats"])
    restored = th.empty_like(g.ndata["labels"])
    restored[orig_nids] = th.cat(labels)
    assert th.equal(restored, g.ndata["labels"])
    restored_edges = th.empty_like(g.edata["feats"])
    restored_edges[orig_eids] = th.cat(edge_rows)
    assert th.equal(restored_edges, g.edata["feats"])
    assert th.equal(
        gpb.nid2partid(th.arange(g.num_nodes())),
        th.repeat_interleave(th.arange(num_parts), th.tensor([m["num_nodes"] for m in gpb.metadata()])),
    )


@pytest.mark.parametrize("num_parts", [1, 3])
def test_typed_partitions_carry_type_ids_and_per_type_maps(tmp_path, num_parts):
    hg = random_hetero()
    config = str(tmp_path / "test.json")
    orig_nids, orig_eids = dgl.distributed.partition_graph(
        hg, "test", num_parts, str(tmp_path), return_mapping=True
    )
    assert set(orig_nids) == set(hg.ntypes) and set(orig_eids) == set(hg.canonical_etypes)
    seen_nodes = {t: [] for t in hg.ntypes}
    labels, elabels = [], []
    for i in range(num_parts):
        part_g, node_feats, edge_feats, gpb, _, ntypes, etypes = dgl.distributed.load_partition(config, i)
        check_reserved_dtypes(part_g)
        assert ntypes == hg.ntypes and etypes == hg.canonical_etypes
        src, dst = part_g.edges()
        etype_ids, per_type_eids = gpb.map_to_per_etype(part_g.edata[dgl.EID])
        assert th.equal(etype_ids, part_g.edata[dgl.ETYPE].long())
        src_types, per_type_src = gpb.map_to_per_ntype(part_g.ndata[dgl.NID][src])
        dst_types, per_type_dst = gpb.map_to_per_ntype(part_g.ndata[dgl.NID][dst])
        for etype_id, canonical in enumerate(hg.canonical_etypes):
            mine = etype_ids == etype_id
            assert (src_types[mine] == hg.get_ntype_id(canonical[0])).all()
            assert (dst_types[mine] == hg.get_ntype_id(canonical[2])).all()
            u, v = hg.find_edges(orig_eids[canonical][per_type_eids[mine]], etype=canonical)
            assert th.equal(orig_nids[canonical[0]][per_type_src[mine]], u)
            assert th.equal(orig_nids[canonical[2]][per_type_dst[mine]], v)
            inner_e = _get_inner_edge_mask(part_g, etype_id)
            assert int(inner_e.sum()) == gpb.partid2eids(i, canonical).numel()
        for ntype in hg.ntypes:
            inner = _get_inner_node_mask(part_g, hg.get_ntype_id(ntype))
            _, per_type = gpb.map_to_per_ntype(part_g.ndata[dgl.NID][inner])
            assert th.equal(per_type, gpb.partid2nids(i, ntype))
            seen_nodes[ntype].append(per_type)
        labels.append(node_feats["n1/labels"])
        elabels.append(edge_feats[_etype_tuple_to_str(("n1", "r1", "n2")) + "/labels"])
    for ntype in hg.ntypes:
        assert th.equal(th.sort(th.cat(seen_nodes[ntype])).values, th.arange(hg.num_nodes(ntype)))
    restored = th.empty(300, dtype=th.int64)
    restored[orig_nids["n1"]] = th.cat(labels)
    assert th.equal(restored, hg.nodes["n1"].data["labels"])
    restored = th.empty(900, dtype=th.int64)
    restored[orig_eids[("n1", "r1", "n2")]] = th.cat(elabels)
    assert th.equal(restored, hg.edges[("n1", "r1", "n2")].data["labels"])


def test_one_partition_keeps_every_id(tmp_path):
    g = random_graph()
    g.edata["eid"] = th.arange(g.num_edges())
    nids, eids = dgl.distributed.partition_graph(g, "one", 1, str(tmp_path), return_mapping=True)
    assert th.equal(nids, th.arange(g.num_nodes())) and th.equal(eids, th.arange(g.num_edges()))
    _, _, edge_feats, *_ = dgl.distributed.load_partition(str(tmp_path / "one.json"), 0)
    assert th.equal(edge_feats["_N:_E:_N/eid"], th.arange(g.num_edges()))
    hg = random_hetero()
    nids, eids = dgl.distributed.partition_graph(hg, "onet", 1, str(tmp_path / "t"), return_mapping=True)
    assert all(th.equal(nids[t], th.arange(hg.num_nodes(t))) for t in hg.ntypes)
    assert all(th.equal(eids[c], th.arange(hg.num_edges(c))) for c in hg.canonical_etypes)


def test_dgl_options_and_the_same_name_on_nodes_and_edges(tmp_path):
    g = random_graph()
    g.ndata["feat"] = th.ones(g.num_nodes(), 2)
    g.edata["feat"] = th.zeros(g.num_edges(), 5)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    dgl.distributed.partition_graph(
        g, "g", 2, str(out), store_eids=True, store_inner_node=False, store_inner_edge=True, n_jobs=1
    )
    dgl.distributed.partition_graph(g, "g", 2, str(out), part_method="random")  # writes over, as DGL
    assert (out / "keep.txt").read_text() == "mine"
    _, node_feats, edge_feats, *_ = dgl.distributed.load_partition(str(out / "g.json"), 0)
    assert node_feats["_N/feat"].shape[1] == 2 and edge_feats["_N:_E:_N/feat"].shape[1] == 5
    with pytest.raises(FileExistsError):  # graphstore's refusal, on request
        dgl.distributed.partition_graph(g, "g", 2, str(out), overwrite=False)
    with pytest.raises(TypeError, match="reshuffle"):  # a misspelled or retired option is refused...
        dgl.distributed.partition_graph(g, "g", 2, str(tmp_path / "r"), reshuffle=True)
    dgl.distributed.partition_graph(g, "g", 2, str(tmp_path / "r"), reshuffle=True, strict_options=False)
    assert (tmp_path / "r" / "g.json").exists()  # ...or ignored as DGL does, on request


def test_two_hop_partitions_add_the_halo_nodes_in_edges(tmp_path):
    g = random_graph()
    g.update_all(fn.copy_u("feats", "msg"), fn.sum("msg", "h"))
    nids, eids = dgl.distributed.partition_graph(g, "h2", 3, str(tmp_path), num_hops=2, return_mapping=True)
    dgl.distributed.partition_graph(g, "h1", 3, str(tmp_path / "one"))
    for part_id in range(3):
        two = dgl.distributed.load_partition(str(tmp_path / "h2.json"), part_id, load_feats=False)[0]
        one = dgl.distributed.load_partition(str(tmp_path / "one" / "h1.json"), part_id, load_feats=False)[0]
        inner_edges = int(two.edata["inner_edge"].sum())
        assert inner_edges == one.num_edges() and bool((two.edata["inner_edge"][:inner_edges] == 1).all())
        assert th.equal(two.edata[dgl.EID][:inner_edges], one.edata[dgl.EID])  # the same partition first
        src, dst = two.edges()
        halo = th.unique(src[:inner_edges][two.ndata["inner_node"][src[:inner_edges]] == 0])
        # The other edges are exactly every in-edge of the one-hop halo nodes, by original ID.
        extra = eids[two.edata[dgl.EID][inner_edges:]]
        expected = g.in_edges(nids[two.ndata[dgl.NID][halo]], form="eid")
        assert th.equal(th.sort(extra).values, th.sort(expected).values)
        assert th.equal(nids[two.ndata[dgl.NID][dst[inner_edges:]]], g.find_edges(extra)[1])
        inner = two.ndata["inner_node"] == 1
        two.ndata["feats"] = g.ndata["feats"][nids[two.ndata[dgl.NID]]]
        two.update_all(fn.copy_u("feats", "msg"), fn.sum("msg", "h"))
        th.testing.assert_close(two.ndata["h"][inner], g.ndata["h"][nids[two.ndata[dgl.NID][inner]]])


DGL_CONFIG = {
    "graph_name": "g",
    "num_nodes": 1000,
    "num_edges": 3600,
    "num_parts": 2,
    "part_method": "metis",
    "halo_hops": 1,
    "ntypes": {"user": 1, "item": 0},
    "etypes": {
        "item:likes-rev:user": 0,
        "user:follows-rev:user": 2,
        "user:follows:user": 1,
        "user:likes:item": 3,
    },
    "node_map": {"user": [[100, 300], [600, 1000]], "item": [[0, 100], [300, 600]]},
    "edge_map": {
        "item:likes-rev:user": [[0, 100], [1000, 1500]],
        "user:follows-rev:user": [[300, 600], [2100, 2800]],
        "user:follows:user": [[100, 300], [1500, 2100]],
        "user:likes:item": [[600, 1000], [2800, 3600]],
    },
    "part-0": {
        "node_feats": "part0/node_feat.dgl",
        "edge_feats": "part0/edge_feat.dgl",
        "part_graph": "part0/graph.dgl",
    },
    "part-1": {
        "node_feats": "part1/node_feat.dgl",
        "edge_feats": "part1/edge_feat.dgl",
        "part_graph": "part1/graph.dgl",
    },
}


def test_load_partition_book_reads_dgls_json(tmp_path):
    config = tmp_path / "g.json"
    config.write_text(json.dumps(DGL_CONFIG))
    gpb, name, ntypes, etypes = dgl.distributed.load_partition_book(str(config), 0)
    assert name == "g" and ntypes == {"item": 0, "user": 1}
    assert etypes[("user", "follows", "user")] == 1
    assert gpb.local_ntype_offset == [0, 100, 300]
    assert gpb.local_etype_offset == [0, 100, 300, 600, 1000]
    gpb1 = dgl.distributed.load_partition_book(str(config), 1)[0]
    assert gpb1.local_ntype_offset == [0, 300, 700]
    assert th.equal(gpb1.partid2nids(1, "user"), th.arange(200, 600))
    # DGL's older maps (per-ID dicts) are refused with a TypeError, as DGL's test expects.
    old = {
        "num_parts": 1,
        "num_nodes": 3,
        "num_edges": 3,
        "graph_name": "o",
        "node_map": {"_N": {"0": 0}},
        "edge_map": {"_N:_E:_N": {"0": 0}},
    }
    (tmp_path / "o.json").write_text(json.dumps(old))
    with pytest.raises(TypeError, match="node_map"):
        dgl.distributed.load_partition_book(str(tmp_path / "o.json"), 0)
