"""DGL's GraphBolt partitions on graphstore's files: ``partition_graph(use_graphbolt=True, store_*=...)``
and ``dgl_partition_to_graphbolt`` make ``load_partition(..., use_graphbolt=True)`` give each partition's
``FusedCSCSamplingGraph`` with the attributes DGL stores (by option, all of them with
``DGL_DIST_DEBUG``), the CSC of the partition's local graph (``load_graphs('partK/graph.dgl')``), and the
coo attributes ``_find_edges`` reads when the coo layout is kept."""

from __future__ import annotations

import pytest
import torch as th

import graphstore.compat.dgl as dgl
from graphstore.compat.dgl.distributed.graph_services import _find_edges
from graphstore.compat.dgl.graphbolt import FusedCSCSamplingGraph


def _graph():
    gen = th.Generator().manual_seed(0)
    return dgl.graph((th.randint(0, 300, (1500,), generator=gen), th.randint(0, 300, (1500,), generator=gen)))


def _hetero():
    gen = th.Generator().manual_seed(1)
    return dgl.heterograph(
        {
            ("a", "x", "b"): (
                th.randint(0, 100, (400,), generator=gen),
                th.randint(0, 120, (400,), generator=gen),
            ),
            ("b", "y", "a"): (
                th.randint(0, 120, (300,), generator=gen),
                th.randint(0, 100, (300,), generator=gen),
            ),
        },
        {"a": 100, "b": 120},
    )


@pytest.mark.parametrize("store", [(True, False, False), (False, True, True)])
def test_stored_attributes_follow_the_options(tmp_path, store, monkeypatch):
    monkeypatch.delenv("DGL_DIST_DEBUG", raising=False)
    store_eids, store_inner_node, store_inner_edge = store
    dgl.distributed.partition_graph(
        _graph(),
        "g",
        2,
        str(tmp_path),
        use_graphbolt=True,
        store_eids=store_eids,
        store_inner_node=store_inner_node,
        store_inner_edge=store_inner_edge,
    )
    config = str(tmp_path / "g.json")
    for part_id in range(2):
        gb = dgl.distributed.load_partition(config, part_id, load_feats=False, use_graphbolt=True)[0]
        local = dgl.load_graphs(str(tmp_path / f"part{part_id}" / "graph.dgl"))[0][0]
        assert isinstance(gb, FusedCSCSamplingGraph)
        indptr, indices, eids = local.adj().csc()
        assert gb.csc_indptr.dtype == th.int32 and th.equal(gb.csc_indptr, indptr)
        assert gb.indices.dtype == th.int32 and th.equal(gb.indices, indices)
        assert th.equal(gb.node_attributes[dgl.NID], local.ndata[dgl.NID])
        assert ("inner_node" in gb.node_attributes) == store_inner_node
        assert (dgl.EID in gb.edge_attributes) == store_eids
        assert ("inner_edge" in gb.edge_attributes) == store_inner_edge
        if store_eids:
            assert th.equal(gb.edge_attributes[dgl.EID], local.edata[dgl.EID][eids])
        assert gb.type_per_edge is None and gb.node_type_to_id is None


def test_debug_mode_keeps_every_field_and_typed_graphs_their_types(tmp_path, monkeypatch):
    hg = _hetero()
    orig_nids, _ = dgl.distributed.partition_graph(hg, "h", 2, str(tmp_path), return_mapping=True)
    config = str(tmp_path / "h.json")
    with pytest.raises(ValueError, match="not made for GraphBolt"):
        dgl.distributed.load_partition(config, 0, use_graphbolt=True)
    monkeypatch.setenv("DGL_DIST_DEBUG", "1")
    dgl.distributed.dgl_partition_to_graphbolt(config, store_eids=False)
    gb, _, _, gpb, _, _, _ = dgl.distributed.load_partition(config, 1, load_feats=False, use_graphbolt=True)
    local = dgl.load_graphs(str(tmp_path / "part1" / "graph.dgl"))[0][0]
    _, _, eids = local.adj().csc()
    assert gb.node_attributes[dgl.NTYPE].dtype == th.int8
    assert th.equal(gb.node_attributes[dgl.NTYPE], local.ndata[dgl.NTYPE])
    assert th.equal(gb.edge_attributes["inner_edge"], local.edata["inner_edge"][eids])
    assert th.equal(gb.type_per_edge, local.edata[dgl.ETYPE][eids])
    assert gb.node_type_to_id == {"a": 0, "b": 1} and gb.edge_type_to_id == {"a:x:b": 0, "b:y:a": 1}
    for node in range(local.num_nodes()):  # in-edges of a node grouped by type, as DGL sorts them
        start, end = int(gb.csc_indptr[node]), int(gb.csc_indptr[node + 1])
        types = gb.type_per_edge[start:end]
        assert th.equal(types, types.sort().values)
    # _find_edges through the coo attributes gives the graph's edges.
    eid = gpb.partid2eids(1, ("a", "x", "b"))[:20]
    homo = gpb.map_to_homo_eid(eid, ("a", "x", "b"))
    src, dst = _find_edges(gb, gpb, homo)
    _, per_type_src = gpb.map_to_per_ntype(src)
    _, per_type_dst = gpb.map_to_per_ntype(dst)
    assert gb.edge_attributes[dgl.distributed.DGL2GB_EID].dtype == th.int32
    assert th.equal(_find_edges(local, gpb, homo)[0], src)
    assert th.equal(_find_edges(local, gpb, homo)[1], dst)
    assert hg.has_edges_between(
        orig_nids["a"][per_type_src], orig_nids["b"][per_type_dst], etype=("a", "x", "b")
    ).all()


def test_without_the_coo_layout_find_edges_says_so(tmp_path):
    dgl.distributed.partition_graph(
        _graph(), "g", 2, str(tmp_path), use_graphbolt=True, graph_formats=["csc"]
    )
    gb, _, _, gpb, _, _, _ = dgl.distributed.load_partition(
        str(tmp_path / "g.json"), 0, load_feats=False, use_graphbolt=True
    )
    with pytest.raises(ValueError, match="coo` format is available"):
        _find_edges(gb, gpb, gpb.partid2eids(0)[:5])
